package sqlitestore

import (
	"errors"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/promptkit/promptkit/internal/testkit"
	"github.com/promptkit/promptkit/jobs"
)

// commitGroup runs a whole group in one transaction, and each call gets
// its own outcome: a call that fails after writing is rolled back alone
// (rows and events), a repeated idempotency key inside the group resolves
// to the first, and one with another request hash fails alone. (That a call whose context ended is not run is
// the group committer's, tested in jobs/internal/groupcommit.)
func TestCommitGroupOneTransaction(t *testing.T) {
	t.Parallel()
	// The clock advances 1µs on every reading, so two writes share a
	// timestamp only if they share a transaction (which reads it once).
	clock := testkit.NewClock(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC), testkit.Ticking(time.Microsecond))
	s, err := Open(t.Context(), filepath.Join(t.TempDir(), "jobs.db"), jobs.Options{Now: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()

	const n = 7
	results := make([]jobs.Enqueued, n)
	var brokenJob string
	enqueue := func(i int, p jobs.EnqueueParams) func(w *wtx) error {
		p, err := p.Normalize()
		if err != nil {
			t.Fatal(err)
		}
		return func(w *wtx) error {
			var err error
			results[i], err = w.enqueueOne(p)
			return err
		}
	}
	boom := errors.New("boom")
	fns := []func(w *wtx) error{
		enqueue(0, jobs.EnqueueParams{Text: "a"}),
		enqueue(1, jobs.EnqueueParams{Text: "b", IdempotencyKey: "k", RequestHash: "h1"}),
		enqueue(2, jobs.EnqueueParams{Text: "bad", DependsOn: jobs.NewID()}),
		enqueue(3, jobs.EnqueueParams{Text: "c", IdempotencyKey: "k"}),
		func(w *wtx) error { // writes, then fails
			e, err := w.enqueueOne(jobs.EnqueueParams{Text: "broken", Priority: new(int), MaxAttempts: 1})
			brokenJob = e.JobID
			if err != nil {
				return err
			}
			return boom
		},
		enqueue(5, jobs.EnqueueParams{Text: "d"}),
		enqueue(6, jobs.EnqueueParams{Text: "e", IdempotencyKey: "k", RequestHash: "h2"}),
	}
	batch := make([]*call, len(fns))
	for i, fn := range fns {
		batch[i] = &call{op: "enqueue", fn: fn}
	}
	errs := s.commitGroup(t.Context(), batch)
	if !errors.Is(errs[2], jobs.ErrInvalid) {
		t.Errorf("invalid call: %v", errs[2])
	}
	if !errors.Is(errs[4], boom) {
		t.Errorf("failing call: %v", errs[4])
	}
	if !errors.Is(errs[6], jobs.ErrIdempotencyConflict) {
		t.Errorf("conflicting call: %v", errs[6])
	}
	if !results[3].Existing || results[3].JobID != results[1].JobID {
		t.Errorf("repeated key in a group: %+v, first %+v", results[3], results[1])
	}
	var created time.Time
	for _, i := range []int{0, 1, 5} {
		if errs[i] != nil {
			t.Fatalf("call %d: %v", i, errs[i])
		}
		j, err := s.GetJob(t.Context(), "", results[i].JobID)
		if err != nil {
			t.Fatal(err)
		}
		if created.IsZero() {
			created = j.CreatedAt
		} else if !j.CreatedAt.Equal(created) {
			t.Errorf("job %d created at %v, another at %v: not one transaction", i, j.CreatedAt, created)
		}
	}
	if _, err := s.GetJob(t.Context(), "", brokenJob); !errors.Is(err, jobs.ErrNotFound) {
		t.Errorf("the failed call's job was kept: %v", err)
	}
	events, err := s.EventsAfter(t.Context(), jobs.EventsParams{})
	if err != nil {
		t.Fatal(err)
	}
	if len(events) != 3 {
		t.Errorf("%d events, want 3 (one per stored job)", len(events))
	}
	for _, e := range events {
		if e.JobID == brokenJob {
			t.Errorf("the failed call's event was kept")
		}
	}
}

// Claims and finalizations of many workers are grouped too, and every
// job is still claimed and finished exactly once.
func TestGroupedClaimSucceed(t *testing.T) {
	t.Parallel()
	s, err := Open(t.Context(), filepath.Join(t.TempDir(), "jobs.db"), jobs.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ps := make([]jobs.EnqueueParams, 200)
	for i := range ps {
		ps[i] = jobs.EnqueueParams{Text: "x"}
	}
	if _, err := s.EnqueueBatch(t.Context(), ps); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	done := map[string]int{}
	var wg sync.WaitGroup
	for w := range 8 {
		worker := string(rune('a' + w))
		wg.Go(func() {
			for {
				got, err := s.Claim(t.Context(), jobs.ClaimParams{Worker: worker})
				if err != nil {
					t.Error(err)
					return
				}
				if len(got) == 0 {
					return
				}
				if _, err := s.Succeed(t.Context(), jobs.SucceedParams{JobID: got[0].ID, Worker: worker, Answer: jobs.Answer{Output: "ok"}}); err != nil {
					t.Error(err)
				}
				// A stale second write in the same stream of groups.
				if _, err := s.Fail(t.Context(), jobs.FailParams{JobID: got[0].ID, Worker: worker}); !errors.Is(err, jobs.ErrNotClaimed) {
					t.Errorf("Fail after Succeed: %v", err)
				}
				mu.Lock()
				done[got[0].ID]++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if len(done) != len(ps) {
		t.Errorf("%d jobs done, want %d", len(done), len(ps))
	}
	for id, n := range done {
		if n != 1 {
			t.Errorf("job %s done %d times", id, n)
		}
	}
	m, err := s.Metrics(t.Context(), jobs.MetricsParams{})
	if err != nil {
		t.Fatal(err)
	}
	if m.Counts[jobs.Succeeded] != len(ps) {
		t.Errorf("%d succeeded, want %d", m.Counts[jobs.Succeeded], len(ps))
	}
}
