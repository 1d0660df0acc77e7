package worker_test

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/promptkit/promptkit"
	"github.com/promptkit/promptkit/internal/testkit"
	"github.com/promptkit/promptkit/internal/testkit/enginekit"
	"github.com/promptkit/promptkit/jobs"
	"github.com/promptkit/promptkit/jobs/worker"
	"github.com/promptkit/promptkit/providertest"
)

// detailEngine returns an engine on the fixture's provider whose backend
// sends key as its API key (from a variable only this test sets), with
// retries transient retries.
func detailEngine(t *testing.T, f *fixture, key string, retries int) *promptkit.Engine {
	t.Helper()
	env := "PROMPTKIT_WORKER_TEST_KEY_" + strings.Map(func(r rune) rune {
		if r >= 'A' && r <= 'Z' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9' {
			return r
		}
		return '_'
	}, t.Name())
	// Not t.Setenv: the test is parallel, and no other test reads this name.
	if err := os.Setenv(env, key); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Unsetenv(env) })
	return enginekit.Provider(t, f.srv.URL, enginekit.Retries(retries), func(c *promptkit.Config) { c.Backends[0].APIKeyEnv = env })
}

// providerError is an OpenAI-style error body with message.
func providerError(status int, message string) providertest.Response {
	body, _ := json.Marshal(map[string]any{"error": map[string]any{
		"message": message, "type": "invalid_request_error", "code": "invalid_api_key"}})
	return providertest.Response{Status: status, Body: body}
}

// attemptDetails returns the detail of each attempt event of a job, in
// order, and everything the job's record holds as one string: its error
// message and every event's data.
func attemptDetails(t *testing.T, f *fixture, jobID string) (details []string, record string) {
	t.Helper()
	evs, err := f.store.JobEvents(f.ctx, "", jobID)
	if err != nil {
		t.Fatalf("JobEvents: %v", err)
	}
	var all strings.Builder
	all.WriteString(f.job(jobID).ErrorMessage)
	for _, ev := range evs {
		all.Write(ev.Data)
		if ev.Type != jobs.EventAttempt {
			continue
		}
		var d struct {
			Detail *string `json:"detail"`
		}
		if err := json.Unmarshal(ev.Data, &d); err != nil {
			t.Fatalf("attempt data %s: %v", ev.Data, err)
		}
		if d.Detail == nil {
			details = append(details, "")
		} else if *d.Detail == "" {
			t.Fatalf("attempt data %s has an empty detail", ev.Data)
		} else {
			details = append(details, *d.Detail)
		}
	}
	return details, all.String()
}

