package promptkit_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/promptkit/promptkit"
	"github.com/promptkit/promptkit/providertest"
)

// eventLog collects execution events.
type eventLog struct {
	mu  sync.Mutex
	evs []promptkit.ExecutionEvent
}

func (l *eventLog) Observe(ev promptkit.ExecutionEvent) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.evs = append(l.evs, ev)
}

func (l *eventLog) Events() []promptkit.ExecutionEvent {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]promptkit.ExecutionEvent(nil), l.evs...)
}

func eventKinds(evs []promptkit.ExecutionEvent) string {
	ks := make([]string, len(evs))
	for i, ev := range evs {
		ks[i] = string(ev.Kind)
	}
	return strings.Join(ks, ",")
}

func lastEvent(t *testing.T, evs []promptkit.ExecutionEvent) promptkit.ExecutionEvent {
	t.Helper()
	if len(evs) == 0 || evs[len(evs)-1].Kind != promptkit.ExecutionFinished {
		t.Fatalf("events %s do not end with finished", eventKinds(evs))
	}
	return evs[len(evs)-1]
}

// deadlockGuard bounds waits that only a deadlock could make long, so a
// regression fails instead of hanging. It is not a timing assertion.
func deadlockGuard(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

var (
	knownZero = promptkit.ObservedTokenCount{Known: true, Complete: true}
	unknown   = promptkit.ObservedTokenCount{}
)

func allCounts(c promptkit.ObservedTokenCount) promptkit.ObservedTokenUsage {
	return promptkit.ObservedTokenUsage{PromptTokens: c, CompletionTokens: c, TotalTokens: c, CachedTokens: c, ReasoningTokens: c}
}

func identityOf(ev promptkit.ExecutionEvent) [5]string {
	return [5]string{ev.PromptID, ev.PromptVersion, ev.ProfileID, ev.BackendID, ev.Model}
}

func TestObserveOrdinaryRun(t *testing.T) {
	t.Parallel()
	r := newSeamRig(t, seamOpts{retries: intp(1)})
	r.srv.Enqueue(providertest.Status(503), providertest.Reply(validSummary))
	var log eventLog
	req := seamSummarize("x")
	req.Observer = log.Observe
	res, err := r.eng.Run(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	// Delivery is synchronous: everything is here the moment Run returns.
	evs := log.Events()
	if got := eventKinds(evs); got != "started,attempt,retry_delay,attempt,finished" {
		t.Fatalf("events = %s", got)
	}
	wantID := [5]string{"summarize", "3", "default", "local", "m1"}
	for i, ev := range evs {
		if ev.RunID == "" || ev.RunID != res.RunID {
			t.Errorf("event %d RunID = %q, result RunID = %q", i, ev.RunID, res.RunID)
		}
		if i > 0 && ev.Time.Before(evs[i-1].Time) {
			t.Errorf("event %d time goes backwards", i)
		}
		if i > 0 && identityOf(ev) != wantID {
			t.Errorf("event %d (%s) identity = %v, want %v", i, ev.Kind, identityOf(ev), wantID)
		}
		if ev.Kind != promptkit.ExecutionFinished && (ev.Attempts != 0 || ev.TransientRetries != 0 || ev.RepairCalls != 0) {
			t.Errorf("nonterminal %s event carries totals: %+v", ev.Kind, ev)
		}
	}
	started, a1, delay, a2, fin := evs[0], evs[1], evs[2], evs[3], evs[4]
	if identityOf(started) != [5]string{} || started.Generation != 0 || started.Attempt != 0 || started.Outcome != "" {
		t.Errorf("started = %+v, want no identities", started)
	}
	if a1.Generation != 1 || a1.Attempt != 1 || !a1.Dispatched || a1.Outcome != promptkit.ExecutionOutcomeError ||
		a1.Failure != promptkit.ExecutionFailureProviderStatus || a1.StatusCode != 503 {
		t.Errorf("first attempt = %+v", a1)
	}
	waits := r.clock.Waits()
	if len(waits) != 1 || delay.Generation != 1 || delay.Attempt != 1 || delay.RetryDelay != waits[0] || delay.Duration != delay.RetryDelay {
		t.Errorf("retry_delay = %+v, waits %v", delay, waits)
	}
	if a2.Generation != 1 || a2.Attempt != 2 || !a2.Dispatched || a2.Outcome != promptkit.ExecutionOutcomeSuccess ||
		a2.Failure != promptkit.ExecutionFailureNone || a2.StatusCode != 200 {
		t.Errorf("second attempt = %+v", a2)
	}
	if fin.Outcome != promptkit.ExecutionOutcomeSuccess || fin.Failure != promptkit.ExecutionFailureNone || fin.RetriesExhausted ||
		fin.Attempts != 2 || fin.TransientRetries != 1 || fin.RepairCalls != 0 || fin.Generation != 0 || fin.Attempt != 0 ||
		fin.RetryDelay != waits[0] {
		t.Errorf("finished = %+v", fin)
	}
	if uint64(res.Attempts) != fin.Attempts {
		t.Errorf("result attempts %d, finished %d", res.Attempts, fin.Attempts)
	}
}

func TestObserveRunOutcomes(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name      string
		opts      seamOpts
		replies   []providertest.Response
		req       promptkit.RunRequest
		closeSrv  bool
		outcome   promptkit.ExecutionOutcome
		failure   promptkit.ExecutionFailureKind
		exhausted bool
		attempts  uint64
		retries   uint64
		repairs   uint64
	}{
		{"exhausted", seamOpts{retries: intp(1)}, []providertest.Response{providertest.Status(503), providertest.Status(503)}, promptkit.RunRequest{Text: "x"},
			false, promptkit.ExecutionOutcomeError, promptkit.ExecutionFailureProviderStatus, true, 2, 1, 0},
		{"noneligible status", seamOpts{retries: intp(2)}, []providertest.Response{providertest.Status(400)}, promptkit.RunRequest{Text: "x"},
			false, promptkit.ExecutionOutcomeError, promptkit.ExecutionFailureProviderStatus, false, 1, 0, 0},
		{"retry then noneligible", seamOpts{retries: intp(2)}, []providertest.Response{providertest.Status(503), providertest.Status(400)}, promptkit.RunRequest{Text: "x"},
			false, promptkit.ExecutionOutcomeError, promptkit.ExecutionFailureProviderStatus, false, 2, 1, 0},
		{"malformed", seamOpts{}, []providertest.Response{providertest.Malformed()}, promptkit.RunRequest{Text: "x"},
			false, promptkit.ExecutionOutcomeError, promptkit.ExecutionFailureMalformed, false, 1, 0, 0},
		{"transport", seamOpts{}, nil, promptkit.RunRequest{Text: "x"},
			true, promptkit.ExecutionOutcomeError, promptkit.ExecutionFailureTransport, false, 1, 0, 0},
		{"invalid output", seamOpts{repairBudget: 1}, []providertest.Response{providertest.Reply("nope"), providertest.Reply("still not json")}, seamSummarize("x"),
			false, promptkit.ExecutionOutcomeInvalidOutput, promptkit.ExecutionFailureNone, false, 2, 0, 1},
		{"skipped validation", seamOpts{}, []providertest.Response{providertest.Reply("plain")}, promptkit.RunRequest{Text: "x"},
			false, promptkit.ExecutionOutcomeSuccess, promptkit.ExecutionFailureNone, false, 1, 0, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			r := newSeamRig(t, c.opts)
			r.srv.Enqueue(c.replies...)
			if c.closeSrv {
				r.srv.Close()
			}
			var log eventLog
			req := c.req
			req.Observer = log.Observe
			res, err := r.eng.Run(context.Background(), req)
			if (err == nil) != (c.outcome != promptkit.ExecutionOutcomeError) {
				t.Fatalf("res = %+v, err = %v", res, err)
			}
			fin := lastEvent(t, log.Events())
			if fin.Outcome != c.outcome || fin.RetriesExhausted != c.exhausted {
				t.Errorf("finished outcome/exhausted = %q/%v, want %q/%v (err %v)", fin.Outcome, fin.RetriesExhausted, c.outcome, c.exhausted, err)
			}
			if fin.Failure != c.failure {
				t.Errorf("finished failure = %q, want %q (err %v)", fin.Failure, c.failure, err)
			}
			if fin.Attempts != c.attempts || fin.TransientRetries != c.retries || fin.RepairCalls != c.repairs {
				t.Errorf("finished totals = %d/%d/%d, want %d/%d/%d", fin.Attempts, fin.TransientRetries, fin.RepairCalls, c.attempts, c.retries, c.repairs)
			}
			if res != nil && (uint64(res.Attempts) != fin.Attempts || uint64(res.RepairCalls) != fin.RepairCalls || res.RunID != fin.RunID) {
				t.Errorf("result %+v disagrees with finished %+v", res, fin)
			}
		})
	}
}

