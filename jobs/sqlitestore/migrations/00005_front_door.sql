-- The OpenAI-compatible front door: chat requests, batch lines, finish
-- reasons, files and batches.
--
-- prompts.chat is a jobs.ChatRequest as JSON (NULL when the prompt is text
-- or a named prompt). prompts.batch_id and custom_id make a prompt a line
-- of a batch (NULL when it is not); prompts_batch reads a batch's lines in
-- prompt ID order (BatchResults' pages, the counts of GetBatch and
-- BatchProgress) and, partial, costs the prompts of no batch nothing.
-- responses.finish_reason is the final generation's ('' when the provider
-- sent none, as every response stored before this migration).
--
-- A file's content is stored in chunks of jobs.FileChunkSize bytes, so no
-- upload or download is ever held whole in memory; file_chunks is an
-- ordinary rowid table (a WITHOUT ROWID table stores its rows in the
-- b-tree itself, a bad fit for rows this large). A batch keeps every field
-- of jobs.Batch; errors and metadata are JSON, its request counts three
-- columns. Files and batches have no events and are never archived: they
-- stay until deleted.
--
-- ALTER TABLE … ADD COLUMN cannot say IF NOT EXISTS: when two processes
-- race to apply this migration, the second fails on it, and migrate runs
-- goose again, which then finds the migration applied.

-- +goose Up
ALTER TABLE prompts ADD COLUMN chat TEXT; -- JSON
ALTER TABLE prompts ADD COLUMN batch_id TEXT;
ALTER TABLE prompts ADD COLUMN custom_id TEXT;
CREATE INDEX IF NOT EXISTS prompts_batch ON prompts (batch_id, id) WHERE batch_id IS NOT NULL;

ALTER TABLE responses ADD COLUMN finish_reason TEXT NOT NULL DEFAULT '';

CREATE TABLE IF NOT EXISTS files (
    id         TEXT PRIMARY KEY,
    org_id     TEXT NOT NULL,
    created_by TEXT NOT NULL,
    purpose    TEXT NOT NULL,
    filename   TEXT NOT NULL,
    bytes      INTEGER NOT NULL,
    created_at INTEGER NOT NULL
) STRICT;

-- Listing an org's files newest first, keyset on (created_at, id).
CREATE INDEX IF NOT EXISTS files_org_created ON files (org_id, created_at, id);

CREATE TABLE IF NOT EXISTS file_chunks (
    file_id TEXT NOT NULL REFERENCES files (id),
    seq     INTEGER NOT NULL, -- from 0, in content order
    data    BLOB NOT NULL,
    PRIMARY KEY (file_id, seq)
) STRICT;

CREATE TABLE IF NOT EXISTS batches (
    id                TEXT PRIMARY KEY,
    org_id            TEXT NOT NULL,
    created_by        TEXT NOT NULL,
    input_file_id     TEXT NOT NULL,
    endpoint          TEXT NOT NULL,
    completion_window TEXT NOT NULL,
    metadata          TEXT, -- JSON object
    priority          INTEGER NOT NULL CHECK (priority BETWEEN 0 AND 100),
    status            TEXT NOT NULL CHECK (status IN ('validating', 'failed', 'in_progress', 'finalizing',
        'completed', 'expired', 'cancelling', 'cancelled')),
    errors            TEXT, -- JSON array of jobs.BatchError
    output_file_id    TEXT,
    error_file_id     TEXT,
    -- The counts stored by the last MoveBatch or FinishBatch (see
    -- jobs.Batch.Counts).
    total             INTEGER NOT NULL DEFAULT 0,
    completed         INTEGER NOT NULL DEFAULT 0,
    failed            INTEGER NOT NULL DEFAULT 0,
    created_at        INTEGER NOT NULL,
    expires_at        INTEGER NOT NULL,
    in_progress_at    INTEGER,
    finalizing_at     INTEGER,
    completed_at      INTEGER,
    failed_at         INTEGER,
    expired_at        INTEGER,
    cancelling_at     INTEGER,
    cancelled_at      INTEGER
) STRICT;

-- Listing newest first per org (the API) and across orgs (operators).
CREATE INDEX IF NOT EXISTS batches_org_created ON batches (org_id, created_at, id);
CREATE INDEX IF NOT EXISTS batches_created ON batches (created_at, id);
-- The batch processor's work list: partial, so it holds only the batches
-- that are not finished.
CREATE INDEX IF NOT EXISTS batches_active ON batches (created_at, id)
    WHERE status IN ('validating', 'in_progress', 'finalizing', 'cancelling');

-- +goose Down
DROP TABLE IF EXISTS batches;
DROP TABLE IF EXISTS file_chunks;
DROP TABLE IF EXISTS files;
ALTER TABLE responses DROP COLUMN finish_reason;
DROP INDEX IF EXISTS prompts_batch;
ALTER TABLE prompts DROP COLUMN custom_id;
ALTER TABLE prompts DROP COLUMN batch_id;
ALTER TABLE prompts DROP COLUMN chat;
