package server

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/promptkit/promptkit"
	"github.com/promptkit/promptkit/internal/testkit"
	"github.com/promptkit/promptkit/internal/testkit/enginekit"
	"github.com/promptkit/promptkit/internal/testkit/storekit"
	"github.com/promptkit/promptkit/jobs"
	"github.com/promptkit/promptkit/jobs/worker"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// env is one server on a fresh database, with a client that checks every
// answer against the OpenAPI document.
type env struct {
	t     *testing.T
	st    jobs.Store
	srv   *Server
	eng   *promptkit.Engine
	clock *testkit.Clock
	logs  *testkit.Logs
	// worker is runWorker's, once it runs: the server's RunNow (the
	// interactive fast path) hands it the jobs requests wait for.
	worker atomic.Pointer[worker.Worker]
}

type option func(*Config)

// setup starts a server on 127.0.0.1:0 over a fresh SQLite database with
// the simulated engine; no worker runs unless the test starts one.
func setup(t *testing.T, opts ...option) *env {
	t.Helper()
	return setupStore(t, storekit.SQLite.New(t).Open(t, jobs.Options{}), opts...)
}

// onStores runs fn on a server over each store (storekit.Each: parallel
// subtests, PostgreSQL skipped without PROMPTKIT_TEST_DATABASE_URL), each
// store opened with storeOpts.
func onStores(t *testing.T, storeOpts jobs.Options, fn func(t *testing.T, e *env), opts ...option) {
	storekit.Each(t, func(t *testing.T, db storekit.DB) {
		fn(t, setupStore(t, db.Open(t, storeOpts), opts...))
	})
}

// setupStore starts a server over st (see setup); the caller closes st.
func setupStore(t *testing.T, st jobs.Store, opts ...option) *env {
	t.Helper()
	eng := enginekit.Simulated(t)
	e := &env{t: t, st: st, eng: eng, clock: testkit.NewClock(time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)), logs: &testkit.Logs{}}
	cfg := Config{
		Store: st, Engine: eng, Addr: "127.0.0.1:0", Now: e.clock.Now,
		Check:  func(ctx context.Context, p jobs.EnqueueParams) error { return worker.Check(ctx, e.eng, p) },
		Logger: e.logs.DebugLogger(),
		RunNow: func(ctx context.Context, p jobs.EnqueueParams) (jobs.Enqueued, <-chan jobs.Job, error) {
			if w := e.worker.Load(); w != nil {
				return w.RunNow(ctx, p)
			}
			return jobs.Enqueued{}, nil, jobs.ErrNoSlot
		},
	}
	for _, o := range opts {
		o(&cfg)
	}
	e.eng = cfg.Engine // an option's engine runs the worker too (runWorker)
	var err error
	e.srv, err = New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.srv.Open(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		// A request made while another was in flight may have left the
		// client a dialled connection it never used: the server counts it
		// as new, not idle, and Shutdown would wait 5 s for it.
		http.DefaultClient.CloseIdleConnections()
		if err := e.srv.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return e
}

// runWorker runs a worker on the env's store until the test ends; mod
// adjusts its config.
func (e *env) runWorker(mod ...func(*worker.Config)) {
	cfg := worker.Config{Store: e.st, Engine: e.eng, Concurrency: 4}
	for _, m := range mod {
		m(&cfg)
	}
	w, err := worker.New(cfg)
	if err != nil {
		e.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { _ = w.Run(ctx) })
	e.worker.Store(w)
	e.t.Cleanup(func() { cancel(); wg.Wait() })
}

// resp is one answer.
type resp struct {
	code   int
	header http.Header
	body   []byte
}

func (r resp) decode(t testing.TB, v any) {
	t.Helper()
	if err := json.Unmarshal(r.body, v); err != nil {
		t.Fatalf("decoding %s: %v", r.body, err)
	}
}

// errorCode is the code of an error answer.
func (r resp) errorCode(t testing.TB) string {
	var e apiError
	r.decode(t, &e)
	return e.Error.Code
}

// call makes a request with a token ("" for none) and optional headers
// (name, value pairs), checks the answer against the OpenAPI document and
// returns it.
func (e *env) call(method, path, token string, body any, headers ...string) resp {
	e.t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	case []byte:
		rd = bytes.NewReader(b)
	default:
		j, err := json.Marshal(b)
		if err != nil {
			e.t.Fatal(err)
		}
		rd = bytes.NewReader(j)
	}
	req, err := http.NewRequest(method, e.srv.URL()+path, rd)
	if err != nil {
		e.t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if rd != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	return e.send(req, headers...)
}

// send sets headers (name, value pairs) on req, sends it, and checks an
// answer of an API route against the OpenAPI document.
func (e *env) send(req *http.Request, headers ...string) resp {
	e.t.Helper()
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	_, pattern := e.srv.mux.Handler(req)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		e.t.Fatal(err)
	}
	// The page and /v1's catch-alls (unknown_test.go) are not operations
	// of the API document.
	if pattern != "" && !slices.Contains(pagePatterns, pattern) && pattern != v1TreePattern && pattern != v1RootPattern {
		checkResponse(e.t, pattern, res.StatusCode, res.Header, b)
	}
	return resp{code: res.StatusCode, header: res.Header, body: b}
}