// TestObserveFinishedProviderStatus: a run failing with a provider status,
// exhausted or not, finishes with Failure provider_status (exhaustion is
// the separate flag), like its attempt events.
func TestObserveFinishedProviderStatus(t *testing.T) {
	t.Parallel()
	for _, replies := range [][]providertest.Response{
		{providertest.Status(400)},
		{providertest.Status(503), providertest.Status(503)},
	} {
		r := newSeamRig(t, seamOpts{retries: intp(1)})
		r.srv.Enqueue(replies...)
		var log eventLog
		_, err := r.eng.Run(context.Background(), promptkit.RunRequest{Text: "x", Observer: log.Observe})
		evs := log.Events()
		fin := lastEvent(t, evs)
		if evs[1].Failure != promptkit.ExecutionFailureProviderStatus {
			t.Errorf("attempt failure = %q", evs[1].Failure)
		}
		if fin.Failure != promptkit.ExecutionFailureProviderStatus {
			t.Errorf("finished failure = %q, want provider_status (err %v)", fin.Failure, err)
		}
	}
}

func TestObservePreGenerationErrors(t *testing.T) {
	t.Parallel()
	canceled, cancel := context.WithCancel(context.Background())
	cancel()
	expired, cancel2 := context.WithDeadline(context.Background(), time.Unix(1, 0))
	defer cancel2()
	cases := []struct {
		name     string
		opts     seamOpts
		ctx      context.Context
		req      promptkit.RunRequest
		want     error
		failure  promptkit.ExecutionFailureKind
		resolved bool // identities were resolved before the failure
	}{
		{"unknown prompt", seamOpts{}, context.Background(), promptkit.RunRequest{PromptID: "nope"}, promptkit.ErrPromptNotFound, promptkit.ExecutionFailurePromptNotFound, false},
		{"unknown profile", seamOpts{}, context.Background(), promptkit.RunRequest{Text: "x", ProfileID: "nope"}, promptkit.ErrProfileNotFound, promptkit.ExecutionFailureProfileNotFound, false},
		{"inputs fail schema", seamOpts{}, context.Background(), seamSummarize(strings.Repeat("long ", 50)), promptkit.ErrInvalidRequest, promptkit.ExecutionFailurePromptRender, false},
		{"template misses input", seamOpts{}, context.Background(), promptkit.RunRequest{PromptID: "echo", Inputs: map[string]any{"other": 1}}, promptkit.ErrInvalidRequest, promptkit.ExecutionFailurePromptRender, false},
		{"neither prompt nor text", seamOpts{}, context.Background(), promptkit.RunRequest{}, promptkit.ErrInvalidRequest, promptkit.ExecutionFailureInvalidRequest, false},
		{"negative retries", seamOpts{}, context.Background(), promptkit.RunRequest{Text: "x", TransientRetries: intp(-1)}, promptkit.ErrInvalidRequest, promptkit.ExecutionFailureInvalidRequest, false},
		{"missing credential", seamOpts{apiKeyEnv: "PROMPTKIT_TEST_OBSERVE_DEFINITELY_UNSET"}, context.Background(), promptkit.RunRequest{Text: "x"}, promptkit.ErrInvalidRequest, promptkit.ExecutionFailureInvalidRequest, true},
		{"canceled before admission", seamOpts{}, canceled, promptkit.RunRequest{Text: "x"}, context.Canceled, promptkit.ExecutionFailureCanceled, true},
		{"deadline before admission", seamOpts{}, expired, promptkit.RunRequest{Text: "x"}, context.DeadlineExceeded, promptkit.ExecutionFailureDeadline, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			r := newSeamRig(t, c.opts)
			var log eventLog
			req := c.req
			req.Observer = log.Observe
			if _, err := r.eng.Run(c.ctx, req); !errors.Is(err, c.want) {
				t.Fatalf("err = %v, want %v", err, c.want)
			}
			evs := log.Events()
			if got := eventKinds(evs); got != "started,finished" {
				t.Fatalf("events = %s, want started,finished", got)
			}
			fin := evs[1]
			if fin.Outcome != promptkit.ExecutionOutcomeError || fin.Failure != c.failure || fin.RunID == "" || fin.RunID != evs[0].RunID {
				t.Errorf("finished = %+v, want failure %q", fin, c.failure)
			}
			if fin.Attempts != 0 || fin.Usage != allCounts(knownZero) {
				t.Errorf("finished totals = %d attempts, usage %+v; want 0 and known zeros", fin.Attempts, fin.Usage)
			}
			if got := identityOf(fin) != [5]string{}; got != c.resolved {
				t.Errorf("finished identity = %v, resolved = %v", identityOf(fin), c.resolved)
			}
			if r.srv.Count() != 0 {
				t.Errorf("provider called %d times", r.srv.Count())
			}
		})
	}
}

