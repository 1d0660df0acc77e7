package promptkit_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/promptkit/promptkit"
	"github.com/promptkit/promptkit/internal/testkit"
	"github.com/promptkit/promptkit/providertest"
)

const seamSummarySchema = `{"type":"object","properties":{"summary":{"type":"string","minLength":1}},"required":["summary"],"additionalProperties":false}`

type seamOpts struct {
	retries      *int
	repairBudget int
	maxActive    int
	maxRuns      int
	maxQueued    int
	apiKeyEnv    string
	rps          float64
	client       promptkit.LLMClient
}

// seamRig is a fake provider and an engine with a fake clock talking to it.
type seamRig struct {
	srv   *providertest.Server
	eng   *promptkit.Engine
	clock *testkit.Clock // its Jitter, Wait and OnWait are the seams
}

func seamConfig(url string, o seamOpts) promptkit.Config {
	return promptkit.Config{
		Backends: []promptkit.Backend{{ID: "local", BaseURL: url, MaxActive: o.maxActive, APIKeyEnv: o.apiKeyEnv, RequestsPerSecond: o.rps}},
		Profiles: []promptkit.Profile{{ID: "default", Backend: "local", Model: "m1", RepairBudget: o.repairBudget}},
		Prompts: []promptkit.Prompt{
			{ID: "summarize", Version: "3", Template: "Summarize: {{.text}}",
				InputSchema:  json.RawMessage(`{"type":"object","properties":{"text":{"type":"string","maxLength":100}},"required":["text"]}`),
				OutputSchema: json.RawMessage(seamSummarySchema)},
			{ID: "echo", Template: "Say {{.word}}"},
		},
		MaxConcurrentRuns: o.maxRuns,
		MaxQueuedRuns:     o.maxQueued,
		TransientRetries:  o.retries,
		LLMClient:         o.client,
	}
}

func newSeamRig(t *testing.T, o seamOpts) seamRig {
	t.Helper()
	srv := providertest.NewServer()
	t.Cleanup(srv.Close)
	clock := testkit.NewClock(time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC))
	eng, err := promptkit.NewWithSeams(seamConfig(srv.URL, o), clock.Now, clock.Jitter, clock.Wait)
	if err != nil {
		t.Fatal(err)
	}
	return seamRig{srv: srv, eng: eng, clock: clock}
}

func seamSummarize(text string) promptkit.RunRequest {
	return promptkit.RunRequest{PromptID: "summarize", Inputs: map[string]any{"text": text}}
}

func intp(v int) *int { return &v }

const validSummary = `{"summary":"ok"}`

func TestRetryDefaultIsTwoRetries(t *testing.T) {
	t.Parallel()
	r := newSeamRig(t, seamOpts{}) // Config.TransientRetries nil
	r.srv.Enqueue(providertest.Status(503), providertest.Status(503), providertest.Status(503), providertest.Reply("never sent"))
	res, err := r.eng.Run(context.Background(), promptkit.RunRequest{Text: "x"})
	if res != nil {
		t.Fatalf("partial result on error: %+v", res)
	}
	if got := r.srv.Count(); got != 3 {
		t.Fatalf("provider calls = %d, want 3 (1 + 2 default retries)", got)
	}
	if !errors.Is(err, promptkit.ErrRetriesExhausted) || !errors.Is(err, promptkit.ErrLLMGenerate) {
		t.Fatalf("err = %v, want ErrRetriesExhausted and ErrLLMGenerate", err)
	}
	var ex *promptkit.RetryExhaustedError
	if !errors.As(err, &ex) || ex.Attempts() != 3 {
		t.Fatalf("errors.As RetryExhaustedError: %#v", ex)
	}
	var ge *promptkit.GenerationError
	if !errors.As(err, &ge) || ge.StatusCode() != 503 || ge.BackendID() != "local" {
		t.Fatalf("errors.As GenerationError through exhaustion: %#v", ge)
	}
	if w := r.clock.Waits(); len(w) != 2 || w[0] != 500*time.Millisecond || w[1] != time.Second {
		t.Fatalf("backoff waits = %v, want [500ms 1s] with maximal jitter", w)
	}
}

