package promptkit_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"testing/fstest"
	"time"

	"github.com/promptkit/promptkit"
	"github.com/promptkit/promptkit/internal/testkit"
	"github.com/promptkit/promptkit/jobs"
	"github.com/promptkit/promptkit/jobs/sqlitestore"
	"github.com/promptkit/promptkit/jobs/worker"
	"github.com/promptkit/promptkit/providertest"
)

// broken is a backend that answers every request with one status.
type broken struct {
	url   string
	calls atomic.Int64
}

func newBroken(t *testing.T, status int) *broken {
	t.Helper()
	b := &broken{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b.calls.Add(1)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_, _ = w.Write([]byte(`{"error":{"message":"down","type":"server_error"}}`))
	}))
	t.Cleanup(srv.Close)
	b.url = srv.URL
	return b
}

var routingStart = time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)

// groupEngine builds an engine whose profile "p" (model "m") is the model
// group over backends, on clock.
func groupEngine(t *testing.T, clock *testkit.Clock, backends []promptkit.Backend, group []promptkit.ProfileBackend) *promptkit.Engine {
	t.Helper()
	eng, err := promptkit.NewWithSeams(promptkit.Config{
		Backends: backends,
		Profiles: []promptkit.Profile{{ID: "p", Model: "m", Backends: group}},
	}, clock.Now, clock.Jitter, clock.Wait)
	if err != nil {
		t.Fatal(err)
	}
	return eng
}

// twoBackendGroup is an engine on a fake clock (returned) whose profile p (model m)
// is a group of the fake providers a and b, with these entries.
func twoBackendGroup(t *testing.T, group ...promptkit.ProfileBackend) (clock *testkit.Clock, a, b *providertest.Server, eng *promptkit.Engine) {
	t.Helper()
	clock = testkit.NewClock(routingStart)
	a, b = providertest.NewServer(), providertest.NewServer()
	t.Cleanup(a.Close)
	t.Cleanup(b.Close)
	eng = groupEngine(t, clock, []promptkit.Backend{{ID: "a", BaseURL: a.URL}, {ID: "b", BaseURL: b.URL}}, group)
	return clock, a, b, eng
}

// attemptBackends collects the attempt events' backends and statuses.
type attemptBackends struct {
	mu       sync.Mutex
	got      []string
	finished string // the finished event's backend
}

func (a *attemptBackends) observe(ev promptkit.ExecutionEvent) {
	a.mu.Lock()
	defer a.mu.Unlock()
	switch ev.Kind {
	case promptkit.ExecutionAttempt:
		a.got = append(a.got, ev.BackendID+":"+http.StatusText(ev.StatusCode))
	case promptkit.ExecutionFinished:
		a.finished = ev.BackendID
	}
}

// One backend of two answers 500 to everything: every run succeeds on the
// other, without waiting, and the broken one gets its first request and
// then one half-open probe per cooldown window, however many runs come.
func TestGroupAvoidsBrokenBackend(t *testing.T) {
	t.Parallel()
	clock := testkit.NewClock(routingStart)
	bad := newBroken(t, 500)
	good := providertest.NewServer()
	t.Cleanup(good.Close)
	eng := groupEngine(t, clock,
		[]promptkit.Backend{{ID: "bad", BaseURL: bad.url}, {ID: "good", BaseURL: good.URL}},
		[]promptkit.ProfileBackend{{ID: "bad"}, {ID: "good"}})
	const runs = 1000
	failedOver := 0
	for i := range runs {
		res, err := eng.Run(context.Background(), promptkit.RunRequest{Text: "x"})
		if err != nil {
			t.Fatalf("run %d: %v", i, err)
		}
		if res.BackendID != "good" {
			t.Fatalf("run %d answered by %q", i, res.BackendID)
		}
		if res.Attempts == 2 {
			failedOver++
		}
		clock.Advance(time.Second)
	}
	if w := clock.Waits(); len(w) != 0 {
		t.Errorf("a retry moving to the other backend waited: %v", w)
	}
	// The design's bound: the first request, then at most one probe per
	// window, a window being the cooldown from a failed probe.
	windows := int64(clock.Now().Sub(routingStart) / promptkit.DefaultCooldown)
	n := bad.calls.Load()
	if n < 2 || n > windows+1 {
		t.Fatalf("the broken backend got %d requests in %d cooldown windows, want 2 to %d", n, windows, windows+1)
	}
	t.Logf("%d runs over %v: the broken backend got %d requests (%d cooldown windows)", runs, clock.Now().Sub(routingStart), n, windows)
	if int64(failedOver) != n || good.Count() != runs {
		t.Errorf("%d runs failed over, good served %d; want %d and %d", failedOver, good.Count(), n, runs)
	}
	p := eng.Pacing()["bad"]
	if !p.Unwell || !p.CooldownUntil.After(clock.Now()) {
		t.Errorf("bad's pacing %+v, want cooling down", p)
	}
	if p := eng.Pacing()["good"]; p.Unwell || !p.CooldownUntil.IsZero() {
		t.Errorf("good's pacing %+v, want well", p)
	}
}