func TestObserveNilEngine(t *testing.T) {
	t.Parallel()
	var log eventLog
	_, err := (*promptkit.Engine)(nil).Run(context.Background(), promptkit.RunRequest{Text: "x", Observer: log.Observe})
	if !errors.Is(err, promptkit.ErrInvalidConfig) {
		t.Fatalf("err = %v", err)
	}
	evs := log.Events()
	if got := eventKinds(evs); got != "started,finished" {
		t.Fatalf("events = %s", got)
	}
	if evs[1].Failure != promptkit.ExecutionFailureInvalidConfig || evs[1].Outcome != promptkit.ExecutionOutcomeError {
		t.Fatalf("finished = %+v", evs[1])
	}
}

func TestObserveUsagePresence(t *testing.T) {
	t.Parallel()
	full := func(p, c, tot, cached, reasoning int) providertest.Usage {
		return providertest.Usage{PromptTokens: p, CompletionTokens: c, TotalTokens: tot, CachedTokens: cached, ReasoningTokens: reasoning}
	}
	count := func(v int, known, complete bool) promptkit.ObservedTokenCount {
		return promptkit.ObservedTokenCount{Value: v, Known: known, Complete: complete}
	}
	cases := []struct {
		name    string
		opts    seamOpts
		req     promptkit.RunRequest
		replies []providertest.Response
		want    promptkit.ObservedTokenUsage
	}{
		{"partial then full", seamOpts{repairBudget: 1}, seamSummarize("x"), []providertest.Response{
			{Text: "not json", Usage: providertest.Usage{Mode: providertest.UsagePartial, PromptTokens: 5, CompletionTokens: 2}},
			{Text: validSummary, Usage: full(7, 3, 10, 1, 4)},
		}, promptkit.ObservedTokenUsage{
			PromptTokens: count(12, true, true), CompletionTokens: count(5, true, true),
			TotalTokens: count(10, true, false), CachedTokens: count(1, true, false), ReasoningTokens: count(4, true, false),
		}},
		{"failed dispatched attempt reports nothing", seamOpts{retries: intp(1)}, promptkit.RunRequest{Text: "x"}, []providertest.Response{
			providertest.Status(503),
			{Text: "ok", Usage: full(1, 2, 3, 1, 1)},
		}, promptkit.ObservedTokenUsage{
			PromptTokens: count(1, true, false), CompletionTokens: count(2, true, false),
			TotalTokens: count(3, true, false), CachedTokens: count(1, true, false), ReasoningTokens: count(1, true, false),
		}},
		{"zero", seamOpts{}, promptkit.RunRequest{Text: "x"}, []providertest.Response{{Text: "ok", Usage: providertest.Usage{Mode: providertest.UsageZero}}}, allCounts(knownZero)},
		{"absent", seamOpts{}, promptkit.RunRequest{Text: "x"}, []providertest.Response{{Text: "ok", Usage: providertest.Usage{Mode: providertest.UsageAbsent}}}, allCounts(unknown)},
		{"null", seamOpts{}, promptkit.RunRequest{Text: "x"}, []providertest.Response{{Text: "ok", Usage: providertest.Usage{Mode: providertest.UsageNull}}}, allCounts(unknown)},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			r := newSeamRig(t, c.opts)
			r.srv.Enqueue(c.replies...)
			var log eventLog
			req := c.req
			req.Observer = log.Observe
			if _, err := r.eng.Run(context.Background(), req); err != nil {
				t.Fatal(err)
			}
			evs := log.Events()
			fin := lastEvent(t, evs)
			if fin.Usage != c.want {
				t.Errorf("finished usage = %+v\nwant %+v", fin.Usage, c.want)
			}
			if fin.Attempts != uint64(len(c.replies)) {
				t.Errorf("attempts = %d, want %d", fin.Attempts, len(c.replies))
			}
			for _, ev := range evs {
				if ev.Kind == promptkit.ExecutionAttempt && ev.StatusCode >= 400 && ev.Usage != allCounts(unknown) {
					t.Errorf("failed attempt reports usage %+v", ev.Usage)
				}
			}
		})
	}
	t.Run("attempt usage", func(t *testing.T) {
		t.Parallel()
		r := newSeamRig(t, seamOpts{})
		r.srv.Enqueue(providertest.Response{Text: "ok", Usage: providertest.Usage{Mode: providertest.UsagePartial, PromptTokens: 5, CompletionTokens: 2}})
		var log eventLog
		if _, err := r.eng.Run(context.Background(), promptkit.RunRequest{Text: "x", Observer: log.Observe}); err != nil {
			t.Fatal(err)
		}
		a := log.Events()[1]
		want := promptkit.ObservedTokenUsage{PromptTokens: count(5, true, true), CompletionTokens: count(2, true, true)}
		if a.Kind != promptkit.ExecutionAttempt || a.Usage != want {
			t.Fatalf("attempt %s usage = %+v, want %+v", a.Kind, a.Usage, want)
		}
	})
}

