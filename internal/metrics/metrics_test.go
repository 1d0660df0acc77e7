package metrics

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"

	"github.com/promptkit/promptkit/internal/testkit"
	"github.com/promptkit/promptkit/jobs"
	"github.com/promptkit/promptkit/jobs/worker"
	"github.com/promptkit/promptkit/pktype"
)

// fakeStore implements only Metrics and Check (healthy unless check is
// set); any other call panics on the nil embedded interface, which would
// show the package calling more than it should.
type fakeStore struct {
	jobs.Store
	metrics func(ctx context.Context, p jobs.MetricsParams) (jobs.Metrics, error)
	check   func(ctx context.Context) error
	// usage answers Usage; nil: an empty ledger.
	usage func(ctx context.Context, p jobs.UsageParams) ([]jobs.UsageBucket, error)

	mu     sync.Mutex
	params []jobs.MetricsParams
}

func (f *fakeStore) Metrics(ctx context.Context, p jobs.MetricsParams) (jobs.Metrics, error) {
	f.mu.Lock()
	f.params = append(f.params, p)
	f.mu.Unlock()
	return f.metrics(ctx, p)
}

func (f *fakeStore) Usage(ctx context.Context, p jobs.UsageParams) ([]jobs.UsageBucket, error) {
	if f.usage == nil {
		return nil, nil
	}
	return f.usage(ctx, p)
}

func (f *fakeStore) Check(ctx context.Context) error {
	if f.check == nil {
		return nil
	}
	return f.check(ctx)
}

// countsStore answers Metrics with the given counts (the other states
// zero, as real stores do).
func countsStore(counts map[jobs.State]int) *fakeStore {
	return &fakeStore{metrics: func(context.Context, jobs.MetricsParams) (jobs.Metrics, error) {
		m := jobs.NewMetrics()
		for s, n := range counts {
			m.Counts[s] = n
		}
		return m, nil
	}}
}

var t0 = time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)

