-- Spend: the API token a job was submitted with (jobs.token_id, kept by
-- a retry; batches.token_id for a batch's lines), and the usage ledger, one row per dispatched provider call,
-- written with the attempt event that reports it (and one of unknown
-- usage for the call a reclaimed job's lost worker may have made). A
-- NULL count or cost is unknown, never zero. Rows copy the job's org,
-- user and token, so they outlive it (archive, delete). Budgets read one
-- org's or one token's spend since a time: the two indexes make that a
-- range read, their INCLUDE columns an index-only one.

-- +goose Up
ALTER TABLE jobs ADD COLUMN token_id text COLLATE "C" NOT NULL DEFAULT '';
ALTER TABLE batches ADD COLUMN token_id text COLLATE "C" NOT NULL DEFAULT '';

CREATE TABLE usage_ledger (
    id            bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    at            timestamptz      NOT NULL,
    job_id        text COLLATE "C" NOT NULL,
    org_id        text COLLATE "C" NOT NULL,
    user_id       text COLLATE "C" NOT NULL,
    token_id      text COLLATE "C" NOT NULL,
    model         text COLLATE "C" NOT NULL,
    backend       text COLLATE "C" NOT NULL,
    input_tokens  bigint,
    output_tokens bigint,
    cached_tokens bigint,
    cost_usd      double precision
);

CREATE INDEX usage_ledger_org_at ON usage_ledger (org_id, at)
    INCLUDE (cost_usd, input_tokens, output_tokens, cached_tokens);
CREATE INDEX usage_ledger_token_at ON usage_ledger (token_id, at)
    INCLUDE (cost_usd, input_tokens, output_tokens, cached_tokens);
CREATE INDEX usage_ledger_at ON usage_ledger (at);

-- +goose Down
DROP TABLE usage_ledger;
ALTER TABLE batches DROP COLUMN token_id;
ALTER TABLE jobs DROP COLUMN token_id;