// Concurrent callers keep the bound: only the requests in flight when the
// backend first fails add to it (it was well until then), since the
// probes go one at a time.
func TestGroupAvoidsBrokenBackendConcurrently(t *testing.T) {
	t.Parallel()
	clock := testkit.NewClock(routingStart)
	bad := newBroken(t, 500)
	good := providertest.NewServer()
	t.Cleanup(good.Close)
	eng := groupEngine(t, clock,
		[]promptkit.Backend{{ID: "bad", BaseURL: bad.url}, {ID: "good", BaseURL: good.URL}},
		[]promptkit.ProfileBackend{{ID: "bad"}, {ID: "good"}})
	const callers, runs = 8, 125
	var wg sync.WaitGroup
	for range callers {
		wg.Go(func() {
			for range runs {
				if _, err := eng.Run(context.Background(), promptkit.RunRequest{Text: "x"}); err != nil {
					t.Error(err)
					return
				}
				clock.Advance(time.Second / callers)
			}
		})
	}
	wg.Wait()
	windows := int64(clock.Now().Sub(routingStart) / promptkit.DefaultCooldown)
	if n := bad.calls.Load(); n > windows+callers {
		t.Fatalf("the broken backend got %d requests in %d cooldown windows, want at most %d", n, windows, windows+callers)
	}
	if good.Count() != callers*runs {
		t.Fatalf("good served %d of %d", good.Count(), callers*runs)
	}
}

// Half-open: past its cooldown a backend that is still unwell gets one
// probe at a time; the others' requests go elsewhere until it answers,
// and an answer puts it back into the rotation.
func TestGroupProbesOneAtATime(t *testing.T) {
	t.Parallel()
	clock := testkit.NewClock(routingStart)
	flaky := providertest.NewServer()
	t.Cleanup(flaky.Close)
	good := providertest.NewServer()
	t.Cleanup(good.Close)
	eng := groupEngine(t, clock,
		[]promptkit.Backend{{ID: "flaky", BaseURL: flaky.URL, Cooldown: 10 * time.Second}, {ID: "good", BaseURL: good.URL}},
		// Weighted 3:1, the round-robin's turn after the cooldown is
		// flaky's: the probe is the next run.
		[]promptkit.ProfileBackend{{ID: "flaky", Weight: 3}, {ID: "good"}})
	flaky.Enqueue(providertest.Status(503))
	if res, err := eng.Run(context.Background(), promptkit.RunRequest{Text: "x"}); err != nil || res.BackendID != "good" {
		t.Fatalf("first run: %+v, %v", res, err)
	}
	clock.Advance(10 * time.Second)
	// The probe is held (its answer withheld) while other runs come.
	hold := make(chan struct{})
	flaky.Enqueue(providertest.Response{Hold: hold})
	probe := make(chan *promptkit.RunResult, 1)
	go func() {
		res, err := eng.Run(context.Background(), promptkit.RunRequest{Text: "x"})
		if err != nil {
			t.Error(err)
		}
		probe <- res
	}()
	if err := flaky.WaitArrivals(t.Context(), 2); err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		if res, err := eng.Run(context.Background(), promptkit.RunRequest{Text: "x"}); err != nil || res.BackendID != "good" {
			t.Fatalf("run %d during the probe: %+v, %v", i, res, err)
		}
	}
	close(hold)
	if res := <-probe; res == nil || res.BackendID != "flaky" {
		t.Fatalf("the probe: %+v", res)
	}
	if p := eng.Pacing()["flaky"]; p.Unwell {
		t.Fatalf("after an answered probe: %+v", p)
	}
	before := flaky.Count()
	for range 4 {
		if _, err := eng.Run(context.Background(), promptkit.RunRequest{Text: "x"}); err != nil {
			t.Fatal(err)
		}
	}
	if got := flaky.Count() - before; got != 3 {
		t.Fatalf("flaky served %d of 4 runs after it recovered, want 3", got)
	}
}

