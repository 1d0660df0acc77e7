package promptkit_test

// Contract tests written against the public API only (promptkit.New, Run,
// Prepare, PrepareExecution, RunPrepared, Discard, the error sentinels,
// ExecutionEvent and providertest), so that they keep holding while the
// internals change. Helpers here are prefixed "contract" to stay clear of
// the other test files' helpers.
//
// Nothing here sleeps to synchronise: runs are ordered with providertest
// Hold channels, observer callbacks and channels. Where a transient retry
// happens, the engine's real backoff (250–500 ms per retry) is waited for;
// no duration is asserted.

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/promptkit/promptkit"
	"github.com/promptkit/promptkit/providertest"
)

const (
	contractSchema = `{"type":"object","properties":{"summary":{"type":"string","minLength":1}},"required":["summary"],"additionalProperties":false}`
	contractValid  = `{"summary":"ok"}`
)

// contractSignal returns an observer that closes the returned channel the
// first time an event of kind arrives, after logging every event to log.
func contractSignal(log *eventLog, kind promptkit.ExecutionEventKind) (promptkit.ExecutionObserver, <-chan struct{}) {
	ch := make(chan struct{})
	var once sync.Once
	return func(ev promptkit.ExecutionEvent) {
		log.Observe(ev)
		if ev.Kind == kind {
			once.Do(func() { close(ch) })
		}
	}, ch
}

// contractAwait waits for ch, failing the test if the guard ends first.
func contractAwait(t *testing.T, guard context.Context, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-guard.Done():
		t.Fatalf("never saw %s", what)
	}
}

func contractInt(v int) *int { return &v }

func contractPrompt() promptkit.Prompt {
	return promptkit.Prompt{ID: "summarize", Version: "3", Template: "Summarize: {{.text}}", OutputSchema: json.RawMessage(contractSchema)}
}

func contractSummarize(text, profile string) promptkit.RunRequest {
	return promptkit.RunRequest{PromptID: "summarize", Inputs: map[string]any{"text": text}, ProfileID: profile}
}

type contractOpts struct {
	maxActive    int
	maxRuns      int
	maxQueued    int
	repairBudget int
	retries      *int
	apiKeyEnv    string
}

func contractConfig(url string, o contractOpts) promptkit.Config {
	return promptkit.Config{
		Backends:          []promptkit.Backend{{ID: "local", BaseURL: url, MaxActive: o.maxActive, APIKeyEnv: o.apiKeyEnv}},
		Profiles:          []promptkit.Profile{{ID: "default", Backend: "local", Model: "m1", RepairBudget: o.repairBudget}},
		Prompts:           []promptkit.Prompt{contractPrompt()},
		MaxConcurrentRuns: o.maxRuns,
		MaxQueuedRuns:     o.maxQueued,
		TransientRetries:  o.retries,
	}
}

// contractRig is a fake provider and an engine (promptkit.New) using it.
func contractRig(t *testing.T, o contractOpts) (*providertest.Server, *promptkit.Engine) {
	t.Helper()
	srv := providertest.NewServer()
	t.Cleanup(srv.Close)
	eng, err := promptkit.New(contractConfig(srv.URL, o))
	if err != nil {
		t.Fatal(err)
	}
	return srv, eng
}

// contractFinished checks that evs is exactly "started,finished", with one
// non-empty RunID, and returns the finished event.
func contractFinished(t *testing.T, evs []promptkit.ExecutionEvent) promptkit.ExecutionEvent {
	t.Helper()
	if got := eventKinds(evs); got != "started,finished" {
		t.Fatalf("events = %s, want started,finished", got)
	}
	if evs[0].RunID == "" || evs[1].RunID != evs[0].RunID {
		t.Fatalf("RunIDs %q, %q", evs[0].RunID, evs[1].RunID)
	}
	return evs[1]
}

