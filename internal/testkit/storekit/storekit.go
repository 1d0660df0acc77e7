// Package storekit runs a test body on every job store and counts a
// store's calls: the store part of the test kit (see package testkit).
// Each gives a test a fresh database per store kind, in parallel
// subtests; PostgreSQL is skipped with a one-line reason when
// PROMPTKIT_TEST_DATABASE_URL is unset, and gets a schema of its own per
// test otherwise (internal/pgtest). Counting wraps a store to count the
// reads a test cares about.
//
// It imports both stores, so the internal tests of jobs, sqlitestore and
// pgstore cannot use it; their external test packages can.
package storekit

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/jackc/pgx/v5"
	_ "modernc.org/sqlite" // the "sqlite" driver, to read tables directly

	"github.com/promptkit/promptkit/internal/pgtest"
	"github.com/promptkit/promptkit/jobs"
	"github.com/promptkit/promptkit/jobs/pgstore"
	"github.com/promptkit/promptkit/jobs/sqlitestore"
)

// Kind is a job store implementation; its value is the subtest name Each
// gives it.
type Kind string

// The store kinds.
const (
	SQLite   Kind = "sqlite"
	Postgres Kind = "postgres"
)

// Kinds lists every store kind, in the order Each runs them.
var Kinds = []Kind{SQLite, Postgres}

// New creates an empty database of kind k for t: a SQLite file in a
// directory of t's, or a PostgreSQL schema dropped when t ends (skipping t
// when PROMPTKIT_TEST_DATABASE_URL is unset).
func (k Kind) New(t testing.TB) DB {
	t.Helper()
	switch k {
	case SQLite:
		return DB{Kind: k, DSN: filepath.Join(t.TempDir(), "jobs.db")}
	case Postgres:
		return DB{Kind: k, DSN: pgtest.Schema(t)}
	}
	t.Fatalf("storekit: unknown store kind %q", k)
	return DB{}
}

// Open opens a store of kind k on dsn (a SQLite file or a PostgreSQL
// URL), migrating it: another connection to a database, as another
// process would open it. The caller closes it.
func (k Kind) Open(ctx context.Context, dsn string, opts jobs.Options) (jobs.Store, error) {
	switch k {
	case SQLite:
		return sqlitestore.Open(ctx, dsn, opts)
	case Postgres:
		return pgstore.Open(ctx, dsn, opts)
	}
	return nil, fmt.Errorf("storekit: unknown store kind %q", k)
}

// DB is one test's database.
type DB struct {
	Kind Kind
	// DSN is the SQLite file or the PostgreSQL URL: what Kind.Open and
	// `promptkit --database` take.
	DSN string
}

// Open opens a store on the database (see Kind.Open), closed when t ends;
// a failure fails t.
func (d DB) Open(t testing.TB, opts jobs.Options) jobs.Store {
	t.Helper()
	st, err := d.Kind.Open(context.Background(), d.DSN, opts)
	if err != nil {
		t.Fatalf("storekit: opening %s: %v", d.Kind, err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// Responses counts the rows of the responses table per job ID, read
// straight from the table, not through a store: what a test checks
// exactly-once delivery against.
func (d DB) Responses(ctx context.Context) (map[string]int, error) {
	switch d.Kind {
	case SQLite:
		db, err := sql.Open("sqlite", "file:"+d.DSN+"?_pragma=busy_timeout(10000)&_pragma=query_only(1)")
		if err != nil {
			return nil, err
		}
		defer db.Close()
		rows, err := db.QueryContext(ctx, `SELECT job_id, COUNT(*) FROM responses GROUP BY job_id`)
		if err != nil {
			return nil, err
		}
		defer rows.Close()
		return scanCounts(rows.Next, rows.Scan, rows.Err)
	case Postgres:
		conn, err := pgx.Connect(ctx, d.DSN)
		if err != nil {
			return nil, err
		}
		defer conn.Close(context.Background())
		rows, err := conn.Query(ctx, `SELECT job_id::text, COUNT(*) FROM responses GROUP BY job_id`)
		if err != nil {
			return nil, err
		}
		defer rows.Close()
		return scanCounts(rows.Next, rows.Scan, rows.Err)
	}
	return nil, fmt.Errorf("storekit: unknown store kind %q", d.Kind)
}

func scanCounts(next func() bool, scan func(...any) error, rerr func() error) (map[string]int, error) {
	out := map[string]int{}
	for next() {
		var id string
		var n int
		if err := scan(&id, &n); err != nil {
			return nil, err
		}
		out[id] = n
	}
	return out, rerr()
}

// Each runs fn once per store kind, each in a parallel subtest named
// after the kind on a fresh database (Kind.New: PostgreSQL skips without
// PROMPTKIT_TEST_DATABASE_URL). It marks t parallel itself.
func Each(t *testing.T, fn func(t *testing.T, db DB)) {
	t.Parallel()
	for _, k := range Kinds {
		t.Run(string(k), func(t *testing.T) {
			t.Parallel()
			fn(t, k.New(t))
		})
	}
}