// Two healthy backends weighted 3:1 split the runs exactly 3:1, and each
// run reports the backend that answered and the model sent there.
func TestGroupSplitsByWeight(t *testing.T) {
	t.Parallel()
	_, a, b, eng := twoBackendGroup(t, promptkit.ProfileBackend{ID: "a", Weight: 3}, promptkit.ProfileBackend{ID: "b", Model: "b-name"})
	answered := map[string]int{}
	for range 400 {
		res, err := eng.Run(context.Background(), promptkit.RunRequest{Text: "x"})
		if err != nil {
			t.Fatal(err)
		}
		answered[res.BackendID+"/"+res.Model]++
	}
	if answered["a/m"] != 300 || answered["b/b-name"] != 100 || a.Count() != 300 || b.Count() != 100 {
		t.Fatalf("answered %v; a saw %d, b %d; want 300 a/m and 100 b/b-name", answered, a.Count(), b.Count())
	}
	for _, r := range b.Requests() {
		if r.Model != "b-name" {
			t.Fatalf("b was sent model %q", r.Model)
		}
	}
}

// A 400 says the request is wrong, not the backend: it is returned as it
// is, without falling back or cooling the backend down.
func TestGroupDoesNotFallBackOn400(t *testing.T) {
	t.Parallel()
	_, a, b, eng := twoBackendGroup(t, promptkit.ProfileBackend{ID: "a"}, promptkit.ProfileBackend{ID: "b"})
	a.Enqueue(providertest.Status(400))
	_, err := eng.Run(context.Background(), promptkit.RunRequest{Text: "x"})
	var ge *promptkit.GenerationError
	if !errors.As(err, &ge) || ge.StatusCode() != 400 {
		t.Fatalf("err = %v, want the 400", err)
	}
	if b.Count() != 0 {
		t.Fatalf("b got %d requests", b.Count())
	}
	if p := eng.Pacing()["a"]; p.Unwell || !p.CooldownUntil.IsZero() {
		t.Fatalf("a's pacing after a 400: %+v", p)
	}
}

// A 429 with Retry-After pauses its backend: the retry goes to the other
// at once, and so do the next runs until the pause ends. The attempt
// events say which backend each attempt went to.
func TestGroup429MovesToOther(t *testing.T) {
	t.Parallel()
	clock, a, _, eng := twoBackendGroup(t, promptkit.ProfileBackend{ID: "a"}, promptkit.ProfileBackend{ID: "b"})
	a.Enqueue(providertest.Status(429).WithRetryAfter("10"))
	var seen attemptBackends
	res, err := eng.Run(context.Background(), promptkit.RunRequest{Text: "x", Observer: seen.observe})
	if err != nil || res.BackendID != "b" || res.Attempts != 2 {
		t.Fatalf("run: %+v, %v", res, err)
	}
	if want := []string{"a:Too Many Requests", "b:OK"}; len(seen.got) != 2 || seen.got[0] != want[0] || seen.got[1] != want[1] || seen.finished != "b" {
		t.Fatalf("attempts %v, finished on %q; want %v, b", seen.got, seen.finished, want)
	}
	if w := clock.Waits(); len(w) != 0 {
		t.Fatalf("waited %v", w)
	}
	if p := eng.Pacing()["a"]; !p.PausedUntil.Equal(routingStart.Add(10*time.Second)) || p.Unwell {
		t.Fatalf("a's pacing: %+v, want paused 10s and not unwell", p)
	}
	for range 3 {
		if res, err := eng.Run(context.Background(), promptkit.RunRequest{Text: "x"}); err != nil || res.BackendID != "b" {
			t.Fatalf("run during a's pause: %+v, %v", res, err)
		}
	}
	if a.Count() != 1 {
		t.Fatalf("a got %d requests during its pause", a.Count())
	}
}

