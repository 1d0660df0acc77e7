package worker_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/promptkit/promptkit/internal/lifecycle"
	"github.com/promptkit/promptkit/internal/testkit/storekit"
	"github.com/promptkit/promptkit/jobs"
	"github.com/promptkit/promptkit/jobs/worker"
	"github.com/promptkit/promptkit/providertest"
)

// service is the lifecycle the worker, the reclaimer and the archiver
// share.
type service interface {
	Start(context.Context) error
	Stop(context.Context) error
}

// checkLifecycle checks the rules every background loop keeps on fresh
// services made by mk: stopping before Start (twice) is safe and
// returns nil, and the service will not start then; a service starts
// once; stopping twice returns nil both times.
func checkLifecycle(t *testing.T, ctx context.Context, mk func() service) {
	t.Helper()
	s := mk()
	for range 2 {
		if err := s.Stop(ctx); err != nil {
			t.Fatalf("Stop before Start: %v", err)
		}
	}
	if err := s.Start(ctx); !errors.Is(err, lifecycle.ErrStopped) {
		t.Fatalf("Start after Stop: %v, want ErrStopped", err)
	}
	s = mk()
	if err := s.Start(ctx); err != nil {
		t.Fatalf("Start: %v", err)
	}
	if err := s.Start(ctx); !errors.Is(err, lifecycle.ErrStarted) {
		t.Fatalf("second Start: %v, want ErrStarted", err)
	}
	for range 2 {
		if err := s.Stop(ctx); err != nil {
			t.Fatalf("Stop: %v", err)
		}
	}
	if err := s.Start(ctx); !errors.Is(err, lifecycle.ErrStarted) {
		t.Fatalf("Start after Stop: %v, want ErrStarted: a service starts once", err)
	}
}

func TestLifecycleRules(t *testing.T) {
	t.Parallel()
	f := newFixture(t, storekit.SQLite.New(t))
	t.Run("worker", func(t *testing.T) {
		checkLifecycle(t, f.ctx, func() service { return f.worker("w1") })
	})
	t.Run("reclaimer", func(t *testing.T) {
		checkLifecycle(t, f.ctx, func() service { return f.reclaimer() })
	})
	t.Run("archiver", func(t *testing.T) {
		checkLifecycle(t, f.ctx, func() service {
			a, err := worker.NewArchiver(worker.ArchiverConfig{Store: f.store, After: time.Hour, Logger: f.log})
			if err != nil {
				t.Fatal(err)
			}
			return a
		})
	})
}

// A Stop whose context ends before the grace does hands the running jobs
// back at once and returns the context's error; a second Stop waits for
// the hand-back.
func TestStopContextCutsTheGraceShort(t *testing.T) {
	eachStore(t, func(t *testing.T, f *fixture) {
		hold := make(chan struct{})
		defer close(hold)
		f.srv.Enqueue(providertest.Response{Text: "never", Hold: hold})
		e := f.enqueue(jobs.EnqueueParams{Text: "slow", MaxAttempts: 1})
		w := f.worker("w1", func(c *worker.Config) { c.ShutdownGrace = time.Hour })
		if err := w.Start(f.ctx); err != nil {
			t.Fatal(err)
		}
		f.arrivals(1)
		ended, cancel := context.WithCancel(f.ctx)
		cancel()
		if err := w.Stop(ended); !errors.Is(err, context.Canceled) {
			t.Fatalf("Stop with an ended context: %v, want context.Canceled", err)
		}
		if err := w.Stop(f.ctx); err != nil {
			t.Fatalf("second Stop: %v", err)
		}
		j := f.job(e.JobID)
		if j.State != jobs.Queued || j.Attempt != 1 || j.WorkerClaim != "" || j.ErrorKind != "" {
			t.Fatalf("after Stop: state=%s attempt=%d claim=%q kind=%q, want handed back", j.State, j.Attempt, j.WorkerClaim, j.ErrorKind)
		}
	})
}

