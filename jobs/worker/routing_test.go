package worker_test

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/promptkit/promptkit"
	"github.com/promptkit/promptkit/internal/testkit/enginekit"
	"github.com/promptkit/promptkit/jobs"
	"github.com/promptkit/promptkit/jobs/worker"
)

// A job on a model group whose first attempt failed on one backend (a
// 500, no retry inside the run) runs its next attempt on the other: the
// backend cooled down, and the new run chooses by its health. Each
// attempt event says which backend it went to.
func TestGroupJobMovesToOtherBackend(t *testing.T) {
	eachStore(t, func(t *testing.T, f *fixture) {
		down := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(http.StatusInternalServerError)
		}))
		t.Cleanup(down.Close)
		eng := enginekit.New(t, promptkit.Config{
			// An hour's cooldown: the second attempt comes long before it
			// ends, however slow the machine.
			Backends: []promptkit.Backend{{ID: "down", BaseURL: down.URL, Cooldown: time.Hour}, {ID: "up", BaseURL: f.srv.URL}},
			Profiles: []promptkit.Profile{{ID: enginekit.ProfileID, Model: enginekit.Model,
				Backends: []promptkit.ProfileBackend{{ID: "down"}, {ID: "up"}}}},
		}, enginekit.Retries(0))
		w := f.worker("w1", func(c *worker.Config) { c.Engine = eng })
		e := f.enqueue(jobs.EnqueueParams{Text: "route me"})
		f.runOnce(w, 1)
		j := f.job(e.JobID)
		if j.State != jobs.Queued {
			t.Fatalf("after the 500: state=%s", j.State)
		}
		f.clock.Set(j.AvailableAt)
		f.runOnce(w, 1)
		if j = f.job(e.JobID); j.State != jobs.Succeeded || j.Attempt != 2 {
			t.Fatalf("state=%s attempt=%d", j.State, j.Attempt)
		}
		evs, atts := f.events(e.JobID)
		want := []string{"→queued", "queued→running", "attempt:500", "running→queued", "queued→running", "attempt:200", "running→succeeded"}
		if !eq(evs, want) {
			t.Fatalf("events = %v, want %v", evs, want)
		}
		if atts[0].Backend != "down" || atts[0].JobAttempt != 1 || atts[1].Backend != "up" || atts[1].JobAttempt != 2 {
			t.Fatalf("attempts = %+v, want job attempt 1 on down, 2 on up", atts)
		}
	})
}
