-- Reservations (jobs.Store.Reserve): a request admitted counts towards
-- its org's and token's requests per minute for a minute, and a provider
-- call in flight towards their tokens per minute and budgets, at its
-- estimate, until it is in the ledger. Admission reads and adds them in
-- one write transaction, which SQLite serialises, so concurrent
-- admissions cannot pass a limit together.
--
-- They replace counting an org's jobs created in the last minute, so the
-- index that counted them (00012) goes: one index entry less per job.

-- +goose Up
CREATE TABLE reservations (
    id         TEXT PRIMARY KEY,
    org_id     TEXT NOT NULL,
    token_id   TEXT NOT NULL DEFAULT '',
    request    INTEGER NOT NULL,
    tokens     INTEGER NOT NULL DEFAULT 0,
    usd        REAL, -- NULL: a call whose cost is not estimable; 0 for a request
    job_id     TEXT NOT NULL DEFAULT '', -- a job's call: counts while the job runs
    claimed_at INTEGER,                   -- under this claim (a reclaim records the call as lost)
    expires_at INTEGER NOT NULL -- unix microseconds
) STRICT;
CREATE INDEX reservations_org ON reservations (org_id, expires_at);
CREATE INDEX reservations_token ON reservations (token_id, expires_at) WHERE token_id <> '';
DROP INDEX IF EXISTS jobs_org_submitted;

-- +goose Down
CREATE INDEX IF NOT EXISTS jobs_org_submitted ON jobs (org_id, created_at);
DROP TABLE reservations;
