-- The usage ledger keeps each call's result (jobs.UsageCall): the HTTP
-- status (0 when there was none), the attempt's outcome ("lost" for a
-- lost call) and failure kind, so that BackendActivity can count a
-- backend's 429s and errors. Rows written before have 0, '' and '': their
-- result is unknown. Constant defaults rewrite no table. BackendActivity
-- reads a recent range of every backend's calls: the existing index on
-- (at) serves it.

-- +goose Up
ALTER TABLE usage_ledger
    ADD COLUMN status_code integer          NOT NULL DEFAULT 0,
    ADD COLUMN outcome     text COLLATE "C" NOT NULL DEFAULT '',
    ADD COLUMN failure     text COLLATE "C" NOT NULL DEFAULT '';

-- +goose Down
ALTER TABLE usage_ledger DROP COLUMN failure, DROP COLUMN outcome, DROP COLUMN status_code;
