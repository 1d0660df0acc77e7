package worker_test

import (
	"testing"
	"time"

	"github.com/promptkit/promptkit/jobs"
	"github.com/promptkit/promptkit/jobs/worker"
	"github.com/promptkit/promptkit/providertest"
)

// TestLongRetryAfterDoesNotHoldTheWorker: with transient retries inside
// the engine, a Retry-After far beyond the job's deadline ends the job
// attempt at once and re-queues the job for the provider's time; a second
// job on the paused backend is handed back without spending an attempt.
func TestLongRetryAfterDoesNotHoldTheWorker(t *testing.T) {
	eachStore(t, func(t *testing.T, f *fixture) {
		w := f.worker("w1", func(c *worker.Config) {
			c.Engine = f.engine(2)
			c.JobTimeout = time.Minute // real deadline; the provider asks for 10
		})
		f.srv.Enqueue(providertest.Status(429).WithRetryAfter("600"))
		first := f.enqueue(jobs.EnqueueParams{Text: "first"})
		f.runOnce(w, 1)
		j := f.job(first.JobID)
		if j.State != jobs.Queued || j.Attempt != 2 || j.ErrorKind != jobs.KindRateLimit {
			t.Fatalf("first: state=%s attempt=%d kind=%q", j.State, j.Attempt, j.ErrorKind)
		}
		if j.AvailableAt.Before(t0.Add(600 * time.Second)) {
			t.Fatalf("first: available_at = now+%v, want >= 600s", j.AvailableAt.Sub(t0))
		}
		if f.srv.Count() != 1 {
			t.Fatalf("provider saw %d requests, want 1 (no retry inside the attempt)", f.srv.Count())
		}

		second := f.enqueue(jobs.EnqueueParams{Text: "second"})
		f.runOnce(w, 1)
		j2 := f.job(second.JobID)
		if j2.State != jobs.Queued || j2.Attempt != 1 || j2.AvailableAt.Before(t0.Add(599*time.Second)) {
			t.Fatalf("second: state=%s attempt=%d available_at=now+%v", j2.State, j2.Attempt, j2.AvailableAt.Sub(t0))
		}
		if f.srv.Count() != 1 {
			t.Fatalf("the paused backend was called: %d requests", f.srv.Count())
		}
	})
}
