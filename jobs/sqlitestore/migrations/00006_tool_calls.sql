-- Tool calls: responses.tool_calls holds the calls the model made instead
-- of (or beside) answering, a JSON array of OpenAI's tool call objects,
-- NULL when it made none (as every response stored before this
-- migration).
--
-- ALTER TABLE … ADD COLUMN cannot say IF NOT EXISTS: when two processes
-- race to apply this migration, the second fails on it, and migrate runs
-- goose again, which then finds the migration applied.

-- +goose Up
ALTER TABLE responses ADD COLUMN tool_calls TEXT; -- JSON

-- +goose Down
ALTER TABLE responses DROP COLUMN tool_calls;
