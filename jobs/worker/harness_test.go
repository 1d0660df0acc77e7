package worker_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
	_ "modernc.org/sqlite" // the "sqlite" driver, to count rows directly

	"github.com/promptkit/promptkit"
	"github.com/promptkit/promptkit/internal/testkit"
	"github.com/promptkit/promptkit/internal/testkit/enginekit"
	"github.com/promptkit/promptkit/internal/testkit/storekit"
	"github.com/promptkit/promptkit/jobs"
	"github.com/promptkit/promptkit/jobs/worker"
	"github.com/promptkit/promptkit/providertest"
)

// TestMain fails the run if a goroutine (a worker's loop, a store's
// watcher) outlives the tests.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// t0 is where every test's clock starts: far from the wall clock, so a
// mix-up between the injected clock and time.Now shows.
var t0 = time.Date(2030, 1, 2, 3, 4, 0, 0, time.UTC)

// deadline only fires when a test hangs.
const deadline = 60 * time.Second

// eachStore runs fn on a fixture per store kind (storekit.Each: parallel
// subtests, PostgreSQL skipped without PROMPTKIT_TEST_DATABASE_URL).
func eachStore(t *testing.T, fn func(t *testing.T, f *fixture)) {
	storekit.Each(t, func(t *testing.T, db storekit.DB) { fn(t, newFixture(t, db)) })
}

// fixture is one test's world: a store on an injected clock, a fake
// provider and engines pointed at it.
type fixture struct {
	t     *testing.T
	ctx   context.Context
	db    storekit.DB
	store jobs.Store
	clock *testkit.Clock
	srv   *providertest.Server
	log   *slog.Logger
}

func newFixture(t *testing.T, db storekit.DB) *fixture {
	clock := testkit.NewClock(t0)
	store := db.Open(t, jobs.Options{Now: clock.Now})
	srv := providertest.NewServer()
	t.Cleanup(srv.Close)
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	t.Cleanup(cancel)
	return &fixture{t: t, ctx: ctx, db: db, store: store, clock: clock, srv: srv, log: testkit.TestLogger(t)}
}

// engine returns an engine whose only backend is the fake provider, with
// retries transient retries inside one run.
func (f *fixture) engine(retries int) *promptkit.Engine {
	f.t.Helper()
	return newEngine(f.t, f.srv.URL, retries)
}

func newEngine(t testing.TB, providerURL string, retries int) *promptkit.Engine {
	t.Helper()
	return enginekit.Provider(t, providerURL, enginekit.Retries(retries))
}

// halfJitter makes backoff deterministic: the middle of each range.
func halfJitter(n time.Duration) time.Duration { return n / 2 }

// worker returns a worker named name on the fixture's store and clock,
// with no retries inside the engine, one job at a time, and a heartbeat
// that never ticks during a test. mod adjusts the config.
func (f *fixture) worker(name string, mod ...func(*worker.Config)) *worker.Worker {
	f.t.Helper()
	cfg := worker.Config{
		Store:             f.store,
		Engine:            f.engine(0),
		Name:              name,
		Concurrency:       1,
		PollInterval:      50 * time.Millisecond, // fallback only: notifications wake it
		HeartbeatInterval: time.Hour,
		ShutdownGrace:     30 * time.Second,
		Logger:            f.log,
		Now:               f.clock.Now,
		Jitter:            halfJitter,
	}
	for _, m := range mod {
		m(&cfg)
	}
	w, err := worker.New(cfg)
	if err != nil {
		f.t.Fatalf("worker.New: %v", err)
	}
	return w
}

// reclaimer returns a reclaimer on the fixture's store with the default
// thresholds.
func (f *fixture) reclaimer() *worker.Reclaimer {
	f.t.Helper()
	r, err := worker.NewReclaimer(worker.ReclaimerConfig{Store: f.store, Logger: f.log})
	if err != nil {
		f.t.Fatalf("worker.NewReclaimer: %v", err)
	}
	return r
}

// start starts w; the returned stop stops it gracefully (Stop) and
// checks that it stopped (also done at cleanup).
func (f *fixture) start(w *worker.Worker) (stop func()) {
	f.t.Helper()
	if err := w.Start(f.ctx); err != nil {
		f.t.Fatalf("Start: %v", err)
	}
	var once sync.Once
	stop = func() {
		once.Do(func() {
			ctx, cancel := context.WithTimeout(context.Background(), deadline)
			defer cancel()
			if err := w.Stop(ctx); err != nil {
				f.t.Errorf("Stop: %v", err)
			}
		})
	}
	f.t.Cleanup(stop)
	return stop
}

