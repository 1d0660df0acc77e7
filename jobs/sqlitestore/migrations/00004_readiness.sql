-- The readiness probe's row. Check proves that the database accepts
-- writes by writing this one row (its time, the store clock's) in a
-- transaction of its own on the writer connection, so it waits its turn
-- behind the store's writes and another process's instead of failing with
-- SQLITE_BUSY. The probe upserts the row, so it needs none here; the
-- CHECK keeps the table to that one row.

-- +goose Up
CREATE TABLE IF NOT EXISTS readiness (
    id INTEGER PRIMARY KEY CHECK (id = 1),
    at INTEGER NOT NULL
) STRICT;

-- +goose Down
DROP TABLE IF EXISTS readiness;