func TestRetryExplicitZeroIsOrdinaryFailure(t *testing.T) {
	t.Parallel()
	r := newSeamRig(t, seamOpts{retries: intp(0)})
	r.srv.Enqueue(providertest.Status(503), providertest.Reply("never sent"))
	_, err := r.eng.Run(context.Background(), promptkit.RunRequest{Text: "x"})
	if r.srv.Count() != 1 {
		t.Fatalf("provider calls = %d, want 1", r.srv.Count())
	}
	var ge *promptkit.GenerationError
	if !errors.As(err, &ge) || ge.StatusCode() != 503 {
		t.Fatalf("err = %v, want a *GenerationError with 503", err)
	}
	var ex *promptkit.RetryExhaustedError
	if errors.Is(err, promptkit.ErrRetriesExhausted) || errors.As(err, &ex) {
		t.Fatalf("R=0 must return the ordinary failure, not exhaustion: %v", err)
	}
	if len(r.clock.Waits()) != 0 {
		t.Fatalf("waited %v with retries disabled", r.clock.Waits())
	}
}

func TestRetryNegativeConfig(t *testing.T) {
	t.Parallel()
	cfg := seamConfig("http://127.0.0.1:1/v1", seamOpts{retries: intp(-1)})
	if _, err := promptkit.New(cfg); !errors.Is(err, promptkit.ErrInvalidConfig) || !strings.Contains(err.Error(), "transient_retries") {
		t.Fatalf("New err = %v, want ErrInvalidConfig naming transient_retries", err)
	}
}

func TestRetryRequestOverridesEngine(t *testing.T) {
	t.Parallel()
	t.Run("request enables", func(t *testing.T) {
		t.Parallel()
		r := newSeamRig(t, seamOpts{retries: intp(0)})
		r.srv.Enqueue(providertest.Status(503), providertest.Status(502), providertest.Reply("ok"))
		res, err := r.eng.Run(context.Background(), promptkit.RunRequest{Text: "x", TransientRetries: intp(2)})
		if err != nil || res.Text != "ok" || res.Attempts != 3 || r.srv.Count() != 3 {
			t.Fatalf("res = %+v, err = %v, calls = %d", res, err, r.srv.Count())
		}
	})
	t.Run("request disables", func(t *testing.T) {
		t.Parallel()
		r := newSeamRig(t, seamOpts{retries: intp(5)})
		r.srv.Enqueue(providertest.Status(503), providertest.Reply("never sent"))
		_, err := r.eng.Run(context.Background(), promptkit.RunRequest{Text: "x", TransientRetries: intp(0)})
		var ge *promptkit.GenerationError
		if !errors.As(err, &ge) || ge.StatusCode() != 503 || errors.Is(err, promptkit.ErrRetriesExhausted) || r.srv.Count() != 1 {
			t.Fatalf("err = %v, calls = %d", err, r.srv.Count())
		}
	})
	t.Run("request exhausts its own budget", func(t *testing.T) {
		t.Parallel()
		r := newSeamRig(t, seamOpts{}) // default 2
		r.srv.Enqueue(providertest.Status(429), providertest.Status(429), providertest.Reply("never sent"))
		_, err := r.eng.Run(context.Background(), promptkit.RunRequest{Text: "x", TransientRetries: intp(1)})
		var ex *promptkit.RetryExhaustedError
		if !errors.As(err, &ex) || ex.Attempts() != 2 || r.srv.Count() != 2 {
			t.Fatalf("err = %v, calls = %d", err, r.srv.Count())
		}
	})
}

func TestRetryNegativeRequest(t *testing.T) {
	t.Parallel()
	r := newSeamRig(t, seamOpts{})
	ctx := context.Background()
	req := promptkit.RunRequest{Text: "x", TransientRetries: intp(-1)}
	if _, err := r.eng.Run(ctx, req); !errors.Is(err, promptkit.ErrInvalidRequest) {
		t.Errorf("Run: %v", err)
	}
	if _, err := r.eng.Prepare(ctx, req); !errors.Is(err, promptkit.ErrInvalidRequest) {
		t.Errorf("Prepare: %v", err)
	}
	if h, err := r.eng.PrepareExecution(ctx, req); !errors.Is(err, promptkit.ErrInvalidRequest) || h != nil {
		t.Errorf("PrepareExecution: %v, %v", h, err)
	}
	if r.srv.Count() != 0 {
		t.Fatalf("invalid requests reached the provider %d times", r.srv.Count())
	}
}

