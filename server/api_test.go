package server

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/promptkit/promptkit/jobs"
)

func TestSubmitAndRead(t *testing.T) {
	onStores(t, jobs.Options{}, func(t *testing.T, e *env) {
		sub := e.submit("", map[string]any{"text": "hello", "priority": 10, "max_attempts": 2,
			"execution_options": map[string]any{"depth": 0}})
		if sub.State != jobs.Queued || sub.PromptID == "" || sub.JobID == "" {
			t.Fatalf("submitted = %+v", sub)
		}

		var v promptView
		r := e.call("GET", "/v1/prompts/"+sub.PromptID, "", nil)
		r.decode(t, &v)
		if r.code != 200 || v.Prompt.Text != "hello" || v.Job.ID != sub.JobID || v.Job.Priority != 10 ||
			v.Job.MaxAttempts != 2 || v.Answer != nil || len(v.Jobs) != 1 {
			t.Fatalf("prompt view: %d %+v", r.code, v)
		}
		if v.Prompt.OrgID != LocalOrg || v.Prompt.CreatedBy != LocalUser {
			t.Fatalf("local identity: org %q user %q", v.Prompt.OrgID, v.Prompt.CreatedBy)
		}

		e.finish(sub.JobID, "the answer")
		r = e.call("GET", "/v1/prompts/"+sub.PromptID, "", nil)
		r.decode(t, &v)
		if v.Job.State != jobs.Succeeded || v.Answer == nil || v.Answer.Output != "the answer" {
			t.Fatalf("answered prompt: %+v", v)
		}

		var jv jobView
		r = e.call("GET", "/v1/jobs/"+sub.JobID, "", nil)
		r.decode(t, &jv)
		var path []string
		for _, ev := range jv.Events {
			path = append(path, fmt.Sprintf("%s>%s", ev.From, ev.To))
		}
		if r.code != 200 || jv.Job.ID != sub.JobID || strings.Join(path, " ") != ">queued queued>running running>succeeded" {
			t.Fatalf("job view: %d %v", r.code, path)
		}
	})
}

func TestSubmitNamedPrompt(t *testing.T) {
	t.Parallel()
	e := setup(t)
	// The simulated configuration has no named prompts: the engine's
	// check refuses at submission what no worker could run.
	r := e.call("POST", "/v1/prompts", "", `{"prompt": "nope", "inputs": {"a": 1}}`)
	if r.code != 400 || r.errorCode(t) != "invalid_request" {
		t.Fatalf("unknown prompt: %d %s", r.code, r.body)
	}
	r = e.call("POST", "/v1/prompts", "", `{"text": "x", "profile": "nope"}`)
	if r.code != 400 || r.errorCode(t) != "invalid_request" {
		t.Fatalf("unknown profile: %d %s", r.code, r.body)
	}
}

func TestIdempotencyKey(t *testing.T) {
	onStores(t, jobs.Options{}, func(t *testing.T, e *env) {
		first := e.call("POST", "/v1/prompts", "", `{"text": "once", "inputs": null, "priority": 5}`, "Idempotency-Key", "k1")
		// The same request, spelled differently, returns the first ids.
		again := e.call("POST", "/v1/prompts", "", `{ "priority": 5, "text": "once" }`, "Idempotency-Key", "k1")
		var a, b submitted
		first.decode(t, &a)
		again.decode(t, &b)
		if first.code != 202 || again.code != 202 || a != b {
			t.Fatalf("repeat: %d %+v, %d %+v", first.code, a, again.code, b)
		}
		r := e.call("POST", "/v1/prompts", "", `{"text": "other"}`, "Idempotency-Key", "k1")
		if r.code != 422 || r.errorCode(t) != "idempotency_conflict" {
			t.Fatalf("same key, other body: %d %s", r.code, r.body)
		}
		// Another user of the org reusing the key gets a conflict, not the
		// first user's ids.
		other := e.token(LocalOrg, "someone", jobs.RoleMember)
		r = e.call("POST", "/v1/prompts", other, `{"priority": 5, "text": "once"}`, "Idempotency-Key", "k1")
		if r.code != 422 {
			t.Fatalf("same key, other user: %d %s", r.code, r.body)
		}
		page, _ := e.st.ListJobs(context.Background(), jobs.ListParams{})
		if len(page.Jobs) != 1 {
			t.Fatalf("%d jobs stored, want 1", len(page.Jobs))
		}
	})
}

func TestWait(t *testing.T) {
	onStores(t, jobs.Options{}, func(t *testing.T, e *env) {
		// No worker: the wait ends with the job still queued.
		r := e.call("POST", "/v1/prompts?wait=1ms", "", `{"text": "nobody runs this"}`)
		var sub submitted
		r.decode(t, &sub)
		if r.code != 202 || sub.State != jobs.Queued {
			t.Fatalf("wait without worker: %d %s", r.code, r.body)
		}
		e.runWorker()
		r = e.call("POST", "/v1/prompts?wait=1m", "", `{"text": "run me"}`)
		var v promptView
		r.decode(t, &v)
		if r.code != 200 || v.Job.State != jobs.Succeeded || v.Answer == nil || !strings.Contains(v.Answer.Output, "run me") {
			t.Fatalf("wait with worker: %d %s", r.code, r.body)
		}
	})
}

