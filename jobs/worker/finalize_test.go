package worker_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/promptkit/promptkit/internal/testkit"
	"github.com/promptkit/promptkit/internal/testkit/storekit"
	"github.com/promptkit/promptkit/jobs"
	"github.com/promptkit/promptkit/jobs/worker"
	"github.com/promptkit/promptkit/providertest"
)

// flakyStore fails the first n Succeed calls as a database hiccup would,
// calling onFail (when set) on each.
type flakyStore struct {
	jobs.Store
	fails  atomic.Int32
	onFail func()
}

var errHiccup = errors.New("connection reset by peer")

func (s *flakyStore) Succeed(ctx context.Context, p jobs.SucceedParams) (jobs.Job, error) {
	if s.fails.Add(-1) >= 0 {
		if s.onFail != nil {
			s.onFail()
		}
		return jobs.Job{}, errHiccup
	}
	return s.Store.Succeed(ctx, p)
}

// TestFinalizationRetriesTransientStoreErrors: a result in hand is not
// lost to one failed write; the job succeeds with exactly one response.
func TestFinalizationRetriesTransientStoreErrors(t *testing.T) {
	eachStore(t, func(t *testing.T, f *fixture) {
		flaky := &flakyStore{Store: f.store}
		flaky.fails.Store(1)
		w := f.worker("w1", func(c *worker.Config) { c.Store = flaky })
		f.srv.Enqueue(providertest.Reply("kept"))
		e := f.enqueue(jobs.EnqueueParams{Text: "x"})
		f.runOnce(w, 1)
		if j := f.job(e.JobID); j.State != jobs.Succeeded {
			t.Fatalf("state = %s", j.State)
		}
		if n := f.responses(e.JobID); n != 1 {
			t.Fatalf("%d response rows", n)
		}
		if f.srv.Count() != 1 {
			t.Fatalf("the job ran %d times", f.srv.Count())
		}
	})
}

// TestFinalizationOutlastsAnOutage: a result in hand survives many failed
// writes — an outage far longer than a few retries — while the claim
// could still be ours, and the trouble is logged once.
func TestFinalizationOutlastsAnOutage(t *testing.T) {
	eachStore(t, func(t *testing.T, f *fixture) {
		flaky := &flakyStore{Store: f.store}
		flaky.fails.Store(30)
		// 30 failed tries, a second of the worker's clock each: an outage
		// ten times longer than the old three-retry budget, well inside
		// ReclaimAfter.
		flaky.onFail = func() { f.clock.Advance(time.Second) }
		var logs testkit.Logs
		w := f.worker("w1", func(c *worker.Config) {
			c.Store = flaky
			c.Logger = logs.Logger()
		})
		worker.SetFinalizeBackoff(w, func(int) time.Duration { return time.Millisecond })
		f.srv.Enqueue(providertest.Reply("kept"))
		e := f.enqueue(jobs.EnqueueParams{Text: "x"})
		f.runOnce(w, 1)
		if j := f.job(e.JobID); j.State != jobs.Succeeded || f.responses(e.JobID) != 1 || f.srv.Count() != 1 {
			t.Fatalf("state %s, %d responses, %d provider calls", j.State, f.responses(e.JobID), f.srv.Count())
		}
		if n := strings.Count(logs.String(), "level=WARN"); n != 1 {
			t.Fatalf("%d warnings, want 1:\n%s", n, logs.String())
		}
	})
}

// TestFinalizationOutlastsReclaimAfter: a write failing for longer than
// reclaim_after (the database was down that long) is still retried while
// nothing took the claim, and then lands: an outage alone never throws a
// finished answer away.
func TestFinalizationOutlastsReclaimAfter(t *testing.T) {
	eachStore(t, func(t *testing.T, f *fixture) {
		flaky := &flakyStore{Store: f.store}
		flaky.fails.Store(20)
		flaky.onFail = func() { f.clock.Advance(time.Minute) } // 20 minutes: four reclaim_afters
		w := f.worker("w1", func(c *worker.Config) { c.Store = flaky })
		worker.SetFinalizeBackoff(w, func(int) time.Duration { return time.Millisecond })
		f.srv.Enqueue(providertest.Reply("kept"))
		e := f.enqueue(jobs.EnqueueParams{Text: "x"})
		f.runOnce(w, 1)
		if j := f.job(e.JobID); j.State != jobs.Succeeded || f.responses(e.JobID) != 1 || f.srv.Count() != 1 {
			t.Fatalf("state %s, %d responses, %d provider calls", j.State, f.responses(e.JobID), f.srv.Count())
		}
	})
}