// token creates a token and returns its secret.
func (e *env) token(org, user string, role jobs.Role) string {
	e.t.Helper()
	secret, hash := jobs.NewTokenSecret()
	if _, err := e.st.CreateToken(context.Background(), jobs.CreateTokenParams{OrgID: org, UserID: user, Role: role, Hash: hash}); err != nil {
		e.t.Fatal(err)
	}
	return secret
}

// submit posts a prompt and returns the 202 answer's ids.
func (e *env) submit(token string, body any) submitted {
	e.t.Helper()
	r := e.call("POST", "/v1/prompts", token, body)
	if r.code != http.StatusAccepted {
		e.t.Fatalf("submit: %d %s", r.code, r.body)
	}
	var s submitted
	r.decode(e.t, &s)
	return s
}

// finish moves a queued job to succeeded through the store, as a worker
// would, without running anything.
func (e *env) finish(jobID, output string) {
	e.t.Helper()
	ctx := context.Background()
	js, err := e.st.Claim(ctx, jobs.ClaimParams{Worker: "test-worker", Limit: 1})
	if err != nil || len(js) != 1 || js[0].ID != jobID {
		e.t.Fatalf("claim %s: %v %v", jobID, js, err)
	}
	if _, err := e.st.Succeed(ctx, jobs.SucceedParams{JobID: jobID, Worker: "test-worker", Answer: jobs.Answer{Output: output,
		Model: "m"}}); err != nil {
		e.t.Fatal(err)
	}
}

// stream is a Server-Sent Events connection.
type stream struct {
	t      *testing.T
	res    *http.Response
	lines  *bufio.Scanner
	cancel context.CancelFunc
}

// sse is one received event.
type sse struct {
	id, event string
	data      stateChanged
}

// openStream connects to /v1/events, with Last-Event-ID when lastID is
// not empty, failing unless the stream opened.
func (e *env) openStream(token, lastID string) *stream {
	e.t.Helper()
	h := http.Header{}
	if token != "" {
		h.Set("Authorization", "Bearer "+token)
	}
	if lastID != "" {
		h.Set("Last-Event-ID", lastID)
	}
	s, r := e.dialEvents(nil, h)
	if s == nil {
		e.t.Fatalf("events: %d", r.code)
	}
	return s
}

// dialEvents opens /v1/events with the query q and the headers h: the
// stream when the answer is 200, else the answer, read whole. Every
// answer is checked against the API document. A deadlock guard ends the
// connection after a minute.
func (e *env) dialEvents(q url.Values, h http.Header) (*stream, resp) {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	u := e.srv.URL() + "/v1/events"
	if len(q) > 0 {
		u += "?" + q.Encode()
	}
	req, _ := http.NewRequestWithContext(ctx, "GET", u, nil)
	maps.Copy(req.Header, h)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		cancel()
		e.t.Fatal(err)
	}
	checkResponse(e.t, "GET /v1/events", res.StatusCode, res.Header, nil)
	if res.StatusCode != http.StatusOK {
		defer cancel()
		defer res.Body.Close()
		var b strings.Builder
		sc := bufio.NewScanner(res.Body)
		for sc.Scan() {
			b.WriteString(sc.Text())
		}
		r := resp{code: res.StatusCode, header: res.Header, body: []byte(b.String())}
		checkResponse(e.t, "GET /v1/events", r.code, r.header, r.body)
		return nil, r
	}
	s := &stream{t: e.t, res: res, lines: bufio.NewScanner(res.Body), cancel: cancel}
	// The first line is a comment sent at once: the subscription is live
	// when it arrives.
	if !s.lines.Scan() || !strings.HasPrefix(s.lines.Text(), ":") {
		e.t.Fatalf("events: no opening comment")
	}
	e.t.Cleanup(s.close)
	return s, resp{code: res.StatusCode, header: res.Header}
}

func (s *stream) close() {
	s.cancel()
	s.res.Body.Close()
}

// next returns the next event, skipping comments; ok is false when the
// stream ended.
func (s *stream) next() (ev sse, ok bool) {
	s.t.Helper()
	for s.lines.Scan() {
		line := s.lines.Text()
		switch {
		case line == "":
			if ev.event != "" {
				return ev, true
			}
		case strings.HasPrefix(line, ":"):
		case strings.HasPrefix(line, "id: "):
			ev.id = strings.TrimPrefix(line, "id: ")
		case strings.HasPrefix(line, "event: "):
			ev.event = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			data := strings.TrimPrefix(line, "data: ")
			checkEventData(s.t, []byte(data))
			if err := json.Unmarshal([]byte(data), &ev.data); err != nil {
				s.t.Fatalf("event data %q: %v", data, err)
			}
		}
	}
	return ev, false
}

// mustNext is next, failing when the stream ended.
func (s *stream) mustNext() sse {
	s.t.Helper()
	ev, ok := s.next()
	if !ok {
		s.t.Fatalf("the event stream ended: %v", s.lines.Err())
	}
	return ev
}
