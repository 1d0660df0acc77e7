-- The readiness probe's rows. Check proves that the database accepts
-- writes by upserting one row of its own, keyed by an ID each Store makes
-- when it opens, with the store clock's time. Many processes probe at
-- once (every replica's /readyz): with one shared row each probe would
-- wait for the previous one's commit, WAL flush included, on that row's
-- lock; with a row per store no probe ever waits for another. The same
-- statement deletes the rows of stores that have not probed for an hour
-- (processes that are gone), skipping rows another probe holds, so the
-- table stays as small as the number of live stores.

-- +goose Up
CREATE TABLE readiness (
    store text COLLATE "C" PRIMARY KEY,
    at    timestamptz      NOT NULL
);

-- +goose Down
DROP TABLE readiness;
