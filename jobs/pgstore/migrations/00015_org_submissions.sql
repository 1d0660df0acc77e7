-- Requests per minute (jobs.Store.Submitted): an org's newest jobs by
-- creation time, so that counting the last minute's submissions walks
-- back from the newest entry and stops at the limit, however many jobs
-- the org has. Migration 00005 replaced the org's index with the one by
-- org and user, which cannot give an org's jobs in time order without
-- reading all of them. Both columns never change: a transition stays a
-- HOT update that writes no index entry (migration 00002); the cost is
-- one index entry per job enqueued. A token's submissions are found
-- through its user's index (jobs_org_user_created_idx), the token
-- checked on the window's rows.

-- +goose Up
CREATE INDEX jobs_org_submitted_idx ON jobs (org_id, created_at);

-- +goose Down
DROP INDEX jobs_org_submitted_idx;