// A prepared run whose observer panics, at any event,
// releases its backend permit and its admission slot.
func TestContractPreparedObserverPanicReleasesResources(t *testing.T) {
	t.Parallel()
	type boom struct{ kind promptkit.ExecutionEventKind }
	kinds := []promptkit.ExecutionEventKind{promptkit.ExecutionStarted, promptkit.ExecutionAttempt, promptkit.ExecutionRetryDelay, promptkit.ExecutionFinished}
	for _, kind := range kinds {
		t.Run(string(kind), func(t *testing.T) {
			t.Parallel()
			srv, eng := contractRig(t, contractOpts{maxActive: 1, maxRuns: 1, retries: contractInt(1)})
			srv.Enqueue(providertest.Status(503), providertest.Reply("first"))
			var log eventLog
			h, err := eng.PrepareExecution(context.Background(), promptkit.RunRequest{Text: "x", Observer: func(ev promptkit.ExecutionEvent) {
				log.Observe(ev)
				if ev.Kind == kind {
					panic(boom{kind})
				}
			}})
			if err != nil {
				t.Fatal(err)
			}
			got := func() (p any) {
				defer func() { p = recover() }()
				_, _ = eng.RunPrepared(context.Background(), h)
				return nil
			}()
			if got != (boom{kind}) {
				t.Fatalf("recovered %v, want the observer's panic", got)
			}
			if evs := log.Events(); len(evs) == 0 || evs[len(evs)-1].Kind != kind {
				t.Fatalf("events after the panic: %s", eventKinds(log.Events()))
			}
			// The handle was claimed before the first event: it stays used.
			if _, err := eng.RunPrepared(context.Background(), h); !errors.Is(err, promptkit.ErrInvalidRequest) {
				t.Fatalf("RunPrepared of the panicked handle: %v", err)
			}
			// The single admission slot and the single permit are free: an
			// ordinary run and another prepared run both complete.
			guard := deadlockGuard(t)
			if res, err := eng.Run(guard, promptkit.RunRequest{Text: "after"}); err != nil || res.Text == "" {
				t.Fatalf("run after the observer panic: res = %+v, err = %v", res, err)
			}
			h2, err := eng.PrepareExecution(guard, promptkit.RunRequest{Text: "after, prepared"})
			if err != nil {
				t.Fatal(err)
			}
			if res, err := eng.RunPrepared(guard, h2); err != nil || res.Text == "" {
				t.Fatalf("prepared run after the observer panic: res = %+v, err = %v", res, err)
			}
			if srv.MaxInFlight() != 1 {
				t.Fatalf("MaxInFlight = %d", srv.MaxInFlight())
			}
		})
	}
}

// contractUnsetEnv returns the name of an environment variable that is not
// set.
func contractUnsetEnv(t *testing.T) string {
	t.Helper()
	for {
		b := make([]byte, 12)
		if _, err := rand.Read(b); err != nil {
			t.Fatal(err)
		}
		name := "PROMPTKIT_CONTRACT_UNSET_" + strings.ToUpper(hex.EncodeToString(b))
		if _, set := os.LookupEnv(name); !set {
			return name
		}
	}
}

// A claimed prepared run that fails on a missing
// credential still emits finished after started.
func TestContractPreparedClaimedThenMissingCredential(t *testing.T) {
	t.Parallel()
	srv, eng := contractRig(t, contractOpts{apiKeyEnv: contractUnsetEnv(t)})
	var log eventLog
	h, err := eng.PrepareExecution(context.Background(), promptkit.RunRequest{Text: "x", Observer: log.Observe})
	if err != nil {
		t.Fatalf("PrepareExecution must not read the credential: %v", err)
	}
	if n := len(log.Events()); n != 0 {
		t.Fatalf("preparation emitted %d events", n)
	}
	res, err := eng.RunPrepared(context.Background(), h)
	if !errors.Is(err, promptkit.ErrInvalidRequest) || res != nil {
		t.Fatalf("res = %+v, err = %v; want no result and ErrInvalidRequest", res, err)
	}
	evs := log.Events()
	fin := contractFinished(t, evs)
	if fin.Outcome != promptkit.ExecutionOutcomeError || fin.Failure != promptkit.ExecutionFailureInvalidRequest || fin.Attempts != 0 {
		t.Fatalf("finished = %+v", fin)
	}
	for _, ev := range evs {
		if ev.ProfileID != "default" || ev.BackendID != "local" || ev.Model != "m1" {
			t.Fatalf("%s event lacks the prepared identities: %+v", ev.Kind, ev)
		}
	}
	if srv.Count() != 0 {
		t.Fatalf("provider called %d times without the credential", srv.Count())
	}
}

// A claimed prepared run refused by a full admission queue still emits
// finished (capacity) after started.
func TestContractPreparedClaimedThenCapacity(t *testing.T) {
	t.Parallel()
	contractQueueFull(t, func(ctx context.Context, eng *promptkit.Engine, obs promptkit.ExecutionObserver) (*promptkit.RunResult, error) {
		h, err := eng.PrepareExecution(ctx, promptkit.RunRequest{Text: "b", Observer: obs})
		if err != nil {
			return nil, err
		}
		return eng.RunPrepared(ctx, h)
	})
}

// A run refused because the admission queue is full is observed: its
// finished event says capacity, and the error is ErrCapacity.
func TestContractAdmissionQueueFullObserved(t *testing.T) {
	t.Parallel()
	contractQueueFull(t, func(ctx context.Context, eng *promptkit.Engine, obs promptkit.ExecutionObserver) (*promptkit.RunResult, error) {
		return eng.Run(ctx, promptkit.RunRequest{Text: "b", Observer: obs})
	})
}