// TestObserveUndispatchedAttempt: a pacing wait canceled before dispatch
// yields an attempt event with Dispatched false and known zero totals.
func TestObserveUndispatchedAttempt(t *testing.T) {
	t.Parallel()
	r := newSeamRig(t, seamOpts{rps: 1})
	if _, err := r.eng.Run(context.Background(), promptkit.RunRequest{Text: "first"}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	r.clock.OnWait(func(ctx context.Context, _ time.Duration) error {
		cancel() // the caller gives up while the run waits for pacing
		return ctx.Err()
	})
	var log eventLog
	_, err := r.eng.Run(ctx, promptkit.RunRequest{Text: "second", Observer: log.Observe})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v", err)
	}
	evs := log.Events()
	if got := eventKinds(evs); got != "started,attempt,finished" {
		t.Fatalf("events = %s", got)
	}
	a, fin := evs[1], evs[2]
	if a.Dispatched || a.Generation != 1 || a.Attempt != 1 || a.Failure != promptkit.ExecutionFailureCanceled || a.Usage != allCounts(unknown) || a.GenerationDuration != 0 {
		t.Errorf("attempt = %+v", a)
	}
	if fin.Failure != promptkit.ExecutionFailureCanceled || fin.Attempts != 0 || fin.TransientRetries != 0 || fin.Usage != allCounts(knownZero) {
		t.Errorf("finished = %+v", fin)
	}
	if r.srv.Count() != 1 {
		t.Errorf("provider called %d times, want only the first run", r.srv.Count())
	}
}

