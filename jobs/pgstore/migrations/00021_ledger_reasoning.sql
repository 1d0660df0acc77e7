-- The usage ledger keeps each call's reasoning tokens (jobs.UsageCall),
-- the part of its output tokens the model spent reasoning, as it keeps
-- its cached tokens: NULL when the provider did not report the count, as
-- in every row written before. A column without a default rewrites no
-- table. Usage sums it, so the org's and the token's indexes include it,
-- to keep a budget's read of the ledger index-only (migration 00014):
-- they are built again, once.

-- +goose Up
ALTER TABLE usage_ledger ADD COLUMN reasoning_tokens bigint;

DROP INDEX usage_ledger_org_at;
CREATE INDEX usage_ledger_org_at ON usage_ledger (org_id, at)
    INCLUDE (cost_usd, input_tokens, output_tokens, cached_tokens, reasoning_tokens);
DROP INDEX usage_ledger_token_at;
CREATE INDEX usage_ledger_token_at ON usage_ledger (token_id, at)
    INCLUDE (cost_usd, input_tokens, output_tokens, cached_tokens, reasoning_tokens);

-- +goose Down
DROP INDEX usage_ledger_org_at;
CREATE INDEX usage_ledger_org_at ON usage_ledger (org_id, at)
    INCLUDE (cost_usd, input_tokens, output_tokens, cached_tokens);
DROP INDEX usage_ledger_token_at;
CREATE INDEX usage_ledger_token_at ON usage_ledger (token_id, at)
    INCLUDE (cost_usd, input_tokens, output_tokens, cached_tokens);
ALTER TABLE usage_ledger DROP COLUMN reasoning_tokens;