// contractQueueFull holds the only admission slot with a run the provider
// holds, then starts two more runs with run: one takes the only queue slot
// and completes once the first finishes, the other is refused at once
// with ErrCapacity, observed as a capacity failure.
func contractQueueFull(t *testing.T, run func(context.Context, *promptkit.Engine, promptkit.ExecutionObserver) (*promptkit.RunResult, error)) {
	srv, eng := contractRig(t, contractOpts{maxRuns: 1, maxQueued: 1})
	guard := deadlockGuard(t)
	hold := make(chan struct{})
	srv.Enqueue(providertest.Response{Hold: hold, Text: "first"})
	first := make(chan error, 1)
	go func() {
		_, err := eng.Run(guard, promptkit.RunRequest{Text: "a"})
		first <- err
	}()
	if err := srv.WaitArrivals(guard, 1); err != nil {
		t.Fatal(err)
	}
	var logs [2]eventLog
	type outcome struct {
		i   int
		res *promptkit.RunResult
		err error
	}
	results := make(chan outcome, 2)
	for i := range logs {
		go func() {
			res, err := run(guard, eng, logs[i].Observe)
			results <- outcome{i, res, err}
		}()
	}
	// Whichever of the two came second is refused while the first still runs.
	refused := <-results
	if !errors.Is(refused.err, promptkit.ErrCapacity) || errors.Is(refused.err, context.Canceled) || errors.Is(refused.err, context.DeadlineExceeded) || refused.res != nil {
		t.Fatalf("res = %+v, err = %v; want an immediate ErrCapacity and no result", refused.res, refused.err)
	}
	fin := contractFinished(t, logs[refused.i].Events())
	if fin.Outcome != promptkit.ExecutionOutcomeError || fin.Failure != promptkit.ExecutionFailureCapacity || fin.Attempts != 0 || fin.ProfileID != "default" {
		t.Fatalf("finished = %+v", fin)
	}
	close(hold)
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	queued := <-results
	if queued.err != nil {
		t.Fatalf("queued run: %v", queued.err)
	}
	evs := logs[queued.i].Events()
	if got := eventKinds(evs); got != "started,attempt,finished" || evs[2].Outcome != promptkit.ExecutionOutcomeSuccess || evs[2].RunID != queued.res.RunID {
		t.Fatalf("queued run's events = %s %+v", got, evs)
	}
}

// RetryExhaustedError's nil pointer and zero value are safe, and
// neither its text nor %#v carries provider text, which Detail keeps.
func TestContractRetryExhaustedErrorSafeAndRedacted(t *testing.T) {
	t.Parallel()
	other := errors.New("unrelated")
	t.Run("nil pointer", func(t *testing.T) {
		t.Parallel()
		var e *promptkit.RetryExhaustedError
		if e.Attempts() != 0 || e.Unwrap() != nil || e.Error() == "" || e.GoString() == "" || e.Is(other) {
			t.Fatalf("nil: Attempts %d, Unwrap %v, Error %q, GoString %q, Is(other) %v", e.Attempts(), e.Unwrap(), e.Error(), e.GoString(), e.Is(other))
		}
		_ = e.Is(promptkit.ErrRetriesExhausted) // must not panic
		var err error = e
		_ = errors.Is(err, promptkit.ErrRetriesExhausted)
		var ge *promptkit.GenerationError
		if errors.As(err, &ge) {
			t.Fatal("a nil RetryExhaustedError unwraps to a GenerationError")
		}
		for _, s := range []string{fmt.Sprintf("%v", err), fmt.Sprintf("%+v", err), fmt.Sprintf("%#v", err)} {
			if strings.Contains(s, "PANIC") {
				t.Fatalf("formatting a nil RetryExhaustedError panicked: %s", s)
			}
		}
	})
	t.Run("zero value", func(t *testing.T) {
		t.Parallel()
		var e promptkit.RetryExhaustedError
		if e.Attempts() != 0 || e.Unwrap() != nil || e.Error() == "" || e.GoString() == "" || e.Is(other) || !e.Is(promptkit.ErrRetriesExhausted) {
			t.Fatalf("zero: Attempts %d, Unwrap %v, Error %q, GoString %q", e.Attempts(), e.Unwrap(), e.Error(), e.GoString())
		}
		var err error = &e
		if !errors.Is(err, promptkit.ErrRetriesExhausted) {
			t.Fatal("a zero RetryExhaustedError does not match ErrRetriesExhausted")
		}
		var ge *promptkit.GenerationError
		if errors.As(err, &ge) {
			t.Fatal("a zero RetryExhaustedError unwraps to a GenerationError")
		}
		for _, s := range []string{fmt.Sprintf("%v", err), fmt.Sprintf("%+v", err), fmt.Sprintf("%#v", err)} {
			if strings.Contains(s, "PANIC") {
				t.Fatalf("formatting a zero RetryExhaustedError panicked: %s", s)
			}
		}
	})
	t.Run("redacted", func(t *testing.T) {
		t.Parallel()
		const marker = "SECRET-MARKER-123"
		srv, eng := contractRig(t, contractOpts{retries: contractInt(1)})
		body := []byte(`{"error":{"message":"overloaded ` + marker + `","type":"server_error","code":"server_error"}}`)
		srv.Enqueue(providertest.Response{Status: 503, Body: body}, providertest.Response{Status: 503, Body: body})
		res, err := eng.Run(context.Background(), promptkit.RunRequest{Text: "x"})
		if res != nil || !errors.Is(err, promptkit.ErrRetriesExhausted) || !errors.Is(err, promptkit.ErrLLMGenerate) {
			t.Fatalf("res = %+v, err = %v; want exhaustion and no result", res, err)
		}
		var ex *promptkit.RetryExhaustedError
		if !errors.As(err, &ex) || ex.Attempts() != 2 {
			t.Fatalf("errors.As RetryExhaustedError: %#v", ex)
		}
		var ge *promptkit.GenerationError
		if !errors.As(err, &ge) || ge.StatusCode() != 503 {
			t.Fatalf("errors.As GenerationError: %v", err)
		}
		if !strings.Contains(ge.Detail(), marker) {
			t.Fatalf("Detail = %q, want the provider's message", ge.Detail())
		}
		for _, s := range []string{
			err.Error(), fmt.Sprintf("%v", err), fmt.Sprintf("%+v", err), fmt.Sprintf("%#v", err),
			ex.Error(), ex.GoString(), fmt.Sprintf("%#v", ex), fmt.Sprintf("%+v", ex),
			ge.Error(), fmt.Sprintf("%#v", ge),
		} {
			if strings.Contains(s, marker) {
				t.Fatalf("error text carries provider text: %s", s)
			}
		}
	})
}

