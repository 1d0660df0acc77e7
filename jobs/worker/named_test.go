package worker_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/promptkit/promptkit"
	"github.com/promptkit/promptkit/jobs"
	"github.com/promptkit/promptkit/jobs/worker"
	"github.com/promptkit/promptkit/providertest"
)

// namedEngine is an engine on the fixture's provider with two named
// prompts: "greet" (inputs only) and "extract" (an output schema), and the
// given repair budget. No transient retries inside the engine.
func namedEngine(t *testing.T, providerURL string, repairBudget int) *promptkit.Engine {
	t.Helper()
	zero := 0
	eng, err := promptkit.New(promptkit.Config{
		Backends: []promptkit.Backend{{ID: "fake", BaseURL: providerURL}},
		Profiles: []promptkit.Profile{{ID: "default", Backend: "fake", Model: "m", RepairBudget: repairBudget}},
		Prompts: []promptkit.Prompt{
			{ID: "greet", Version: "2", Template: "Greet {{.name}}, who is {{.age}}, in {{.lang}}.",
				InputSchema: json.RawMessage(`{"type":"object","required":["name","age","lang"]}`)},
			{ID: "extract", Template: "Extract a summary from: {{.text}}",
				OutputSchema: json.RawMessage(`{"type":"object","properties":{"summary":{"type":"string"}},"required":["summary"],"additionalProperties":false}`)},
		},
		TransientRetries: &zero,
	})
	if err != nil {
		t.Fatalf("promptkit.New: %v", err)
	}
	return eng
}

// A job for a named prompt with inputs (PromptRef + Inputs, no Text) runs
// that prompt rendered with those inputs.
func TestNamedPromptJobRendersInputs(t *testing.T) {
	eachStore(t, func(t *testing.T, f *fixture) {
		f.srv.Enqueue(providertest.Reply("Hallo Ada"))
		e := f.enqueue(jobs.EnqueueParams{PromptRef: "greet", Inputs: json.RawMessage(`{"name":"Ada","age":36,"lang":"German"}`)})
		w := f.worker("w1", func(c *worker.Config) { c.Engine = namedEngine(t, f.srv.URL, 0) })
		f.runOnce(w, 1)

		j := f.job(e.JobID)
		if j.State != jobs.Succeeded || j.ErrorKind != "" || j.Attempt != 1 {
			t.Fatalf("job: state=%s kind=%q msg=%q attempt=%d", j.State, j.ErrorKind, j.ErrorMessage, j.Attempt)
		}
		reqs := f.srv.Requests()
		if len(reqs) != 1 {
			t.Fatalf("provider saw %d requests, want 1", len(reqs))
		}
		if msgs := reqs[0].Messages; len(msgs) != 1 || msgs[0].Role != "user" || msgs[0].Content != "Greet Ada, who is 36, in German." {
			t.Fatalf("provider got %+v, want the prompt rendered with the job's inputs", msgs)
		}
		r, err := f.store.GetResponse(f.ctx, "", j.ResponseID)
		if err != nil {
			t.Fatal(err)
		}
		if r.Output != "Hallo Ada" {
			t.Fatalf("response output = %q", r.Output)
		}
	})
}

// A job whose output is still invalid after the repair budget ends failed
// at once with error_kind parse: no response, no retry.
func TestInvalidOutputAfterRepairFailsParse(t *testing.T) {
	eachStore(t, func(t *testing.T, f *fixture) {
		f.srv.Enqueue(providertest.Reply("not json at all"), providertest.Reply(`{"summary": 42}`))
		e := f.enqueue(jobs.EnqueueParams{PromptRef: "extract", Inputs: json.RawMessage(`{"text":"a long article"}`), MaxAttempts: 3})
		w := f.worker("w1", func(c *worker.Config) { c.Engine = namedEngine(t, f.srv.URL, 1) })
		f.runOnce(w, 1)

		j := f.job(e.JobID)
		if j.State != jobs.Failed || j.ErrorKind != jobs.KindParse || string(j.ErrorKind) != "parse" || j.Attempt != 1 || j.FinishedAt.IsZero() {
			t.Fatalf("job: state=%s kind=%q attempt=%d finished=%v; want failed, parse, 1", j.State, j.ErrorKind, j.Attempt, j.FinishedAt)
		}
		if j.ErrorMessage == "" || strings.Contains(j.ErrorMessage, "not json") || strings.Contains(j.ErrorMessage, "42") {
			t.Fatalf("error message %q: want a reason that quotes no output", j.ErrorMessage)
		}
		if j.ResponseID != "" || f.responses(e.JobID) != 0 {
			t.Fatalf("failed job has a response (%q)", j.ResponseID)
		}
		// The initial generation and its one repair, nothing more.
		if f.srv.Count() != 2 {
			t.Fatalf("provider saw %d requests, want 2 (initial and one repair)", f.srv.Count())
		}
		evs, _ := f.events(e.JobID)
		if want := []string{"→queued", "queued→running", "attempt:200", "attempt:200", "running→failed"}; !eq(evs, want) {
			t.Fatalf("events = %v, want %v", evs, want)
		}
		// Terminal: it is not claimed again, however late it gets.
		f.clock.Advance(24 * time.Hour)
		f.runOnce(w, 0)
		if f.srv.Count() != 2 {
			t.Fatalf("the failed job ran again")
		}
	})
}