func TestRetryPointersAreCopied(t *testing.T) {
	t.Parallel()
	t.Run("config", func(t *testing.T) {
		t.Parallel()
		n := 0
		r := newSeamRig(t, seamOpts{retries: &n})
		n = 5
		r.srv.Enqueue(providertest.Status(503), providertest.Reply("never sent"))
		if _, err := r.eng.Run(context.Background(), promptkit.RunRequest{Text: "x"}); err == nil || r.srv.Count() != 1 {
			t.Fatalf("engine followed the caller's int after New: err = %v, calls = %d", err, r.srv.Count())
		}
	})
	t.Run("prepared request", func(t *testing.T) {
		t.Parallel()
		r := newSeamRig(t, seamOpts{retries: intp(0)})
		n := 2
		h, err := r.eng.PrepareExecution(context.Background(), promptkit.RunRequest{Text: "x", TransientRetries: &n})
		if err != nil {
			t.Fatal(err)
		}
		n = 0
		r.srv.Enqueue(providertest.Status(503), providertest.Status(503), providertest.Reply("ok"))
		res, err := r.eng.RunPrepared(context.Background(), h)
		if err != nil || res.Attempts != 3 || r.srv.Count() != 3 {
			t.Fatalf("prepared run followed the caller's int: res = %+v, err = %v, calls = %d", res, err, r.srv.Count())
		}
	})
}

func TestRetryOnlyTransientStatuses(t *testing.T) {
	t.Parallel()
	cases := []struct {
		status int
		retry  bool
	}{
		{400, false}, {401, false}, {403, false}, {404, false}, {408, false}, {409, false}, {422, false},
		{429, true}, {500, true}, {501, false}, {502, true}, {503, true}, {504, true}, {505, false},
	}
	for _, c := range cases {
		t.Run(fmt.Sprint(c.status), func(t *testing.T) {
			t.Parallel()
			r := newSeamRig(t, seamOpts{retries: intp(1)})
			r.srv.Enqueue(providertest.Status(c.status), providertest.Reply("ok"))
			res, err := r.eng.Run(context.Background(), promptkit.RunRequest{Text: "x"})
			if c.retry {
				if err != nil || res.Text != "ok" || res.Attempts != 2 || r.srv.Count() != 2 {
					t.Fatalf("eligible %d: res = %+v, err = %v, calls = %d", c.status, res, err, r.srv.Count())
				}
				return
			}
			var ge *promptkit.GenerationError
			if !errors.As(err, &ge) || ge.StatusCode() != c.status || errors.Is(err, promptkit.ErrRetriesExhausted) {
				t.Fatalf("noneligible %d: err = %v", c.status, err)
			}
			if r.srv.Count() != 1 || len(r.clock.Waits()) != 0 {
				t.Fatalf("noneligible %d was replayed: calls = %d, waits = %v", c.status, r.srv.Count(), r.clock.Waits())
			}
		})
	}
}

func TestRetryAfterIsAMinimum(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		header string
		want   time.Duration
	}{
		{"2", 2 * time.Second},   // above the 500ms local backoff
		{"30", 30 * time.Second}, // above the 8s local cap: never capped
	} {
		t.Run(c.header, func(t *testing.T) {
			t.Parallel()
			r := newSeamRig(t, seamOpts{retries: intp(1)})
			r.srv.Enqueue(providertest.Status(503).WithRetryAfter(c.header), providertest.Reply("ok"))
			res, err := r.eng.Run(context.Background(), promptkit.RunRequest{Text: "x"})
			if err != nil || res.Attempts != 2 {
				t.Fatalf("res = %+v, err = %v", res, err)
			}
			w := r.clock.Waits()
			if len(w) == 0 || w[0] < c.want {
				t.Fatalf("retry wait = %v, want at least %v", w, c.want)
			}
		})
	}
}

