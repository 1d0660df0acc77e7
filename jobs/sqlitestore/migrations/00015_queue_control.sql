-- Queue control (issue 28): an operator pauses an org's queue
-- (limits.paused: its queued jobs stay queued, as at its max_running),
-- holds a backend (pacing.held: engines dispatch nothing new to it), and
-- drains a worker (workers.draining: it claims nothing more). workers
-- holds one row per worker process, as it last reported itself on its
-- heartbeat; times are microseconds since the epoch of the store's clock.
--
-- ALTER TABLE … ADD COLUMN cannot say IF NOT EXISTS: when two processes
-- race to apply this migration, the second fails on it, and migrate runs
-- goose again, which then finds the migration applied.

-- +goose Up
ALTER TABLE limits ADD COLUMN paused INTEGER NOT NULL DEFAULT 0;
ALTER TABLE pacing ADD COLUMN held INTEGER NOT NULL DEFAULT 0;

CREATE TABLE IF NOT EXISTS workers (
    worker     TEXT    PRIMARY KEY,
    host       TEXT    NOT NULL,
    pid        INTEGER NOT NULL,
    running    INTEGER NOT NULL,
    started_at INTEGER NOT NULL,
    seen_at    INTEGER NOT NULL,
    draining   INTEGER NOT NULL DEFAULT 0
) STRICT, WITHOUT ROWID;

-- +goose Down
DROP TABLE IF EXISTS workers;
ALTER TABLE pacing DROP COLUMN held;
ALTER TABLE limits DROP COLUMN paused;
