-- Transitions as HOT updates. A job row is updated at least twice (claim,
-- finish), and while any index covered a column those updates change
-- (state in the claim and reclaim index predicates, running_heartbeat_at,
-- updated_at, finished_at), PostgreSQL had to write a new entry into every
-- index of jobs on each of them. With no index on a changing column, and
-- room on the page for the new row version (fillfactor), an update is a
-- heap-only tuple (HOT) update that touches no index, far cheaper per row;
-- and these updates run in the store's serialized section (see the package
-- doc).
--
-- So the queue and the running set move to two narrow side tables that
-- mirror jobs.state (a job is in job_queue exactly when it is queued, in
-- job_running exactly when it is running), written only under the event
-- lock. jobs keeps the indexes on columns that never change (id, org and
-- creation time, prompt). Since-polling finds changed jobs through their
-- events (every change of updated_at appends an event stamped with the same
-- time); Metrics and Archive scan jobs.

-- +goose Up
CREATE TABLE job_queue (
    job_id       text        PRIMARY KEY,
    priority     smallint    NOT NULL,
    available_at timestamptz NOT NULL,
    created_at   timestamptz NOT NULL,
    depends_on   text
);

-- Claim order: priority, then not-before time, then age.
CREATE INDEX job_queue_claim_idx ON job_queue (priority, available_at, created_at, job_id);

CREATE TABLE job_running (
    job_id text PRIMARY KEY
);

INSERT INTO job_queue (job_id, priority, available_at, created_at, depends_on)
SELECT id, priority, available_at, created_at, depends_on FROM jobs WHERE state = 'queued';
INSERT INTO job_running (job_id) SELECT id FROM jobs WHERE state = 'running';

DROP INDEX jobs_claim_idx;
DROP INDEX jobs_reclaim_idx;
DROP INDEX jobs_updated_idx;
DROP INDEX jobs_finished_idx;

-- Half of each new page stays free for the versions its rows' updates
-- write, so they stay on the page (a HOT update needs that).
ALTER TABLE jobs SET (fillfactor = 50);

-- A response's ID is derived from its prompt and job, so the primary key
-- already refuses a second response for a job; the unique index on job_id
-- said it twice, for the price of a second index entry on every success.
-- (Archive finds a job's response through jobs.response_id.)
ALTER TABLE responses DROP CONSTRAINT responses_job_id_key;

-- Since-polling by event time. The log is append-only and its times grow
-- with its physical order, so a block-range index serves "at > T" for the
-- price of almost nothing per insert.
CREATE INDEX job_events_at_idx ON job_events USING brin (at) WITH (autosummarize = on);

-- +goose Down
DROP INDEX job_events_at_idx;
ALTER TABLE responses ADD CONSTRAINT responses_job_id_key UNIQUE (job_id);
ALTER TABLE jobs RESET (fillfactor);
CREATE INDEX jobs_claim_idx ON jobs (priority, available_at, created_at, id) WHERE state = 'queued';
CREATE INDEX jobs_reclaim_idx ON jobs (running_heartbeat_at) WHERE state = 'running';
CREATE INDEX jobs_updated_idx ON jobs (updated_at, id);
CREATE INDEX jobs_finished_idx ON jobs (finished_at) WHERE finished_at IS NOT NULL;
DROP TABLE job_running;
DROP TABLE job_queue;