func newTest(t *testing.T, st jobs.Store, opts Options) *Metrics {
	t.Helper()
	if opts.Now == nil {
		opts.Now = func() time.Time { return t0 }
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	return New(st, opts)
}

// scrape serves GET /metrics and returns the body, failing unless 200.
func scrape(t *testing.T, m *Metrics) string {
	t.Helper()
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	if rec.Code != http.StatusOK {
		t.Fatalf("GET /metrics = %d: %s", rec.Code, rec.Body)
	}
	return rec.Body.String()
}

// family returns the gathered family called name, or nil.
func family(t *testing.T, m *Metrics, name string) *dto.MetricFamily {
	t.Helper()
	fams, err := m.reg.Gather()
	if err != nil {
		t.Fatalf("Gather: %v", err)
	}
	for _, f := range fams {
		if f.GetName() == name {
			return f
		}
	}
	return nil
}

// series returns the metric of family name whose labels are exactly
// labels (name=value pairs), or nil.
func series(t *testing.T, m *Metrics, name string, labels ...string) *dto.Metric {
	t.Helper()
	f := family(t, m, name)
	if f == nil {
		return nil
	}
	want := map[string]string{}
	for i := 0; i+1 < len(labels); i += 2 {
		if labels[i+1] != "" {
			want[labels[i]] = labels[i+1]
		}
	}
next:
	for _, s := range f.GetMetric() {
		got := map[string]string{}
		for _, lp := range s.GetLabel() {
			if lp.GetValue() != "" { // an empty value is an absent label
				got[lp.GetName()] = lp.GetValue()
			}
		}
		if len(got) != len(want) {
			continue
		}
		for k, v := range want {
			if got[k] != v {
				continue next
			}
		}
		return s
	}
	return nil
}

// hist returns the sample count and sum of a histogram series (0, 0 when
// absent).
func hist(t *testing.T, m *Metrics, name string, labels ...string) (uint64, float64) {
	t.Helper()
	s := series(t, m, name, labels...)
	if s == nil {
		return 0, 0
	}
	return s.GetHistogram().GetSampleCount(), s.GetHistogram().GetSampleSum()
}

// counter returns a counter or gauge series' value; -1 when absent.
func counter(t *testing.T, m *Metrics, name string, labels ...string) float64 {
	t.Helper()
	s := series(t, m, name, labels...)
	switch {
	case s == nil:
		return -1
	case s.Counter != nil:
		return s.GetCounter().GetValue()
	default:
		return s.GetGauge().GetValue()
	}
}

func TestJobsByState(t *testing.T) {
	t.Parallel()
	st := countsStore(map[jobs.State]int{jobs.Queued: 7, jobs.Running: 2, jobs.Succeeded: 40})
	m := newTest(t, st, Options{})
	want := `
# HELP promptkit_jobs Jobs in each state, across the deployment (read from the store at scrape time).
# TYPE promptkit_jobs gauge
promptkit_jobs{state="cancelled"} 0
promptkit_jobs{state="failed"} 0
promptkit_jobs{state="queued"} 7
promptkit_jobs{state="running"} 2
promptkit_jobs{state="succeeded"} 40
promptkit_jobs{state="superseded"} 0
# HELP promptkit_store_up 1 if the store passed its health check in this scrape's time (it answers, its schema is current and it accepts writes: what /readyz asks), else 0. promptkit_jobs is absent when the job count query failed.
# TYPE promptkit_store_up gauge
promptkit_store_up 1
`
	if err := testutil.GatherAndCompare(m.reg, strings.NewReader(want), "promptkit_jobs", "promptkit_store_up"); err != nil {
		t.Fatal(err)
	}
	// Since is the injected now, so the store's latency window is empty.
	st.mu.Lock()
	defer st.mu.Unlock()
	if len(st.params) == 0 || !st.params[0].Since.Equal(t0) || st.params[0].OrgID != "" {
		t.Fatalf("Metrics called with %+v, want Since %v and every org", st.params, t0)
	}
}

// TestJobsCollectorError: a failing or slow count query leaves the job
// counts out (not zero, not stale), and the scrape still succeeds with
// everything else; promptkit_store_up follows the store's Check, which
// a hung store fails too.
func TestJobsCollectorError(t *testing.T) {
	t.Parallel()
	t.Run("error", func(t *testing.T) {
		t.Parallel()
		fail := false
		var mu sync.Mutex
		st := &fakeStore{metrics: func(context.Context, jobs.MetricsParams) (jobs.Metrics, error) {
			mu.Lock()
			defer mu.Unlock()
			if fail {
				return jobs.Metrics{}, errors.New("database is locked")
			}
			m := jobs.NewMetrics()
			m.Counts[jobs.Queued] = 3
			return m, nil
		}}
		m := newTest(t, st, Options{})
		if got := counter(t, m, "promptkit_jobs", "state", "queued"); got != 3 {
			t.Fatalf("queued = %v before the failure, want 3", got)
		}
		mu.Lock()
		fail = true
		mu.Unlock()
		m.SSEClients(1)
		body := scrape(t, m)
		if strings.Contains(body, "promptkit_jobs{") {
			t.Errorf("job counts reported although the store failed:\n%s", body)
		}
		// The store's Check passes: the count query failing alone does
		// not make it down.
		for _, want := range []string{"promptkit_store_up 1", "promptkit_sse_clients 1", "go_goroutines"} {
			if !strings.Contains(body, want) {
				t.Errorf("scrape lacks %q:\n%s", want, body)
			}
		}
	})
	t.Run("timeout", func(t *testing.T) {
		t.Parallel()
		st := &fakeStore{metrics: func(ctx context.Context, _ jobs.MetricsParams) (jobs.Metrics, error) {
			<-ctx.Done() // a store that hangs until the deadline
			return jobs.Metrics{}, ctx.Err()
		}, check: func(ctx context.Context) error {
			<-ctx.Done()
			return ctx.Err()
		}}
		m := newTest(t, st, Options{ScrapeTimeout: 20 * time.Millisecond})
		start := time.Now()
		body := scrape(t, m)
		if d := time.Since(start); d > 5*time.Second {
			t.Errorf("scrape took %v with a 20ms scrape timeout", d)
		}
		if strings.Contains(body, "promptkit_jobs{") || !strings.Contains(body, "promptkit_store_up 0") {
			t.Errorf("a hung store should give promptkit_store_up 0 and no counts:\n%s", body)
		}
	})
}

// TestStoreUpIsTheWriteAwareCheck: a store that answers reads while its
// writes fail is down, as /readyz says, though the job counts are still
// reported; and store_up is back at 1 once the Check passes again.
func TestStoreUpIsTheWriteAwareCheck(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var checkErr error = fmt.Errorf("store: the latest write failed: %w", errors.New("disk full"))
	st := countsStore(map[jobs.State]int{jobs.Queued: 5})
	st.check = func(ctx context.Context) error {
		if _, ok := ctx.Deadline(); !ok {
			return errors.New("Check called without the scrape's deadline")
		}
		mu.Lock()
		defer mu.Unlock()
		return checkErr
	}
	var logs testkit.Logs
	m := newTest(t, st, Options{Logger: logs.Logger()})
	if got := counter(t, m, "promptkit_store_up"); got != 0 {
		t.Errorf("promptkit_store_up = %v while Check fails, want 0", got)
	}
	if got := counter(t, m, "promptkit_jobs", "state", "queued"); got != 5 {
		t.Errorf("queued = %v, want 5: the counts still answer", got)
	}
	mu.Lock()
	checkErr = nil
	mu.Unlock()
	if got := counter(t, m, "promptkit_store_up"); got != 1 {
		t.Errorf("promptkit_store_up = %v once Check passes, want 1", got)
	}
	// Two failing scrapes, then a good one: one warning for the outage,
	// one line for the recovery.
	if n := strings.Count(logs.String(), "level=WARN"); n != 1 {
		t.Errorf("%d warnings over two failing scrapes, want 1:\n%s", n, logs.String())
	}
	if !strings.Contains(logs.String(), "store check recovered") {
		t.Errorf("the recovery is not logged:\n%s", logs.String())
	}
}

func TestJobEvents(t *testing.T) {
	t.Parallel()
	m := newTest(t, countsStore(nil), Options{})
	j := jobs.Job{ID: "j1", State: jobs.Running, Attempt: 1, MaxAttempts: 3}
	m.ObserveJob(worker.JobEvent{Job: j, Claimed: true, Waited: 2 * time.Second})
	m.ObserveJob(worker.JobEvent{Job: j, Outcome: worker.OutcomeRetried, Ran: 500 * time.Millisecond})
	m.ObserveJob(worker.JobEvent{Job: j, Claimed: true, Waited: 8 * time.Second})
	m.ObserveJob(worker.JobEvent{Job: j, Outcome: worker.OutcomeSucceeded, Ran: 1500 * time.Millisecond})
	m.ObserveJob(worker.JobEvent{Job: j, Claimed: true})
	m.ObserveJob(worker.JobEvent{Job: j, Outcome: worker.OutcomeDiscarded, Ran: time.Second})

	if got := testutil.ToFloat64(m.attempts); got != 3 {
		t.Errorf("attempts = %v, want 3", got)
	}
	if got := testutil.ToFloat64(m.retries); got != 1 {
		t.Errorf("retries = %v, want 1", got)
	}
	if n, sum := hist(t, m, "promptkit_job_queue_wait_seconds"); n != 3 || sum != 10 {
		t.Errorf("queue wait: %d samples summing to %v, want 3 and 10", n, sum)
	}
	for _, c := range []struct {
		outcome string
		n       float64
		ran     float64
	}{
		{worker.OutcomeSucceeded, 1, 1.5}, {worker.OutcomeRetried, 1, 0.5}, {worker.OutcomeDiscarded, 1, 1},
		{worker.OutcomeFailed, 0, 0}, {worker.OutcomeHandedBack, 0, 0}, {worker.OutcomeWriteFailed, 0, 0},
	} {
		if got := counter(t, m, "promptkit_jobs_settled_total", "outcome", c.outcome); got != c.n {
			t.Errorf("settled{%s} = %v, want %v", c.outcome, got, c.n)
		}
		if n, sum := hist(t, m, "promptkit_job_run_duration_seconds", "outcome", c.outcome); float64(n) != c.n || sum != c.ran {
			t.Errorf("run duration{%s}: %d samples summing to %v, want %v and %v", c.outcome, n, sum, c.n, c.ran)
		}
	}
}

// attempt is a dispatched attempt event.
func attempt(model string, status int, failure pktype.ExecutionFailureKind, gen time.Duration, usage pktype.ObservedTokenUsage) pktype.ExecutionEvent {
	outcome := pktype.ExecutionOutcomeSuccess
	if failure != pktype.ExecutionFailureNone {
		outcome = pktype.ExecutionOutcomeError
	}
	return pktype.ExecutionEvent{Kind: pktype.ExecutionAttempt, RunID: "r1", Model: model, Generation: 1, Attempt: 1,
		Dispatched: true, GenerationDuration: gen, Duration: gen, StatusCode: status, Failure: failure, Outcome: outcome, Usage: usage}
}

func known(n int) pktype.ObservedTokenCount {
	return pktype.ObservedTokenCount{Value: n, Known: true, Complete: true}
}

func TestProviderCalls(t *testing.T) {
	t.Parallel()
	m := newTest(t, countsStore(nil), Options{Models: []string{"gpt-x"}})
	obs := m.Observer()
	// Two answered calls; the second reports no completion count.
	obs(attempt("gpt-x", 200, "", 2*time.Second, pktype.ObservedTokenUsage{PromptTokens: known(100), CompletionTokens: known(20), TotalTokens: known(120)}))
	obs(attempt("gpt-x", 200, "", time.Second, pktype.ObservedTokenUsage{PromptTokens: known(50)}))
	// A reported zero is a count; an answer without usage records none.
	obs(attempt("gpt-x", 200, "", time.Second, pktype.ObservedTokenUsage{CompletionTokens: known(0)}))
	obs(attempt("gpt-x", 503, pktype.ExecutionFailureProviderStatus, 100*time.Millisecond, pktype.ObservedTokenUsage{}))
	obs(attempt("gpt-x", 429, pktype.ExecutionFailureProviderStatus, 100*time.Millisecond, pktype.ObservedTokenUsage{}))
	obs(attempt("gpt-x", 400, pktype.ExecutionFailureProviderStatus, 100*time.Millisecond, pktype.ObservedTokenUsage{}))
	obs(attempt("gpt-x", 0, pktype.ExecutionFailureTransport, 100*time.Millisecond, pktype.ObservedTokenUsage{}))
	// A model nobody configured is not a label value.
	obs(attempt("user-typed-model", 200, "", time.Second, pktype.ObservedTokenUsage{PromptTokens: known(7)}))
	// Not provider calls: an undispatched attempt, and the other kinds
	// (the finished event repeats the run's usage totals).
	undispatched := attempt("gpt-x", 0, pktype.ExecutionFailureCapacity, 0, pktype.ObservedTokenUsage{})
	undispatched.Dispatched = false
	obs(undispatched)
	obs(pktype.ExecutionEvent{Kind: pktype.ExecutionStarted, Model: "gpt-x"})
	obs(pktype.ExecutionEvent{Kind: pktype.ExecutionRetryDelay, Model: "gpt-x", RetryDelay: time.Second})
	obs(pktype.ExecutionEvent{Kind: pktype.ExecutionFinished, Model: "gpt-x", StatusCode: 200, Outcome: pktype.ExecutionOutcomeSuccess,
		Usage: pktype.ObservedTokenUsage{PromptTokens: known(150), CompletionTokens: known(20)}})

	for class, want := range map[string]float64{"2xx": 4, "5xx": 1, "429": 1, "4xx": 1, "transport": 1, "none": 0, "other": 0} {
		if got := counter(t, m, "promptkit_provider_responses_total", "status_class", class); got != want {
			t.Errorf("provider responses{%s} = %v, want %v", class, got, want)
		}
	}
	for _, c := range []struct {
		model, errType string
		n              uint64
		sum            float64
	}{
		{"gpt-x", "", 3, 4}, {"gpt-x", "503", 1, 0.1}, {"gpt-x", "429", 1, 0.1}, {"gpt-x", "400", 1, 0.1},
		{"gpt-x", "transport", 1, 0.1}, {OtherModel, "", 1, 1},
	} {
		n, sum := hist(t, m, "gen_ai_client_operation_duration_seconds", "gen_ai_operation_name", "chat", "gen_ai_request_model", c.model, "error_type", c.errType)
		if n != c.n || sum != c.sum {
			t.Errorf("operation duration{%s,%q}: %d samples summing to %v, want %d and %v", c.model, c.errType, n, sum, c.n, c.sum)
		}
	}
	if f := family(t, m, "gen_ai_client_operation_duration_seconds"); len(f.GetMetric()) != 6 {
		t.Errorf("operation duration has %d series, want 6", len(f.GetMetric()))
	}
	for _, c := range []struct {
		model, typ string
		n          uint64
		sum        float64
	}{
		{"gpt-x", "input", 2, 150}, {"gpt-x", "output", 2, 20}, {OtherModel, "input", 1, 7}, {OtherModel, "output", 0, 0},
	} {
		n, sum := hist(t, m, "gen_ai_client_token_usage", "gen_ai_operation_name", "chat", "gen_ai_request_model", c.model, "gen_ai_token_type", c.typ)
		if n != c.n || sum != c.sum {
			t.Errorf("token usage{%s,%s}: %d samples summing to %v, want %d and %v", c.model, c.typ, n, sum, c.n, c.sum)
		}
	}
}

func TestHTTPAndSSE(t *testing.T) {
	t.Parallel()
	m := newTest(t, countsStore(nil), Options{})
	m.ObserveHTTP("POST /v1/prompts", 202, 30*time.Millisecond)
	m.ObserveHTTP("POST /v1/prompts", 202, 10*time.Millisecond)
	m.ObserveHTTP("POST /v1/prompts", 400, time.Millisecond)
	m.ObserveHTTP("GET /v1/jobs/{id}", 200, time.Millisecond)
	m.ObserveHTTP("", 404, time.Millisecond)
	m.ObserveHTTP("GET /v1/jobs/{id}", 0, time.Millisecond)
	for _, c := range []struct {
		route, code string
		want        float64
	}{
		{"POST /v1/prompts", "202", 2}, {"POST /v1/prompts", "400", 1}, {"GET /v1/jobs/{id}", "200", 1},
		{"unmatched", "404", 1}, {"GET /v1/jobs/{id}", "other", 1},
	} {
		if got := counter(t, m, "promptkit_http_requests_total", "route", c.route, "code", c.code); got != c.want {
			t.Errorf("http requests{%s,%s} = %v, want %v", c.route, c.code, got, c.want)
		}
	}
	if n, sum := hist(t, m, "promptkit_http_request_duration_seconds", "route", "POST /v1/prompts"); n != 3 || sum < 0.0409 || sum > 0.0411 {
		t.Errorf("http duration{POST /v1/prompts}: %d samples summing to %v, want 3 and 0.041", n, sum)
	}

	m.SSEClients(1)
	m.SSEClients(1)
	m.SSEClients(-1)
	if got := testutil.ToFloat64(m.sseClients); got != 1 {
		t.Errorf("sse clients = %v, want 1", got)
	}
}

// TestNilMetrics: a server with metrics off may call the observers on a
// nil *Metrics.
func TestNilMetrics(t *testing.T) {
	t.Parallel()
	var m *Metrics
	m.ObserveJob(worker.JobEvent{Claimed: true})
	m.ObserveHTTP("GET /", 200, time.Millisecond)
	m.SSEClients(1)
	if m.Observer() != nil {
		t.Fatal("Observer of a nil *Metrics is not nil")
	}
}

// fillStrings sets every string field reachable in v (a pointer to a
// struct), nested structs included, to marker plus the field's name, and
// every []byte or json.RawMessage to a JSON string holding the marker.
func fillStrings(v reflect.Value, marker string) {
	for i := range v.NumField() {
		f := v.Field(i)
		name := v.Type().Field(i).Name
		switch {
		case !f.CanSet():
		case f.Kind() == reflect.String:
			f.SetString(marker + "-" + name)
		case f.Kind() == reflect.Slice && f.Type().Elem().Kind() == reflect.Uint8:
			f.SetBytes([]byte(`{"model":"` + marker + `"}`))
		case f.Kind() == reflect.Struct:
			fillStrings(f, marker)
		}
	}
}

// TestNoFreeTextInLabels feeds every event this package takes with a
// marker in each free-text field (IDs, model names, error messages, kinds,
// outcomes) and a store whose answers and error carry it too, and checks
// the marker never reaches the /metrics output.
func TestNoFreeTextInLabels(t *testing.T) {
	t.Parallel()
	const marker = "MARKER-5d1e"
	var mu sync.Mutex
	fail := false
	st := &fakeStore{metrics: func(context.Context, jobs.MetricsParams) (jobs.Metrics, error) {
		mu.Lock()
		defer mu.Unlock()
		if fail {
			return jobs.Metrics{}, errors.New("store error " + marker)
		}
		m := jobs.NewMetrics()
		m.Counts[jobs.State(marker)] = 5
		m.ErrorRate[jobs.ErrorKind(marker)] = 0.5
		m.Orgs = []jobs.OrgLatency{{OrgID: marker, Finished: 1}}
		return m, nil
	}}
	// A logger that would show the marker is fine: logs are not metrics.
	m := newTest(t, st, Options{Models: []string{"configured-model"}})

	var ev pktype.ExecutionEvent
	fillStrings(reflect.ValueOf(&ev).Elem(), marker)
	ev.Dispatched, ev.StatusCode, ev.Usage.PromptTokens = true, 200, known(3)
	obs := m.Observer()
	obs(ev) // Kind carries the marker too: not an attempt
	for _, kind := range []pktype.ExecutionEventKind{pktype.ExecutionStarted, pktype.ExecutionAttempt, pktype.ExecutionRetryDelay, pktype.ExecutionFinished} {
		e := ev
		e.Kind = kind
		obs(e)
		e.Failure, e.StatusCode = pktype.ExecutionFailureProviderStatus, 503
		obs(e)
		e.StatusCode = 0
		obs(e)
	}

	var je worker.JobEvent
	fillStrings(reflect.ValueOf(&je).Elem(), marker)
	je.Ran, je.Waited = time.Second, time.Second
	m.ObserveJob(je)
	je.Claimed = true
	m.ObserveJob(je)

	m.ObserveHTTP("GET /v1/jobs/{id}", 200, time.Millisecond)
	m.SSEClients(1)

	body := scrape(t, m)
	mu.Lock()
	fail = true
	mu.Unlock()
	body += scrape(t, m)
	if strings.Contains(body, marker) {
		for line := range strings.SplitSeq(body, "\n") {
			if strings.Contains(line, marker) {
				t.Errorf("marker in /metrics: %s", line)
			}
		}
	}
	// The events were counted, under fixed labels.
	if got := counter(t, m, "promptkit_jobs_settled_total", "outcome", "other"); got != 1 {
		t.Errorf("settled{other} = %v, want 1", got)
	}
	if n, _ := hist(t, m, "gen_ai_client_token_usage", "gen_ai_operation_name", "chat", "gen_ai_request_model", OtherModel, "gen_ai_token_type", "input"); n != 3 {
		t.Errorf("token usage{_OTHER,input} has %d samples, want 3 (one per attempt event)", n)
	}
	if n, _ := hist(t, m, "gen_ai_client_operation_duration_seconds", "gen_ai_operation_name", "chat", "gen_ai_request_model", OtherModel, "error_type", "other"); n != 1 {
		t.Errorf("operation duration{_OTHER,other} has %d samples, want 1", n)
	}
}

// TestLint: the metric names and help follow Prometheus conventions.
func TestLint(t *testing.T) {
	t.Parallel()
	m := newTest(t, countsStore(nil), Options{})
	m.ObserveHTTP("GET /", 200, time.Millisecond)
	m.Observer()(attempt("", 200, "", time.Second, pktype.ObservedTokenUsage{PromptTokens: known(1)}))
	m.ObserveJob(worker.JobEvent{Outcome: worker.OutcomeSucceeded})
	problems, err := testutil.GatherAndLint(m.reg)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		if strings.HasPrefix(p.Metric, "go_") || strings.HasPrefix(p.Metric, "process_") {
			continue
		}
		t.Errorf("lint: %s: %s", p.Metric, p.Text)
	}
}
