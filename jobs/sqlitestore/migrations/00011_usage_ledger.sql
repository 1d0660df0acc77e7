-- Spend: the API token a job was submitted with (jobs.token_id, kept by
-- a retry; batches.token_id for a batch's lines), and the usage ledger, one row per dispatched provider call,
-- written with the attempt event that reports it (and one of unknown
-- usage for the call a reclaimed job's lost worker may have made). A
-- NULL count or cost is unknown, never zero. Rows copy the job's org,
-- user and token, so they outlive it (archive, delete). Budgets read one
-- org's or one token's spend since a time: the two indexes make that a
-- range read. Times are microseconds since the epoch.

-- +goose Up
ALTER TABLE jobs ADD COLUMN token_id TEXT NOT NULL DEFAULT '';
ALTER TABLE batches ADD COLUMN token_id TEXT NOT NULL DEFAULT '';

CREATE TABLE IF NOT EXISTS usage_ledger (
    id            INTEGER PRIMARY KEY,
    at            INTEGER NOT NULL,
    job_id        TEXT NOT NULL,
    org_id        TEXT NOT NULL,
    user_id       TEXT NOT NULL,
    token_id      TEXT NOT NULL,
    model         TEXT NOT NULL,
    backend       TEXT NOT NULL,
    input_tokens  INTEGER,
    output_tokens INTEGER,
    cached_tokens INTEGER,
    cost_usd      REAL
) STRICT;

CREATE INDEX IF NOT EXISTS usage_ledger_org_at ON usage_ledger (org_id, at);
CREATE INDEX IF NOT EXISTS usage_ledger_token_at ON usage_ledger (token_id, at);
CREATE INDEX IF NOT EXISTS usage_ledger_at ON usage_ledger (at);

-- +goose Down
DROP TABLE IF EXISTS usage_ledger;
ALTER TABLE batches DROP COLUMN token_id;
ALTER TABLE jobs DROP COLUMN token_id;
