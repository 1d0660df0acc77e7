package rest

import (
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
	"github.com/promptkit/promptkit/server/internal/apitest"
	"github.com/promptkit/promptkit/server/internal/auth"
	"github.com/promptkit/promptkit/server/internal/events"
	"github.com/promptkit/promptkit/server/internal/httpapi"
	"github.com/promptkit/promptkit/server/internal/submit"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// The identities the tests act as (apitest's): acme's members ann and
// bob, acme's admin boss, and beta's member bea.
var (
	ann  = apitest.Ann
	bob  = apitest.Bob
	boss = apitest.Boss
	bea  = apitest.Bea
)

// maxBody is the fixture's body limit, small enough to pass in a test.
const maxBody = 512

// fixture is the REST API wired as server/server.go wires it: on a
// SQLite store in t's directory (counting its reads), with an Auth for
// the submission budget, a submit.Jobs whose waits an events hub wakes
// (polling only hourly: the store's notifications wake it), every part
// on one fake clock, served on the routes server/routes.go gives it, in
// REST's error shape. Requests act as the identity the test puts in
// their context, as auth's middleware would.
type fixture struct {
	t    *testing.T
	st   *storekit.Counting
	clk  *testkit.Clock
	logs *testkit.Logs
	auth *auth.Auth
	api  *API
	mux  *http.ServeMux
	// stopServing ends submit.Jobs.Serving, as the server's closing does.
	stopServing context.CancelFunc
}

// newFixture builds the fixture; each of opts changes the Auth's config
// (its store, clock and address are the fixture's).
func newFixture(t *testing.T, opts ...func(*auth.Config)) *fixture {
	t.Helper()
	clk := testkit.NewClock(apitest.Start)
	st := storekit.Count(storekit.SQLite.New(t).Open(t, jobs.Options{Now: clk.Now}))
	logs := &testkit.Logs{}
	ac := auth.Config{SubmitRate: -1, OrgSubmitRate: -1}
	for _, o := range opts {
		o(&ac)
	}
	ac.Store, ac.Now, ac.Addr, ac.Log = st, clk.Now, "127.0.0.1:8080", testkit.TestLogger(t)
	au := auth.New(ac)
	hub := events.New(events.Config{Store: st, Poll: time.Hour, Recheck: time.Hour, KeepAlive: time.Hour, Buffer: 16,
		Log: testkit.TestLogger(t)})
	if err := hub.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := hub.Stop(context.Background()); err != nil {
			t.Error(err)
		}
	})
	serving, stop := context.WithCancel(context.Background())
	t.Cleanup(stop)
	a := &API{Store: st, Auth: au, Jobs: submit.Jobs{Store: st, Auth: au, Hub: hub, Serving: serving},
		MaxBody: maxBody, MaxWait: time.Minute, Log: logs.DebugLogger(), Now: clk.Now}
	mux := http.NewServeMux()
	for pattern, h := range map[string]httpapi.HandlerFunc{
		"POST /v1/prompts":            a.Submit,
		"GET /v1/prompts":             a.ListPrompts,
		"GET /v1/prompts/{id}":        a.GetPrompt,
		"POST /v1/prompts/{id}/retry": a.RetryPrompt,
		"GET /v1/jobs/{id}":           a.GetJob,
		"POST /v1/jobs/{id}/cancel":   a.CancelJob,
		"GET /v1/recent":              a.Recent,
		"GET /v1/profiles":            a.Profiles,
		"GET /v1/usage":               a.Usage,
	} {
		mux.Handle(pattern, httpapi.REST.Handler(testkit.TestLogger(t), h))
	}
	return &fixture{t: t, st: st, clk: clk, logs: logs, auth: au, api: a, mux: mux, stopServing: stop}
}

// request is method target as id with body (sent as JSON when not
// empty) and headers, name and value pairs.
func (f *fixture) request(id auth.Identity, method, target, body string, headers ...string) *http.Request {
	req := httptest.NewRequestWithContext(f.t.Context(), method, target, strings.NewReader(body))
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	return req.WithContext(auth.With(req.Context(), id))
}

// serve answers req with h, recording the 1xx answers' headers on hints
// (when not nil).
func serve(h http.Handler, req *http.Request, hints chan<- http.Header) apitest.Answer {
	w := &hintRecorder{ResponseRecorder: httptest.NewRecorder(), hints: hints}
	h.ServeHTTP(w, req)
	return apitest.Answer{Code: w.Code, Header: w.Header(), Body: w.Body.Bytes()}
}

// hintRecorder is a recorder that sends the headers of an informational
// answer (103 Early Hints) on hints instead of taking it for the answer,
// as a client does.
type hintRecorder struct {
	*httptest.ResponseRecorder
	hints chan<- http.Header
}

