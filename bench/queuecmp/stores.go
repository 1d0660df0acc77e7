package main

import (
	"context"

	"github.com/promptkit/promptkit/jobs"
	"github.com/promptkit/promptkit/jobs/pgstore"
	"github.com/promptkit/promptkit/jobs/sqlitestore"
)

// Our stores' connection setups, for the report.
const (
	pgStoreSetup     = "jobs/pgstore (its own pgxpool; search_path in the URL)"
	sqliteStoreSetup = "jobs/sqlitestore (WAL, synchronous NORMAL, one writer connection, reader pool)"
)

func openPGStore(ctx context.Context, url string) (jobs.Store, error) {
	return pgstore.Open(ctx, url, jobs.Options{})
}

func openSQLiteStore(ctx context.Context, path string) (jobs.Store, error) {
	return sqlitestore.Open(ctx, path, jobs.Options{})
}

// sqliteDSN is River's SQLite connection: the same pragmas as
// sqlitestore's writer (WAL, synchronous NORMAL, busy timeout 10 s,
// foreign keys).
func sqliteDSN(path string) string {
	return "file:" + path + "?_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)&_pragma=synchronous(NORMAL)&_pragma=foreign_keys(1)"
}
