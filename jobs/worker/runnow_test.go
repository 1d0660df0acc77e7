package worker_test

import (
	"errors"
	"testing"

	"github.com/promptkit/promptkit/jobs"
	"github.com/promptkit/promptkit/providertest"
)

// RunNow stores the job claimed by the worker and runs it in a free slot
// at once: the channel gives the settled job, whose history is the one a
// queued job's would be (one write fewer: the claim came with the
// enqueue); with no free slot, or a job it would not claim now, it
// stores nothing.
func TestRunNow(t *testing.T) {
	eachStore(t, func(t *testing.T, f *fixture) {
		w := f.worker("fast")
		if _, _, err := w.RunNow(f.ctx, jobs.EnqueueParams{Text: "before start"}); !errors.Is(err, jobs.ErrNoSlot) {
			t.Fatalf("RunNow before Start: %v, want ErrNoSlot", err)
		}
		f.start(w)

		hold := make(chan struct{})
		f.srv.Enqueue(providertest.Response{Text: "first", Hold: hold})
		// The loop takes the free slots while it claims (and at start):
		// until it gives them back RunNow stores nothing and says so.
		runNow := func(p jobs.EnqueueParams) (e jobs.Enqueued, done <-chan jobs.Job, err error) {
			f.waitFor("a free slot", func() bool {
				e, done, err = w.RunNow(f.ctx, p)
				return !errors.Is(err, jobs.ErrNoSlot)
			})
			return e, done, err
		}
		e, done, err := runNow(jobs.EnqueueParams{OrgID: "org", Text: "ask", IdempotencyKey: "k"})
		if err != nil || e.Claimed == nil || e.State != jobs.Running || done == nil {
			t.Fatalf("RunNow = %+v, %v, %v", e, done, err)
		}
		f.arrivals(1)
		// Its one slot is busy: the next is refused, nothing stored.
		if _, _, err := w.RunNow(f.ctx, jobs.EnqueueParams{OrgID: "org", Text: "busy"}); !errors.Is(err, jobs.ErrNoSlot) {
			t.Errorf("RunNow with no free slot: %v, want ErrNoSlot", err)
		}
		if page, err := f.store.ListJobs(f.ctx, jobs.ListParams{}); err != nil || len(page.Jobs) != 1 {
			t.Errorf("jobs stored: %d, %v; want only the first", len(page.Jobs), err)
		}
		close(hold)
		j, ok := <-done
		if !ok || j.ID != e.JobID || j.State != jobs.Succeeded {
			t.Fatalf("settled job = %+v (%v)", j, ok)
		}
		if evs, _ := f.events(e.JobID); !eq(evs, []string{"→queued", "queued→running", "attempt:200", "running→succeeded"}) {
			t.Errorf("events %v", evs)
		}
		if n := f.responses(e.JobID); n != 1 {
			t.Errorf("%d responses stored", n)
		}

		again, done, err := runNow(jobs.EnqueueParams{OrgID: "org", Text: "ask", IdempotencyKey: "k"})
		if err != nil || !again.Existing || done != nil || again.JobID != e.JobID {
			t.Errorf("repeat = %+v, %v, %v", again, done, err)
		}
		if _, _, err := w.RunNow(f.ctx, jobs.EnqueueParams{OrgID: "org", Text: "later", DependsOn: e.JobID}); !errors.Is(err, jobs.ErrNoSlot) {
			t.Errorf("RunNow with a dependency: %v, want ErrNoSlot", err)
		}
		if f.srv.Count() != 1 {
			t.Errorf("provider saw %d requests, want 1", f.srv.Count())
		}
	})
}
