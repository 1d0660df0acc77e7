package admin_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/promptkit/promptkit/internal/testkit"
	"github.com/promptkit/promptkit/internal/testkit/storekit"
	"github.com/promptkit/promptkit/jobs"
	"github.com/promptkit/promptkit/server/internal/admin"
	"github.com/promptkit/promptkit/server/internal/apitest"
	"github.com/promptkit/promptkit/server/internal/auth"
	"github.com/promptkit/promptkit/server/internal/httpapi"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// The identities the tests act as (apitest's): an operator, acme's admin
// and acme's member.
var (
	operator = apitest.Operator
	boss     = apitest.Boss
	member   = apitest.Ann
)

// fixture is the admin API on a SQLite store in t's directory, the store
// and the API on one fake clock, served on the routes server/routes.go
// gives it, in REST's error shape.
type fixture struct {
	t    *testing.T
	st   jobs.Store
	clk  *testkit.Clock
	logs *testkit.Logs
	mux  *http.ServeMux
}

// maxBody is the fixture's body limit, small enough to pass in a test.
const maxBody = 4 << 10

func newFixture(t *testing.T) *fixture {
	t.Helper()
	clk := testkit.NewClock(apitest.Start)
	st := storekit.SQLite.New(t).Open(t, jobs.Options{Now: clk.Now})
	logs := &testkit.Logs{}
	a := &admin.API{Store: st, MaxBody: maxBody, Log: logs.Logger(), Now: clk.Now}
	mux := http.NewServeMux()
	for pattern, h := range map[string]httpapi.HandlerFunc{
		"GET /v1/admin/overview":              a.Overview,
		"GET /v1/admin/jobs":                  a.ListJobs,
		"GET /v1/admin/jobs/{id}":             a.GetJob,
		"POST /v1/admin/jobs/cancel":          a.CancelJobs,
		"POST /v1/admin/jobs/retry":           a.RetryJobs,
		"GET /v1/admin/batches":               a.Batches,
		"GET /v1/admin/backends":              a.Backends,
		"POST /v1/admin/backends/{id}/pause":  a.PauseBackend,
		"POST /v1/admin/backends/{id}/resume": a.ResumeBackend,
		"POST /v1/admin/orgs/{id}/pause":      a.PauseOrg,
		"POST /v1/admin/orgs/{id}/resume":     a.ResumeOrg,
		"GET /v1/admin/workers":               a.Workers,
		"POST /v1/admin/workers/{id}/drain":   a.DrainWorker,
		"POST /v1/admin/workers/{id}/undrain": a.UndrainWorker,
		"GET /v1/admin/tokens":                a.Tokens,
		"POST /v1/admin/tokens":               a.CreateToken,
		"POST /v1/admin/tokens/{id}/revoke":   a.RevokeToken,
	} {
		mux.Handle(pattern, httpapi.REST.Handler(testkit.TestLogger(t), h))
	}
	return &fixture{t: t, st: st, clk: clk, logs: logs, mux: mux}
}

// call serves method target as id (nil: no identity at all) with body
// (nil: none; a string as it is; anything else as JSON).
func (f *fixture) call(id *auth.Identity, method, target string, body any) apitest.Answer {
	f.t.Helper()
	var rd *bytes.Reader
	switch b := body.(type) {
	case nil:
		rd = bytes.NewReader(nil)
	case string:
		rd = bytes.NewReader([]byte(b))
	default:
		raw, err := json.Marshal(b)
		if err != nil {
			f.t.Fatal(err)
		}
		rd = bytes.NewReader(raw)
	}
	req := httptest.NewRequestWithContext(f.t.Context(), method, target, rd)
	if id != nil {
		req = req.WithContext(auth.With(req.Context(), *id))
	}
	r := apitest.Record(f.mux, req)
	if ct := r.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		f.t.Errorf("%s %s: Content-Type %q, want JSON", method, target, ct)
	}
	return r
}

// ok calls and fails the test unless the answer is want; it decodes the
// body into v when v is not nil.
func (f *fixture) ok(id *auth.Identity, method, target string, body any, want int, v any) {
	f.t.Helper()
	r := f.call(id, method, target, body)
	if r.Code != want {
		f.t.Fatalf("%s %s: %d %s, want %d", method, target, r.Code, r.Body, want)
	}
	if v != nil {
		r.Decode(f.t, v)
	}
}

// refused calls and fails the test unless the answer is the problem of
// status and code, its message holding each of words.
func (f *fixture) refused(id *auth.Identity, method, target string, body any, status int, code string, words ...string) {
	f.t.Helper()
	apitest.CheckProblem(f.t, method+" "+target, f.call(id, method, target, body), status, code, words...)
}

// enqueue stores a prompt of org by user with p's other fields.
func (f *fixture) enqueue(org, user string, p jobs.EnqueueParams) jobs.Enqueued {
	f.t.Helper()
	p.OrgID, p.CreatedBy = org, user
	if p.Text == "" && p.PromptRef == "" && p.Chat == nil {
		p.Text = "a prompt of " + org
	}
	e, err := f.st.Enqueue(context.Background(), p)
	if err != nil {
		f.t.Fatalf("enqueue: %v", err)
	}
	return e
}