func TestObserveInjectedUsage(t *testing.T) {
	t.Parallel()
	known := func(v int) promptkit.ObservedTokenCount {
		return promptkit.ObservedTokenCount{Value: v, Known: true, Complete: true}
	}
	cases := []struct {
		name string
		resp promptkit.GenerateResponse
		want promptkit.ObservedTokenUsage
	}{
		{"legacy nil presence", promptkit.GenerateResponse{Text: "ok", Usage: promptkit.TokenUsage{PromptTokens: 3, TotalTokens: 3}},
			promptkit.ObservedTokenUsage{PromptTokens: known(3), TotalTokens: known(3)}},
		{"explicit zeros", promptkit.GenerateResponse{Text: "ok", UsagePresence: &promptkit.TokenUsagePresence{
			PromptTokens: true, CompletionTokens: true, TotalTokens: true, CachedTokens: true, ReasoningTokens: true}},
			allCounts(knownZero)},
		{"explicit presence governs", promptkit.GenerateResponse{Text: "ok", Usage: promptkit.TokenUsage{CompletionTokens: 5},
			UsagePresence: &promptkit.TokenUsagePresence{PromptTokens: true}},
			promptkit.ObservedTokenUsage{PromptTokens: knownZero}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			resp := c.resp
			r := newSeamRig(t, seamOpts{client: &countingClient{resp: &resp}})
			var log eventLog
			res, err := r.eng.Run(context.Background(), promptkit.RunRequest{Text: "x", Observer: log.Observe})
			if err != nil {
				t.Fatal(err)
			}
			evs := log.Events()
			if got := eventKinds(evs); got != "started,attempt,finished" {
				t.Fatalf("events = %s", got)
			}
			if evs[1].Usage != c.want || evs[2].Usage != c.want {
				t.Errorf("usage attempt %+v, finished %+v\nwant %+v", evs[1].Usage, evs[2].Usage, c.want)
			}
			// Result counts sum what was returned; which of them are known
			// is what the finished event says.
			if res.Usage.TokenUsage != c.resp.Usage {
				t.Errorf("result usage = %+v, want %+v", res.Usage, c.resp.Usage)
			}
			if res.Usage.Known != c.want.Usage().Known {
				t.Errorf("result usage known = %+v, want %+v", res.Usage.Known, c.want.Usage().Known)
			}
		})
	}
	t.Run("failing client has unknown usage", func(t *testing.T) {
		t.Parallel()
		r := newSeamRig(t, seamOpts{client: &countingClient{err: errors.New("boom")}})
		var log eventLog
		if _, err := r.eng.Run(context.Background(), promptkit.RunRequest{Text: "x", Observer: log.Observe}); err == nil {
			t.Fatal("want error")
		}
		evs := log.Events()
		fin := lastEvent(t, evs)
		if evs[1].Usage != allCounts(unknown) || !evs[1].Dispatched || fin.Usage != allCounts(unknown) || fin.Attempts != 1 ||
			fin.Failure != promptkit.ExecutionFailureGeneration {
			t.Fatalf("attempt %+v\nfinished %+v", evs[1], fin)
		}
	})
}

