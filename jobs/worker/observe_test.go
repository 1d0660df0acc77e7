package worker_test

import (
	"sync"
	"testing"
	"time"

	"github.com/promptkit/promptkit"
	"github.com/promptkit/promptkit/jobs"
	"github.com/promptkit/promptkit/jobs/worker"
	"github.com/promptkit/promptkit/providertest"
)

// TestObserveHook: Config.Observe sees each claim, with how long the job
// had been available, and each settlement with its outcome; Config.Observer
// sees the engine's attempts.
func TestObserveHook(t *testing.T) {
	eachStore(t, func(t *testing.T, f *fixture) {
		var mu sync.Mutex
		var events []worker.JobEvent
		var statuses []int
		w := f.worker("w1", func(c *worker.Config) {
			c.Observe = func(e worker.JobEvent) {
				mu.Lock()
				defer mu.Unlock()
				events = append(events, e)
			}
			c.Observer = func(ev promptkit.ExecutionEvent) {
				if ev.Kind == promptkit.ExecutionAttempt {
					mu.Lock()
					defer mu.Unlock()
					statuses = append(statuses, ev.StatusCode)
				}
			}
		})
		take := func() ([]worker.JobEvent, []int) {
			mu.Lock()
			defer mu.Unlock()
			evs, sts := events, statuses
			events, statuses = nil, nil
			return evs, sts
		}
		check := func(what string, jobID string, waited time.Duration, outcome string, status int) {
			t.Helper()
			evs, sts := take()
			if len(evs) != 2 {
				t.Fatalf("%s: Observe saw %d events, want a claim and a settlement: %+v", what, len(evs), evs)
			}
			c, s := evs[0], evs[1]
			if !c.Claimed || c.Job.ID != jobID || c.Waited != waited || c.Outcome != "" {
				t.Errorf("%s: claim event = %+v, want job %s waited %v", what, c, jobID, waited)
			}
			if s.Claimed || s.Job.ID != jobID || s.Outcome != outcome || s.Ran < 0 {
				t.Errorf("%s: settlement event = claimed %v job %s outcome %q ran %v, want job %s outcome %q", what, s.Claimed, s.Job.ID, s.Outcome, s.Ran, jobID, outcome)
			}
			if len(sts) != 1 || sts[0] != status {
				t.Errorf("%s: Observer saw attempt statuses %v, want [%d]", what, sts, status)
			}
		}

		// Available since its creation, claimed 3s later: succeeds.
		ok := f.enqueue(jobs.EnqueueParams{Text: "fine"})
		f.clock.Advance(3 * time.Second)
		f.runOnce(w, 1)
		check("success", ok.JobID, 3*time.Second, worker.OutcomeSucceeded, 200)

		// Scheduled 10s ahead and claimed 2s after that: a 503 with an
		// attempt left puts it back in the queue.
		f.srv.Enqueue(providertest.Status(503))
		retry := f.enqueue(jobs.EnqueueParams{Text: "down", MaxAttempts: 2, AvailableAt: f.clock.Now().Add(10 * time.Second)})
		f.clock.Advance(12 * time.Second)
		f.runOnce(w, 1)
		check("retry", retry.JobID, 2*time.Second, worker.OutcomeRetried, 503)
		if j := f.job(retry.JobID); j.State != jobs.Queued || j.Attempt != 2 {
			t.Fatalf("retried job: state=%s attempt=%d", j.State, j.Attempt)
		}
	})
}
