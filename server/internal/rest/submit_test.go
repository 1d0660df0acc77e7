package rest

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/promptkit/promptkit/jobs"
	"github.com/promptkit/promptkit/server/internal/apitest"
	"github.com/promptkit/promptkit/server/internal/auth"
	"github.com/promptkit/promptkit/server/internal/httpapi"
)

// TestSubmitStoresAsTheCaller: POST /v1/prompts answers 202 with the
// prompt's and job's ids (in the body and the id headers) and the queued
// state; the job is stored as the identity's (org, creator, token) with
// what the body asked for, and is no other org's.
func TestSubmitStoresAsTheCaller(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	later := apitest.Start.Add(time.Hour)
	r := f.call(ann, "POST", "/v1/prompts", `{"text": "hello", "priority": 10, "max_attempts": 2,
		"scheduled_for": "`+later.Format(time.RFC3339)+`", "execution_options": {"depth": 0}}`)
	var s Submitted
	r.Decode(t, &s)
	if r.Code != http.StatusAccepted || s.PromptID == "" || s.JobID == "" || s.State != jobs.Queued {
		t.Fatalf("submit: %d %s, want 202 with ids, queued", r.Code, r.Body)
	}
	if r.Header.Get(httpapi.HeaderPromptID) != s.PromptID || r.Header.Get(httpapi.HeaderJobID) != s.JobID {
		t.Errorf("id headers %v, want %s and %s", r.Header, s.PromptID, s.JobID)
	}
	j, err := f.st.GetJob(ctx, "acme", s.JobID)
	if err != nil {
		t.Fatalf("the job in acme: %v", err)
	}
	if j.PromptID != s.PromptID || j.OrgID != "acme" || j.CreatedBy != "ann" || j.TokenID != "tok_ann" ||
		j.Priority != 10 || j.MaxAttempts != 2 || !j.AvailableAt.Equal(later) || j.State != jobs.Queued {
		t.Errorf("stored %+v; want acme's, by ann with tok_ann, priority 10, 2 attempts, available at %v", j, later)
	}
	if p, err := f.st.GetPrompt(ctx, "acme", s.PromptID); err != nil || p.Text != "hello" || p.CreatedBy != "ann" {
		t.Errorf("stored prompt %+v %v", p, err)
	}
	if _, err := f.st.GetJob(ctx, "beta", s.JobID); !errors.Is(err, jobs.ErrNotFound) {
		t.Errorf("the job in beta: %v, want not found", err)
	}
	// The same submission again is another prompt: submissions are never
	// coalesced without an Idempotency-Key.
	again := f.submit(ann, `{"text": "hello"}`)
	if again.PromptID == s.PromptID || again.JobID == s.JobID || f.count() != 2 {
		t.Errorf("the same text again: %+v (first %+v), %d jobs; want a second prompt", again, s, f.count())
	}
	if !f.logs.Contains("prompt submitted") {
		t.Errorf("no submission logged: %s", f.logs)
	}
}