func TestGenerateResponseUsagePresenceJSON(t *testing.T) {
	t.Parallel()
	in := promptkit.GenerateResponse{Text: "ok", Usage: promptkit.TokenUsage{PromptTokens: 1},
		UsagePresence: &promptkit.TokenUsagePresence{PromptTokens: true, ReasoningTokens: true}}
	b, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), `"usage_presence":{"prompt_tokens":true,"completion_tokens":false,"total_tokens":false,"cached_tokens":false,"reasoning_tokens":true}`) {
		t.Fatalf("JSON = %s", b)
	}
	var out promptkit.GenerateResponse
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	if out.UsagePresence == nil || *out.UsagePresence != *in.UsagePresence || out.Usage != in.Usage {
		t.Fatalf("round trip = %+v", out)
	}
	in.UsagePresence = nil
	if b, _ = json.Marshal(in); strings.Contains(string(b), "usage_presence") {
		t.Fatalf("nil presence serialized: %s", b)
	}
	out = promptkit.GenerateResponse{}
	if err := json.Unmarshal(b, &out); err != nil || out.UsagePresence != nil {
		t.Fatalf("round trip of nil presence = %+v, %v", out, err)
	}
}

// TestObserveRedaction: events never carry provider text, keys or URLs.
// Not parallel: it sets the environment.
func TestObserveRedaction(t *testing.T) {
	const (
		marker = "PROVIDER-MARKER-obs-71"
		key    = "sk-test-OBSERVE-KEY-5e2"
		env    = "PROMPTKIT_TEST_OBSERVE_REDACTION_KEY"
	)
	t.Setenv(env, key)
	r := newSeamRig(t, seamOpts{retries: intp(1), apiKeyEnv: env})
	body := func(code int) []byte {
		return fmt.Appendf(nil, `{"error":{"message":"%s %d key %s at %s","type":"x","code":"y"}}`, marker, code, key, r.srv.URL)
	}
	r.srv.Enqueue(providertest.Response{Status: 503, Body: body(503)}, providertest.Response{Status: 400, Body: body(400)})
	var log eventLog
	req := seamSummarize("hello")
	req.Observer = log.Observe
	if _, err := r.eng.Run(context.Background(), req); err == nil {
		t.Fatal("want error")
	}
	evs := log.Events()
	if got := eventKinds(evs); got != "started,attempt,retry_delay,attempt,finished" {
		t.Fatalf("events = %s", got)
	}
	host := strings.TrimPrefix(r.srv.URL, "http://")
	host = host[:strings.Index(host, "/")]
	for _, ev := range evs {
		for _, s := range []string{fmt.Sprintf("%#v", ev), fmt.Sprintf("%+v", ev)} {
			for _, secret := range []string{marker, key, r.srv.URL, host} {
				if strings.Contains(s, secret) {
					t.Fatalf("event leaks %q: %s", secret, s)
				}
			}
		}
	}
}

