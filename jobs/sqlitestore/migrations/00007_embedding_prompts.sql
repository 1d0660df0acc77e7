-- Embeddings requests: prompts.embedding is a jobs.EmbeddingRequest as
-- JSON (a batch line for /v1/embeddings: its texts, dimensions and
-- encoding format), NULL when the prompt is text, a named prompt or a
-- chat (as every prompt stored before this migration).
--
-- ALTER TABLE … ADD COLUMN cannot say IF NOT EXISTS: when two processes
-- race to apply this migration, the second fails on it, and migrate runs
-- goose again, which then finds the migration applied.

-- +goose Up
ALTER TABLE prompts ADD COLUMN embedding TEXT; -- JSON

-- +goose Down
ALTER TABLE prompts DROP COLUMN embedding;
