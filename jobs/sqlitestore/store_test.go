package sqlitestore_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/promptkit/promptkit/internal/testkit"
	"github.com/promptkit/promptkit/jobs"
	"github.com/promptkit/promptkit/jobs/jobstest"
	"github.com/promptkit/promptkit/jobs/sqlitestore"
)

// harness gives each suite test a database file in its own temporary
// directory; the DSN is the file path.
var harness = jobstest.Harness{
	NewDatabase: func(t *testing.T) string { return filepath.Join(t.TempDir(), "jobs.db") },
	Open:        jobstest.Opener(sqlitestore.Open),
}

// TestMain runs the suite's child claimer when re-executed by it, and
// otherwise the tests under a goroutine-leak check, which proves Close
// stops the watcher of other processes' commits.
func TestMain(m *testing.M) { jobstest.Main(m, harness) }

func TestConformance(t *testing.T) {
	jobstest.Run(t, harness)
}

func open(t *testing.T) (*sqlitestore.Store, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "jobs.db")
	s, err := sqlitestore.Open(t.Context(), path, jobs.Options{})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s, path
}

func TestOpenRejectsMemory(t *testing.T) {
	t.Parallel()
	for _, p := range []string{"", ":memory:", "file::memory:?cache=shared"} {
		if s, err := sqlitestore.Open(t.Context(), p, jobs.Options{}); !errors.Is(err, jobs.ErrInvalid) {
			if s != nil {
				s.Close()
			}
			t.Errorf("Open(%q) = %v, want ErrInvalid", p, err)
		}
	}
}

// Migrate is idempotent and leaves a file Open accepts; reopening keeps
// the data.
func TestMigrateAndReopen(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "a?b#c.db") // URI metacharacters in the name
	for i := range 2 {
		applied, err := sqlitestore.Migrate(t.Context(), path)
		if err != nil {
			t.Fatalf("Migrate: %v", err)
		}
		// The first run applies every migration, the second none.
		if (i == 0) != (len(applied) > 0) || (i == 0 && applied[0] != 1) {
			t.Fatalf("run %d applied %v", i, applied)
		}
	}
	s, err := sqlitestore.Open(t.Context(), path, jobs.Options{})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	e, err := s.Enqueue(t.Context(), jobs.EnqueueParams{Text: "x"})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s2, err := sqlitestore.Open(t.Context(), path, jobs.Options{})
	if err != nil {
		t.Fatalf("reopen: %v", err)
	}
	defer s2.Close()
	if _, err := s2.GetJob(t.Context(), "", e.JobID); err != nil {
		t.Errorf("job lost across reopen: %v", err)
	}
}