// TestObserverOutsidePermits: with one backend permit, the observer starts
// and waits for another run on the same engine at every event. That run
// needs the permit, so it completes only if no permit is held during
// callbacks. MaxConcurrentRuns is 0: admission is not involved.
func TestObserverOutsidePermits(t *testing.T) {
	t.Parallel()
	r := newSeamRig(t, seamOpts{maxActive: 1, retries: intp(1)})
	r.srv.Enqueue(
		providertest.Reply("inner-started"),
		providertest.Status(503), // outer attempt 1
		providertest.Reply("inner-attempt"),
		providertest.Reply("inner-retry_delay"),
		providertest.Reply("outer"), // outer attempt 2
		providertest.Reply("inner-attempt"),
		providertest.Reply("inner-finished"),
	)
	guard := deadlockGuard(t)
	var inner []string
	var kinds []string
	observer := func(ev promptkit.ExecutionEvent) {
		kinds = append(kinds, string(ev.Kind))
		done := make(chan error, 1)
		go func() {
			res, err := r.eng.Run(guard, promptkit.RunRequest{Text: "inner", TransientRetries: intp(0)})
			if err == nil {
				inner = append(inner, res.Text) // ordered by the channel below
			}
			done <- err
		}()
		if err := <-done; err != nil {
			t.Errorf("inner run during %s callback: %v", ev.Kind, err)
		}
	}
	res, err := r.eng.Run(guard, promptkit.RunRequest{Text: "outer", Observer: observer})
	if err != nil || res.Text != "outer" {
		t.Fatalf("outer res = %+v, err = %v", res, err)
	}
	want := "inner-started,inner-attempt,inner-retry_delay,inner-attempt,inner-finished"
	if got := strings.Join(inner, ","); got != want {
		t.Fatalf("inner runs = %s (events %v), want %s", got, kinds, want)
	}
	if r.srv.MaxInFlight() != 1 {
		t.Fatalf("MaxInFlight = %d", r.srv.MaxInFlight())
	}
}

