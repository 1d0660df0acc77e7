-- The answer as the backend sent it (jobs.Response.Body): every choice
-- and field promptkit does not model (reasoning, logprobs,
-- system_fingerprint, usage details, ...), but the first choice's text
-- and tool calls, which output and tool_calls hold. NULL for responses
-- stored before, as for answers that have none.

-- +goose Up
ALTER TABLE responses ADD COLUMN body TEXT; -- JSON

-- +goose Down
ALTER TABLE responses DROP COLUMN body;
