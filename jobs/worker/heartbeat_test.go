package worker_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/promptkit/promptkit/internal/testkit"
	"github.com/promptkit/promptkit/jobs"
	"github.com/promptkit/promptkit/jobs/worker"
	"github.com/promptkit/promptkit/providertest"
)

// TestHeartbeatStopsALostClaim: with no notifications at all, a running
// job cancelled elsewhere is stopped by the next heartbeat, which
// confirms every claim.
func TestHeartbeatStopsALostClaim(t *testing.T) {
	eachStore(t, func(t *testing.T, f *fixture) {
		hold := make(chan struct{}) // never released: only a stop ends the call
		defer close(hold)
		f.srv.Enqueue(providertest.Response{Text: "too late", Hold: hold})
		e := f.enqueue(jobs.EnqueueParams{Text: "long one"})
		stop := f.start(f.worker("w1", func(c *worker.Config) {
			c.Store = &deafStore{Store: f.store}
			c.HeartbeatInterval = 10 * time.Millisecond
		}))
		defer stop()
		f.arrivals(1)
		if _, err := f.store.Cancel(f.ctx, jobs.CancelParams{JobID: e.JobID}); err != nil {
			t.Fatalf("Cancel: %v", err)
		}
		f.waitFor("the provider to see the request cancelled", func() bool { return f.srv.Stats().Canceled == 1 })
		if j := f.job(e.JobID); j.State != jobs.Cancelled || f.responses(e.JobID) != 0 {
			t.Fatalf("state %s, %d responses", j.State, f.responses(e.JobID))
		}
	})
}

// TestNormalRunLogsNoWarning: heartbeats racing the worker's own
// finalizations (a heartbeat for a job that has just finished) are normal
// operation, not a warning.
func TestNormalRunLogsNoWarning(t *testing.T) {
	eachStore(t, func(t *testing.T, f *fixture) {
		var logs testkit.Logs
		const n = 40
		for i := range n {
			f.srv.Enqueue(providertest.Reply(fmt.Sprint("answer ", i)))
		}
		var ids []string
		for i := range n {
			ids = append(ids, f.enqueue(jobs.EnqueueParams{Text: fmt.Sprint("q", i)}).JobID)
		}
		stop := f.start(f.worker("w1", func(c *worker.Config) {
			c.Concurrency = 4
			c.HeartbeatInterval = time.Millisecond // heart-beat constantly
			c.Logger = logs.Logger()
		}))
		for _, id := range ids {
			f.waitState(id, jobs.Succeeded)
		}
		stop()
		if strings.Contains(logs.String(), "level=WARN") || strings.Contains(logs.String(), "level=ERROR") {
			t.Fatalf("a normal run logged a warning:\n%s", logs.String())
		}
	})
}
