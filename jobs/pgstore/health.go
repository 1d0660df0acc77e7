package pgstore

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/promptkit/promptkit/jobs/internal/health"
	"github.com/promptkit/promptkit/jobs/internal/schema"
)

// latestVersion is the newest embedded migration's version.
var latestVersion = sync.OnceValues(func() (int64, error) { return schema.Latest(migrationFS) })

// probeSQL is Check's write (migration 00007): it upserts this store's own
// row of readiness ($1 its key, $2 the clock), so concurrent probes of
// many processes never wait for one another, and deletes the rows of
// stores that have not probed for an hour, skipping any another probe
// holds. One autocommit statement: its commit is the proof.
const probeSQL = `
	WITH gone AS (
		DELETE FROM readiness WHERE store IN (
			SELECT store FROM readiness WHERE at < $2::timestamptz - interval '1 hour' AND store <> $1
			FOR UPDATE SKIP LOCKED)
	)
	INSERT INTO readiness (store, at) VALUES ($1, $2)
	ON CONFLICT (store) DO UPDATE SET at = excluded.at`

// Check, in three steps (health.Writes.Check):
//
//  1. reads goose's version table in the store's schema: a schema other
//     than this build's is a *schema.VersionError naming both versions;
//  2. the probe: upserts this store's row of readiness (probeSQL), which
//     fails when the database refuses writes (a read-only transaction
//     mode, a hot standby, no room for WAL) and waits, as long as ctx
//     lets it, for a pool connection;
//  3. the real writes' record (see wrote): a small probe can succeed
//     where real writes fail (recycled WAL segments have room for it,
//     while a table that must grow has none), so Check also fails while
//     the latest real write failed for a database reason within
//     health.Window and none has stored anything since. The error names
//     that write's error and wraps it.
//
// See jobs.Store.
func (s *Store) Check(ctx context.Context) error {
	if err := s.health.Check(ctx, s.now, health.Probe{Want: latestVersion, Have: s.schemaVersion, Write: s.probe}); err != nil {
		return fmt.Errorf("pgstore: check: %w", err)
	}
	return nil
}

// schemaVersion reads goose's version table in the store's schema.
func (s *Store) schemaVersion(ctx context.Context) (int64, error) {
	var have *int64
	if err := s.pool.QueryRow(ctx, `SELECT max(version_id) FROM goose_db_version`).Scan(&have); err != nil || have == nil {
		return 0, err
	}
	return *have, nil
}

// probe is Check's write (probeSQL).
func (s *Store) probe(ctx context.Context) error {
	_, err := s.pool.Exec(ctx, probeSQL, s.probeKey, s.clock())
	return err
}

// wrote records the outcome of a real write for Check: op names the method
// ("enqueue"), err is what it returns, stored whether it stored anything.
// Every writing method of jobs.Store calls it once per call (Archive once
// per batch); Check's probe and ChangesSince (which raises the change
// floor as it reads) do not. A failure for a database reason is remembered
// with the clock's time; a write that stored something forgets it. A write
// that stored nothing changes neither (an empty Claim poll writes no byte,
// so it succeeds on a full disk too), and neither does a refusal.
//
// With nothing remembered, recording a success is one atomic load, and
// recording allocates nothing but a failure's record.
func (s *Store) wrote(ctx context.Context, op string, err error, stored bool) {
	s.health.Record(ctx, op, err, stored, s.now, callerEnded)
}

// callerEnded reports whether err is how pgx ends a call whose context
// ended: the context's error (pgconn wraps it in its timeout errors, and
// pgxpool returns it for a connection it no longer waits for), or
// query_canceled, should a cancel request have been what stopped the
// statement.
func callerEnded(err error) bool {
	var pgErr *pgconn.PgError
	return errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) ||
		(errors.As(err, &pgErr) && pgErr.Code == "57014")
}
