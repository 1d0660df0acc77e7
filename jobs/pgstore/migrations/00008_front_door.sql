-- The OpenAI-compatible front door: chat requests, batch lines, finish
-- reasons, files and batches.
--
-- prompts.chat is a jobs.ChatRequest (NULL when the prompt is text or a
-- named prompt). It is json, not jsonb, like inputs: jsonb would reorder
-- the keys of a request's JSON schema, and a provider writes a structured
-- answer's keys in the schema's order. prompts.batch_id and custom_id make
-- a prompt a line of a batch (NULL when it is not); prompts_batch_idx
-- reads a batch's lines in prompt ID order (BatchResults' pages, the
-- counts of GetBatch and BatchProgress) and, partial, costs the prompts of
-- no batch nothing. Prompts are never updated, so the index costs no
-- transition anything. responses.finish_reason is the final generation's
-- ('' when the provider sent none, as every response stored before this
-- migration). New nullable columns and a constant default rewrite no
-- table.
--
-- A file's content is stored in chunks of jobs.FileChunkSize bytes, so no
-- upload or download is ever held whole in memory. A batch keeps every
-- field of jobs.Batch; errors and metadata are json, its request counts
-- three columns. Files and batches have no events and are written without
-- the event lock; they are never archived, and stay until deleted. IDs,
-- orgs and users are COLLATE "C", like everywhere else (migration 00004).

-- +goose Up
ALTER TABLE prompts
    ADD COLUMN chat      json,
    ADD COLUMN batch_id  text COLLATE "C",
    ADD COLUMN custom_id text;
CREATE INDEX prompts_batch_idx ON prompts (batch_id, id) WHERE batch_id IS NOT NULL;

ALTER TABLE responses ADD COLUMN finish_reason text NOT NULL DEFAULT '';

CREATE TABLE files (
    id         text COLLATE "C" PRIMARY KEY,
    org_id     text COLLATE "C" NOT NULL,
    created_by text COLLATE "C" NOT NULL,
    purpose    text             NOT NULL,
    filename   text             NOT NULL,
    bytes      bigint           NOT NULL,
    created_at timestamptz      NOT NULL
);

-- Listing an org's files newest first, keyset on (created_at, id).
CREATE INDEX files_org_created_idx ON files (org_id, created_at, id);

CREATE TABLE file_chunks (
    file_id text COLLATE "C" NOT NULL REFERENCES files (id),
    seq     integer          NOT NULL, -- from 0, in content order
    data    bytea            NOT NULL,
    PRIMARY KEY (file_id, seq)
);

CREATE TABLE batches (
    id                text COLLATE "C" PRIMARY KEY,
    org_id            text COLLATE "C" NOT NULL,
    created_by        text COLLATE "C" NOT NULL,
    input_file_id     text COLLATE "C" NOT NULL,
    endpoint          text             NOT NULL,
    completion_window text             NOT NULL,
    metadata          json,
    priority          smallint         NOT NULL CHECK (priority BETWEEN 0 AND 100),
    status            text             NOT NULL CHECK (status IN ('validating', 'failed', 'in_progress',
        'finalizing', 'completed', 'expired', 'cancelling', 'cancelled')),
    errors            json, -- array of jobs.BatchError
    output_file_id    text COLLATE "C",
    error_file_id     text COLLATE "C",
    -- The counts stored by the last MoveBatch or FinishBatch (see
    -- jobs.Batch.Counts).
    total             integer          NOT NULL DEFAULT 0,
    completed         integer          NOT NULL DEFAULT 0,
    failed            integer          NOT NULL DEFAULT 0,
    created_at        timestamptz      NOT NULL,
    expires_at        timestamptz      NOT NULL,
    in_progress_at    timestamptz,
    finalizing_at     timestamptz,
    completed_at      timestamptz,
    failed_at         timestamptz,
    expired_at        timestamptz,
    cancelling_at     timestamptz,
    cancelled_at      timestamptz
);

-- Listing newest first per org (the API) and across orgs (operators).
CREATE INDEX batches_org_created_idx ON batches (org_id, created_at, id);
CREATE INDEX batches_created_idx ON batches (created_at, id);
-- The batch processor's work list: partial, so it holds only the batches
-- that are not finished.
CREATE INDEX batches_active_idx ON batches (created_at, id)
    WHERE status IN ('validating', 'in_progress', 'finalizing', 'cancelling');

-- +goose Down
DROP TABLE batches;
DROP TABLE file_chunks;
DROP TABLE files;
ALTER TABLE responses DROP COLUMN finish_reason;
DROP INDEX prompts_batch_idx;
ALTER TABLE prompts
    DROP COLUMN custom_id,
    DROP COLUMN batch_id,
    DROP COLUMN chat;
