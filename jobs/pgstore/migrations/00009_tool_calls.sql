-- Tool calls: responses.tool_calls holds the calls the model made instead
-- of (or beside) answering, a JSON array of OpenAI's tool call objects,
-- NULL when it made none (as every response stored before this
-- migration). json, not jsonb: the arguments are the model's text, kept
-- as it wrote them. A new nullable column rewrites no table.

-- +goose Up
ALTER TABLE responses ADD COLUMN tool_calls json;

-- +goose Down
ALTER TABLE responses DROP COLUMN tool_calls;