// Of two Retry-After header lines on a 503, the first counts.
func TestContractRetryAfterFirstHeaderLineCounts(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		lines []string
		want  time.Duration
	}{
		{[]string{"7", "1"}, 7 * time.Second},
		{[]string{"1", "7"}, 1 * time.Second},
	} {
		t.Run(strings.Join(c.lines, ","), func(t *testing.T) {
			t.Parallel()
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				for _, v := range c.lines {
					w.Header().Add("Retry-After", v) // one header line each
				}
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(http.StatusServiceUnavailable)
				_, _ = w.Write([]byte(`{"error":{"message":"busy","type":"server_error","code":"server_error"}}`))
			}))
			t.Cleanup(srv.Close)
			// The fixture really sends two lines, in this order.
			probe, err := http.Get(srv.URL)
			if err != nil {
				t.Fatal(err)
			}
			probe.Body.Close()
			if got := probe.Header.Values("Retry-After"); strings.Join(got, ",") != strings.Join(c.lines, ",") {
				t.Fatalf("fixture sends Retry-After %q", got)
			}

			eng, err := promptkit.New(promptkit.Config{
				Backends:         []promptkit.Backend{{ID: "b", BaseURL: srv.URL + "/v1"}},
				Profiles:         []promptkit.Profile{{ID: "p", Backend: "b", Model: "m"}},
				TransientRetries: contractInt(0),
			})
			if err != nil {
				t.Fatal(err)
			}
			before := time.Now()
			_, err = eng.Run(context.Background(), promptkit.RunRequest{Text: "x"})
			after := time.Now()
			var ge *promptkit.GenerationError
			if !errors.As(err, &ge) || ge.StatusCode() != 503 || errors.Is(err, promptkit.ErrRetriesExhausted) {
				t.Fatalf("err = %v", err)
			}
			nb, ok := promptkit.NotBefore(err)
			if !ok || !nb.Equal(ge.RetryAfter()) {
				t.Fatalf("NotBefore = %v, %v; RetryAfter = %v", nb, ok, ge.RetryAfter())
			}
			// Bounds on the value: the response arrived between before and
			// after, and the first line's delay is measured from then.
			if lo, hi := before.Add(c.want-time.Second), after.Add(c.want+time.Second); nb.Before(lo) || !nb.Before(hi) {
				t.Fatalf("NotBefore is %v after the call started (%v after it ended); want about %v (the first line)", nb.Sub(before), nb.Sub(after), c.want)
			}
		})
	}
}

