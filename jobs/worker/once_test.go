package worker_test

import (
	"context"
	"testing"
	"time"

	"github.com/promptkit/promptkit/jobs"
	"github.com/promptkit/promptkit/jobs/worker"
	"github.com/promptkit/promptkit/providertest"
)

// TestRunOnceInterruptedHandsBack: ending RunOnce's context (Ctrl-C on
// `worker --once`) treats the batch as a shutdown: after the grace
// period the running job and the one not started yet go back to the
// queue without spending an attempt.
func TestRunOnceInterruptedHandsBack(t *testing.T) {
	eachStore(t, func(t *testing.T, f *fixture) {
		hold := make(chan struct{})
		defer close(hold)
		f.srv.Enqueue(providertest.Response{Text: "never", Hold: hold})
		a := f.enqueue(jobs.EnqueueParams{Text: "slow", MaxAttempts: 1})
		b := f.enqueue(jobs.EnqueueParams{Text: "waiting its turn", MaxAttempts: 1})
		w := f.worker("w1", func(c *worker.Config) {
			c.Concurrency, c.BatchSize = 1, 2
			c.ShutdownGrace = time.Millisecond
		})
		ctx, cancel := context.WithCancel(f.ctx)
		done := make(chan int, 1)
		go func() { n, _ := w.RunOnce(ctx); done <- n }()
		f.arrivals(1)
		cancel()
		if n := <-done; n != 2 {
			t.Fatalf("RunOnce claimed %d, want 2", n)
		}
		for _, id := range []string{a.JobID, b.JobID} {
			j := f.job(id)
			if j.State != jobs.Queued || j.Attempt != 1 || j.WorkerClaim != "" || j.ErrorKind != "" {
				t.Fatalf("job %s after the interrupt: state=%s attempt=%d claim=%q kind=%q", id, j.State, j.Attempt, j.WorkerClaim, j.ErrorKind)
			}
		}
		if f.srv.Count() != 1 {
			t.Fatalf("the provider saw %d calls, want 1 (the second job never started)", f.srv.Count())
		}
	})
}
