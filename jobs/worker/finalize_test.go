package worker_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

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
		var logs lockedBuffer
		w := f.worker("w1", func(c *worker.Config) {
			c.Store = flaky
			c.Logger = slog.New(slog.NewTextHandler(&logs, nil))
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

// TestFinalizationStopsBeforeReclaim: a write failing until the job would
// be reclaimed is given up shortly before, leaving the job to the reclaim
// loop instead of racing it.
func TestFinalizationStopsBeforeReclaim(t *testing.T) {
	eachStore(t, func(t *testing.T, f *fixture) {
		flaky := &flakyStore{Store: f.store}
		flaky.fails.Store(1 << 30)
		var tries atomic.Int32
		flaky.onFail = func() { tries.Add(1); f.clock.Advance(time.Minute) }
		w := f.worker("w1", func(c *worker.Config) {
			c.Store = flaky
			c.ReclaimAfter = 5 * time.Minute
			c.HeartbeatInterval = 30 * time.Second
		})
		worker.SetFinalizeBackoff(w, func(int) time.Duration { return time.Millisecond })
		f.srv.Enqueue(providertest.Reply("lost"))
		e := f.enqueue(jobs.EnqueueParams{Text: "x"})
		f.runOnce(w, 1)
		// Claimed at t0; tries at t0, +1m, +2m, +3m, +4m; the deadline is
		// t0 + 5m − 30s, so the fifth try is the last.
		if n := tries.Load(); n != 5 {
			t.Fatalf("%d tries, want 5", n)
		}
		if j := f.job(e.JobID); j.State != jobs.Running {
			t.Fatalf("state %s, want running (left for the reclaim loop)", j.State)
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
