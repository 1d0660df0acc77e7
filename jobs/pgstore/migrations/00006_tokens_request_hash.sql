-- API tokens, and the request fingerprint of an idempotent enqueue.
--
-- A token is stored as the SHA-256 of its secret (jobs.HashToken), never
-- the secret. Every API request looks its token up by hash, and asks
-- whether any valid token exists at all (no token: the API is open), so
-- both must be one indexed read: tokens_valid_idx holds exactly the valid
-- tokens, by hash. UNIQUE (hash) covers revoked tokens as well, so a
-- revoked secret can never come back under another token. IDs, orgs and
-- users are COLLATE "C", like everywhere else (migration 00004).
--
-- prompts.request_hash is EnqueueParams.RequestHash: a repeat of an
-- idempotency key whose request differs from the first one's is refused
-- (jobs.ErrIdempotencyConflict). '' means "not fingerprinted" and never
-- conflicts, which is also what every prompt stored before this migration
-- has. A constant default adds the column without rewriting the table.

-- +goose Up
CREATE TABLE tokens (
    id         text COLLATE "C" PRIMARY KEY,
    org_id     text COLLATE "C" NOT NULL,
    user_id    text COLLATE "C" NOT NULL,
    role       text             NOT NULL CHECK (role IN ('member', 'admin')),
    hash       bytea            NOT NULL UNIQUE,
    created_at timestamptz      NOT NULL,
    revoked_at timestamptz
);

CREATE INDEX tokens_valid_idx ON tokens (hash) WHERE revoked_at IS NULL;

ALTER TABLE prompts ADD COLUMN request_hash text NOT NULL DEFAULT '';

-- +goose Down
ALTER TABLE prompts DROP COLUMN request_hash;
DROP TABLE tokens;
