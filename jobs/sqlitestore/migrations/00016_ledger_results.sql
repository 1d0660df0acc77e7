-- The usage ledger keeps each call's result (jobs.UsageCall): the HTTP
-- status (0 when there was none), the attempt's outcome ("lost" for a
-- lost call) and failure kind, so that BackendActivity can count a
-- backend's 429s and errors. Rows written before have 0, '' and '': their
-- result is unknown. BackendActivity reads a recent range of every
-- backend's calls: the existing index on (at) serves it.

-- +goose Up
ALTER TABLE usage_ledger ADD COLUMN status_code INTEGER NOT NULL DEFAULT 0;
ALTER TABLE usage_ledger ADD COLUMN outcome TEXT NOT NULL DEFAULT '';
ALTER TABLE usage_ledger ADD COLUMN failure TEXT NOT NULL DEFAULT '';

-- +goose Down
ALTER TABLE usage_ledger DROP COLUMN failure;
ALTER TABLE usage_ledger DROP COLUMN outcome;
ALTER TABLE usage_ledger DROP COLUMN status_code;
