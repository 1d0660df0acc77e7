-- Shared pacing (jobs.Store.SyncPacing): the pacers of every process on
-- the database share, per backend, a pause (a provider's Retry-After) and
-- the last decrease of the learned provider-wide rate (pacing, one row
-- per backend), and each process's demand on the backend and its part of
-- that decrease (pacing_peers, one row per backend and process, deleted
-- once older than the peers' time to live). pause_until, rate_at and
-- estimate_at are the engines' clocks', the other times the store's.

-- +goose Up
CREATE TABLE pacing (
    backend     text COLLATE "C" PRIMARY KEY,
    pause_until timestamptz,
    rate_cap    double precision NOT NULL DEFAULT 0,
    rate_floor  double precision NOT NULL DEFAULT 0,
    rate_at     timestamptz,
    updated_at  timestamptz NOT NULL
);

CREATE TABLE pacing_peers (
    backend     text COLLATE "C" NOT NULL,
    peer        text COLLATE "C" NOT NULL,
    demand      integer          NOT NULL,
    seen_at     timestamptz      NOT NULL,
    estimate    integer          NOT NULL DEFAULT 0,
    estimate_at timestamptz,
    PRIMARY KEY (backend, peer)
);

-- +goose Down
DROP TABLE pacing_peers;
DROP TABLE pacing;