func TestGenerationErrorRetryAfter(t *testing.T) {
	t.Parallel()
	r := newSeamRig(t, seamOpts{retries: intp(0)})
	received := r.clock.Now()
	r.srv.Enqueue(providertest.Status(503).WithRetryAfter("2"))
	_, err := r.eng.Run(context.Background(), promptkit.RunRequest{Text: "x"})
	var ge *promptkit.GenerationError
	if !errors.As(err, &ge) {
		t.Fatalf("err = %v", err)
	}
	if got, want := ge.RetryAfter(), received.Add(2*time.Second); !got.Equal(want) {
		t.Fatalf("RetryAfter = %v, want %v", got, want)
	}
	var none *promptkit.GenerationError
	if !none.RetryAfter().IsZero() {
		t.Fatal("nil GenerationError has a RetryAfter")
	}
}

// TestRetryBudgetPerRepairGeneration: each repair generation gets its own
// transient budget, so P=1, R=1 allows four calls.
func TestRetryBudgetPerRepairGeneration(t *testing.T) {
	t.Parallel()
	r := newSeamRig(t, seamOpts{retries: intp(1), repairBudget: 1})
	r.srv.Enqueue(providertest.Status(503), providertest.Reply("not json"), providertest.Status(503), providertest.Reply(validSummary))
	res, err := r.eng.Run(context.Background(), seamSummarize("x"))
	if err != nil {
		t.Fatal(err)
	}
	if res.Validation.Status != promptkit.ValidationValid || string(res.Output) != validSummary {
		t.Fatalf("validation = %+v, output = %s", res.Validation, res.Output)
	}
	if res.Attempts != 4 || res.RepairCalls != 1 || r.srv.Count() != 4 {
		t.Fatalf("attempts = %d, repairs = %d, calls = %d; want 4, 1, 4", res.Attempts, res.RepairCalls, r.srv.Count())
	}
}

// countingClient is an injected LLMClient that counts its calls.
type countingClient struct {
	calls atomic.Int64
	resp  *promptkit.GenerateResponse
	err   error
}

func (c *countingClient) Generate(context.Context, promptkit.GenerateRequest) (*promptkit.GenerateResponse, error) {
	c.calls.Add(1)
	return c.resp, c.err
}

func TestRetryNeverRetriesInjectedClient(t *testing.T) {
	t.Parallel()
	mine := errors.New("injected failure")
	c := &countingClient{err: mine}
	r := newSeamRig(t, seamOpts{client: c, retries: intp(5)})
	_, err := r.eng.Run(context.Background(), promptkit.RunRequest{Text: "x", TransientRetries: intp(5)})
	if !errors.Is(err, mine) || !errors.Is(err, promptkit.ErrLLMGenerate) || errors.Is(err, promptkit.ErrRetriesExhausted) {
		t.Fatalf("err = %v", err)
	}
	if c.calls.Load() != 1 || len(r.clock.Waits()) != 0 || r.srv.Count() != 0 {
		t.Fatalf("injected client called %d times, waits %v, provider %d", c.calls.Load(), r.clock.Waits(), r.srv.Count())
	}
}

func TestRetryWaitCanceledByCaller(t *testing.T) {
	t.Parallel()
	r := newSeamRig(t, seamOpts{retries: intp(2)})
	waiting := make(chan struct{})
	r.clock.OnWait(func(ctx context.Context, _ time.Duration) error {
		close(waiting)
		<-ctx.Done() // a real wait: only cancellation ends it
		return ctx.Err()
	})
	r.srv.Enqueue(providertest.Status(503), providertest.Reply("never sent"))
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	var log eventLog
	go func() {
		_, err := r.eng.Run(ctx, promptkit.RunRequest{Text: "x", Observer: log.Observe})
		errc <- err
	}()
	<-waiting
	cancel()
	err := <-errc
	if !errors.Is(err, context.Canceled) || errors.Is(err, promptkit.ErrRetriesExhausted) {
		t.Fatalf("err = %v, want context.Canceled and not exhaustion", err)
	}
	if r.srv.Count() != 1 {
		t.Fatalf("provider called %d times after cancellation, want 1", r.srv.Count())
	}
	// The interrupted wait is still reported, then the run finishes canceled.
	evs := log.Events()
	if got := eventKinds(evs); got != "started,attempt,retry_delay,finished" {
		t.Fatalf("events = %s", got)
	}
	if fin := evs[3]; fin.Failure != promptkit.ExecutionFailureCanceled || fin.RetriesExhausted || fin.Attempts != 1 {
		t.Fatalf("finished = %+v", fin)
	}
}