// Fallbacks take the runs, in order, only while no primary is available;
// pinning a backend runs it alone, with its name for the model.
func TestGroupFallbackAndPinning(t *testing.T) {
	t.Parallel()
	clock := testkit.NewClock(routingStart)
	bad := newBroken(t, 502)
	f1, f2 := providertest.NewServer(), providertest.NewServer()
	t.Cleanup(f1.Close)
	t.Cleanup(f2.Close)
	eng := groupEngine(t, clock,
		[]promptkit.Backend{{ID: "main", BaseURL: bad.url}, {ID: "f1", BaseURL: f1.URL}, {ID: "f2", BaseURL: f2.URL}},
		[]promptkit.ProfileBackend{{ID: "main"}, {ID: "f1", Fallback: true, Model: "f1-name"}, {ID: "f2", Fallback: true}})
	for i := range 3 {
		res, err := eng.Run(context.Background(), promptkit.RunRequest{Text: "x"})
		if err != nil || res.BackendID != "f1" || res.Model != "f1-name" {
			t.Fatalf("run %d: %+v, %v", i, res, err)
		}
	}
	if bad.calls.Load() != 1 || f2.Count() != 0 {
		t.Fatalf("main got %d requests, f2 %d; want 1 and 0", bad.calls.Load(), f2.Count())
	}
	// Pinned to f2 it runs there, with the profile's model.
	res, err := eng.Run(context.Background(), promptkit.RunRequest{Text: "x", Backend: "f2"})
	if err != nil || res.BackendID != "f2" || res.Model != "m" {
		t.Fatalf("pinned to f2: %+v, %v", res, err)
	}
	// Pinned to the cooling main it runs there alone: no routing.
	_, err = eng.Run(context.Background(), promptkit.RunRequest{Text: "x", Backend: "main"})
	var ge *promptkit.GenerationError
	if !errors.As(err, &ge) || ge.StatusCode() != 502 || f1.Count() != 3 {
		t.Fatalf("pinned to main: %v; f1 saw %d", err, f1.Count())
	}
	// Pinned to f1 by its name of the model, too.
	res, err = eng.Run(context.Background(), promptkit.RunRequest{Text: "x", Backend: "f1", Model: "f1-name"})
	if err != nil || res.BackendID != "f1" || res.Model != "f1-name" {
		t.Fatalf("pinned to f1 by its model name: %+v, %v", res, err)
	}
	if _, err := eng.Run(context.Background(), promptkit.RunRequest{Text: "x", Backend: "f2", Model: "f1-name"}); !errors.Is(err, promptkit.ErrInvalidRequest) {
		t.Fatalf("f2 with f1's name of the model: %v", err)
	}
	// The front door finds the group by its model.
	if prof, m, ok := eng.ResolveModel("m"); !ok || prof != "p" || m != "m" {
		t.Fatalf("ResolveModel(m) = %q, %q, %v", prof, m, ok)
	}
}

// Embeddings route like generations.
func TestGroupRoutesEmbeddings(t *testing.T) {
	t.Parallel()
	clock := testkit.NewClock(routingStart)
	bad := newBroken(t, 500)
	good := providertest.NewServer()
	t.Cleanup(good.Close)
	eng := groupEngine(t, clock,
		[]promptkit.Backend{{ID: "bad", BaseURL: bad.url}, {ID: "good", BaseURL: good.URL}},
		[]promptkit.ProfileBackend{{ID: "bad"}, {ID: "good", Model: "good-name"}})
	for range 3 {
		res, err := eng.Embed(context.Background(), promptkit.EmbedRequest{Input: []string{"x"}})
		if err != nil || res.BackendID != "good" || res.Model != "good-name" {
			t.Fatalf("embed: %+v, %v", res, err)
		}
	}
	if bad.calls.Load() != 1 {
		t.Fatalf("bad got %d requests", bad.calls.Load())
	}
}