// TestProviderDetail: with KeepProviderDetail, the attempt the provider
// refused keeps the provider's message ("Incorrect API key provided"),
// redacted: neither the backend's own key nor anything shaped like a key
// reaches the job's events, its error message or the logs. Without it
// (the default) no event has a detail at all.
func TestProviderDetail(t *testing.T) {
	const (
		ownKey   = "own-backend-key-Q7xv2Lw9"               // the backend's configured key, echoed back
		otherKey = "sk-proj-AbCdEfGh0123456789secretSECRET" // a key-shaped token
		prompt   = "PROMPT-MARKER-d41"
	)
	message := "Incorrect API key provided: " + otherKey + " (sent " + ownKey + "). You can find your API key at https://platform.openai.com/account/api-keys."
	for _, keep := range []bool{true, false} {
		t.Run(fmt.Sprint("keep=", keep), func(t *testing.T) {
			eachStore(t, func(t *testing.T, f *fixture) {
				var logs testkit.Logs
				w := f.worker("w1", func(c *worker.Config) {
					c.Engine = detailEngine(t, f, ownKey, 0)
					c.KeepProviderDetail = keep
					c.Logger = logs.DebugLogger()
				})
				f.srv.Enqueue(providerError(401, message))
				e := f.enqueue(jobs.EnqueueParams{Text: "please " + prompt})
				f.runOnce(w, 1)
				j := f.job(e.JobID)
				if j.State != jobs.Failed || j.ErrorKind != jobs.KindAuth {
					t.Fatalf("job = %s %s %q, want failed auth", j.State, j.ErrorKind, j.ErrorMessage)
				}
				if got := f.srv.Requests()[0].Header.Get("Authorization"); got != "Bearer "+ownKey {
					t.Fatalf("the provider saw Authorization %q: the test's key did not reach it", got)
				}
				details, record := attemptDetails(t, f, e.JobID)
				if len(details) != 1 {
					t.Fatalf("%d attempt events, want 1", len(details))
				}
				if keep {
					want := "invalid_request_error: invalid_api_key: Incorrect API key provided: [REDACTED] (sent [REDACTED])."
					if !strings.HasPrefix(details[0], want) {
						t.Fatalf("detail %q, want it to start with %q", details[0], want)
					}
				} else if details[0] != "" {
					t.Fatalf("detail %q kept without KeepProviderDetail", details[0])
				}
				if strings.Contains(j.ErrorMessage, "Incorrect") {
					t.Fatalf("the provider's message reached the job's error message: %q", j.ErrorMessage)
				}
				everything := record + logs.String()
				for _, secret := range []string{ownKey, otherKey, "AbCdEfGh0123456789", prompt} {
					if strings.Contains(everything, secret) {
						t.Fatalf("%q reached the job's record or the logs:\n%s", secret, everything)
					}
				}
				if strings.Contains(logs.String(), "Incorrect") {
					t.Fatalf("the provider's message reached the logs:\n%s", logs.String())
				}
			})
		})
	}
}

// TestProviderDetailIsTheLastAttempts: inside one run the engine retries
// twice; only the attempt that ended the run carries the provider's
// message (the engine reports no text for the others), each attempt is
// recorded before the next call goes out, and a detail is cut to
// jobs.MaxErrorMessage bytes on a character boundary.
func TestProviderDetailIsTheLastAttempts(t *testing.T) {
	eachStore(t, func(t *testing.T, f *fixture) {
		hold := make(chan struct{})
		second := providerError(503, "overloaded, second try")
		second.Hold = hold
		long := "overloaded, third try " + strings.Repeat("é", 400) // 822 bytes
		f.srv.Enqueue(providerError(503, "overloaded, first try"), second, providerError(503, long))
		e := f.enqueue(jobs.EnqueueParams{Text: "q"})
		w := f.worker("w1", func(c *worker.Config) {
			c.Engine = f.engine(2)
			c.KeepProviderDetail = true
		})
		done := make(chan error, 1)
		go func() { _, err := w.RunOnce(f.ctx); done <- err }()
		f.arrivals(2)
		// The second call is in flight: the first attempt is recorded.
		if details, _ := attemptDetails(t, f, e.JobID); len(details) != 1 || details[0] != "" {
			t.Errorf("while the second call was in flight, attempt details = %q, want one without detail", details)
		}
		close(hold)
		if err := <-done; err != nil {
			t.Fatalf("RunOnce: %v", err)
		}
		if j := f.job(e.JobID); j.State != jobs.Queued || j.ErrorKind != jobs.KindProvider5xx {
			t.Fatalf("job = %s %s, want queued provider_5xx", j.State, j.ErrorKind)
		}
		details, _ := attemptDetails(t, f, e.JobID)
		if len(details) != 3 || details[0] != "" || details[1] != "" {
			t.Fatalf("attempt details = %q, want the last one only", details)
		}
		last := details[2]
		if !strings.HasPrefix(last, "invalid_request_error: invalid_api_key: overloaded, third try é") ||
			len(last) > jobs.MaxErrorMessage || len(last) < jobs.MaxErrorMessage-1 || !strings.HasSuffix(last, "é") {
			t.Fatalf("last detail (%d bytes) = %q, want the message cut to at most %d bytes on a character boundary", len(last), last, jobs.MaxErrorMessage)
		}
	})
}

