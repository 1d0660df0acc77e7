// Package apitest is what the tests of the server's handler packages
// (admin, rest, submit, …) share: the identities they act as, a recorded
// answer and promptkit's error body on the wire, and the store moves that
// set a job up. No production code imports it.
package apitest

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/promptkit/promptkit/jobs"
	"github.com/promptkit/promptkit/server/internal/auth"
)

// Start is when the tests' fake clocks start.
var Start = time.Date(2030, 3, 4, 9, 0, 0, 0, time.UTC)

// The identities the tests act as, each with a token ID of its own (Key):
// an operator (of its own org, "ops"), acme's admin, acme's members ann
// and bob, and beta's member bea.
var (
	Operator = auth.Identity{Org: "ops", User: "olga", Role: jobs.RoleOperator, Key: "tok_olga"}
	Boss     = auth.Identity{Org: "acme", User: "boss", Role: jobs.RoleAdmin, Key: "tok_boss"}
	Ann      = auth.Identity{Org: "acme", User: "ann", Role: jobs.RoleMember, Key: "tok_ann"}
	Bob      = auth.Identity{Org: "acme", User: "bob", Role: jobs.RoleMember, Key: "tok_bob"}
	Bea      = auth.Identity{Org: "beta", User: "bea", Role: jobs.RoleMember, Key: "tok_bea"}
)

// Answer is a recorded response.
type Answer struct {
	Code   int
	Header http.Header
	Body   []byte
}

// Record serves req with h and records the answer.
func Record(h http.Handler, req *http.Request) Answer {
	w := httptest.NewRecorder()
	h.ServeHTTP(w, req)
	return Answer{Code: w.Code, Header: w.Header(), Body: w.Body.Bytes()}
}

// Decode decodes the body into v, failing the test when it is not JSON.
func (r Answer) Decode(t testing.TB, v any) {
	t.Helper()
	if err := json.Unmarshal(r.Body, v); err != nil {
		t.Fatalf("decoding %d %s: %v", r.Code, r.Body, err)
	}
}

// Problem is promptkit's error body as it is on the wire.
type Problem struct {
	Error struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

// CheckProblem fails t unless r is the problem of status and code, its
// message holding each of words; what names the request.
func CheckProblem(t testing.TB, what string, r Answer, status int, code string, words ...string) {
	t.Helper()
	var p Problem
	if r.Code != status || json.Unmarshal(r.Body, &p) != nil || p.Error.Code != code {
		t.Errorf("%s: %d %s, want %d with code %q", what, r.Code, r.Body, status, code)
		return
	}
	for _, w := range words {
		if !strings.Contains(p.Error.Message, w) {
			t.Errorf("%s: message %q does not name %q", what, p.Error.Message, w)
		}
	}
}

// Claim claims the oldest queued job as worker "w"; it must be jobID.
func Claim(t testing.TB, st jobs.Store, jobID string) {
	t.Helper()
	js, err := st.Claim(context.Background(), jobs.ClaimParams{Worker: "w", Limit: 1})
	if err != nil || len(js) != 1 || js[0].ID != jobID {
		t.Fatalf("claim: %+v %v, want %s", js, err, jobID)
	}
}

// Succeed claims jobID (the oldest queued job) and answers it with
// output (model "m", backend "b"), with attempt events when given.
func Succeed(t testing.TB, st jobs.Store, jobID, output string, attempts ...json.RawMessage) {
	t.Helper()
	Claim(t, st, jobID)
	if _, err := st.Succeed(context.Background(), jobs.SucceedParams{JobID: jobID, Worker: "w",
		Answer: jobs.Answer{Output: output, Model: "m", Backend: "b"}, AttemptEvents: attempts}); err != nil {
		t.Fatalf("succeed: %v", err)
	}
}

// Job reads a job, of any org.
func Job(t testing.TB, st jobs.Store, id string) jobs.Job {
	t.Helper()
	j, err := st.GetJob(context.Background(), "", id)
	if err != nil {
		t.Fatalf("GetJob %s: %v", id, err)
	}
	return j
}