// PromptHash covers the rendered request only: retry settings and
// the observer never change it; the text does.
func TestContractPromptHashIgnoresRetriesAndObserver(t *testing.T) {
	t.Parallel()
	srv := providertest.NewServer()
	t.Cleanup(srv.Close)
	ctx := context.Background()
	observer := func(promptkit.ExecutionEvent) {}
	var engines []*promptkit.Engine
	for _, r := range []*int{nil, contractInt(0), contractInt(7), contractInt(math.MaxInt)} {
		eng, err := promptkit.New(contractConfig(srv.URL, contractOpts{retries: r}))
		if err != nil {
			t.Fatal(err)
		}
		engines = append(engines, eng)
	}
	for _, base := range []promptkit.RunRequest{contractSummarize("hash me", ""), {Text: "hash me too"}} {
		ref, err := engines[0].Prepare(ctx, base)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(ref.PromptHash, "sha256:") {
			t.Fatalf("PromptHash = %q", ref.PromptHash)
		}
		for ei, eng := range engines {
			for _, r := range []*int{nil, contractInt(0), contractInt(5), contractInt(math.MaxInt)} {
				for _, obs := range []promptkit.ExecutionObserver{nil, observer} {
					req := base
					req.TransientRetries, req.Observer = r, obs
					p, err := eng.Prepare(ctx, req)
					if err != nil {
						t.Fatal(err)
					}
					h, err := eng.PrepareExecution(ctx, req)
					if err != nil {
						t.Fatal(err)
					}
					info := h.Info()
					if err := eng.Discard(h); err != nil {
						t.Fatal(err)
					}
					if p.PromptHash != ref.PromptHash || info.PromptHash != ref.PromptHash {
						t.Fatalf("engine %d, retries %v, observer %v: hashes %s / %s, want %s", ei, r, obs != nil, p.PromptHash, info.PromptHash, ref.PromptHash)
					}
				}
			}
		}
		// A run's result carries the same hash, whatever its retry setting.
		req := base
		req.TransientRetries, req.Observer = contractInt(3), observer
		res, err := engines[3].Run(ctx, req)
		if err != nil || res.PromptHash != ref.PromptHash {
			t.Fatalf("run: res = %+v, err = %v; want hash %s", res, err, ref.PromptHash)
		}
		// Changing the text changes the hash.
		changed := base
		if changed.Text != "" {
			changed.Text += "!"
		} else {
			changed.Inputs = map[string]any{"text": "hash me!"}
		}
		p, err := engines[0].Prepare(ctx, changed)
		if err != nil {
			t.Fatal(err)
		}
		if p.PromptHash == ref.PromptHash {
			t.Fatalf("different text, same hash %s", p.PromptHash)
		}
	}
}

// TransientRetries = math.MaxInt is accepted, in Config and in a
// RunRequest (ordinary and prepared), and nothing overflows: one 503 then
// a 200 is a success in two attempts.
func TestContractTransientRetriesMaxInt(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name     string
		config   *int
		request  *int
		prepared bool
	}{
		{"config", contractInt(math.MaxInt), nil, false},
		{"request", nil, contractInt(math.MaxInt), false},
		{"request over zero config", contractInt(0), contractInt(math.MaxInt), false},
		{"prepared request", nil, contractInt(math.MaxInt), true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			srv, eng := contractRig(t, contractOpts{retries: c.config})
			srv.Enqueue(providertest.Status(503), providertest.Reply("ok"))
			var log eventLog
			req := promptkit.RunRequest{Text: "x", TransientRetries: c.request, Observer: log.Observe}
			var res *promptkit.RunResult
			var err error
			if c.prepared {
				h, perr := eng.PrepareExecution(context.Background(), req)
				if perr != nil {
					t.Fatal(perr)
				}
				res, err = eng.RunPrepared(context.Background(), h)
			} else {
				res, err = eng.Run(context.Background(), req)
			}
			if err != nil || res.Text != "ok" || res.Attempts != 2 || srv.Count() != 2 {
				t.Fatalf("res = %+v, err = %v, provider calls = %d", res, err, srv.Count())
			}
			evs := log.Events()
			if got := eventKinds(evs); got != "started,attempt,retry_delay,attempt,finished" {
				t.Fatalf("events = %s", got)
			}
			if fin := evs[4]; fin.Attempts != 2 || fin.TransientRetries != 1 || fin.Outcome != promptkit.ExecutionOutcomeSuccess {
				t.Fatalf("finished = %+v", fin)
			}
		})
	}
}

// contractPools is an engine with two profiles on one finite backend
// ("shared", one active permit), one on another finite backend ("other",
// one permit) and one on an unlimited backend ("open").
type contractPools struct {
	shared, other, open *providertest.Server
	eng                 *promptkit.Engine
}