// TestRecentBoundary: with a clock that does not move, every change is
// stamped in the instant of the previous as_of; polling with as_of must
// still see each of them.
func TestRecentBoundary(t *testing.T) {
	onStores(t, jobs.Options{Now: frozen}, func(t *testing.T, e *env) {
		var rec recent
		e.call("GET", "/v1/recent", "", nil).decode(t, &rec)
		seen := map[string]jobs.State{}
		for i := range 20 {
			sub := e.submit("", map[string]any{"text": fmt.Sprint("b", i)})
			rec = e.recent(rec.AsOf)
			for _, p := range rec.Prompts {
				seen[p.Job.ID] = p.Job.State
			}
			if seen[sub.JobID] != jobs.Queued {
				t.Fatalf("poll %d missed the new job", i)
			}
			e.finish(sub.JobID, "x")
			rec = e.recent(rec.AsOf)
			for _, p := range rec.Prompts {
				seen[p.Job.ID] = p.Job.State
			}
			if seen[sub.JobID] != jobs.Succeeded {
				t.Fatalf("poll %d missed the finish", i)
			}
		}
	})
}

// frozen is a store clock that never moves.
func frozen() time.Time { return time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC) }

// recent polls /v1/recent with since.
func (e *env) recent(since time.Time) recent {
	e.t.Helper()
	var rec recent
	r := e.call("GET", "/v1/recent?since="+since.Format(time.RFC3339Nano), "", nil)
	if r.code != 200 {
		e.t.Fatalf("recent: %d %s", r.code, r.body)
	}
	r.decode(e.t, &rec)
	return rec
}

func TestHealth(t *testing.T) {
	t.Parallel()
	e := setup(t)
	for _, p := range []string{"/healthz", "/readyz"} {
		if r := e.call("GET", p, "", nil); r.code != 200 {
			t.Errorf("%s: %d", p, r.code)
		}
	}
	r := e.call("GET", "/openapi.json", "", nil)
	var doc map[string]any
	r.decode(t, &doc)
	if r.code != 200 || doc["openapi"] != "3.1.0" {
		t.Fatalf("openapi.json: %d", r.code)
	}
	e.st.Close()
	if r := e.call("GET", "/readyz", "", nil); r.code != 503 {
		t.Errorf("readyz with the store closed: %d", r.code)
	}
}

// TestSubmitRateLimit: a token's submissions beyond its burst are 429
// with Retry-After until the clock refills the bucket; other tokens are
// not affected.
func TestSubmitRateLimit(t *testing.T) {
	t.Parallel()
	e := setup(t, func(c *Config) { c.SubmitRate, c.SubmitBurst = 1, 2 })
	a := e.token("o", "a", jobs.RoleMember)
	b := e.token("o", "b", jobs.RoleMember)
	for range 2 {
		e.submit(a, map[string]any{"text": "x"})
	}
	r := e.call("POST", "/v1/prompts", a, `{"text": "x"}`)
	if r.code != 429 || r.header.Get("Retry-After") != "1" || r.errorCode(t) != "rate_limited" {
		t.Fatalf("over the rate: %d %q %s", r.code, r.header.Get("Retry-After"), r.body)
	}
	e.submit(b, map[string]any{"text": "x"})
	e.clock.Advance(time.Second)
	e.submit(a, map[string]any{"text": "x"})
}

// TestAnswersAreJSON: what a client can get wrong never answers 500 or a
// non-JSON error on a /v1 route.
func TestAnswersAreJSON(t *testing.T) {
	t.Parallel()
	e := setup(t)
	for _, c := range []struct{ method, path, body string }{
		{"POST", "/v1/prompts", "\x00\xff"},
		{"POST", "/v1/prompts/x/retry", "{"},
		{"POST", "/v1/prompts/x/retry", `{"priority": "high"}`},
		{"GET", "/v1/prompts?limit=99999", ""},
		{"GET", "/v1/recent?since=" + strings.Repeat("9", 40), ""},
	} {
		r := e.call(c.method, c.path, "", c.body)
		var body apiError
		if r.code >= 500 || json.Unmarshal(r.body, &body) != nil || body.Error.Code == "" {
			t.Errorf("%s %s: %d %s", c.method, c.path, r.code, r.body)
		}
	}
	req, _ := http.NewRequest("GET", e.srv.URL()+"/v1/events", nil)
	req.Header.Set("Last-Event-ID", "x")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != 400 {
		t.Errorf("bad Last-Event-ID: %d", res.StatusCode)
	}
}
