package server

import (
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/promptkit/promptkit/internal/metrics"
	"github.com/promptkit/promptkit/jobs/worker"
)

// TestPromptTextNeverLogged: a prompt's text, and its answer (the
// simulated backend repeats the prompt), appear in no log line and no
// metric, through submission, a run, a wait, a retry, a cancel, an event
// stream, and requests the server refuses.
func TestPromptTextNeverLogged(t *testing.T) {
	t.Parallel()
	const marker = "MARKER-7f3a-do-not-log"
	var m *metrics.Metrics
	e := setup(t, func(c *Config) {
		m = metrics.New(c.Store, metrics.Options{Models: []string{"promptkit-simulated"}})
		c.Metrics = m
	})
	w, err := worker.New(worker.Config{Store: e.st, Engine: e.eng, Logger: e.srv.log, Observe: m.ObserveJob, Observer: m.Observer()})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { _ = w.Run(ctx) })
	defer func() { cancel(); wg.Wait() }()

	s := e.openStream("", "")
	body := map[string]any{"text": "say " + marker, "inputs": nil}
	r := e.call("POST", "/v1/prompts?wait=1m", "", body, "Idempotency-Key", marker)
	var v promptView
	r.decode(t, &v)
	if v.Answer == nil || !strings.Contains(v.Answer.Output, marker) {
		t.Fatalf("no answer: %d %s", r.code, r.body)
	}
	s.mustNext()
	e.call("POST", "/v1/prompts", "", map[string]any{"text": "other " + marker}, "Idempotency-Key", marker) // 422
	e.call("POST", "/v1/prompts", "", `{"text": "`+marker+`", "`+marker+`": 1}`)                            // unknown field
	e.call("POST", "/v1/prompts", "", `{"text": "`+marker+`", "profile": "`+marker+`"}`)                    // unknown profile
	e.call("POST", "/v1/prompts/"+v.Prompt.ID+"/retry", "", nil)
	sub := e.submit("", map[string]any{"text": marker, "scheduled_for": "2099-01-01T00:00:00Z"})
	e.call("POST", "/v1/jobs/"+sub.JobID+"/cancel", "", nil)
	e.call("GET", "/v1/prompts/"+marker, "", nil)

	scrape := e.call("GET", "/metrics", "", nil)
	if scrape.code != 200 || !strings.Contains(string(scrape.body), "promptkit_http_requests_total") {
		t.Fatalf("metrics: %d", scrape.code)
	}
	if strings.Contains(string(scrape.body), marker) {
		t.Error("the prompt's text is in /metrics")
	}
	logs := e.logs.String()
	if !strings.Contains(logs, v.Prompt.ID) {
		t.Errorf("the logs lack the prompt id; they should carry ids:\n%s", logs)
	}
	if strings.Contains(logs, marker) {
		t.Errorf("the prompt's text is in the logs:\n%s", logs)
	}
}
