package worker_test

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/promptkit/promptkit/jobs"
	"github.com/promptkit/promptkit/jobs/worker"
	"github.com/promptkit/promptkit/providertest"
)

// The five proofs of the job design (docs/service.md), against both stores.

// Proof 1: queued → running → succeeded, with the response row and the
// event log queued, running, attempt, succeeded.
func TestProofQueuedRunningSucceeded(t *testing.T) {
	eachStore(t, func(t *testing.T, f *fixture) {
		hold := make(chan struct{})
		f.srv.Enqueue(providertest.Response{Text: "the answer", Hold: hold})
		e := f.enqueue(jobs.EnqueueParams{Text: "the question"})
		if j := f.job(e.JobID); j.State != jobs.Queued || j.Attempt != 1 {
			t.Fatalf("after enqueue: state=%s attempt=%d", j.State, j.Attempt)
		}

		w := f.worker("w1")
		done := make(chan struct{})
		go func() { defer close(done); f.runOnce(w, 1) }()
		f.arrivals(1)
		j := f.job(e.JobID)
		if j.State != jobs.Running || j.WorkerClaim != "w1" || !j.HeartbeatAt.Equal(t0) {
			t.Fatalf("while the provider holds the request: state=%s claim=%q heartbeat=%v", j.State, j.WorkerClaim, j.HeartbeatAt)
		}
		close(hold)
		<-done

		j = f.job(e.JobID)
		if j.State != jobs.Succeeded || j.ResponseID != jobs.ResponseID(e.PromptID, e.JobID) || j.ErrorKind != "" || j.Attempt != 1 {
			t.Fatalf("after the run: %+v", j)
		}
		r, err := f.store.GetResponse(f.ctx, "", j.ResponseID)
		if err != nil {
			t.Fatal(err)
		}
		if r.Output != "the answer" || r.JobID != e.JobID || r.Model != "m" || !r.Usage.Known.TotalTokens || r.Usage.TotalTokens == 0 {
			t.Fatalf("response = %+v", r)
		}
		if n := f.responses(e.JobID); n != 1 {
			t.Fatalf("%d response rows, want 1", n)
		}
		evs, atts := f.events(e.JobID)
		if want := []string{"→queued", "queued→running", "attempt:200", "running→succeeded"}; !eq(evs, want) {
			t.Fatalf("events = %v, want %v", evs, want)
		}
		if a := atts[0]; a.JobAttempt != 1 || a.Generation != 1 || a.Attempt != 1 || !a.Dispatched || a.Usage["total_tokens"].Value == 0 {
			t.Fatalf("attempt event = %+v", a)
		}
		if got := userTexts(f.srv); !eq(got, []string{"the question"}) {
			t.Fatalf("provider saw %q", got)
		}
	})
}

// Proof 2: priorities 90, 10, 50 are claimed and executed as 10, 50, 90.
func TestProofPriorityOrder(t *testing.T) {
	eachStore(t, func(t *testing.T, f *fixture) {
		var ids []string
		for _, p := range []int{90, 10, 50} {
			e := f.enqueue(jobs.EnqueueParams{Text: "priority " + strconv.Itoa(p), Priority: ptr(p)})
			ids = append(ids, e.JobID)
		}
		// Concurrency 1, and no polling: the next claim follows the previous
		// job at once, whatever order its notification and its freed slot
		// come in.
		stop := f.start(f.worker("w1", func(c *worker.Config) { c.PollInterval = time.Hour }))
		for _, id := range ids {
			f.waitState(id, jobs.Succeeded)
		}
		stop()
		want := []string{"priority 10", "priority 50", "priority 90"}
		if got := userTexts(f.srv); !eq(got, want) {
			t.Fatalf("provider saw %q, want %q", got, want)
		}
		if f.srv.MaxInFlight() != 1 {
			t.Fatalf("MaxInFlight = %d with Concurrency 1", f.srv.MaxInFlight())
		}
	})
}

