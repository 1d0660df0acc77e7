-- Tokens may have the operator role (jobs.RoleOperator): an admin of
-- every org, and of what all orgs share (backends, workers). SQLite
-- cannot change a CHECK constraint, so the table is rebuilt; it is small.

-- +goose Up
CREATE TABLE tokens_operator (
    id         TEXT PRIMARY KEY,
    org_id     TEXT NOT NULL,
    user_id    TEXT NOT NULL,
    role       TEXT NOT NULL CHECK (role IN ('member', 'admin', 'operator')),
    hash       BLOB NOT NULL UNIQUE,
    created_at INTEGER NOT NULL,
    revoked_at INTEGER
) STRICT;
INSERT INTO tokens_operator (id, org_id, user_id, role, hash, created_at, revoked_at)
    SELECT id, org_id, user_id, role, hash, created_at, revoked_at FROM tokens;
DROP TABLE tokens;
ALTER TABLE tokens_operator RENAME TO tokens;
CREATE INDEX IF NOT EXISTS tokens_valid ON tokens (hash) WHERE revoked_at IS NULL;

-- +goose Down
DELETE FROM tokens WHERE role = 'operator';
