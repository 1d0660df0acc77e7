package sqlitestore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync"

	"github.com/promptkit/promptkit/jobs/internal/health"
	"github.com/promptkit/promptkit/jobs/internal/schema"
)

// latestVersion is the newest embedded migration's version.
var latestVersion = sync.OnceValues(func() (int64, error) { return schema.Latest(migrationFS) })

// qSchemaVersion is the newest migration applied to the file, as goose
// computes it.
const qSchemaVersion = `SELECT max(version_id) FROM goose_db_version`

// qProbe is Check's write: the one row of readiness (migration 4), stamped
// with the transaction's time.
var qProbe = wq(`INSERT INTO readiness (id, at) VALUES (1, ?1) ON CONFLICT (id) DO UPDATE SET at = excluded.at`)

// Check implements jobs.Store, in three steps (health.Writes.Check):
//
//  1. one read of goose's version table on the reader pool: a schema
//     other than this build's is a *schema.VersionError naming both
//     versions;
//  2. the probe, a write of readiness's one row in a transaction of its
//     own on the writer connection: it waits its turn behind this
//     store's writes (the writer pool's one connection serves one
//     transaction at a time) and another process's (the busy timeout),
//     as long as ctx lets it, and fails when the file cannot be written
//     (read-only, I/O errors);
//  3. the real writes' record (see wrote): a small probe can succeed where
//     real writes fail — on a full disk, WAL mode reuses the WAL's space
//     after a checkpoint, and an update in place needs no new page, while
//     an enqueue needs both — so Check also fails while the latest real
//     write failed for a database reason within health.Window and none has
//     stored anything since. The error names that write's error and wraps
//     it.
func (s *Store) Check(ctx context.Context) error {
	if err := s.health.Check(ctx, s.now, health.Probe{Want: latestVersion, Have: s.schemaVersion, Write: s.probe}); err != nil {
		return fmt.Errorf("sqlitestore: check: %w", err)
	}
	return nil
}

// schemaVersion reads goose's version table on the reader pool.
func (s *Store) schemaVersion(ctx context.Context) (int64, error) {
	var have sql.NullInt64
	err := s.readRow(ctx, qSchemaVersion).Scan(&have)
	return have.Int64, err
}

// probe is Check's write (qProbe), in a transaction of its own.
func (s *Store) probe(ctx context.Context) error {
	return s.tx(ctx, func(w *wtx) error {
		_, err := w.exec(qProbe, w.now)
		return err
	})
}

// wrote records the outcome of a real write for Check: op names the method
// ("enqueue"), err is what it returns, stored whether it stored anything.
// Every writing method of jobs.Store calls it once per call (Archive once
// per batch); Check's probe and ChangesSince (which takes the write lock
// to read) do not. A failure for a database reason is remembered with the
// clock's time; a write that stored something forgets it. A write that
// stored nothing changes neither (an empty Claim poll writes no byte, so
// it succeeds on a full disk too), and neither does a refusal.
//
// With nothing remembered, recording a success is one atomic load, and
// recording allocates nothing but a failure's record.
func (s *Store) wrote(ctx context.Context, op string, err error, stored bool) {
	s.health.Record(ctx, op, err, stored, s.now, callerEnded)
}

// callerEnded reports whether err is how the driver ends a call whose
// context ended: the context's error (modernc.org/sqlite returns it for a
// statement it interrupted or a lock wait it gave up, database/sql for a
// connection or transaction it no longer starts), or sql.ErrTxDone for a
// transaction database/sql rolled back when the context ended.
func callerEnded(err error) bool {
	return errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, sql.ErrTxDone)
}
