-- API tokens, and the request fingerprint of an idempotent enqueue.
--
-- A token is stored as the SHA-256 of its secret (jobs.HashToken), never
-- the secret. Every API request looks its token up by hash, and asks
-- whether any valid token exists at all (no token: the API is open), so
-- both must be one indexed read: tokens_valid holds exactly the valid
-- tokens, by hash. UNIQUE (hash) covers revoked tokens as well, so a
-- revoked secret can never come back under another token.
--
-- prompts.request_hash is EnqueueParams.RequestHash: a repeat of an
-- idempotency key whose request differs from the first one's is refused
-- (jobs.ErrIdempotencyConflict). '' means "not fingerprinted" and never
-- conflicts, which is also what every prompt stored before this migration
-- has.
--
-- ALTER TABLE … ADD COLUMN cannot say IF NOT EXISTS: when two processes
-- race to apply this migration, the second fails on it, and migrate runs
-- goose again, which then finds the migration applied.

-- +goose Up
CREATE TABLE IF NOT EXISTS tokens (
    id         TEXT PRIMARY KEY,
    org_id     TEXT NOT NULL,
    user_id    TEXT NOT NULL,
    role       TEXT NOT NULL CHECK (role IN ('member', 'admin')),
    hash       BLOB NOT NULL UNIQUE,
    created_at INTEGER NOT NULL,
    revoked_at INTEGER
) STRICT;

CREATE INDEX IF NOT EXISTS tokens_valid ON tokens (hash) WHERE revoked_at IS NULL;

ALTER TABLE prompts ADD COLUMN request_hash TEXT NOT NULL DEFAULT '';

-- +goose Down
ALTER TABLE prompts DROP COLUMN request_hash;
DROP TABLE IF EXISTS tokens;