func (w *hintRecorder) WriteHeader(code int) {
	if code >= 100 && code < 200 {
		if w.hints != nil {
			w.hints <- w.Header().Clone()
		}
		return
	}
	w.ResponseRecorder.WriteHeader(code)
}

// call serves method target as id with body and headers (see request).
// Every answer, an error included, must be JSON.
func (f *fixture) call(id auth.Identity, method, target, body string, headers ...string) apitest.Answer {
	f.t.Helper()
	r := serve(f.mux, f.request(id, method, target, body, headers...), nil)
	if ct := r.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		f.t.Errorf("%s %s: Content-Type %q, want JSON", method, target, ct)
	}
	return r
}

// pending is a request being answered in the background (start).
type pending struct {
	hints  chan http.Header
	answer chan apitest.Answer
}

// start serves method target as id in the background, as call does.
func (f *fixture) start(id auth.Identity, method, target, body string, headers ...string) *pending {
	f.t.Helper()
	p := &pending{hints: make(chan http.Header, 1), answer: make(chan apitest.Answer, 1)}
	req := f.request(id, method, target, body, headers...)
	go func() { p.answer <- serve(f.mux, req, p.hints) }()
	return p
}

// hint is the headers of the request's 103 Early Hints; it fails the
// test when the answer comes without one.
func (p *pending) hint(t *testing.T) http.Header {
	t.Helper()
	select {
	case h := <-p.hints:
		return h
	case r := <-p.answer:
		select {
		case h := <-p.hints: // sent before the answer, raced in the select
			p.answer <- r
			return h
		default:
		}
		t.Fatalf("answered %d %s without a 103 first", r.Code, r.Body)
		return nil
	}
}

// wait is the pending request's answer. It does not time out: the
// request ends when the test's context does, at the latest.
func (p *pending) wait() apitest.Answer { return <-p.answer }

// ok calls and fails the test unless the answer is want; it decodes the
// body into v when v is not nil.
func (f *fixture) ok(id auth.Identity, method, target, body string, want int, v any) apitest.Answer {
	f.t.Helper()
	r := f.call(id, method, target, body)
	if r.Code != want {
		f.t.Fatalf("%s %s as %s: %d %s, want %d", method, target, id.User, r.Code, r.Body, want)
	}
	if v != nil {
		r.Decode(f.t, v)
	}
	return r
}

// refused calls and fails the test unless the answer is the problem of
// status and code, its message holding each of words.
func (f *fixture) refused(id auth.Identity, method, target, body string, status int, code string, words ...string) {
	f.t.Helper()
	r := f.call(id, method, target, body)
	apitest.CheckProblem(f.t, method+" "+target, r, status, code, words...)
}

// submit posts body to /v1/prompts as id and returns the 202's ids.
func (f *fixture) submit(id auth.Identity, body string) Submitted {
	f.t.Helper()
	var s Submitted
	f.ok(id, "POST", "/v1/prompts", body, http.StatusAccepted, &s)
	if s.PromptID == "" || s.JobID == "" {
		f.t.Fatalf("submitted %+v: no ids", s)
	}
	return s
}

// enqueue stores a prompt of id's directly, with text.
func (f *fixture) enqueue(id auth.Identity, text string) jobs.Enqueued {
	f.t.Helper()
	e, err := f.st.Enqueue(context.Background(), jobs.EnqueueParams{OrgID: id.Org, CreatedBy: id.User, Text: text})
	if err != nil {
		f.t.Fatalf("enqueue: %v", err)
	}
	return e
}

// succeed claims jobID (the oldest queued job) and answers it with
// output, with attempt events when given.
func (f *fixture) succeed(jobID, output string, attempts ...json.RawMessage) {
	f.t.Helper()
	apitest.Succeed(f.t, f.st, jobID, output, attempts...)
}

// job reads a job from the store, of any org.
func (f *fixture) job(id string) jobs.Job { f.t.Helper(); return apitest.Job(f.t, f.st, id) }

// count is how many jobs the store holds, of every org.
func (f *fixture) count() int {
	f.t.Helper()
	n, err := f.st.CountJobs(context.Background(), jobs.JobFilter{})
	if err != nil {
		f.t.Fatal(err)
	}
	return n
}

// queuedJob waits for the store to hold a queued job of org's and
// returns it: a request in the background (start) has queued it. The
// handler's log wakes the wait; nothing sleeps.
func (f *fixture) queuedJob(org string) jobs.Job {
	f.t.Helper()
	var j jobs.Job
	testkit.WaitFor(f.t, 10*time.Second, "a queued job of "+org, func() (bool, string) {
		page, err := f.st.ListJobs(context.Background(), jobs.ListParams{JobFilter: jobs.JobFilter{OrgID: org, State: jobs.Queued}})
		if err != nil || len(page.Jobs) == 0 {
			return false, "none"
		}
		j = page.Jobs[0]
		return true, ""
	}, f.logs)
	return j
}
