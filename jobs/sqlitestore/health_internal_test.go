package sqlitestore

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/promptkit/promptkit/jobs"
	"github.com/promptkit/promptkit/jobs/internal/storetest"
	"github.com/promptkit/promptkit/jobs/jobstest"
)

// openClocked opens a store on a new file, on a fake clock.
func openClocked(t *testing.T) (*Store, *jobstest.Clock, string) {
	t.Helper()
	clock := jobstest.NewClock(jobstest.T0)
	path := filepath.Join(t.TempDir(), "jobs.db")
	s, err := Open(t.Context(), path, jobs.Options{Now: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s, clock, path
}

// sqliteCode is the primary SQLite result code err carries, or 0.
func sqliteCode(err error) int {
	var se *sqlite.Error
	if errors.As(err, &se) {
		return se.Code() & 0xff
	}
	return 0
}

// writerPragma runs a PRAGMA on the writer pool's only connection, where
// it stays set.
func writerPragma(t *testing.T, s *Store, pragma string) {
	t.Helper()
	if _, err := s.writer.ExecContext(t.Context(), "PRAGMA "+pragma); err != nil {
		t.Fatalf("PRAGMA %s: %v", pragma, err)
	}
}

// A full disk, simulated by capping the file at the pages it has
// (max_page_count, a setting of the writer connection): an enqueue needs
// new pages and fails with SQLITE_FULL, while the probe, which updates its
// row in place, succeeds. Check fails all the same, naming the failed
// write (storetest.FailedWrites).
func TestCheckRemembersFailedWrites(t *testing.T) {
	s, clock, _ := openClocked(t)
	ctx := t.Context()
	var pages, maxPages int64
	if err := s.writer.QueryRowContext(ctx, "PRAGMA page_count").Scan(&pages); err != nil {
		t.Fatal(err)
	}
	if err := s.writer.QueryRowContext(ctx, "PRAGMA max_page_count").Scan(&maxPages); err != nil {
		t.Fatal(err)
	}
	full := func(err error) bool { return sqliteCode(err) == sqlite3.SQLITE_FULL }
	storetest.FailedWrites{
		Store:  s,
		Clock:  clock,
		Break:  func(t *testing.T) { writerPragma(t, s, fmt.Sprintf("max_page_count = %d", pages)) },
		Mend:   func(t *testing.T) { writerPragma(t, s, fmt.Sprintf("max_page_count = %d", maxPages)) },
		Failed: full,
		Write:  jobs.EnqueueParams{CreatedBy: "u", Text: strings.Repeat("x", 1<<20)},
		Broken: func(t *testing.T) {
			if err := s.tx(ctx, func(w *wtx) error { _, err := w.exec(qProbe, w.now); return err }); err != nil {
				t.Fatalf("the probe alone on a full file: %v (the test needs it to pass)", err)
			}
			if err := s.Check(ctx); !full(err) || !strings.Contains(fmt.Sprint(err), "enqueue") {
				t.Fatalf("Check on a full file after a failed enqueue = %v, want the enqueue's SQLITE_FULL", err)
			}
		},
	}.Run(t)
}

// The probe is a write: it stamps readiness's row with the store's clock,
// and on a connection that may not write (query_only) Check fails even
// though nothing else did; the probe's own failure is not remembered.
func TestCheckProbeWrites(t *testing.T) {
	s, clock, _ := openClocked(t)
	ctx := t.Context()
	for range 2 {
		now := clock.Advance(time.Second)
		if err := s.Check(ctx); err != nil {
			t.Fatal(err)
		}
		var at int64
		if err := s.reader.QueryRowContext(ctx, `SELECT at FROM readiness WHERE id = 1`).Scan(&at); err != nil {
			t.Fatal(err)
		}
		if at != now.UnixMicro() {
			t.Fatalf("readiness.at = %v, want the clock's %v", fromMicros(at), now)
		}
	}
	writerPragma(t, s, "query_only = 1")
	if err := s.Check(ctx); sqliteCode(err) != sqlite3.SQLITE_READONLY || !strings.Contains(fmt.Sprint(err), "probe") {
		t.Fatalf("Check when writes are refused = %v, want the probe's SQLITE_READONLY", err)
	}
	writerPragma(t, s, "query_only = 0")
	if err := s.Check(ctx); err != nil {
		t.Fatalf("Check once writes work again: %v", err)
	}
}

// While another process holds the write lock, the probe waits for it
// (rather than failing with SQLITE_BUSY) for as long as Check's context
// allows, and succeeds once the lock is released.
func TestCheckWaitsForTheWriteLock(t *testing.T) {
	s, _, path := openClocked(t)
	ctx := t.Context()
	other, err := openWriter(path)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	lock, err := other.BeginTx(ctx, nil) // BEGIN IMMEDIATE: the write lock
	if err != nil {
		t.Fatal(err)
	}
	short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	if err := s.Check(short); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Check while another process writes, with a deadline = %v, want the deadline's error", err)
	}

	done := make(chan error, 1)
	go func() { done <- s.Check(ctx) }()
	// The probe holds the writer connection while it waits for the lock:
	// once it is in use, the Check is waiting.
	for s.writer.Stats().InUse == 0 {
		select {
		case err := <-done:
			t.Fatalf("Check returned while another process held the write lock: %v", err)
		default:
			runtime.Gosched()
		}
	}
	if err := lock.Rollback(); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("Check that waited for the write lock: %v", err)
	}
	if err := s.Check(ctx); err != nil {
		t.Fatalf("Check after the lock was released: %v", err)
	}
}
