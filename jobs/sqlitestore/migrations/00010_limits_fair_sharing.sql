-- Limits and fair sharing between orgs (issue 27).
--
-- limits holds one row per org or token (jobs.Limit); a zero column is no
-- limit. The store reads two of its columns at every claim and enqueue:
-- max_running (an org's jobs running at once) and weight (its share).
--
-- Fair sharing is start-time fair queueing: every queued job carries a
-- virtual start tag (jobs.fair_tag, kept when the job is requeued), and
-- the claim order within a priority is tag order, so the claim still
-- walks one index from the front. fair_tags keeps each org's last tag per
-- priority, from which the next one follows (see jobs.Store.Claim).
--
-- ALTER TABLE … ADD COLUMN cannot say IF NOT EXISTS: when two processes
-- race to apply this migration, the second fails on it, and migrate runs
-- goose again, which then finds the migration applied.

-- +goose Up
ALTER TABLE jobs ADD COLUMN fair_tag REAL NOT NULL DEFAULT 0;

CREATE TABLE IF NOT EXISTS limits (
    scope               TEXT    NOT NULL CHECK (scope IN ('org', 'token')),
    subject             TEXT    NOT NULL,
    requests_per_minute INTEGER NOT NULL DEFAULT 0,
    tokens_per_minute   INTEGER NOT NULL DEFAULT 0,
    max_running         INTEGER NOT NULL DEFAULT 0,
    daily_usd           REAL    NOT NULL DEFAULT 0,
    monthly_usd         REAL    NOT NULL DEFAULT 0,
    weight              INTEGER NOT NULL DEFAULT 0,
    updated_at          INTEGER NOT NULL,
    PRIMARY KEY (scope, subject)
) STRICT, WITHOUT ROWID;

CREATE TABLE IF NOT EXISTS fair_tags (
    priority INTEGER NOT NULL,
    org_id   TEXT    NOT NULL,
    last     REAL    NOT NULL,
    PRIMARY KEY (priority, org_id)
) STRICT, WITHOUT ROWID;

-- The queue as it stands keeps its order: tags count up per priority in
-- the old claim order.
UPDATE jobs SET fair_tag = r.n
FROM (SELECT id, row_number() OVER (PARTITION BY priority ORDER BY available_at, created_at, id) AS n
    FROM jobs WHERE state = 'queued') r
WHERE r.id = jobs.id;
INSERT INTO fair_tags (priority, org_id, last)
SELECT priority, org_id, max(fair_tag) FROM jobs WHERE state = 'queued' GROUP BY priority, org_id;

-- Claim order: priority, then tag.
DROP INDEX IF EXISTS jobs_claim;
CREATE INDEX IF NOT EXISTS jobs_claim ON jobs (priority, fair_tag, id) WHERE state = 'queued';

-- +goose Down
DROP INDEX IF EXISTS jobs_claim;
CREATE INDEX IF NOT EXISTS jobs_claim
    ON jobs (priority, available_at, created_at, id) WHERE state = 'queued';
DROP TABLE IF EXISTS fair_tags;
DROP TABLE IF EXISTS limits;
ALTER TABLE jobs DROP COLUMN fair_tag;