// Proof 3: a transient provider failure is re-queued with backoff on the
// injected clock, then succeeds once the clock has passed it.
func TestProofTransientFailureRetried(t *testing.T) {
	eachStore(t, func(t *testing.T, f *fixture) {
		f.srv.Enqueue(providertest.Status(503), providertest.Reply("second time lucky"))
		e := f.enqueue(jobs.EnqueueParams{Text: "flaky"})
		var jit []time.Duration
		var mu sync.Mutex
		w := f.worker("w1", func(c *worker.Config) {
			c.Jitter = func(n time.Duration) time.Duration {
				mu.Lock()
				jit = append(jit, n)
				mu.Unlock()
				return n / 2
			}
		})

		f.runOnce(w, 1)
		j := f.job(e.JobID)
		if j.State != jobs.Queued || j.Attempt != 2 || j.ErrorKind != jobs.KindProvider5xx || j.WorkerClaim != "" {
			t.Fatalf("after the 503: state=%s attempt=%d kind=%q claim=%q", j.State, j.Attempt, j.ErrorKind, j.WorkerClaim)
		}
		if lo, hi := t0.Add(5*time.Second), t0.Add(10*time.Second); j.AvailableAt.Before(lo) || j.AvailableAt.After(hi) {
			t.Fatalf("available_at = %v, want within [%v, %v]", j.AvailableAt, lo, hi)
		}
		if want := t0.Add(7500 * time.Millisecond); !j.AvailableAt.Equal(want) || !slices.Equal(jit, []time.Duration{5 * time.Second}) {
			t.Fatalf("available_at = %v (jitter asked %v), want %v", j.AvailableAt, jit, want)
		}
		if j.ErrorMessage == "" {
			t.Fatal("no error_message recorded")
		}

		f.runOnce(w, 0) // not yet available
		f.clock.Advance(7499 * time.Millisecond)
		f.runOnce(w, 0)
		f.clock.Advance(time.Millisecond)
		f.runOnce(w, 1)
		j = f.job(e.JobID)
		if j.State != jobs.Succeeded || j.Attempt != 2 {
			t.Fatalf("after advancing the clock: state=%s attempt=%d", j.State, j.Attempt)
		}
		if r, err := f.store.GetResponse(f.ctx, "", j.ResponseID); err != nil || r.Output != "second time lucky" {
			t.Fatalf("response %+v, %v", r, err)
		}
		evs, _ := f.events(e.JobID)
		want := []string{"→queued", "queued→running", "attempt:503", "running→queued", "queued→running", "attempt:200", "running→succeeded"}
		if !eq(evs, want) {
			t.Fatalf("events = %v, want %v", evs, want)
		}
	})
}

// Proof 4: a job whose worker stopped heart-beating is reclaimed and a
// live worker completes it.
func TestProofHeartbeatLossReclaimed(t *testing.T) {
	eachStore(t, func(t *testing.T, f *fixture) {
		e := f.enqueue(jobs.EnqueueParams{Text: "orphan"})
		claimed, err := f.store.Claim(f.ctx, jobs.ClaimParams{Worker: "dead-worker"})
		if err != nil || len(claimed) != 1 || claimed[0].ID != e.JobID {
			t.Fatalf("Claim = %v, %v", claimed, err)
		}
		r := f.reclaimer() // default thresholds: 5m, 15m

		f.clock.Advance(4 * time.Minute)
		if got, err := r.Sweep(f.ctx); err != nil || len(got.Requeued)+len(got.Failed) != 0 {
			t.Fatalf("sweep at 4m = %+v, %v; want nothing", got, err)
		}
		f.clock.Advance(time.Minute + time.Second)
		got, err := r.Sweep(f.ctx)
		if err != nil || !slices.Equal(got.Requeued, []string{e.JobID}) || len(got.Failed) != 0 {
			t.Fatalf("sweep at 5m1s = %+v, %v", got, err)
		}
		j := f.job(e.JobID)
		if j.State != jobs.Queued || j.Attempt != 2 || j.ErrorKind != jobs.KindWorkerCrash || j.WorkerClaim != "" {
			t.Fatalf("after reclaim: state=%s attempt=%d kind=%q claim=%q", j.State, j.Attempt, j.ErrorKind, j.WorkerClaim)
		}

		f.srv.Enqueue(providertest.Reply("rescued"))
		f.runOnce(f.worker("alive"), 1)
		j = f.job(e.JobID)
		if j.State != jobs.Succeeded || j.Attempt != 2 {
			t.Fatalf("after the live worker: state=%s attempt=%d", j.State, j.Attempt)
		}
		// The dead worker coming back changes nothing.
		if _, err := f.store.Succeed(f.ctx, jobs.SucceedParams{JobID: e.JobID, Worker: "dead-worker", Answer: jobs.Answer{Output: "zombie"}}); !errors.Is(err, jobs.ErrNotClaimed) {
			t.Fatalf("dead worker's Succeed: %v, want ErrNotClaimed", err)
		}
		if r, err := f.store.GetResponse(f.ctx, "", j.ResponseID); err != nil || r.Output != "rescued" {
			t.Fatalf("response %+v, %v", r, err)
		}
		if n := f.responses(e.JobID); n != 1 {
			t.Fatalf("%d response rows, want 1", n)
		}
	})
}