// TestSettledJobsAreLogged: every settled job attempt has one Info line
// naming the job, its prompt, the outcome, the job's new state and error
// kind — never the prompt, the answer or the provider's text — and no
// warning.
func TestSettledJobsAreLogged(t *testing.T) {
	eachStore(t, func(t *testing.T, f *fixture) {
		var logs testkit.Logs
		w := f.worker("w1", func(c *worker.Config) {
			c.Logger = logs.Logger()
		})
		f.srv.Enqueue(providertest.Reply("ANSWER-MARKER"), providerError(401, "PROVIDER-MARKER"), providerError(500, "PROVIDER-MARKER"))
		ok := f.enqueue(jobs.EnqueueParams{Text: "PROMPT-MARKER one"})
		refused := f.enqueue(jobs.EnqueueParams{Text: "PROMPT-MARKER two"})
		retried := f.enqueue(jobs.EnqueueParams{Text: "PROMPT-MARKER three"})
		for range 3 { // one at a time, in order: the answers go in that order
			f.runOnce(w, 1)
		}
		out := logs.String()
		for _, c := range []struct {
			e    jobs.Enqueued
			want []string
		}{
			{ok, []string{"outcome=succeeded", "state=succeeded"}},
			{refused, []string{"outcome=failed", "state=failed", "error_kind=auth"}},
			{retried, []string{"outcome=retried", "state=queued", "error_kind=provider_5xx", "available_at="}},
		} {
			lines := settledLines(out, c.e.JobID)
			if len(lines) != 1 {
				t.Fatalf("job %s has %d settled lines, want 1:\n%s", c.e.JobID, len(lines), out)
			}
			for _, want := range append(c.want, "level=INFO", "prompt="+c.e.PromptID, "attempt=1", "max_attempts=3", "duration=") {
				if !strings.Contains(lines[0], want) {
					t.Errorf("settled line %q lacks %q", lines[0], want)
				}
			}
		}
		for _, bad := range []string{"ANSWER-MARKER", "PROVIDER-MARKER", "PROMPT-MARKER", "level=WARN", "level=ERROR"} {
			if strings.Contains(out, bad) {
				t.Errorf("the log has %q:\n%s", bad, out)
			}
		}
	})
}

// TestDiscardedJobIsLoggedOnce: a job cancelled while it runs has one
// settled line, outcome discarded, and no other line about its result.
func TestDiscardedJobIsLoggedOnce(t *testing.T) {
	eachStore(t, func(t *testing.T, f *fixture) {
		var logs testkit.Logs
		hold := make(chan struct{})
		f.srv.Enqueue(providertest.Response{Text: "too late", Hold: hold})
		e := f.enqueue(jobs.EnqueueParams{Text: "q"})
		w := f.worker("w1", func(c *worker.Config) {
			c.Logger = logs.Logger()
		})
		done := make(chan error, 1)
		go func() { _, err := w.RunOnce(f.ctx); done <- err }()
		f.arrivals(1)
		if _, err := f.store.Cancel(f.ctx, jobs.CancelParams{JobID: e.JobID}); err != nil {
			t.Fatalf("Cancel: %v", err)
		}
		close(hold) // the answer arrives after the cancel
		if err := <-done; err != nil {
			t.Fatalf("RunOnce: %v", err)
		}
		out := logs.String()
		lines := settledLines(out, e.JobID)
		if len(lines) != 1 || !strings.Contains(lines[0], "outcome=discarded") {
			t.Fatalf("settled lines %q, want one discarded:\n%s", lines, out)
		}
		if n := strings.Count(out, "job="+e.JobID); n != 1 {
			t.Fatalf("%d log lines name the job, want 1:\n%s", n, out)
		}
	})
}

// settledLines returns the "job settled" lines of a job.
func settledLines(logs, jobID string) []string {
	var out []string
	for line := range strings.SplitSeq(logs, "\n") {
		if strings.Contains(line, `msg="job settled"`) && strings.Contains(line, "job="+jobID+" ") {
			out = append(out, line)
		}
	}
	return out
}
