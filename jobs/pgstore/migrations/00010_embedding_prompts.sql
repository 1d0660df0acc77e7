-- Embeddings requests: prompts.embedding is a jobs.EmbeddingRequest (a
-- batch line for /v1/embeddings: its texts, dimensions and encoding
-- format), NULL when the prompt is text, a named prompt or a chat (as
-- every prompt stored before this migration). json, like chat and inputs.
-- A new nullable column rewrites no table.

-- +goose Up
ALTER TABLE prompts ADD COLUMN embedding json;

-- +goose Down
ALTER TABLE prompts DROP COLUMN embedding;