// Proof 5: a double-claim race where only one finalization lands. Worker A
// is cut off from notifications (as a partitioned or paused worker would
// be), so it does not notice the reclaim and its late result reaches the
// store, which refuses it.
func TestProofDoubleClaimOneFinalization(t *testing.T) {
	eachStore(t, func(t *testing.T, f *fixture) {
		holdA := make(chan struct{})
		f.srv.Enqueue(providertest.Response{Text: "from A", Hold: holdA}, providertest.Reply("from B"))
		e := f.enqueue(jobs.EnqueueParams{Text: "contested"})

		deaf := &deafStore{Store: f.store}
		a := f.worker("A", func(c *worker.Config) { c.Store = deaf })
		aDone := make(chan struct{})
		go func() { defer close(aDone); f.runOnce(a, 1) }()
		f.arrivals(1)

		f.clock.Advance(6 * time.Minute)
		got, err := f.reclaimer().Sweep(f.ctx)
		if err != nil || !slices.Equal(got.Requeued, []string{e.JobID}) {
			t.Fatalf("Sweep = %+v, %v", got, err)
		}
		f.runOnce(f.worker("B"), 1)
		if j := f.job(e.JobID); j.State != jobs.Succeeded || j.WorkerClaim != "B" {
			t.Fatalf("after B: state=%s claim=%q", j.State, j.WorkerClaim)
		}

		close(holdA) // A's result arrives now
		<-aDone
		if errs := deaf.succeedErrors(); len(errs) != 1 || !errors.Is(errs[0], jobs.ErrNotClaimed) {
			t.Fatalf("A's Succeed returned %v, want one ErrNotClaimed", errs)
		}
		j := f.job(e.JobID)
		if j.State != jobs.Succeeded || j.WorkerClaim != "B" || j.Attempt != 2 || j.ErrorKind != "" {
			t.Fatalf("final job: state=%s claim=%q attempt=%d kind=%q", j.State, j.WorkerClaim, j.Attempt, j.ErrorKind)
		}
		r, err := f.store.GetResponse(f.ctx, "", j.ResponseID)
		if err != nil || r.Output != "from B" {
			t.Fatalf("response %+v, %v", r, err)
		}
		if n := f.responses(e.JobID); n != 1 {
			t.Fatalf("%d response rows, want 1", n)
		}
		// A's late attempt is not in the log either: only B's attempt is.
		evs, _ := f.events(e.JobID)
		want := []string{"→queued", "queued→running", "running→queued", "queued→running", "attempt:200", "running→succeeded"}
		if !eq(evs, want) {
			t.Fatalf("events = %v, want %v", evs, want)
		}
	})
}

// deafStore never notifies its user, and records what Succeed returned.
type deafStore struct {
	jobs.Store
	mu   sync.Mutex
	errs []error
}

// Notifier is the worker's by default (Config.Notifier): one that never
// wakes it, while answer pieces still pass.
func (d *deafStore) Notifier() jobs.Notifier { return deafNotifier{d.Store.Notifier()} }

type deafNotifier struct{ jobs.Notifier }

func (deafNotifier) Notify(ctx context.Context) <-chan struct{} {
	ch := make(chan struct{})
	go func() { <-ctx.Done(); close(ch) }()
	return ch
}

func (d *deafStore) Succeed(ctx context.Context, p jobs.SucceedParams) (jobs.Job, error) {
	j, err := d.Store.Succeed(ctx, p)
	d.mu.Lock()
	d.errs = append(d.errs, err)
	d.mu.Unlock()
	return j, err
}

func (d *deafStore) succeedErrors() []error {
	d.mu.Lock()
	defer d.mu.Unlock()
	return slices.Clone(d.errs)
}