func newContractPools(t *testing.T, maxRuns, maxQueued int, pauseOnRetryAfter bool) contractPools {
	t.Helper()
	p := contractPools{shared: providertest.NewServer(), other: providertest.NewServer(), open: providertest.NewServer()}
	t.Cleanup(p.shared.Close)
	t.Cleanup(p.other.Close)
	t.Cleanup(p.open.Close)
	var err error
	p.eng, err = promptkit.New(promptkit.Config{
		Backends: []promptkit.Backend{
			{ID: "shared", BaseURL: p.shared.URL, MaxActive: 1, PauseOnRetryAfter: &pauseOnRetryAfter},
			{ID: "other", BaseURL: p.other.URL, MaxActive: 1},
			{ID: "open", BaseURL: p.open.URL},
		},
		Profiles: []promptkit.Profile{
			{ID: "a", Backend: "shared", Model: "ma", RepairBudget: 1},
			{ID: "b", Backend: "shared", Model: "mb", RepairBudget: 1},
			{ID: "c", Backend: "other", Model: "mc"},
			{ID: "d", Backend: "open", Model: "md"},
		},
		Prompts:           []promptkit.Prompt{contractPrompt()},
		DefaultProfile:    "a",
		MaxConcurrentRuns: maxRuns,
		MaxQueuedRuns:     maxQueued,
		TransientRetries:  contractInt(2),
	})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// startInRetryWait starts run a on profile a, whose first attempt gets a
// 503 asking to wait an hour, and returns once that attempt is over and
// the run waits to retry: its events, its result and what cancels it.
func (p *contractPools) startInRetryWait(t *testing.T, guard context.Context) (*eventLog, <-chan error, context.CancelFunc) {
	t.Helper()
	p.shared.Enqueue(providertest.Status(503).WithRetryAfter("3600"))
	log := &eventLog{}
	obs, attempted := contractSignal(log, promptkit.ExecutionAttempt)
	ctxA, cancelA := context.WithCancel(guard)
	t.Cleanup(cancelA)
	doneA := make(chan error, 1)
	go func() {
		_, err := p.eng.Run(ctxA, promptkit.RunRequest{Text: "alpha", ProfileID: "a", Observer: obs})
		doneA <- err
	}()
	contractAwait(t, guard, attempted, "run a's first attempt")
	return log, doneA, cancelA
}

// Two profiles sharing one finite backend under
// initial, retry and repair traffic; backoff frees the active permit but
// not logical admission; different backend pools stay independent.
func TestContractSharedBackendPools(t *testing.T) {
	t.Parallel()

	t.Run("initial retry and repair traffic share one permit", func(t *testing.T) {
		t.Parallel()
		p := newContractPools(t, 0, 0, true)
		guard := deadlockGuard(t)
		hold := make(chan struct{})
		// Taken in arrival order by whichever run sends: two 503s (the
		// first held in flight) and one invalid output; then the default
		// responder answers schema-valid JSON. With two retries per
		// generation, no generation can exhaust, so whatever the
		// interleaving: 3 generations (2 initial + 1 repair) ending in a
		// 200 each, plus the 2 failed attempts, is 5 calls.
		p.shared.Enqueue(providertest.Response{Status: 503, Hold: hold}, providertest.Reply("not json"), providertest.Status(503))
		type outcome struct {
			res *promptkit.RunResult
			err error
		}
		var logs [2]eventLog
		results := [2]chan outcome{make(chan outcome, 1), make(chan outcome, 1)}
		for i, profile := range []string{"a", "b"} {
			obs, started := contractSignal(&logs[i], promptkit.ExecutionStarted)
			req := contractSummarize("text for "+profile, profile)
			req.Observer = obs
			go func() {
				res, err := p.eng.Run(guard, req)
				results[i] <- outcome{res, err}
			}()
			contractAwait(t, guard, started, "run "+profile+" start")
		}
		if err := p.shared.WaitArrivals(guard, 1); err != nil {
			t.Fatal(err)
		}
		// The shared backend's only permit is taken by the held request;
		// another backend's pool is independent: a run there completes.
		if res, err := p.eng.Run(guard, promptkit.RunRequest{Text: "other pool", ProfileID: "c"}); err != nil || res.BackendID != "other" {
			t.Fatalf("run on the other backend while the shared one is busy: res = %+v, err = %v", res, err)
		}
		if p.shared.InFlight() != 1 || p.other.Count() != 1 {
			t.Fatalf("shared in flight %d, other calls %d", p.shared.InFlight(), p.other.Count())
		}
		close(hold)
		var attempts, repairs int
		var finAttempts, finRetries, finRepairs uint64
		for i, profile := range []string{"a", "b"} {
			o := <-results[i]
			if o.err != nil {
				t.Fatalf("run %s: %v", profile, o.err)
			}
			if o.res.Validation.Status != promptkit.ValidationValid || o.res.ProfileID != profile || o.res.BackendID != "shared" {
				t.Fatalf("run %s: %+v", profile, o.res)
			}
			attempts += o.res.Attempts
			repairs += o.res.RepairCalls
			evs := logs[i].Events()
			fin := evs[len(evs)-1]
			if fin.Kind != promptkit.ExecutionFinished || fin.RunID != o.res.RunID || fin.Attempts != uint64(o.res.Attempts) || fin.RepairCalls != uint64(o.res.RepairCalls) {
				t.Fatalf("run %s: finished %+v disagrees with result %+v", profile, fin, o.res)
			}
			finAttempts += fin.Attempts
			finRetries += fin.TransientRetries
			finRepairs += fin.RepairCalls
			for _, ev := range evs[1:] {
				if ev.ProfileID != profile || ev.BackendID != "shared" {
					t.Fatalf("run %s: %s event identity %q/%q", profile, ev.Kind, ev.ProfileID, ev.BackendID)
				}
			}
		}
		if attempts != 5 || repairs != 1 || finAttempts != 5 || finRetries != 2 || finRepairs != 1 {
			t.Fatalf("attempts %d (finished %d), repairs %d (finished %d), transient retries %d; want 5, 1, 2", attempts, finAttempts, repairs, finRepairs, finRetries)
		}
		if p.shared.Count() != 5 || p.shared.MaxInFlight() != 1 {
			t.Fatalf("shared backend: %d calls, MaxInFlight %d; want 5 and 1", p.shared.Count(), p.shared.MaxInFlight())
		}
		if p.other.MaxInFlight() != 1 {
			t.Fatalf("other backend MaxInFlight = %d", p.other.MaxInFlight())
		}
	})

	t.Run("backoff frees the active permit", func(t *testing.T) {
		t.Parallel()
		// Without a backend-wide pause, a Retry-After of an hour keeps run
		// a in its retry wait for the whole test.
		p := newContractPools(t, 0, 0, false)
		guard := deadlockGuard(t)
		log, doneA, cancelA := p.startInRetryWait(t, guard)
		// Run a waits to retry; the shared backend's only permit is free.
		res, err := p.eng.Run(guard, promptkit.RunRequest{Text: "beta", ProfileID: "b"})
		if err != nil || res.BackendID != "shared" || res.Attempts != 1 {
			t.Fatalf("run b during run a's retry wait: res = %+v, err = %v", res, err)
		}
		select {
		case err := <-doneA:
			t.Fatalf("run a returned before its retry wait ended: %v", err)
		default:
		}
		cancelA()
		if err := <-doneA; !errors.Is(err, context.Canceled) || errors.Is(err, promptkit.ErrRetriesExhausted) {
			t.Fatalf("run a: %v, want context.Canceled", err)
		}
		// The cancel may land before run a's wait has begun (its permit is
		// released first, which is what run b needed): then there is no
		// retry_delay event, as a wait that never started has none.
		evs := log.Events()
		if got := eventKinds(evs); got != "started,attempt,retry_delay,finished" && got != "started,attempt,finished" {
			t.Fatalf("run a's events = %s", got)
		}
		if fin := evs[len(evs)-1]; fin.Failure != promptkit.ExecutionFailureCanceled || fin.Attempts != 1 {
			t.Fatalf("run a finished = %+v", fin)
		}
		if p.shared.Count() != 2 || p.shared.MaxInFlight() != 1 {
			t.Fatalf("shared backend: %d calls, MaxInFlight %d", p.shared.Count(), p.shared.MaxInFlight())
		}
	})

	t.Run("backoff keeps logical admission", func(t *testing.T) {
		t.Parallel()
		p := newContractPools(t, 1, 1, false)
		guard := deadlockGuard(t)
		_, doneA, cancelA := p.startInRetryWait(t, guard)
		// Run a waits to retry and keeps the only admission slot: of two
		// more runs (one on the shared backend, one on another backend:
		// admission is engine-wide), one queues and one is refused.
		errs := make(chan error, 2)
		for _, profile := range []string{"b", "c"} {
			go func() {
				_, err := p.eng.Run(guard, promptkit.RunRequest{Text: "later", ProfileID: profile})
				errs <- err
			}()
		}
		if err := <-errs; !errors.Is(err, promptkit.ErrCapacity) || errors.Is(err, context.Canceled) {
			t.Fatalf("err = %v, want an immediate ErrCapacity: the retry wait released admission", err)
		}
		if n := p.shared.Count() + p.other.Count(); n != 1 {
			t.Fatalf("provider calls = %d while run a holds admission, want only run a's", n)
		}
		select {
		case err := <-doneA:
			t.Fatalf("run a returned before its retry wait ended: %v", err)
		default:
		}
		cancelA()
		if err := <-doneA; !errors.Is(err, context.Canceled) {
			t.Fatalf("run a: %v", err)
		}
		if err := <-errs; err != nil {
			t.Fatalf("queued run after run a ended: %v", err)
		}
		if n := p.shared.Count() + p.other.Count(); n != 2 {
			t.Fatalf("provider calls = %d, want 2", n)
		}
	})

	t.Run("unlimited backend", func(t *testing.T) {
		t.Parallel()
		p := newContractPools(t, 0, 0, true)
		guard := deadlockGuard(t)
		hold := make(chan struct{})
		p.open.Enqueue(providertest.Response{Hold: hold, Text: "one"}, providertest.Response{Hold: hold, Text: "two"})
		errs := make(chan error, 2)
		for range 2 {
			go func() {
				_, err := p.eng.Run(guard, promptkit.RunRequest{Text: "x", ProfileID: "d"})
				errs <- err
			}()
		}
		// Both are in flight at once: nothing bounds this backend.
		if err := p.open.WaitArrivals(guard, 2); err != nil {
			t.Fatal(err)
		}
		close(hold)
		for range 2 {
			if err := <-errs; err != nil {
				t.Fatal(err)
			}
		}
		if p.open.MaxInFlight() != 2 {
			t.Fatalf("open backend MaxInFlight = %d", p.open.MaxInFlight())
		}
	})
}

// Transient failure, successful invalid output, repair
// transient failure, valid output: consistent counts, usage and events.
func TestContractTransientRepairTransientSequence(t *testing.T) {
	t.Parallel()
	srv, eng := contractRig(t, contractOpts{retries: contractInt(1), repairBudget: 1})
	u1 := providertest.Usage{PromptTokens: 11, CompletionTokens: 3, TotalTokens: 14, CachedTokens: 2, ReasoningTokens: 1}
	u2 := providertest.Usage{PromptTokens: 20, CompletionTokens: 5, TotalTokens: 25, CachedTokens: 4, ReasoningTokens: 2}
	srv.Enqueue(
		providertest.Status(503),
		providertest.Response{Text: "not json", Usage: u1},
		providertest.Status(503),
		providertest.Response{Text: contractValid, Usage: u2},
	)
	var log eventLog
	req := contractSummarize("sequence", "")
	req.Observer = log.Observe
	res, err := eng.Run(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	if res.Validation.Status != promptkit.ValidationValid || string(res.Output) != contractValid {
		t.Fatalf("validation = %+v, output %s", res.Validation, res.Output)
	}
	if res.Attempts != 4 || res.RepairCalls != 1 || srv.Count() != 4 {
		t.Fatalf("attempts %d, repairs %d, provider calls %d; want 4, 1, 4", res.Attempts, res.RepairCalls, srv.Count())
	}
	wantUsage := promptkit.Usage{
		TokenUsage: promptkit.TokenUsage{PromptTokens: 31, CompletionTokens: 8, TotalTokens: 39, CachedTokens: 6, ReasoningTokens: 3},
		Known:      promptkit.TokenUsagePresence{PromptTokens: true, CompletionTokens: true, TotalTokens: true, CachedTokens: true, ReasoningTokens: true},
	}
	if res.Usage != wantUsage {
		t.Fatalf("usage = %+v, want the sum of the two 200s %+v", res.Usage, wantUsage)
	}
	// Each generation's retry resends the same frozen request.
	reqs := srv.Requests()
	if string(reqs[0].Body) != string(reqs[1].Body) || string(reqs[2].Body) != string(reqs[3].Body) || string(reqs[1].Body) == string(reqs[2].Body) {
		t.Fatal("retries did not resend their generation's request, or the repair did not change it")
	}

	evs := log.Events()
	type step struct {
		kind                promptkit.ExecutionEventKind
		generation, attempt uint64
		outcome             promptkit.ExecutionOutcome
		status              int
	}
	want := []step{
		{promptkit.ExecutionStarted, 0, 0, "", 0},
		{promptkit.ExecutionAttempt, 1, 1, promptkit.ExecutionOutcomeError, 503},
		{promptkit.ExecutionRetryDelay, 1, 1, "", 0},
		{promptkit.ExecutionAttempt, 1, 2, promptkit.ExecutionOutcomeSuccess, 200},
		{promptkit.ExecutionAttempt, 2, 1, promptkit.ExecutionOutcomeError, 503},
		{promptkit.ExecutionRetryDelay, 2, 1, "", 0},
		{promptkit.ExecutionAttempt, 2, 2, promptkit.ExecutionOutcomeSuccess, 200},
		{promptkit.ExecutionFinished, 0, 0, promptkit.ExecutionOutcomeSuccess, 0},
	}
	if len(evs) != len(want) {
		t.Fatalf("events = %s", eventKinds(evs))
	}
	for i, w := range want {
		ev := evs[i]
		got := step{ev.Kind, ev.Generation, ev.Attempt, ev.Outcome, ev.StatusCode}
		if got != w {
			t.Errorf("event %d = %+v, want %+v", i, got, w)
		}
		if ev.RunID == "" || ev.RunID != res.RunID {
			t.Errorf("event %d RunID %q, result RunID %q", i, ev.RunID, res.RunID)
		}
		if ev.Kind == promptkit.ExecutionAttempt {
			if !ev.Dispatched {
				t.Errorf("event %d not dispatched", i)
			}
			if ev.StatusCode == 503 && ev.Failure != promptkit.ExecutionFailureProviderStatus {
				t.Errorf("event %d failure %q", i, ev.Failure)
			}
		}
	}
	fin := evs[len(evs)-1]
	if fin.Attempts != 4 || fin.TransientRetries != 2 || fin.RepairCalls != 1 || fin.RetriesExhausted || fin.Failure != promptkit.ExecutionFailureNone {
		t.Fatalf("finished = %+v", fin)
	}
	// Known partial usage: every count was reported by the two 200s but
	// not by the two dispatched 503s.
	partial := func(v int) promptkit.ObservedTokenCount { return promptkit.ObservedTokenCount{Value: v, Known: true} }
	wantObserved := promptkit.ObservedTokenUsage{
		PromptTokens: partial(31), CompletionTokens: partial(8), TotalTokens: partial(39), CachedTokens: partial(6), ReasoningTokens: partial(3),
	}
	if fin.Usage != wantObserved {
		t.Fatalf("finished usage = %+v\nwant %+v", fin.Usage, wantObserved)
	}
}
