-- The job store's schema. IDs are text: the domain's IDs are
-- strings (UUIDv7 made by the store, but callers may look up anything an
-- HTTP path carries), and a malformed ID must be "not found", not a cast
-- error. Times are timestamptz with microsecond precision; the store
-- truncates its clock to match.

-- +goose Up
CREATE TABLE prompts (
    id              text        PRIMARY KEY,
    org_id          text        NOT NULL,
    created_by      text        NOT NULL,
    -- No foreign key: archiving may delete a parent whose thread lives on.
    parent_id       text,
    correlation_id  text        NOT NULL DEFAULT '',
    text            text        NOT NULL DEFAULT '',
    prompt_ref      text        NOT NULL DEFAULT '',
    -- json, not jsonb: callers get back the exact bytes they stored.
    inputs          json,
    profile         text        NOT NULL DEFAULT '',
    idempotency_key text        NOT NULL DEFAULT '',
    created_at      timestamptz NOT NULL
);

-- Idempotent enqueue: one prompt per (org, key). Partial, so prompts
-- without a key cost nothing; INSERT ... ON CONFLICT targets it.
CREATE UNIQUE INDEX prompts_idempotency_idx
    ON prompts (org_id, idempotency_key) WHERE idempotency_key <> '';

CREATE TABLE jobs (
    id                   text        PRIMARY KEY,
    -- No foreign key to prompts: a job is inserted either in the same
    -- transaction as its prompt (Enqueue) or by Retry from a job it holds
    -- locked, and Archive deletes a prompt only when no other job refers
    -- to it; the per-row check would run inside the serialized end of
    -- every enqueue (see the package doc).
    prompt_id            text        NOT NULL,
    state                text        NOT NULL
        CHECK (state IN ('queued', 'running', 'succeeded', 'failed', 'cancelled', 'superseded')),
    priority             smallint    NOT NULL CHECK (priority BETWEEN 0 AND 100),
    attempt              integer     NOT NULL DEFAULT 1,
    max_attempts         integer     NOT NULL CHECK (max_attempts >= 1),
    execution_options    json        NOT NULL DEFAULT '{}',
    worker_claim         text,
    claimed_at           timestamptz,
    started_at           timestamptz,
    running_heartbeat_at timestamptz,
    finished_at          timestamptz,
    response_id          text,
    error_kind           text,
    error_message        text,
    -- supersedes and depends_on have no foreign keys: archiving an old
    -- terminal job must not be blocked by the job that replaced or
    -- followed it.
    supersedes           text,
    depends_on           text,
    org_id               text        NOT NULL,
    created_by           text        NOT NULL,
    created_at           timestamptz NOT NULL,
    updated_at           timestamptz NOT NULL,
    available_at         timestamptz NOT NULL
);

-- Claim: queued jobs in claim order (priority, then not-before time, then
-- age; id breaks ties between jobs created at the same instant). Partial,
-- so the index holds only the queue, not the history.
CREATE INDEX jobs_claim_idx
    ON jobs (priority, available_at, created_at, id) WHERE state = 'queued';

-- Reclaim: running jobs by heartbeat age.
CREATE INDEX jobs_reclaim_idx
    ON jobs (running_heartbeat_at) WHERE state = 'running';

-- Since-polling (ChangesSince): jobs changed after a time.
CREATE INDEX jobs_updated_idx ON jobs (updated_at, id);

-- Per-org listing, newest first, keyset on (created_at, id).
CREATE INDEX jobs_org_created_idx ON jobs (org_id, created_at DESC, id DESC);

-- A prompt's jobs (retry history, idempotent repeats, Archive's orphan test).
CREATE INDEX jobs_prompt_idx ON jobs (prompt_id, created_at);

-- Archive and metrics: finished jobs by finish time.
CREATE INDEX jobs_finished_idx ON jobs (finished_at) WHERE finished_at IS NOT NULL;

CREATE TABLE responses (
    -- jobs.ResponseID(prompt_id, job_id): a second write for the same job
    -- collides here, and UNIQUE (job_id) says the same thing in the schema.
    id                text        PRIMARY KEY,
    prompt_id         text        NOT NULL,
    -- No foreign key (here and on job_events): the store writes these rows
    -- only for jobs it holds locked, and a per-row foreign-key check would
    -- run inside the serialized end of every transaction (see the package
    -- doc). Archive deletes them with their job.
    job_id            text        NOT NULL UNIQUE,
    output            text        NOT NULL,
    parsed            json,
    model             text        NOT NULL DEFAULT '',
    -- pktype.Usage as JSON: the counts, null for one the provider did not
    -- report (unknown is not zero; rows written before pktype.Usage keep
    -- that in a "known" object, which it still reads). Queryable as
    -- (usage->>'total_tokens')::int.
    usage             json        NOT NULL DEFAULT '{}',
    created_at        timestamptz NOT NULL
);

-- Append-only history. seq is allocated only while the writer holds the
-- store's event lock, at the end of its transaction, so seq order is commit
-- order (see the package doc).
CREATE TABLE job_events (
    seq        bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    job_id     text        NOT NULL,
    prompt_id  text        NOT NULL,
    org_id     text        NOT NULL,
    type       text        NOT NULL CHECK (type IN ('transition', 'attempt')),
    from_state text,
    to_state   text,
    data       json,
    at         timestamptz NOT NULL
);

-- A job's history in order (JobEvents), and Archive's delete by job.
-- EventsAfter for one org walks the primary key from its cursor and
-- filters: followers read near the head of the log, where that is short,
-- and every index here costs every event insert.
CREATE INDEX job_events_job_idx ON job_events (job_id, seq);

-- +goose Down
DROP TABLE job_events;
DROP TABLE responses;
DROP TABLE jobs;
DROP TABLE prompts;
