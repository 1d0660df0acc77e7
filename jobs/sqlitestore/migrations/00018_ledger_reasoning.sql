-- The usage ledger keeps each call's reasoning tokens (jobs.UsageCall),
-- the part of its output tokens the model spent reasoning, as it keeps
-- its cached tokens: NULL when the provider did not report the count, as
-- in every row written before.

-- +goose Up
ALTER TABLE usage_ledger ADD COLUMN reasoning_tokens INTEGER;

-- +goose Down
ALTER TABLE usage_ledger DROP COLUMN reasoning_tokens;
