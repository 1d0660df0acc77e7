package worker_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"

	"github.com/promptkit/promptkit/jobs"
	"github.com/promptkit/promptkit/jobs/worker"
	"github.com/promptkit/promptkit/providertest"
)

// flakyStore fails the first n Succeed calls as a database hiccup would.
type flakyStore struct {
	jobs.Store
	fails atomic.Int32
}

var errHiccup = errors.New("connection reset by peer")

func (s *flakyStore) Succeed(ctx context.Context, p jobs.SucceedParams) (jobs.Job, error) {
	if s.fails.Add(-1) >= 0 {
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
