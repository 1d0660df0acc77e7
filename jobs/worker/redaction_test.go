package worker_test

import (
	"strings"
	"testing"

	"github.com/promptkit/promptkit/internal/testkit"
	"github.com/promptkit/promptkit/jobs"
	"github.com/promptkit/promptkit/jobs/worker"
	"github.com/promptkit/promptkit/providertest"
)

// TestNoProviderTextOrPromptInJobRecords: neither the prompt nor the
// provider's error text reaches the job's error message, its events or
// the worker's logs.
func TestNoProviderTextOrPromptInJobRecords(t *testing.T) {
	const providerMarker, promptMarker = "PROVIDER-MARKER-7f1", "PROMPT-MARKER-c42"
	eachStore(t, func(t *testing.T, f *fixture) {
		var logs testkit.Logs
		w := f.worker("w1", func(c *worker.Config) {
			c.Logger = logs.DebugLogger()
		})
		f.srv.Enqueue(providertest.Response{Status: 400, Body: []byte(`{"error":{"message":"` + providerMarker + `"}}`)})
		e := f.enqueue(jobs.EnqueueParams{Text: "please " + promptMarker})
		f.runOnce(w, 1)
		j := f.job(e.JobID)
		if j.State != jobs.Failed || j.ErrorKind != jobs.KindProvider4xx || j.ErrorMessage == "" {
			t.Fatalf("job = %s %s %q", j.State, j.ErrorKind, j.ErrorMessage)
		}
		evs, err := f.store.JobEvents(f.ctx, "", e.JobID)
		if err != nil {
			t.Fatal(err)
		}
		var all strings.Builder
		all.WriteString(j.ErrorMessage)
		for _, ev := range evs {
			all.Write(ev.Data)
		}
		all.WriteString(logs.String())
		for _, m := range []string{providerMarker, promptMarker} {
			if strings.Contains(all.String(), m) {
				t.Fatalf("%s leaked into the job record or logs:\n%s", m, all.String())
			}
		}
	})
}
