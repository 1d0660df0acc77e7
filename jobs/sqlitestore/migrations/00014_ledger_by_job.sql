-- The dashboard's filter by backend (jobs.JobFilter.Backend) keeps the
-- jobs that made a call to it: for each job row read, an EXISTS on the
-- usage ledger's rows of that job. This index makes that a probe of a few
-- entries instead of a scan of the ledger. The ledger is append-only, so
-- the index costs one entry per provider call.

-- +goose Up
CREATE INDEX IF NOT EXISTS usage_ledger_backend_job ON usage_ledger (backend, job_id);

-- +goose Down
DROP INDEX IF EXISTS usage_ledger_backend_job;