// TestFinalizationDropsOnlyALostClaim: when the job was reclaimed while
// the write kept failing, the store's answer (the claim is lost) ends the
// retries and the answer is dropped; the job runs again as attempt 2.
func TestFinalizationDropsOnlyALostClaim(t *testing.T) {
	eachStore(t, func(t *testing.T, f *fixture) {
		flaky := &flakyStore{Store: f.store}
		flaky.fails.Store(1 << 30)
		var reclaimed atomic.Bool
		flaky.onFail = func() {
			if reclaimed.Load() {
				flaky.fails.Store(0) // the database is back
				return
			}
			f.clock.Advance(10 * time.Minute)
			if r, err := f.store.Reclaim(f.ctx, jobs.ReclaimParams{}); err != nil || len(r.Requeued) != 1 {
				t.Errorf("Reclaim = %+v, %v", r, err)
			}
			reclaimed.Store(true)
		}
		w := f.worker("w1", func(c *worker.Config) { c.Store = flaky })
		worker.SetFinalizeBackoff(w, func(int) time.Duration { return time.Millisecond })
		f.srv.Enqueue(providertest.Reply("lost"))
		e := f.enqueue(jobs.EnqueueParams{Text: "x"})
		f.runOnce(w, 1)
		if j := f.job(e.JobID); j.State != jobs.Queued || j.Attempt != 2 || f.responses(e.JobID) != 0 {
			t.Fatalf("job %s attempt %d with %d responses; want queued, attempt 2, none", j.State, j.Attempt, f.responses(e.JobID))
		}
	})
}

// invalidStore refuses every Succeed as a value the database cannot hold.
type invalidStore struct{ jobs.Store }

func (s invalidStore) Succeed(context.Context, jobs.SucceedParams) (jobs.Job, error) {
	return jobs.Job{}, fmt.Errorf("pgstore: succeed: %w: the database refused a value (SQLSTATE 22021)", jobs.ErrInvalid)
}

// TestUnstorableResultFailsTheJob: a result the store refuses, which no
// retry can change, ends the job (failed, unstorable) instead of holding
// its worker slot for ever.
func TestUnstorableResultFailsTheJob(t *testing.T) {
	eachStore(t, func(t *testing.T, f *fixture) {
		w := f.worker("w1", func(c *worker.Config) { c.Store = invalidStore{f.store} })
		f.srv.Enqueue(providertest.Reply("refused"))
		e := f.enqueue(jobs.EnqueueParams{Text: "x"})
		f.runOnce(w, 1)
		if j := f.job(e.JobID); j.State != jobs.Failed || j.ErrorKind != jobs.KindUnstorable || f.srv.Count() != 1 {
			t.Fatalf("job %s %q after %d calls; want failed unstorable after 1", j.State, j.ErrorKind, f.srv.Count())
		}
	})
}

// TestProviderNULIsStored: an answer holding a NUL character (which
// PostgreSQL cannot store in text) is stored with U+FFFD in its place on
// every store, instead of failing its finishing write.
func TestProviderNULIsStored(t *testing.T) {
	eachStore(t, func(t *testing.T, f *fixture) {
		w := f.worker("w1")
		f.srv.Enqueue(providertest.Reply("a\x00b"))
		e := f.enqueue(jobs.EnqueueParams{Text: "x"})
		f.runOnce(w, 1)
		j := f.job(e.JobID)
		if j.State != jobs.Succeeded {
			t.Fatalf("state %s %q", j.State, j.ErrorKind)
		}
		r, err := f.store.GetResponse(f.ctx, "", j.ResponseID)
		if err != nil || r.Output != "a\uFFFDb" {
			t.Fatalf("response %q, %v", r.Output, err)
		}
	})
}