// A cooldown one engine begins reaches another sharing its store: the
// other's group avoids the backend at once, though it never saw it fail.
func TestGroupCooldownShared(t *testing.T) {
	t.Parallel()
	clock := testkit.NewClock(routingStart)
	st, err := sqlitestore.Open(t.Context(), filepath.Join(t.TempDir(), "jobs.db"), jobs.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	bad := newBroken(t, 500)
	good := providertest.NewServer()
	t.Cleanup(good.Close)
	backends := []promptkit.Backend{{ID: "bad", BaseURL: bad.url}, {ID: "good", BaseURL: good.URL}}
	group := []promptkit.ProfileBackend{{ID: "bad"}, {ID: "good"}}
	e1, e2 := groupEngine(t, clock, backends, group), groupEngine(t, clock, backends, group)

	ctx, cancel := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	t.Cleanup(func() { cancel(); wg.Wait() })
	share := func(e *promptkit.Engine, peer string) {
		wg.Go(func() {
			_ = e.SharePacing(ctx, worker.PacingStore(st), promptkit.SharePacingOptions{Peer: peer, Wake: st.Notifier().Notify(ctx)})
		})
	}
	share(e1, "p1")
	if res, err := e1.Run(ctx, promptkit.RunRequest{Text: "x"}); err != nil || res.BackendID != "good" {
		t.Fatalf("e1: %+v, %v", res, err)
	}
	until := routingStart.Add(promptkit.DefaultCooldown)
	stored := func() bool {
		got, err := st.SyncPacing(ctx, jobs.PacingSyncParams{})
		if err != nil {
			t.Error(err)
			return true
		}
		for _, b := range got {
			if b.Backend == "bad" && b.CooldownUntil.Equal(until) {
				return true
			}
		}
		return false
	}
	if !testkit.Until(ctx, 10*time.Second, stored, st.Notifier()) {
		t.Fatal("e1's cooldown never reached the store")
	}
	share(e2, "p2")
	if !testkit.Until(ctx, 10*time.Second, func() bool { return e2.Pacing()["bad"].CooldownUntil.Equal(until) }, st.Notifier()) {
		t.Fatalf("e2 never adopted the cooldown: %+v", e2.Pacing()["bad"])
	}
	for range 5 {
		if res, err := e2.Run(ctx, promptkit.RunRequest{Text: "x"}); err != nil || res.BackendID != "good" || res.Attempts != 1 {
			t.Fatalf("e2: %+v, %v", res, err)
		}
	}
	if bad.calls.Load() != 1 {
		t.Fatalf("bad got %d requests, want only e1's", bad.calls.Load())
	}
}

// A config file's model group and cooldown load as written.
func TestLoadGroupConfig(t *testing.T) {
	t.Parallel()
	yaml := `backends:
  - {id: a, base_url: 'http://x/v1', cooldown: 1m}
  - {id: b, base_url: 'http://y/v1'}
  - {id: c, base_url: 'http://z/v1'}
profiles:
  - id: p
    model: m
    backends:
      - {id: a, weight: 3}
      - {id: b, model: b-name}
      - {id: c, fallback: true}
`
	cfg, err := promptkit.LoadConfig(fstest.MapFS{"promptkit.yaml": {Data: []byte(yaml)}}, "promptkit.yaml")
	if err != nil {
		t.Fatal(err)
	}
	want := []promptkit.ProfileBackend{{ID: "a", Weight: 3}, {ID: "b", Model: "b-name"}, {ID: "c", Fallback: true}}
	g := cfg.Profiles[0].Backends
	if len(g) != 3 || g[0] != want[0] || g[1] != want[1] || g[2] != want[2] || cfg.Backends[0].Cooldown != time.Minute {
		t.Fatalf("loaded %+v, cooldown %v", g, cfg.Backends[0].Cooldown)
	}
	if _, err := promptkit.New(cfg); err != nil {
		t.Fatal(err)
	}
}
