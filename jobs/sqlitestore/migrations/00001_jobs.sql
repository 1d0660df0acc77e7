-- The job service schema. Times are INTEGER unix microseconds
-- UTC (the same precision as PostgreSQL's timestamptz), NULL when unset.
-- Every statement says IF NOT EXISTS: two processes opening a fresh file at
-- once may both run this migration; SQLite's write lock serialises them and
-- the second run is then a no-op.

-- +goose Up
CREATE TABLE IF NOT EXISTS prompts (
    id              TEXT PRIMARY KEY,
    org_id          TEXT NOT NULL,
    created_by      TEXT NOT NULL,
    -- No foreign key: archiving may delete a parent whose thread goes on.
    parent_id       TEXT,
    correlation_id  TEXT NOT NULL DEFAULT '',
    text            TEXT NOT NULL DEFAULT '',
    prompt_ref      TEXT NOT NULL DEFAULT '',
    inputs          TEXT, -- JSON
    profile         TEXT NOT NULL DEFAULT '',
    idempotency_key TEXT NOT NULL DEFAULT '',
    created_at      INTEGER NOT NULL
) STRICT;

-- Idempotent enqueue: one prompt per (org, key); prompts without a key are
-- left out of the index entirely.
CREATE UNIQUE INDEX IF NOT EXISTS prompts_idempotency
    ON prompts (org_id, idempotency_key) WHERE idempotency_key <> '';

CREATE TABLE IF NOT EXISTS jobs (
    id                   TEXT PRIMARY KEY,
    prompt_id            TEXT NOT NULL REFERENCES prompts (id),
    state                TEXT NOT NULL DEFAULT 'queued'
        CHECK (state IN ('queued', 'running', 'succeeded', 'failed', 'cancelled', 'superseded')),
    priority             INTEGER NOT NULL DEFAULT 50 CHECK (priority BETWEEN 0 AND 100),
    attempt              INTEGER NOT NULL DEFAULT 1,
    max_attempts         INTEGER NOT NULL DEFAULT 3 CHECK (max_attempts >= 1),
    execution_options    TEXT NOT NULL DEFAULT '{}', -- JSON
    worker_claim         TEXT,
    claimed_at           INTEGER,
    started_at           INTEGER,
    running_heartbeat_at INTEGER,
    finished_at          INTEGER,
    response_id          TEXT,
    error_kind           TEXT NOT NULL DEFAULT '',
    error_message        TEXT NOT NULL DEFAULT '', -- already redacted
    -- No foreign keys on supersedes and depends_on: archiving deletes old
    -- terminal jobs that newer ones may still name.
    supersedes           TEXT,
    depends_on           TEXT,
    org_id               TEXT NOT NULL,
    created_by           TEXT NOT NULL,
    created_at           INTEGER NOT NULL,
    updated_at           INTEGER NOT NULL,
    available_at         INTEGER NOT NULL
) STRICT;

-- Claim: only queued rows, in exactly the claim order, so the claim query
-- walks the index from the front and stops after LIMIT rows instead of
-- sorting the queue. Partial, so finished jobs (the bulk of the table) cost
-- nothing here.
CREATE INDEX IF NOT EXISTS jobs_claim
    ON jobs (priority, available_at, created_at, id) WHERE state = 'queued';

-- Reclaim: running jobs by heartbeat age; partial, so it stays as small as
-- the set of running jobs.
CREATE INDEX IF NOT EXISTS jobs_reclaim
    ON jobs (running_heartbeat_at) WHERE state = 'running';

-- Since-polling (ChangesSince). Pollers ask for recent changes, so the
-- scan from `since` to the end is short; per-org polling filters that same
-- short range rather than paying for a second index on every transition.
CREATE INDEX IF NOT EXISTS jobs_updated ON jobs (updated_at, id);

-- Listing newest first with keyset pagination on (created_at, id): per org
-- (the API's listing) and across orgs (operators, and single-tenant
-- deployments where every job has the same org).
CREATE INDEX IF NOT EXISTS jobs_org_created ON jobs (org_id, created_at, id);
CREATE INDEX IF NOT EXISTS jobs_created ON jobs (created_at, id);

-- A prompt's jobs (retry history, the idempotency lookup) and the
-- foreign-key check when archiving deletes a prompt.
CREATE INDEX IF NOT EXISTS jobs_prompt ON jobs (prompt_id, created_at, id);

-- Archive and the metrics window: finished jobs by finish time; partial,
-- so queued and running jobs are not in it.
CREATE INDEX IF NOT EXISTS jobs_finished
    ON jobs (finished_at) WHERE finished_at IS NOT NULL;

-- No index on state for Metrics' counts: the partial claim and reclaim
-- indexes already count queued and running jobs, and the rest is an
-- occasional scan, cheaper overall than an index every transition rewrites.

CREATE TABLE IF NOT EXISTS responses (
    -- Deterministic (jobs.ResponseID): a second write for a job collides.
    id         TEXT PRIMARY KEY,
    prompt_id  TEXT NOT NULL,
    -- UNIQUE also serves the foreign-key check when archiving a job.
    job_id     TEXT NOT NULL UNIQUE REFERENCES jobs (id),
    output     TEXT NOT NULL,
    parsed     TEXT, -- JSON
    model      TEXT NOT NULL DEFAULT '',
    usage      TEXT NOT NULL DEFAULT '{}', -- JSON of pktype.Usage (null: unknown)
    created_at INTEGER NOT NULL
) STRICT;

CREATE TABLE IF NOT EXISTS job_events (
    -- AUTOINCREMENT: a sequence number is never reused, even after the
    -- newest events are archived, so a reader's "after N" stays valid.
    seq        INTEGER PRIMARY KEY AUTOINCREMENT,
    job_id     TEXT NOT NULL REFERENCES jobs (id),
    prompt_id  TEXT NOT NULL,
    org_id     TEXT NOT NULL,
    type       TEXT NOT NULL,
    from_state TEXT NOT NULL DEFAULT '',
    to_state   TEXT NOT NULL DEFAULT '',
    data       TEXT, -- JSON
    at         INTEGER NOT NULL
) STRICT;

-- A job's history in order (JobEvents), and the foreign-key check when
-- archiving a job. Per-org event paging scans the primary key from the
-- reader's position instead: readers follow the head of the log, so that
-- range is short.
CREATE INDEX IF NOT EXISTS job_events_job ON job_events (job_id, seq);

-- +goose Down
DROP TABLE IF EXISTS job_events;
DROP TABLE IF EXISTS responses;
DROP TABLE IF EXISTS jobs;
DROP TABLE IF EXISTS prompts;