// succeed claims the oldest queued job, which must be jobID, and answers
// it with output.
func (f *fixture) succeed(jobID, output string) {
	f.t.Helper()
	apitest.Succeed(f.t, f.st, jobID, output)
}

// job reads a job from the store.
func (f *fixture) job(id string) jobs.Job { f.t.Helper(); return apitest.Job(f.t, f.st, id) }

var routes = []struct {
	method, path string
	body         any
	// shared: only an operator may use it (backends and workers).
	shared bool
}{
	{"GET", "/v1/admin/overview", nil, false},
	{"GET", "/v1/admin/jobs", nil, false},
	{"GET", "/v1/admin/jobs/job_x", nil, false},
	{"POST", "/v1/admin/jobs/cancel", map[string]any{"filter": map[string]any{"state": "queued"}}, false},
	{"POST", "/v1/admin/jobs/retry", map[string]any{"filter": map[string]any{"state": "cancelled"}}, false},
	{"GET", "/v1/admin/batches", nil, false},
	{"GET", "/v1/admin/backends", nil, true},
	{"POST", "/v1/admin/backends/b1/pause", nil, true},
	{"POST", "/v1/admin/backends/b1/resume", nil, true},
	{"POST", "/v1/admin/orgs/acme/pause", nil, false},
	{"POST", "/v1/admin/orgs/acme/resume", nil, false},
	{"GET", "/v1/admin/workers", nil, true},
	{"POST", "/v1/admin/workers/w1/drain", nil, true},
	{"POST", "/v1/admin/workers/w1/undrain", nil, true},
	{"GET", "/v1/admin/tokens", nil, false},
	{"POST", "/v1/admin/tokens", map[string]any{"user": "zed"}, false},
	{"POST", "/v1/admin/tokens/tok_ann/revoke", nil, false},
}

// TestRefusedWithoutAdmin: every route answers a member, and a request
// with no identity, 403 forbidden in REST's JSON, and changes nothing.
func TestRefusedWithoutAdmin(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	q := f.enqueue("acme", "ann", jobs.EnqueueParams{})
	if _, err := f.st.ReportWorker(ctx, jobs.WorkerReport{Worker: "w1", Host: "h", PID: 1}); err != nil {
		t.Fatal(err)
	}
	for _, who := range []struct {
		name string
		id   *auth.Identity
	}{{"member", &member}, {"no identity", nil}} {
		for _, r := range routes {
			t.Run(who.name+" "+r.method+" "+r.path, func(t *testing.T) {
				f := *f
				f.t = t
				f.refused(who.id, r.method, r.path, r.body, http.StatusForbidden, "forbidden")
			})
		}
	}
	if j := f.job(q.JobID); j.State != jobs.Queued {
		t.Errorf("acme's job is %s after the refused cancel, want queued", j.State)
	}
	ls, err := f.st.Limits(ctx)
	if err != nil || len(ls) != 0 {
		t.Errorf("limits after the refused pause: %+v %v, want none", ls, err)
	}
	ts, err := f.st.ListTokens(ctx, "")
	if err != nil || len(ts) != 0 {
		t.Errorf("tokens after the refused creation: %+v %v, want none", ts, err)
	}
	ws, err := f.st.Workers(ctx, apitest.Start.Add(-time.Hour))
	if err != nil || len(ws) != 1 || ws[0].Draining {
		t.Errorf("workers after the refused drain: %+v %v, want w1 not draining", ws, err)
	}
	bs, err := f.st.SyncPacing(ctx, jobs.PacingSyncParams{})
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range bs {
		if b.Held {
			t.Errorf("backend %s held after the refused pause", b.Backend)
		}
	}
}

// TestSharedRoutesNeedOperator: an org's admin is refused the routes of
// what the orgs share (backends, workers) with a message saying an
// operator token is needed, and changes nothing; the operator token and
// the local identity are answered.
func TestSharedRoutesNeedOperator(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	if _, err := f.st.ReportWorker(ctx, jobs.WorkerReport{Worker: "w1", Host: "h", PID: 1}); err != nil {
		t.Fatal(err)
	}
	for _, r := range routes {
		if r.shared {
			f.refused(&boss, r.method, r.path, r.body, http.StatusForbidden, "forbidden", "operator token")
		}
	}
	ws, err := f.st.Workers(ctx, apitest.Start.Add(-time.Hour))
	if err != nil || len(ws) != 1 || ws[0].Draining {
		t.Fatalf("workers after the admin's drain: %+v %v, want w1 not draining", ws, err)
	}
	if bs, err := f.st.SyncPacing(ctx, jobs.PacingSyncParams{}); err != nil || len(bs) != 0 {
		t.Fatalf("backends after the admin's pause: %+v %v, want none held", bs, err)
	}
	for _, id := range []*auth.Identity{&operator, &auth.Local} {
		f.ok(id, "GET", "/v1/admin/backends", nil, http.StatusOK, nil)
		f.ok(id, "GET", "/v1/admin/workers", nil, http.StatusOK, nil)
	}
}