// TestRetryStoppedByAttemptCallback: an attempt callback that cancels the
// run's context prevents the retry and its wait.
func TestRetryStoppedByAttemptCallback(t *testing.T) {
	t.Parallel()
	r := newSeamRig(t, seamOpts{retries: intp(3)})
	r.srv.Enqueue(providertest.Status(503), providertest.Reply("never sent"))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var log eventLog
	observer := func(ev promptkit.ExecutionEvent) {
		log.Observe(ev)
		if ev.Kind == promptkit.ExecutionAttempt {
			cancel()
		}
	}
	_, err := r.eng.Run(ctx, promptkit.RunRequest{Text: "x", Observer: observer})
	if !errors.Is(err, context.Canceled) || errors.Is(err, promptkit.ErrRetriesExhausted) {
		t.Fatalf("err = %v", err)
	}
	if r.srv.Count() != 1 || len(r.clock.Waits()) != 0 {
		t.Fatalf("calls = %d, waits = %v", r.srv.Count(), r.clock.Waits())
	}
	if got := eventKinds(log.Events()); got != "started,attempt,finished" {
		t.Fatalf("events = %s", got)
	}
}

// TestRetryFreezesRequest: the API key is resolved once per generation; a
// change of the environment between attempts does not reach the retry.
// Not parallel: it changes the environment.
func TestRetryFreezesRequest(t *testing.T) {
	const env = "PROMPTKIT_TEST_RETRY_FREEZE_KEY"
	t.Setenv(env, "key-one")
	r := newSeamRig(t, seamOpts{retries: intp(1), apiKeyEnv: env})
	r.clock.OnWait(func(context.Context, time.Duration) error {
		return os.Setenv(env, "key-two") // t.Setenv restores it at cleanup
	})
	r.srv.Enqueue(providertest.Status(503), providertest.Reply(validSummary))
	if _, err := r.eng.Run(context.Background(), seamSummarize("freeze")); err != nil {
		t.Fatal(err)
	}
	reqs := r.srv.Requests()
	if len(reqs) != 2 {
		t.Fatalf("provider saw %d requests", len(reqs))
	}
	for i, q := range reqs {
		if got := q.Header.Get("Authorization"); got != "Bearer key-one" {
			t.Errorf("attempt %d Authorization = %q, want the first key", i+1, got)
		}
	}
	if string(reqs[0].Body) != string(reqs[1].Body) {
		t.Errorf("retry body differs:\n%s\n%s", reqs[0].Body, reqs[1].Body)
	}
	// The change itself took effect: a new generation sequence sees it.
	r.clock.OnWait(nil)
	if _, err := r.eng.Run(context.Background(), promptkit.RunRequest{Text: "again"}); err != nil {
		t.Fatal(err)
	}
	if got := r.srv.Requests()[2].Header.Get("Authorization"); got != "Bearer key-two" {
		t.Fatalf("next run Authorization = %q, want the changed key", got)
	}
}

// BeforeCall is asked before every provider call of a run, retries
// included; its error ends the run there, with no further call, and
// errors.Is finds it.
func TestBeforeCallStopsLaterCalls(t *testing.T) {
	t.Parallel()
	r := newSeamRig(t, seamOpts{})
	r.srv.Enqueue(providertest.Status(503), providertest.Status(503), providertest.Reply("never sent"))
	spent := errors.New("budget spent")
	asked := 0
	_, err := r.eng.Run(context.Background(), promptkit.RunRequest{Text: "x", BeforeCall: func(context.Context, promptkit.CallEstimate) error {
		asked++
		if asked == 2 {
			return spent
		}
		return nil
	}})
	if !errors.Is(err, spent) {
		t.Fatalf("err = %v, want the BeforeCall error", err)
	}
	if got := r.srv.Count(); got != 1 || asked != 2 {
		t.Fatalf("provider calls = %d, BeforeCall asked %d times; want 1 and 2", got, asked)
	}
}