// TestSubmitRefusesBadInput: each bad request is a 4xx JSON wireProblem
// whose message names the field or parameter at fault, and stores
// nothing.
func TestSubmitRefusesBadInput(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	theirs := f.enqueue(bea, "beta's") // another org's prompt and job
	const unknown = "0190a0a0-0000-7000-8000-000000000000"
	for _, c := range []struct {
		name, target, body string
		headers            []string
		status             int
		code               string
		names              string
	}{
		{"unknown field", "", `{"text": "x", "org_id": "beta"}`, nil, 400, "invalid_json", "org_id"},
		{"wrong type", "", `{"text": 5}`, nil, 400, "invalid_json", "text"},
		{"priority type", "", `{"text": "x", "priority": "high"}`, nil, 400, "invalid_json", "priority"},
		{"priority range", "", `{"text": "x", "priority": 101}`, nil, 400, "invalid_request", "priority"},
		{"negative priority", "", `{"text": "x", "priority": -1}`, nil, 400, "invalid_request", "priority"},
		{"max attempts", "", `{"text": "x", "max_attempts": 0}`, nil, 400, "invalid_request", "max_attempts"},
		{"scheduled_for", "", `{"text": "x", "scheduled_for": "tomorrow"}`, nil, 400, "invalid_json", "scheduled_for"},
		{"scheduled_for type", "", `{"text": "x", "scheduled_for": 17}`, nil, 400, "invalid_json", "scheduled_for"},
		{"unknown parent", "", `{"text": "x", "parent_id": "` + unknown + `"}`, nil, 400, "invalid_request", "parent_id"},
		{"another org's parent", "", `{"text": "x", "parent_id": "` + theirs.PromptID + `"}`, nil, 400, "invalid_request", "parent_id"},
		{"unknown depends_on", "", `{"text": "x", "depends_on": "` + unknown + `"}`, nil, 400, "invalid_request", "depends_on"},
		{"another org's depends_on", "", `{"text": "x", "depends_on": "` + theirs.JobID + `"}`, nil, 400, "invalid_request", "depends_on"},
		{"options", "", `{"text": "x", "execution_options": {"router_model": "m"}}`, nil, 400, "invalid_request", "router_model"},
		{"blank text", "", `{"text": "   "}`, nil, 400, "invalid_request", "text"},
		{"text and prompt", "", `{"text": "x", "prompt": "p"}`, nil, 400, "invalid_request", "prompt"},
		{"malformed", "", `{"text": `, nil, 400, "invalid_json", ""},
		{"not json", "", `hello`, nil, 400, "invalid_json", ""},
		{"array", "", `[1]`, nil, 400, "invalid_json", "object"},
		{"two values", "", `{"text": "x"} {"text": "y"}`, nil, 400, "invalid_json", "more than one"},
		{"empty", "", ``, nil, 400, "invalid_json", "empty"},
		{"too large", "", `{"text": "` + strings.Repeat("a", maxBody) + `"}`, nil, 413, "too_large", "512"},
		{"bad wait", "?wait=soon", `{"text": "x"}`, nil, 400, "invalid_request", "wait"},
		{"negative wait", "?wait=-1s", `{"text": "x"}`, nil, 400, "invalid_request", "wait"},
		{"long key", "", `{"text": "x"}`, []string{"Idempotency-Key", strings.Repeat("k", 256)}, 400, "invalid_request", "Idempotency-Key"},
	} {
		r := f.call(ann, "POST", "/v1/prompts"+c.target, c.body, c.headers...)
		apitest.CheckProblem(t, c.name, r, c.status, c.code, c.names)
		if r.Header.Get(httpapi.HeaderJobID) != "" {
			t.Errorf("%s: refused with a job id %q", c.name, r.Header.Get(httpapi.HeaderJobID))
		}
	}
	if n := f.count(); n != 1 {
		t.Errorf("the store holds %d jobs after the refusals, want beta's alone", n)
	}
}

// TestSubmitNeedsJSON: wired behind auth's guard, as the server wires
// every route, a POST whose body is not declared JSON is a 415 in local
// mode and reaches no handler; one declared JSON is submitted.
func TestSubmitNeedsJSON(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.auth.SetLoopback(true) // no token exists: local mode
	h := f.auth.Guard(f.mux, func(r *http.Request) auth.Route {
		_, pattern := f.mux.Handler(r)
		return auth.Route{Pattern: pattern, Dialect: httpapi.REST}
	})
	for _, ct := range []string{"text/plain", "application/x-www-form-urlencoded", ""} {
		req := f.request(auth.Local, "POST", "/v1/prompts", `{"text": "x"}`, "Content-Type", ct)
		req.Host = "127.0.0.1:8080"
		apitest.CheckProblem(t, "Content-Type "+ct, serve(h, req, nil), http.StatusUnsupportedMediaType, "unsupported_media_type", "Content-Type")
	}
	if n := f.count(); n != 0 {
		t.Fatalf("%d jobs stored by refused requests", n)
	}
	req := f.request(auth.Local, "POST", "/v1/prompts", `{"text": "x"}`, "Content-Type", "application/json; charset=utf-8")
	req.Host = "127.0.0.1:8080"
	if r := serve(h, req, nil); r.Code != http.StatusAccepted || f.count() != 1 {
		t.Fatalf("JSON: %d %s, %d jobs; want 202 and one job", r.Code, r.Body, f.count())
	}
}