// Run, kept for the callers not moved yet, is Start, the end of its
// context, and a graceful Stop.
func TestRunIsStartAndStop(t *testing.T) {
	eachStore(t, func(t *testing.T, f *fixture) {
		f.srv.Enqueue(providertest.Reply("done"))
		settled := make(chan string, 1)
		w := f.worker("w1", func(c *worker.Config) {
			c.Observe = func(e worker.JobEvent) {
				if !e.Claimed {
					settled <- e.Outcome
				}
			}
		})
		ctx, cancel := context.WithCancel(f.ctx)
		done := make(chan error, 1)
		go func() { done <- w.Run(ctx) }() //nolint:staticcheck // Run is what is tested
		f.enqueue(jobs.EnqueueParams{Text: "q"})
		if o := <-settled; o != worker.OutcomeSucceeded {
			t.Fatalf("outcome %s", o)
		}
		cancel()
		if err := <-done; err != nil {
			t.Fatalf("Run: %v", err)
		}
		if err := w.Start(f.ctx); !errors.Is(err, lifecycle.ErrStarted) {
			t.Fatalf("Start after Run: %v, want ErrStarted", err)
		}
	})
}

// signalStore tells the test about every sweep and archiving pass.
type signalStore struct {
	jobs.Store
	reclaimed chan jobs.Reclaimed
	archived  chan int
}

func (s *signalStore) Reclaim(ctx context.Context, p jobs.ReclaimParams) (jobs.Reclaimed, error) {
	r, err := s.Store.Reclaim(ctx, p)
	if err == nil {
		select {
		case s.reclaimed <- r:
		default:
		}
	}
	return r, err
}

func (s *signalStore) Archive(ctx context.Context, before time.Time) (int, error) {
	n, err := s.Store.Archive(ctx, before)
	if err == nil {
		select {
		case s.archived <- n:
		default:
		}
	}
	return n, err
}

// The reclaimer sweeps as soon as it starts, and the archiver archives.
func TestMaintenanceLoopsWorkFromStart(t *testing.T) {
	eachStore(t, func(t *testing.T, f *fixture) {
		st := &signalStore{Store: f.store, reclaimed: make(chan jobs.Reclaimed, 1), archived: make(chan int, 1)}
		done := f.enqueue(jobs.EnqueueParams{Text: "old"})
		f.srv.Enqueue(providertest.Reply("done"))
		f.runOnce(f.worker("w1"), 1)
		dead := f.enqueue(jobs.EnqueueParams{Text: "its worker dies"})
		if got, err := f.store.Claim(f.ctx, jobs.ClaimParams{Worker: "dead", Limit: 1}); err != nil || len(got) != 1 {
			t.Fatalf("Claim: %d jobs, %v", len(got), err)
		}
		f.clock.Advance(48 * time.Hour)

		r, err := worker.NewReclaimer(worker.ReclaimerConfig{Store: st, StuckAfter: 72 * time.Hour, Logger: f.log})
		if err != nil {
			t.Fatal(err)
		}
		a, err := worker.NewArchiver(worker.ArchiverConfig{Store: st, After: 24 * time.Hour, Now: f.clock.Now, Logger: f.log})
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range []service{r, a} {
			if err := s.Start(f.ctx); err != nil {
				t.Fatal(err)
			}
		}
		if got := <-st.reclaimed; !slices.Equal(got.Requeued, []string{dead.JobID}) {
			t.Fatalf("the first sweep requeued %v, want the dead worker's job %s", got.Requeued, dead.JobID)
		}
		if n := <-st.archived; n != 1 {
			t.Fatalf("the first pass archived %d jobs, want 1", n)
		}
		for _, s := range []service{r, a} {
			if err := s.Stop(f.ctx); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := f.store.GetJob(f.ctx, "", done.JobID); !errors.Is(err, jobs.ErrNotFound) {
			t.Fatalf("the finished job: %v, want archived", err)
		}
		if j := f.job(dead.JobID); j.State != jobs.Queued {
			t.Fatalf("the dead worker's job is %s, want queued", j.State)
		}
	})
}
