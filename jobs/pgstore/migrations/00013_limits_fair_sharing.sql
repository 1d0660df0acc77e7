-- Limits and fair sharing between orgs (issue 27).
--
-- limits holds one row per org or token (jobs.Limit); a zero column is no
-- limit. The store reads two of its columns at every claim and enqueue:
-- max_running (an org's jobs running at once) and weight (its share).
--
-- Fair sharing is start-time fair queueing: every queued job carries a
-- virtual start tag (jobs.fair_tag, mirrored in job_queue.tag, kept when
-- the job is requeued), and the claim order within a priority is tag
-- order, so the claim stays one range scan of one index. fair_tags keeps
-- each org's last tag per priority, from which the next one follows (see
-- jobs.Store.Claim).

-- +goose Up
CREATE TABLE limits (
    scope               text COLLATE "C" NOT NULL CHECK (scope IN ('org', 'token')),
    subject             text COLLATE "C" NOT NULL,
    requests_per_minute integer          NOT NULL DEFAULT 0,
    tokens_per_minute   integer          NOT NULL DEFAULT 0,
    max_running         integer          NOT NULL DEFAULT 0,
    daily_usd           double precision NOT NULL DEFAULT 0,
    monthly_usd         double precision NOT NULL DEFAULT 0,
    weight              integer          NOT NULL DEFAULT 0,
    updated_at          timestamptz      NOT NULL,
    PRIMARY KEY (scope, subject)
);

CREATE TABLE fair_tags (
    priority smallint         NOT NULL,
    org_id   text COLLATE "C" NOT NULL,
    last     double precision NOT NULL,
    PRIMARY KEY (priority, org_id)
);

ALTER TABLE jobs ADD COLUMN fair_tag double precision NOT NULL DEFAULT 0;
ALTER TABLE job_queue ADD COLUMN tag double precision NOT NULL DEFAULT 0;

-- The queue as it stands keeps its order: tags count up per priority in
-- the old claim order.
WITH ranked AS (
    SELECT job_id, row_number() OVER (PARTITION BY priority ORDER BY available_at, created_at, job_id) AS n
    FROM job_queue
)
UPDATE job_queue q SET tag = r.n FROM ranked r WHERE r.job_id = q.job_id;
UPDATE jobs j SET fair_tag = q.tag FROM job_queue q WHERE q.job_id = j.id;
INSERT INTO fair_tags (priority, org_id, last)
SELECT q.priority, j.org_id, max(q.tag) FROM job_queue q JOIN jobs j ON j.id = q.job_id GROUP BY q.priority, j.org_id;

-- Claim order: priority, then tag.
DROP INDEX job_queue_claim_idx;
CREATE INDEX job_queue_claim_idx ON job_queue (priority, tag, job_id);

-- +goose Down
DROP INDEX job_queue_claim_idx;
CREATE INDEX job_queue_claim_idx ON job_queue (priority, available_at, created_at, job_id);
ALTER TABLE job_queue DROP COLUMN tag;
ALTER TABLE jobs DROP COLUMN fair_tag;
DROP TABLE fair_tags;
DROP TABLE limits;
