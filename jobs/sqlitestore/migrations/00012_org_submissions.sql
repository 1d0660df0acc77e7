-- Requests per minute (jobs.Store.Submitted): an org's newest jobs by
-- creation time, so that counting the last minute's submissions walks
-- back from the newest entry and stops at the limit, however many jobs
-- the org has. Migration 00002 replaced the org's index with the one by
-- org and user, which cannot give an org's jobs in time order without
-- reading all of them. A token's submissions are found through its
-- user's index (jobs_org_user_created), the token checked on the
-- window's rows.

-- +goose Up
CREATE INDEX IF NOT EXISTS jobs_org_submitted ON jobs (org_id, created_at);

-- +goose Down
DROP INDEX IF EXISTS jobs_org_submitted;