// TestSubmitIdempotencyKey: a repeat of a key with the same request,
// however spelled, answers the first ids and stores nothing; once the
// job is done, the repeat answers 200 with its answer. The key with
// another request, or by another member of the org, is a 422
// idempotency_conflict; another org's key of the same name is its own.
func TestSubmitIdempotencyKey(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	var first, again Submitted
	f.call(ann, "POST", "/v1/prompts", `{"text": "once", "inputs": null, "priority": 5}`, "Idempotency-Key", "k1").Decode(t, &first)
	r := f.call(ann, "POST", "/v1/prompts", `{ "priority": 5,  "text": "once" }`, "Idempotency-Key", "k1")
	r.Decode(t, &again)
	if r.Code != http.StatusAccepted || first.JobID == "" || again != first {
		t.Fatalf("repeat: %d %+v, want 202 %+v", r.Code, again, first)
	}
	// Inputs in another key order are the same request.
	var in1, in2 Submitted
	f.call(ann, "POST", "/v1/prompts", `{"prompt": "p", "inputs": {"a": 1, "b": [2, 3]}}`, "Idempotency-Key", "k2").Decode(t, &in1)
	f.call(ann, "POST", "/v1/prompts", `{"inputs": {"b": [2, 3], "a": 1}, "prompt": "p"}`, "Idempotency-Key", "k2").Decode(t, &in2)
	if in1.JobID == "" || in1 != in2 {
		t.Errorf("inputs reordered: %+v, want %+v", in2, in1)
	}
	if n := f.count(); n != 2 {
		t.Fatalf("%d jobs stored, want 2", n)
	}
	for _, c := range []struct {
		name string
		id   auth.Identity
		body string
	}{{"another request", ann, `{"text": "other"}`}, {"another member", bob, `{"text": "once", "priority": 5}`}} {
		r := f.call(c.id, "POST", "/v1/prompts", c.body, "Idempotency-Key", "k1")
		apitest.CheckProblem(t, c.name, r, http.StatusUnprocessableEntity, "idempotency_conflict", "Idempotency-Key")
	}
	if n := f.count(); n != 2 {
		t.Fatalf("%d jobs stored after the conflicts, want 2", n)
	}
	var theirs Submitted
	f.call(bea, "POST", "/v1/prompts", `{"text": "once", "priority": 5}`, "Idempotency-Key", "k1").Decode(t, &theirs)
	if theirs.JobID == "" || theirs.JobID == first.JobID {
		t.Errorf("beta's k1: %+v, want a job of its own", theirs)
	}

	// Done, the repeat answers the prompt with its answer.
	f.succeed(first.JobID, "the answer")
	var v PromptView
	r = f.call(ann, "POST", "/v1/prompts", `{"text": "once", "priority": 5}`, "Idempotency-Key", "k1")
	r.Decode(t, &v)
	if r.Code != http.StatusOK || v.Prompt.ID != first.PromptID || v.Job.ID != first.JobID || v.Job.State != jobs.Succeeded ||
		v.Answer == nil || v.Answer.Output != "the answer" || r.Header.Get(httpapi.HeaderJobID) != first.JobID {
		t.Errorf("repeat of a done job: %d %s", r.Code, r.Body)
	}
	if n := f.count(); n != 3 {
		t.Errorf("%d jobs stored, want 3", n)
	}
}

// TestSubmitRate: an identity's submissions beyond its burst are 429
// rate_limited with Retry-After until the clock refills the bucket, and
// store nothing; another identity is not held back.
func TestSubmitRate(t *testing.T) {
	t.Parallel()
	f := newFixture(t, func(c *auth.Config) { c.SubmitRate, c.SubmitBurst = 1, 2 })
	for range 2 {
		f.submit(ann, `{"text": "x"}`)
	}
	r := f.call(ann, "POST", "/v1/prompts", `{"text": "x"}`)
	apitest.CheckProblem(t, "over the rate", r, http.StatusTooManyRequests, "rate_limited")
	if got := r.Header.Get("Retry-After"); got != "1" {
		t.Errorf("Retry-After %q, want 1", got)
	}
	if n := f.count(); n != 2 {
		t.Errorf("%d jobs stored, want 2", n)
	}
	f.submit(bob, `{"text": "x"}`)
	f.clk.Advance(time.Second)
	f.submit(ann, `{"text": "x"}`)
}
