-- The dashboard's filter by backend (jobs.JobFilter.Backend) keeps the
-- jobs that made a call to it: an EXISTS on the usage ledger's rows of the
-- job with that backend. With the backend first, this index serves both
-- ways a planner runs it: a probe of a few entries per job row read, or
-- the backend's rows read as one range and joined; without it, either
-- reads the whole ledger. The ledger is append-only, so the index costs
-- one entry per provider call.

-- +goose Up
CREATE INDEX IF NOT EXISTS usage_ledger_backend_job ON usage_ledger (backend, job_id);

-- +goose Down
DROP INDEX IF EXISTS usage_ledger_backend_job;