// runOnce runs one RunOnce and checks it claimed want jobs.
func (f *fixture) runOnce(w *worker.Worker, want int) {
	f.t.Helper()
	n, err := w.RunOnce(f.ctx)
	if err != nil {
		f.t.Fatalf("RunOnce: %v", err)
	}
	if n != want {
		f.t.Fatalf("RunOnce claimed %d jobs, want %d", n, want)
	}
}

// enqueue enqueues p in org "org" by "tester".
func (f *fixture) enqueue(p jobs.EnqueueParams) jobs.Enqueued {
	f.t.Helper()
	p.OrgID, p.CreatedBy = "org", "tester"
	e, err := f.store.Enqueue(f.ctx, p)
	if err != nil {
		f.t.Fatalf("Enqueue: %v", err)
	}
	return e
}

func (f *fixture) job(id string) jobs.Job {
	f.t.Helper()
	// Its own deadline, so a hang reported by waitJob shows the job.
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	j, err := f.store.GetJob(ctx, "", id)
	if err != nil {
		f.t.Fatalf("GetJob %s: %v", id, err)
	}
	return j
}

// waitJob waits until the job satisfies ok, looking again whenever the
// store notifies, failing only if the test hangs.
func (f *fixture) waitJob(id, what string, ok func(jobs.Job) bool) jobs.Job {
	f.t.Helper()
	var j jobs.Job
	if !testkit.Until(f.ctx, time.Hour, func() bool { j = f.job(id); return ok(j) }, f.store.Notifier()) {
		f.t.Fatalf("job %s never became %s; last: state=%s attempt=%d claim=%q kind=%q msg=%q", id, what, j.State, j.Attempt, j.WorkerClaim, j.ErrorKind, j.ErrorMessage)
	}
	return j
}

func (f *fixture) waitState(id string, s jobs.State) jobs.Job {
	f.t.Helper()
	return f.waitJob(id, string(s), func(j jobs.Job) bool { return j.State == s })
}

// waitFor waits until cond holds, looking again whenever the store
// notifies (and on the kit's fallback tick), failing only if the test
// hangs.
func (f *fixture) waitFor(what string, cond func() bool) {
	f.t.Helper()
	if !testkit.Until(f.ctx, time.Hour, cond, f.store.Notifier()) {
		f.t.Fatalf("timed out waiting for %s", what)
	}
}

// arrivals waits until the provider has seen n requests.
func (f *fixture) arrivals(n int) {
	f.t.Helper()
	if err := f.srv.WaitArrivals(f.ctx, n); err != nil {
		f.t.Fatalf("waiting for %d provider requests (saw %d): %v", n, f.srv.Count(), err)
	}
}

// responses counts the job's response rows in the database itself.
func (f *fixture) responses(jobID string) int {
	f.t.Helper()
	n, err := f.db.Responses(f.ctx)
	if err != nil {
		f.t.Fatalf("counting responses: %v", err)
	}
	return n[jobID]
}

// events summarises a job's events: "→queued", "queued→running",
// "attempt:503", … in sequence order.
func (f *fixture) events(jobID string) ([]string, []attempt) {
	f.t.Helper()
	evs, err := f.store.JobEvents(f.ctx, "", jobID)
	if err != nil {
		f.t.Fatalf("JobEvents: %v", err)
	}
	var out []string
	var atts []attempt
	for _, e := range evs {
		switch e.Type {
		case jobs.EventTransition:
			out = append(out, string(e.From)+"→"+string(e.To))
		case jobs.EventAttempt:
			var a attempt
			if err := json.Unmarshal(e.Data, &a); err != nil {
				f.t.Fatalf("attempt event data %s: %v", e.Data, err)
			}
			atts = append(atts, a)
			out = append(out, fmt.Sprintf("attempt:%d", a.StatusCode))
		default:
			out = append(out, "?"+string(e.Type))
		}
	}
	return out, atts
}

// attempt is the JSON the worker writes for an attempt event.
type attempt struct {
	JobAttempt int    `json:"job_attempt"`
	Generation uint64 `json:"generation"`
	Attempt    uint64 `json:"attempt"`
	Backend    string `json:"backend"`
	Dispatched bool   `json:"dispatched"`
	StatusCode int    `json:"status_code"`
	Outcome    string `json:"outcome"`
	Failure    string `json:"failure"`
	Usage      map[string]struct {
		Value int `json:"value"`
	} `json:"usage"`
}

// userTexts returns the last user message of each provider request, in
// arrival order.
func userTexts(srv *providertest.Server) []string {
	var out []string
	for _, r := range srv.Requests() {
		last := ""
		for _, m := range r.Messages {
			if m.Role == "user" {
				last = m.Content
			}
		}
		out = append(out, last)
	}
	return out
}

func eq[T comparable](a, b []T) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func ptr[T any](v T) *T { return &v }