// attemptFlakyStore fails the first n AppendAttempt calls.
type attemptFlakyStore struct {
	jobs.Store
	fails atomic.Int32
}

func (s *attemptFlakyStore) AppendAttempt(ctx context.Context, p jobs.AttemptParams) error {
	if s.fails.Add(-1) >= 0 {
		return errHiccup
	}
	return s.Store.AppendAttempt(ctx, p)
}

// TestAttemptRecordSurvivesAFailedWrite: an attempt event whose write
// fails during the run is kept and written with the result, so the
// history still has one event per provider call.
func TestAttemptRecordSurvivesAFailedWrite(t *testing.T) {
	eachStore(t, func(t *testing.T, f *fixture) {
		flaky := &attemptFlakyStore{Store: f.store}
		flaky.fails.Store(2) // the write during the run, and the first retry
		w := f.worker("w1", func(c *worker.Config) { c.Store = flaky })
		worker.SetFinalizeBackoff(w, func(int) time.Duration { return time.Millisecond })
		f.srv.Enqueue(providertest.Reply("kept"))
		e := f.enqueue(jobs.EnqueueParams{Text: "x"})
		f.runOnce(w, 1)
		evs, atts := f.events(e.JobID)
		if want := []string{"→queued", "queued→running", "attempt:200", "running→succeeded"}; !eq(evs, want) || len(atts) != 1 {
			t.Fatalf("events %v, want %v", evs, want)
		}
	})
}

// outageStore fails Reclaim and Check while down, as a database outage
// does, and counts the sweeps that reached the store.
type outageStore struct {
	jobs.Store
	down   atomic.Bool
	sweeps atomic.Int32
}

func (s *outageStore) Reclaim(ctx context.Context, p jobs.ReclaimParams) (jobs.Reclaimed, error) {
	if s.down.Load() {
		return jobs.Reclaimed{}, errHiccup
	}
	s.sweeps.Add(1)
	return s.Store.Reclaim(ctx, p)
}

func (s *outageStore) Check(ctx context.Context) error {
	if s.down.Load() {
		return errHiccup
	}
	return s.Store.Check(ctx)
}

// TestReclaimerWaitsOutAnOutage: failing sweeps warn once per outage, and
// once the store answers again sweeping resumes only after two heartbeat
// intervals, so live workers' heartbeats and results land before any of
// their jobs could be reclaimed for heartbeats the outage swallowed.
func TestReclaimerWaitsOutAnOutage(t *testing.T) {
	t.Parallel()
	f := newFixture(t, storekit.SQLite.New(t))
	st := &outageStore{Store: f.store}
	var logs testkit.Logs
	r, err := worker.NewReclaimer(worker.ReclaimerConfig{Store: st, HeartbeatInterval: 10 * time.Second,
		Logger: logs.Logger()})
	if err != nil {
		t.Fatal(err)
	}
	now := t0
	clock := func() time.Time { return now }
	worker.ReclaimTick(f.ctx, r, clock)
	if st.sweeps.Load() != 1 {
		t.Fatalf("%d sweeps before the outage, want 1", st.sweeps.Load())
	}
	st.down.Store(true)
	for range 5 {
		worker.ReclaimTick(f.ctx, r, clock)
		now = now.Add(time.Minute)
	}
	if n := strings.Count(logs.String(), "level=WARN"); n != 1 {
		t.Fatalf("%d warnings over one outage, want 1:\n%s", n, logs.String())
	}
	st.down.Store(false)
	worker.ReclaimTick(f.ctx, r, clock) // the store answers: the grace starts
	now = now.Add(20*time.Second - time.Microsecond)
	worker.ReclaimTick(f.ctx, r, clock)
	if st.sweeps.Load() != 1 {
		t.Fatalf("%d sweeps within the grace, want none after the outage", st.sweeps.Load()-1)
	}
	now = now.Add(time.Microsecond)
	worker.ReclaimTick(f.ctx, r, clock)
	if st.sweeps.Load() != 2 {
		t.Fatalf("%d sweeps after the grace, want 1", st.sweeps.Load()-1)
	}
}
