-- IDs, orgs, users and keys compare byte by byte. They are opaque strings,
-- so the database's collation has nothing to say about their order, yet a
-- text column under any collation but C or POSIX (en_US.UTF-8, ICU, and
-- C.UTF-8 before PostgreSQL 17) compares through the collation library:
-- on every step of every index descent and every index insert.
-- COLLATE "C" is a memcmp, whatever collation the database has. Byte order
-- is also the order SQLite's BINARY collation gives, so keyset pages break
-- ties the same way on both stores.
--
-- Changing a column's collation rebuilds the indexes on it but does not
-- rewrite the table. Columns compared with each other change together: two
-- columns of different collations cannot be compared.

-- +goose Up
ALTER TABLE prompts
    ALTER COLUMN id              TYPE text COLLATE "C",
    ALTER COLUMN org_id          TYPE text COLLATE "C",
    ALTER COLUMN created_by      TYPE text COLLATE "C",
    ALTER COLUMN parent_id       TYPE text COLLATE "C",
    ALTER COLUMN idempotency_key TYPE text COLLATE "C";
ALTER TABLE jobs
    ALTER COLUMN id           TYPE text COLLATE "C",
    ALTER COLUMN prompt_id    TYPE text COLLATE "C",
    ALTER COLUMN worker_claim TYPE text COLLATE "C",
    ALTER COLUMN response_id  TYPE text COLLATE "C",
    ALTER COLUMN supersedes   TYPE text COLLATE "C",
    ALTER COLUMN depends_on   TYPE text COLLATE "C",
    ALTER COLUMN org_id       TYPE text COLLATE "C",
    ALTER COLUMN created_by   TYPE text COLLATE "C";
ALTER TABLE responses
    ALTER COLUMN id        TYPE text COLLATE "C",
    ALTER COLUMN prompt_id TYPE text COLLATE "C",
    ALTER COLUMN job_id    TYPE text COLLATE "C";
ALTER TABLE job_events
    ALTER COLUMN job_id    TYPE text COLLATE "C",
    ALTER COLUMN prompt_id TYPE text COLLATE "C",
    ALTER COLUMN org_id    TYPE text COLLATE "C";
ALTER TABLE job_queue
    ALTER COLUMN job_id     TYPE text COLLATE "C",
    ALTER COLUMN depends_on TYPE text COLLATE "C";
ALTER TABLE job_running
    ALTER COLUMN job_id TYPE text COLLATE "C";

-- +goose Down
ALTER TABLE job_running
    ALTER COLUMN job_id TYPE text COLLATE "default";
ALTER TABLE job_queue
    ALTER COLUMN job_id     TYPE text COLLATE "default",
    ALTER COLUMN depends_on TYPE text COLLATE "default";
ALTER TABLE job_events
    ALTER COLUMN job_id    TYPE text COLLATE "default",
    ALTER COLUMN prompt_id TYPE text COLLATE "default",
    ALTER COLUMN org_id    TYPE text COLLATE "default";
ALTER TABLE responses
    ALTER COLUMN id        TYPE text COLLATE "default",
    ALTER COLUMN prompt_id TYPE text COLLATE "default",
    ALTER COLUMN job_id    TYPE text COLLATE "default";
ALTER TABLE jobs
    ALTER COLUMN id           TYPE text COLLATE "default",
    ALTER COLUMN prompt_id    TYPE text COLLATE "default",
    ALTER COLUMN worker_claim TYPE text COLLATE "default",
    ALTER COLUMN response_id  TYPE text COLLATE "default",
    ALTER COLUMN supersedes   TYPE text COLLATE "default",
    ALTER COLUMN depends_on   TYPE text COLLATE "default",
    ALTER COLUMN org_id       TYPE text COLLATE "default",
    ALTER COLUMN created_by   TYPE text COLLATE "default";
ALTER TABLE prompts
    ALTER COLUMN id              TYPE text COLLATE "default",
    ALTER COLUMN org_id          TYPE text COLLATE "default",
    ALTER COLUMN created_by      TYPE text COLLATE "default",
    ALTER COLUMN parent_id       TYPE text COLLATE "default",
    ALTER COLUMN idempotency_key TYPE text COLLATE "default";
