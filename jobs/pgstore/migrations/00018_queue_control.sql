-- Queue control (issue 28): an operator pauses an org's queue
-- (limits.paused: its queued jobs stay queued, as at its max_running,
-- read by the claim's capped CTE), holds a backend (pacing.held: engines
-- dispatch nothing new to it), and drains a worker (workers.draining: it
-- claims nothing more). workers holds one row per worker process, as it
-- last reported itself on its heartbeat, in the store's time. Constant
-- defaults rewrite no table.

-- +goose Up
ALTER TABLE limits ADD COLUMN paused boolean NOT NULL DEFAULT false;
ALTER TABLE pacing ADD COLUMN held boolean NOT NULL DEFAULT false;

CREATE TABLE workers (
    worker     text COLLATE "C" PRIMARY KEY,
    host       text        NOT NULL,
    pid        integer     NOT NULL,
    running    integer     NOT NULL,
    started_at timestamptz NOT NULL,
    seen_at    timestamptz NOT NULL,
    draining   boolean     NOT NULL DEFAULT false
);

-- +goose Down
DROP TABLE workers;
ALTER TABLE pacing DROP COLUMN held;
ALTER TABLE limits DROP COLUMN paused;
