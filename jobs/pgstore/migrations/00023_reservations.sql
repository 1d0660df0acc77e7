-- Reservations (jobs.Store.Reserve): a request admitted counts towards
-- its org's and token's requests per minute for a minute, and a provider
-- call in flight towards their tokens per minute and budgets, at its
-- estimate, until it is in the ledger. Admission reads and adds them
-- under an advisory lock per org and per token, so concurrent admissions
-- cannot pass a limit together. Rows live a minute, or as long as a call:
-- the table stays as small as the traffic of the last minute.
--
-- UNLOGGED: a reservation is a minute's state, not a record, and writing
-- it to the WAL would make every admission wait for a flush. A database
-- crash empties the table (its recovery truncates unlogged tables): the
-- minute before it is then forgotten, the ledger is not.
--
-- They replace counting an org's jobs created in the last minute, so the
-- index that counted them (00015) goes: one index entry less per job.

-- +goose Up
CREATE UNLOGGED TABLE reservations (
    id         text PRIMARY KEY,
    org_id     text NOT NULL,
    token_id   text NOT NULL DEFAULT '',
    request    boolean NOT NULL,
    tokens     bigint NOT NULL DEFAULT 0,
    usd        double precision, -- NULL: a call whose cost is not estimable; 0 for a request
    job_id     text NOT NULL DEFAULT '', -- a job's call: counts while the job runs
    claimed_at timestamptz,               -- under this claim (a reclaim records the call as lost)
    expires_at timestamptz NOT NULL
);
CREATE INDEX reservations_org_idx ON reservations (org_id, expires_at);
CREATE INDEX reservations_token_idx ON reservations (token_id, expires_at) WHERE token_id <> '';
DROP INDEX jobs_org_submitted_idx;

-- +goose Down
CREATE INDEX jobs_org_submitted_idx ON jobs (org_id, created_at);
DROP TABLE reservations;
