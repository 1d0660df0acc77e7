-- The answer as the backend sent it (jobs.Response.Body): every choice
-- and field, those promptkit does not model too (reasoning, logprobs,
-- system_fingerprint, usage details, ...). NULL for responses stored
-- before, as for answers that have none.

-- +goose Up
ALTER TABLE responses ADD COLUMN body TEXT; -- JSON

-- +goose Down
ALTER TABLE responses DROP COLUMN body;