// Two stores on one file (as two processes would have) see each other's
// writes and never claim a job twice.
func TestTwoStoresOneFile(t *testing.T) {
	t.Parallel()
	a, path := open(t)
	b, err := sqlitestore.Open(t.Context(), path, jobs.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	ps := make([]jobs.EnqueueParams, 300)
	for i := range ps {
		ps[i] = jobs.EnqueueParams{Text: "x"}
	}
	if _, err := a.EnqueueBatch(t.Context(), ps); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	seen := map[string]int{}
	var wg sync.WaitGroup
	for i, s := range []*sqlitestore.Store{a, b, a, b} {
		wg.Go(func() {
			for {
				got, err := s.Claim(t.Context(), jobs.ClaimParams{Worker: fmt.Sprint("w", i), Limit: 4})
				if err != nil {
					t.Errorf("Claim: %v", err)
					return
				}
				if len(got) == 0 {
					return
				}
				mu.Lock()
				for _, j := range got {
					seen[j.ID]++
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if len(seen) != len(ps) {
		t.Errorf("claimed %d distinct jobs, want %d", len(seen), len(ps))
	}
	for id, n := range seen {
		if n != 1 {
			t.Errorf("job %s claimed %d times", id, n)
		}
	}
}

// Group commit: many concurrent Enqueue calls all get their own result;
// the bad one fails alone.
func TestGroupCommitManyCallers(t *testing.T) {
	t.Parallel()
	s, _ := open(t)
	const n = 200
	res := make([]jobs.Enqueued, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			p := jobs.EnqueueParams{Text: fmt.Sprint("p", i), IdempotencyKey: fmt.Sprint("k", i%100)}
			if i == 123 {
				p.ParentID = jobs.NewID()
				p.IdempotencyKey = ""
			}
			res[i], errs[i] = s.Enqueue(t.Context(), p)
		})
	}
	wg.Wait()
	byKey := map[string]string{}
	for i := range n {
		if i == 123 {
			if !errors.Is(errs[i], jobs.ErrInvalid) {
				t.Errorf("bad call: %v", errs[i])
			}
			continue
		}
		if errs[i] != nil {
			t.Fatalf("call %d: %v", i, errs[i])
		}
		k := fmt.Sprint("k", i%100)
		if prev, ok := byKey[k]; ok && prev != res[i].JobID {
			t.Errorf("key %s: jobs %s and %s", k, prev, res[i].JobID)
		}
		byKey[k] = res[i].JobID
	}
	m, err := s.Metrics(t.Context(), jobs.MetricsParams{})
	if err != nil {
		t.Fatal(err)
	}
	if m.Counts[jobs.Queued] != 100 {
		t.Errorf("%d jobs queued, want 100 (one per key)", m.Counts[jobs.Queued])
	}
}

// Close waits for Enqueue calls in flight and later calls fail cleanly.
func TestCloseWithEnqueuesInFlight(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "jobs.db")
	s, err := sqlitestore.Open(t.Context(), path, jobs.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var stored []string
	for range 50 {
		wg.Go(func() {
			e, err := s.Enqueue(context.Background(), jobs.EnqueueParams{Text: "x"})
			if err == nil {
				mu.Lock()
				stored = append(stored, e.JobID)
				mu.Unlock()
			}
		})
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	if _, err := s.Enqueue(t.Context(), jobs.EnqueueParams{Text: "x"}); err == nil {
		t.Error("Enqueue after Close succeeded")
	}
	// Every call that reported success is durable.
	s2, err := sqlitestore.Open(t.Context(), path, jobs.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	for _, id := range stored {
		if _, err := s2.GetJob(t.Context(), "", id); err != nil {
			t.Errorf("acknowledged job %s lost: %v", id, err)
		}
	}
}

// A clock that steps back cannot hide a change from a since-poller:
// updated_at never goes below a committed one.
func TestChangesSinceClockStepsBack(t *testing.T) {
	t.Parallel()
	clock := testkit.NewClock(jobstest.T0)
	s, err := sqlitestore.Open(t.Context(), filepath.Join(t.TempDir(), "jobs.db"), jobs.Options{Now: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	a, err := s.Enqueue(t.Context(), jobs.EnqueueParams{Text: "x"})
	if err != nil {
		t.Fatal(err)
	}
	clock.Advance(time.Second)
	c, err := s.ChangesSince(t.Context(), jobs.ChangesParams{})
	if err != nil {
		t.Fatal(err)
	}
	clock.Advance(-time.Hour)
	if _, err := s.Cancel(t.Context(), jobs.CancelParams{JobID: a.JobID}); err != nil {
		t.Fatal(err)
	}
	c, err = s.ChangesSince(t.Context(), jobs.ChangesParams{Since: c.AsOf})
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Jobs) != 1 || c.Jobs[0].State != jobs.Cancelled {
		t.Errorf("change after the clock stepped back: got %+v", c.Jobs)
	}
}

// TestNotifySeesOtherProcesses: a commit through another handle on the
// same file (another process, in practice) wakes this store's
// subscribers.
func TestNotifySeesOtherProcesses(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "jobs.db")
	a, err := sqlitestore.Open(t.Context(), path, jobs.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := sqlitestore.Open(t.Context(), path, jobs.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	wake := a.Notifier().Notify(ctx)
	// The watcher takes its first reading on its first tick; keep
	// enqueuing through the other handle until a wake-up arrives (a
	// missed notification would hang here until the test times out).
	for {
		if _, err := b.Enqueue(t.Context(), jobs.EnqueueParams{Text: "from elsewhere"}); err != nil {
			t.Fatal(err)
		}
		select {
		case <-wake:
			return
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// A database file Open or Migrate creates is readable by its owner only,
// and so are the -wal and -shm files SQLite creates next to it; an
// existing file keeps its mode.
func TestFileModes(t *testing.T) {
	t.Parallel()
	if runtime.GOOS == "windows" {
		t.Skip("no Unix file modes")
	}
	modes := func(path string) string {
		t.Helper()
		var out []string
		for _, p := range []string{path, path + "-wal", path + "-shm"} {
			fi, err := os.Stat(p)
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, fmt.Sprintf("%s %v", filepath.Base(p), fi.Mode().Perm()))
		}
		return strings.Join(out, ", ")
	}
	// Stat while the store is open: SQLite removes -wal and -shm when the
	// last connection closes.
	check := func(path, want string) {
		t.Helper()
		s, err := sqlitestore.Open(t.Context(), path, jobs.Options{})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		if _, err := s.Enqueue(t.Context(), jobs.EnqueueParams{Text: "x"}); err != nil {
			t.Fatal(err)
		}
		b := filepath.Base(path)
		if got, want := modes(path), fmt.Sprintf("%s %s, %s-wal %s, %s-shm %s", b, want, b, want, b, want); got != want {
			t.Errorf("modes %s, want %s", got, want)
		}
	}
	dir := t.TempDir()
	check(filepath.Join(dir, "open.db"), "-rw-------")

	migrated := filepath.Join(dir, "migrated.db")
	if _, err := sqlitestore.Migrate(t.Context(), migrated); err != nil {
		t.Fatal(err)
	}
	check(migrated, "-rw-------")

	existing := filepath.Join(dir, "existing.db")
	if err := os.WriteFile(existing, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(existing, 0o640); err != nil { // not subject to the umask
		t.Fatal(err)
	}
	check(existing, "-rw-r-----")
}

// Stores opening one new file at once all migrate it and open it: the
// one that applies a migration second finds it applied.
func TestConcurrentOpenNewFile(t *testing.T) {
	t.Parallel()
	for range 3 {
		path := filepath.Join(t.TempDir(), "jobs.db")
		const n = 6
		stores := make([]*sqlitestore.Store, n)
		errs := make([]error, n)
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() { stores[i], errs[i] = sqlitestore.Open(t.Context(), path, jobs.Options{}) })
		}
		wg.Wait()
		for i, s := range stores {
			if errs[i] != nil {
				t.Errorf("Open %d: %v", i, errs[i])
				continue
			}
			if err := s.Check(t.Context()); err != nil {
				t.Errorf("Check %d: %v", i, err)
			}
			s.Close()
		}
	}
}