// TestObserverOutsideAdmission: with one admission slot, a run started
// inside the started and finished callbacks completes: those events are
// delivered before admission and after its release.
func TestObserverOutsideAdmission(t *testing.T) {
	t.Parallel()
	r := newSeamRig(t, seamOpts{maxRuns: 1, maxActive: 1})
	guard := deadlockGuard(t)
	var inner int
	observer := func(ev promptkit.ExecutionEvent) {
		if ev.Kind != promptkit.ExecutionStarted && ev.Kind != promptkit.ExecutionFinished {
			return
		}
		done := make(chan error, 1)
		go func() {
			_, err := r.eng.Run(guard, promptkit.RunRequest{Text: "inner"})
			done <- err
		}()
		if err := <-done; err != nil {
			t.Errorf("inner run during %s callback: %v", ev.Kind, err)
		}
		inner++
	}
	if _, err := r.eng.Run(guard, promptkit.RunRequest{Text: "outer", Observer: observer}); err != nil {
		t.Fatal(err)
	}
	if inner != 2 || r.srv.Count() != 3 {
		t.Fatalf("inner runs = %d, provider calls = %d", inner, r.srv.Count())
	}
}

type observerPanic struct{ kind promptkit.ExecutionEventKind }

// TestObserverPanicReleasesResources: a panic at any event propagates out
// of Run, stops delivery, and leaks neither the backend permit nor the
// admission slot.
func TestObserverPanicReleasesResources(t *testing.T) {
	t.Parallel()
	kinds := []promptkit.ExecutionEventKind{promptkit.ExecutionStarted, promptkit.ExecutionAttempt, promptkit.ExecutionRetryDelay, promptkit.ExecutionFinished}
	for _, kind := range kinds {
		t.Run(string(kind), func(t *testing.T) {
			t.Parallel()
			r := newSeamRig(t, seamOpts{maxActive: 1, maxRuns: 1, retries: intp(1)})
			r.srv.Enqueue(providertest.Status(503), providertest.Reply("ok"))
			var log eventLog
			observer := func(ev promptkit.ExecutionEvent) {
				log.Observe(ev)
				if ev.Kind == kind {
					panic(observerPanic{kind})
				}
			}
			got := func() (p any) {
				defer func() { p = recover() }()
				r.eng.Run(context.Background(), promptkit.RunRequest{Text: "x", Observer: observer})
				return nil
			}()
			if got != (observerPanic{kind}) {
				t.Fatalf("recovered %v, want the observer's panic", got)
			}
			evs := log.Events()
			if evs[len(evs)-1].Kind != kind {
				t.Fatalf("events after the panic: %s", eventKinds(evs))
			}
			// Both the single permit and the single admission slot are free.
			res, err := r.eng.Run(deadlockGuard(t), promptkit.RunRequest{Text: "after"})
			if err != nil {
				t.Fatalf("run after observer panic: %v", err)
			}
			if res.Text == "" {
				t.Fatalf("res = %+v", res)
			}
		})
	}
}
