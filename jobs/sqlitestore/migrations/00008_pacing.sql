-- Shared pacing (jobs.Store.SyncPacing): the pacers of every process on
-- the database share, per backend, a pause (a provider's Retry-After) and
-- the last decrease of the learned provider-wide rate (pacing, one row
-- per backend), and each process's demand on the backend and its part of
-- that decrease (pacing_peers, one row per backend and process, deleted
-- once older than the peers' time to live). Times are microseconds since
-- the epoch, as everywhere in this schema; pause_until, rate_at and
-- estimate_at are the engines' clocks', the others the store's.

-- +goose Up
CREATE TABLE IF NOT EXISTS pacing (
    backend     TEXT PRIMARY KEY,
    pause_until INTEGER,
    rate_cap    REAL NOT NULL DEFAULT 0,
    rate_floor  REAL NOT NULL DEFAULT 0,
    rate_at     INTEGER,
    updated_at  INTEGER NOT NULL
) STRICT;

CREATE TABLE IF NOT EXISTS pacing_peers (
    backend     TEXT NOT NULL,
    peer        TEXT NOT NULL,
    demand      INTEGER NOT NULL,
    seen_at     INTEGER NOT NULL,
    estimate    INTEGER NOT NULL DEFAULT 0,
    estimate_at INTEGER,
    PRIMARY KEY (backend, peer)
) STRICT;

-- +goose Down
DROP TABLE IF EXISTS pacing_peers;
DROP TABLE IF EXISTS pacing;
