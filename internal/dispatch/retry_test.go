package dispatch

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/promptkit/promptkit/internal/llm"
	"github.com/promptkit/promptkit/internal/observe"
	"github.com/promptkit/promptkit/internal/testkit"
	"github.com/promptkit/promptkit/pktype"
)

// These tests drive Generate, acquire and Backoff through the private seams
// only (Config.Now, Config.Jitter, Config.Wait and s.onWait): no test sleeps
// and no assertion depends on elapsed real time.

var epoch = time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)

// newClock returns a fake clock at epoch; its Wait records the requested
// duration and, unless a hook set with OnWait fails it, advances the clock
// by it.
func newClock() *testkit.Clock { return testkit.NewClock(epoch) }

func jitterNone(time.Duration) time.Duration   { return 0 }
func jitterFull(n time.Duration) time.Duration { return n }

// fakeSched returns a scheduler on c whose blocking waits are announced on
// the returned channel.
func fakeSched(t *testing.T, c *testkit.Clock, jitter func(time.Duration) time.Duration, backends map[string]Backend) (*Scheduler, chan string) {
	t.Helper()
	s := New(Config{Backends: backends, Now: c.Now, Jitter: jitter, Wait: c.Wait})
	ch := make(chan string, 64)
	s.onWait = func(what string) {
		select {
		case ch <- what:
		default:
			t.Errorf("too many waits announced (last %q)", what)
		}
	}
	return s, ch
}

// announced drains what has been announced so far.
func announced(ch chan string) []string {
	var got []string
	for {
		select {
		case w := <-ch:
			got = append(got, w)
		default:
			return got
		}
	}
}

// steps returns an Attempt that performs fs[i] on call i (the last one
// repeats) and the call counter.
func steps(fs ...func() llm.Outcome) (func(context.Context) llm.Outcome, *atomic.Int32) {
	var calls atomic.Int32
	return func(context.Context) llm.Outcome {
		i := int(calls.Add(1)) - 1
		return fs[min(i, len(fs)-1)]()
	}, &calls
}

func outcomes(outs ...llm.Outcome) (func(context.Context) llm.Outcome, *atomic.Int32) {
	fs := make([]func() llm.Outcome, len(outs))
	for i, o := range outs {
		fs[i] = func() llm.Outcome { return o }
	}
	return steps(fs...)
}

func failStatus(code int) llm.Outcome { return statusAt(code, time.Time{}) }

func statusAt(code int, notBefore time.Time) llm.Outcome {
	return llm.Outcome{
		Err:        pktype.NewGenerationError("b", code, "", notBefore),
		StatusCode: code,
		NotBefore:  notBefore,
	}
}

func success() llm.Outcome {
	return llm.Outcome{Response: &pktype.GenerateResponse{Text: "ok"}, StatusCode: 200}
}

// newRecorder returns a recorder on c; events are appended to the returned
// slice (on the Generate goroutine) after also calling extra.
func newRecorder(c *testkit.Clock, extra func(pktype.ExecutionEvent)) (*observe.Recorder, *[]pktype.ExecutionEvent) {
	evs := new([]pktype.ExecutionEvent)
	rec := observe.New(c.Now, nil, func(e pktype.ExecutionEvent) {
		*evs = append(*evs, e)
		if extra != nil {
			extra(e)
		}
	})
	return rec, evs
}

func evString(e pktype.ExecutionEvent) string {
	switch e.Kind {
	case pktype.ExecutionAttempt:
		return fmt.Sprintf("attempt g%d a%d dispatched=%t failure=%q status=%d outcome=%q cw=%v",
			e.Generation, e.Attempt, e.Dispatched, e.Failure, e.StatusCode, e.Outcome, e.CapacityWait)
	case pktype.ExecutionRetryDelay:
		return fmt.Sprintf("retry_delay g%d a%d delay=%v", e.Generation, e.Attempt, e.RetryDelay)
	}
	return string(e.Kind)
}

func evStrings(evs []pktype.ExecutionEvent) []string {
	out := make([]string, len(evs))
	for i, e := range evs {
		out[i] = evString(e)
	}
	return out
}

func sameStrings(t *testing.T, what string, got, want []string) {
	t.Helper()
	if !slices.Equal(got, want) {
		t.Fatalf("%s:\n got  %s\n want %s", what, strings.Join(got, "\n      "), strings.Join(want, "\n      "))
	}
}

func sameWaits(t *testing.T, got []time.Duration, want ...time.Duration) {
	t.Helper()
	if !slices.Equal(got, want) {
		t.Fatalf("waits = %v, want %v", got, want)
	}
}

func isExhausted(err error) bool {
	var ee *pktype.RetryExhaustedError
	return errors.As(err, &ee) || errors.Is(err, pktype.ErrRetriesExhausted)
}

// 1. Only 429, 500, 502, 503 and 504 are retried.

func TestRetryStatusTable(t *testing.T) {
	t.Parallel()
	backends := map[string]Backend{"b": {MaxActive: 1}}
	for _, code := range []int{429, 500, 502, 503, 504} {
		t.Run(fmt.Sprintf("eligible_%d", code), func(t *testing.T) {
			t.Parallel()
			c := newClock()
			s, _ := fakeSched(t, c, jitterNone, backends)
			att, calls := outcomes(failStatus(code))
			out := s.Generate(context.Background(), Sequence{Backend: "b", Generation: 1, Retries: 1, Attempt: att})
			if calls.Load() != 2 {
				t.Fatalf("%d attempts, want 2", calls.Load())
			}
			if !errors.Is(out.Err, pktype.ErrRetriesExhausted) {
				t.Fatalf("err = %v, want exhaustion", out.Err)
			}
			sameWaits(t, c.Waits(), 250*time.Millisecond)
		})
	}
	for _, code := range []int{400, 401, 403, 404, 409, 422, 501, 505} {
		t.Run(fmt.Sprintf("not_eligible_%d", code), func(t *testing.T) {
			t.Parallel()
			c := newClock()
			s, _ := fakeSched(t, c, jitterNone, backends)
			att, calls := outcomes(failStatus(code))
			out := s.Generate(context.Background(), Sequence{Backend: "b", Generation: 1, Retries: 3, Attempt: att})
			if calls.Load() != 1 {
				t.Fatalf("%d attempts, want 1", calls.Load())
			}
			var se *pktype.GenerationError
			if !errors.As(out.Err, &se) || se.StatusCode() != code || isExhausted(out.Err) {
				t.Fatalf("err = %v, want the plain HTTP %d StatusError", out.Err, code)
			}
			sameWaits(t, c.Waits())
		})
	}
	others := map[string]llm.Outcome{
		"transport":           {Err: &llm.AttemptError{Kind: pktype.ErrTransport, Cause: errors.New("connection refused")}},
		"transport_deadline":  {Err: &llm.AttemptError{Kind: pktype.ErrTransport, Cause: context.DeadlineExceeded}},
		"malformed":           {Err: &llm.AttemptError{Kind: pktype.ErrMalformedResponse}, StatusCode: 200},
		"arbitrary":           {Err: errors.New("injected client failed")},
		"arbitrary_status503": {Err: errors.New("not a StatusError"), StatusCode: 503},
	}
	for name, o := range others {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			c := newClock()
			s, _ := fakeSched(t, c, jitterNone, backends)
			att, calls := outcomes(o)
			out := s.Generate(context.Background(), Sequence{Backend: "b", Generation: 1, Retries: 3, Attempt: att})
			if calls.Load() != 1 {
				t.Fatalf("%d attempts, want 1", calls.Load())
			}
			if out.Err != o.Err {
				t.Fatalf("err = %v, want the attempt's own error %v", out.Err, o.Err)
			}
			sameWaits(t, c.Waits())
		})
	}
}

// 2. R = 0 returns the ordinary first failure.

func TestZeroRetriesReturnsFirstFailure(t *testing.T) {
	t.Parallel()
	for _, code := range []int{429, 503} {
		c := newClock()
		s, _ := fakeSched(t, c, jitterNone, map[string]Backend{"b": {MaxActive: 1}})
		first := statusAt(code, epoch.Add(time.Second))
		att, calls := outcomes(first, success())
		out := s.Generate(context.Background(), Sequence{Backend: "b", Generation: 1, Retries: 0, Attempt: att})
		if calls.Load() != 1 {
			t.Fatalf("%d: %d attempts, want 1", code, calls.Load())
		}
		if out.Err != first.Err || isExhausted(out.Err) || out.StatusCode != code {
			t.Fatalf("%d: err = %v, want the first failure unwrapped", code, out.Err)
		}
		sameWaits(t, c.Waits())
	}
}

// 3. R = 2, every attempt eligible: exhaustion after exactly 3 attempts.

func TestExhaustionAfterAllAttempts(t *testing.T) {
	t.Parallel()
	c := newClock()
	s, _ := fakeSched(t, c, jitterNone, map[string]Backend{"b": {MaxActive: 1}})
	last := failStatus(503)
	att, calls := outcomes(failStatus(500), failStatus(502), last)
	out := s.Generate(context.Background(), Sequence{Backend: "b", Generation: 1, Retries: 2, Attempt: att})
	if calls.Load() != 3 {
		t.Fatalf("%d attempts, want 3", calls.Load())
	}
	var ee *pktype.RetryExhaustedError
	if !errors.As(out.Err, &ee) || ee.Attempts() != 3 {
		t.Fatalf("err = %#v, want *ExhaustedError with Attempts 3", out.Err)
	}
	if !errors.Is(out.Err, pktype.ErrRetriesExhausted) || !errors.Is(out.Err, pktype.ErrLLMGenerate) {
		t.Fatalf("err = %v does not match ErrRetriesExhausted and ErrGenerate", out.Err)
	}
	var se *pktype.GenerationError
	if !errors.As(out.Err, &se) || se.StatusCode() != 503 || ee.Unwrap() != last.Err {
		t.Fatalf("cause = %v, want the last (503) failure", ee.Unwrap())
	}
	if out.StatusCode != 503 {
		t.Fatalf("StatusCode = %d, want 503", out.StatusCode)
	}
	sameWaits(t, c.Waits(), 250*time.Millisecond, 500*time.Millisecond)
}

// 4. A later non-eligible failure or a success ends the sequence.

func TestLaterFailureOrSuccessEndsSequence(t *testing.T) {
	t.Parallel()
	t.Run("503_then_400", func(t *testing.T) {
		t.Parallel()
		c := newClock()
		s, _ := fakeSched(t, c, jitterNone, nil)
		final := failStatus(400)
		att, calls := outcomes(failStatus(503), final, success())
		out := s.Generate(context.Background(), Sequence{Backend: "b", Generation: 1, Retries: 5, Attempt: att})
		if calls.Load() != 2 || out.Err != final.Err || isExhausted(out.Err) {
			t.Fatalf("calls %d, err %v: want 2 attempts ending in the 400", calls.Load(), out.Err)
		}
	})
	t.Run("503_then_success", func(t *testing.T) {
		t.Parallel()
		c := newClock()
		s, _ := fakeSched(t, c, jitterNone, nil)
		att, calls := outcomes(failStatus(503), success(), failStatus(400))
		out := s.Generate(context.Background(), Sequence{Backend: "b", Generation: 1, Retries: 5, Attempt: att})
		if calls.Load() != 2 || out.Err != nil || out.Response == nil || out.Response.Text != "ok" {
			t.Fatalf("calls %d, out %+v: want success after 2 attempts", calls.Load(), out)
		}
	})
}

// 5. Backoff: equal jitter in [base/2, base], base = min(500ms·2^(k-1), 8s).

func TestBackoff(t *testing.T) {
	t.Parallel()
	bases := map[uint64]time.Duration{
		1: 500 * time.Millisecond, 2: time.Second, 3: 2 * time.Second, 4: 4 * time.Second,
		5: 8 * time.Second, 6: 8 * time.Second, 7: 8 * time.Second, 63: 8 * time.Second,
		64: 8 * time.Second, 65: 8 * time.Second, 1 << 40: 8 * time.Second,
		math.MaxUint64 - 1: 8 * time.Second, math.MaxUint64: 8 * time.Second,
	}
	jitters := map[string]struct {
		j    func(time.Duration) time.Duration
		full bool // true: expect base, false: expect base/2
	}{
		"zero":     {jitterNone, false},
		"full":     {jitterFull, true},
		"negative": {func(time.Duration) time.Duration { return -time.Hour }, false},
		"minint":   {func(time.Duration) time.Duration { return math.MinInt64 }, false},
		"double":   {func(n time.Duration) time.Duration { return 2 * n }, true},
		"maxint":   {func(time.Duration) time.Duration { return math.MaxInt64 }, true},
	}
	for name, jc := range jitters {
		for k, base := range bases {
			var arg time.Duration
			s := New(Config{Jitter: func(n time.Duration) time.Duration { arg = n; return jc.j(n) }})
			want := base / 2
			if jc.full {
				want = base
			}
			if got := s.Backoff(k); got != want {
				t.Errorf("jitter %s: Backoff(%d) = %v, want %v", name, k, got, want)
			}
			if arg != base/2 {
				t.Errorf("jitter %s: Backoff(%d) asked jitter for [0, %v], want [0, %v]", name, k, arg, base/2)
			}
		}
	}
	// The default jitter stays within range.
	s := New(Config{})
	for k, base := range bases {
		for range 200 {
			if got := s.Backoff(k); got < base/2 || got > base {
				t.Fatalf("default Backoff(%d) = %v, outside [%v, %v]", k, got, base/2, base)
			}
		}
	}
}

// 6. Retry-After: wait until max(backoff deadline, NotBefore).

func TestRetryAfterVersusBackoff(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		code int
		nb   time.Duration // NotBefore relative to the attempt's start; 0: none
		took time.Duration // how long the attempt itself took on the fake clock
		want time.Duration
	}{
		{"429_30s_not_capped", 429, 30 * time.Second, 0, 30 * time.Second},
		{"503_30s_not_capped", 503, 30 * time.Second, 0, 30 * time.Second},
		{"500_30s", 500, 30 * time.Second, 0, 30 * time.Second},
		{"measured_from_now", 429, 30 * time.Second, 2 * time.Second, 28 * time.Second},
		{"earlier_than_backoff", 429, 200 * time.Millisecond, 0, 500 * time.Millisecond},
		{"past", 429, -time.Hour, 0, 500 * time.Millisecond},
		{"none", 429, 0, 0, 500 * time.Millisecond},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c := newClock()
			s, waiting := fakeSched(t, c, jitterFull, map[string]Backend{"b": {MaxActive: 1}})
			att, calls := steps(func() llm.Outcome {
				var nb time.Time
				if tc.nb != 0 {
					nb = c.Now().Add(tc.nb)
				}
				c.Advance(tc.took)
				return statusAt(tc.code, nb)
			}, success)
			out := s.Generate(context.Background(), Sequence{Backend: "b", Generation: 1, Retries: 1, Attempt: att})
			if out.Err != nil || calls.Load() != 2 {
				t.Fatalf("calls %d, err %v: want success on the retry", calls.Load(), out.Err)
			}
			// One wait only: the retry delay covers the provider pause too.
			sameWaits(t, c.Waits(), tc.want)
			if w := announced(waiting); len(w) != 0 {
				t.Fatalf("acquisition waited for %q after the retry delay", w)
			}
		})
	}
	t.Run("second_retry", func(t *testing.T) {
		t.Parallel()
		c := newClock()
		s, _ := fakeSched(t, c, jitterFull, nil)
		att, calls := steps(
			func() llm.Outcome { return failStatus(503) },
			func() llm.Outcome { return statusAt(429, c.Now().Add(3*time.Second)) },
			success)
		out := s.Generate(context.Background(), Sequence{Backend: "b", Generation: 1, Retries: 2, Attempt: att})
		if out.Err != nil || calls.Load() != 3 {
			t.Fatalf("calls %d, err %v", calls.Load(), out.Err)
		}
		sameWaits(t, c.Waits(), 500*time.Millisecond, 3*time.Second)
	})
}

func TestHugeRetryAfterSaturates(t *testing.T) {
	t.Parallel()
	c := newClock()
	s, waiting := fakeSched(t, c, jitterFull, map[string]Backend{"b": {MaxActive: 1}})
	far := time.Date(9999, 12, 31, 23, 59, 59, 0, time.UTC)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c.OnWait(func(ctx context.Context, d time.Duration) error {
		cancel()
		<-ctx.Done()
		return ctx.Err()
	})
	att, calls := outcomes(statusAt(429, far), success())
	out := s.Generate(ctx, Sequence{Backend: "b", Generation: 1, Retries: 2, Attempt: att})
	if !errors.Is(out.Err, context.Canceled) || calls.Load() != 1 {
		t.Fatalf("calls %d, err %v", calls.Load(), out.Err)
	}
	// The delay is unrepresentable: it must saturate, never wrap to a
	// negative or short wait.
	sameWaits(t, c.Waits(), time.Duration(math.MaxInt64))

	// The backend stays paused for everyone else, by the same saturated wait.
	ctx2, cancel2 := context.WithCancel(context.Background())
	defer cancel2()
	c.OnWait(func(ctx context.Context, d time.Duration) error {
		cancel2()
		return ctx.Err()
	})
	att2, calls2 := outcomes(success())
	out = s.Generate(ctx2, Sequence{Backend: "b", Generation: 1, Attempt: att2})
	if !errors.Is(out.Err, pktype.ErrCapacity) || !errors.Is(out.Err, context.Canceled) || calls2.Load() != 0 {
		t.Fatalf("calls %d, err %v: want a canceled pause wait", calls2.Load(), out.Err)
	}
	sameWaits(t, c.Waits()[1:], time.Duration(math.MaxInt64))
	sameStrings(t, "announced", announced(waiting), []string{"backend pause"})
}

// 7. Context.

func TestCancelDuringRetryWait(t *testing.T) {
	t.Parallel()
	c := newClock()
	s, _ := fakeSched(t, c, jitterNone, map[string]Backend{"b": {MaxActive: 1}})
	inWait := make(chan time.Duration, 1)
	c.OnWait(func(ctx context.Context, d time.Duration) error {
		inWait <- d
		<-ctx.Done()
		return ctx.Err()
	})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	rec, evs := newRecorder(c, nil)
	att, calls := outcomes(failStatus(503))
	done := make(chan llm.Outcome, 1)
	go func() {
		done <- s.Generate(ctx, Sequence{Backend: "b", Generation: 1, Retries: 5, Attempt: att, Recorder: rec})
	}()
	if d := <-inWait; d != 250*time.Millisecond {
		t.Errorf("retry wait = %v, want 250ms", d)
	}
	c.Advance(123 * time.Millisecond)
	cancel()
	out := <-done
	if out.Err != context.Canceled {
		t.Fatalf("err = %v, want context.Canceled", out.Err)
	}
	if calls.Load() != 1 {
		t.Fatalf("%d attempts after cancellation, want 1", calls.Load())
	}
	sameStrings(t, "events", evStrings(*evs), []string{
		`attempt g1 a1 dispatched=true failure="provider_status" status=503 outcome="error" cw=0s`,
		`retry_delay g1 a1 delay=123ms`,
	})
	if tot := rec.Totals(); tot.Attempts != 1 || tot.TransientRetries != 0 || tot.RetryDelay != 123*time.Millisecond {
		t.Fatalf("totals = %+v", tot)
	}
}

func TestContextDoneBeforeFirstAttempt(t *testing.T) {
	t.Parallel()
	expired, cancel := context.WithDeadline(context.Background(), time.Unix(1, 0))
	defer cancel()
	for name, ctx := range map[string]context.Context{"canceled": ctxDone(), "deadline": expired} {
		c := newClock()
		s, waiting := fakeSched(t, c, jitterNone, map[string]Backend{"b": {MaxActive: 1}})
		rec, _ := newRecorder(c, nil)
		att, calls := outcomes(success())
		out := s.Generate(ctx, Sequence{Backend: "b", Generation: 1, Retries: 2, Attempt: att, Recorder: rec})
		if !errors.Is(out.Err, ctx.Err()) || calls.Load() != 0 || rec.Totals().Attempts != 0 {
			t.Fatalf("%s: err %v, calls %d, attempts %d: want no dispatch", name, out.Err, calls.Load(), rec.Totals().Attempts)
		}
		sameWaits(t, c.Waits())
		if w := announced(waiting); len(w) != 0 {
			t.Fatalf("%s: waited for %q", name, w)
		}
	}
}

func TestObserverCancelStopsRetries(t *testing.T) {
	t.Parallel()
	c := newClock()
	s, _ := fakeSched(t, c, jitterNone, map[string]Backend{"b": {MaxActive: 1}})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	rec, evs := newRecorder(c, func(e pktype.ExecutionEvent) {
		if e.Kind == pktype.ExecutionAttempt {
			cancel()
		}
	})
	att, calls := outcomes(failStatus(503))
	out := s.Generate(ctx, Sequence{Backend: "b", Generation: 1, Retries: 2, Attempt: att, Recorder: rec})
	if !errors.Is(out.Err, context.Canceled) || isExhausted(out.Err) || calls.Load() != 1 {
		t.Fatalf("err %v, calls %d: want one attempt and context.Canceled", out.Err, calls.Load())
	}
	sameWaits(t, c.Waits()) // no wait started, so no delay event either
	if len(*evs) != 1 {
		t.Fatalf("events = %v", evStrings(*evs))
	}
}

// 8. Recorder events, delivered with no permit held.

func TestGenerateEventsOutsidePermit(t *testing.T) {
	t.Parallel()
	c := newClock()
	s := New(Config{Backends: map[string]Backend{"b": {MaxActive: 1}}, Now: c.Now, Jitter: jitterNone, Wait: c.Wait})
	// probe takes and returns the backend's only permit; if it would have
	// to wait, the permit is held and the probe fails instead of hanging.
	var probeCancel context.CancelFunc
	s.onWait = func(what string) {
		t.Errorf("observer would block on %q: a permit is held during the callback", what)
		probeCancel()
	}
	probes := 0
	probe := func() {
		probes++
		pctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		probeCancel = cancel
		release, err := s.acquire(pctx, "b", 1, false)
		if err != nil {
			t.Errorf("probe acquire: %v", err)
			return
		}
		release()
	}
	rec, evs := newRecorder(c, func(pktype.ExecutionEvent) { probe() })
	att, calls := steps(
		func() llm.Outcome { return failStatus(503) },
		func() llm.Outcome { return failStatus(503) },
		func() llm.Outcome {
			// Sanity check of the probe: during the attempt the permit is held.
			if s.gates["b"].permits.TryAcquire(1) {
				t.Error("the only permit is free during an attempt")
				s.gates["b"].permits.Release(1)
			}
			return success()
		})
	out := s.Generate(context.Background(), Sequence{Backend: "b", Generation: 1, Retries: 2, Attempt: att, Recorder: rec})
	if out.Err != nil || calls.Load() != 3 {
		t.Fatalf("err %v, calls %d", out.Err, calls.Load())
	}
	sameStrings(t, "events", evStrings(*evs), []string{
		`attempt g1 a1 dispatched=true failure="provider_status" status=503 outcome="error" cw=0s`,
		`retry_delay g1 a1 delay=250ms`,
		`attempt g1 a2 dispatched=true failure="provider_status" status=503 outcome="error" cw=0s`,
		`retry_delay g1 a2 delay=500ms`,
		`attempt g1 a3 dispatched=true failure="" status=200 outcome="success" cw=0s`,
	})
	if probes != 5 {
		t.Fatalf("%d probes, want 5", probes)
	}
	tot := rec.Totals()
	if tot.Attempts != 3 || tot.TransientRetries != 2 || tot.RetryDelay != 750*time.Millisecond || tot.CapacityWait != 0 {
		t.Fatalf("totals = %+v", tot)
	}
}

// 9. A caller in its retry wait holds no permit; admission is not touched.

func TestBackoffFreesPermit(t *testing.T) {
	t.Parallel()
	c := newClock()
	s := New(Config{MaxRuns: 1, Backends: map[string]Backend{"b": {MaxActive: 1}}, Now: c.Now, Jitter: jitterNone, Wait: c.Wait})
	admitted, _, err := s.Admit(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	inWait := make(chan struct{})
	resume := make(chan struct{})
	var waitCalls atomic.Int32
	c.OnWait(func(ctx context.Context, d time.Duration) error {
		if waitCalls.Add(1) == 1 { // A's retry wait
			close(inWait)
			<-resume
		}
		return nil // then Wait advances the clock by d
	})
	ctxB, cancelB := context.WithCancel(context.Background())
	defer cancelB()
	s.onWait = func(what string) {
		t.Errorf("caller B waited for %q while A was backing off", what)
		cancelB()
	}

	attA, callsA := outcomes(failStatus(503), success())
	doneA := make(chan llm.Outcome, 1)
	go func() {
		doneA <- s.Generate(context.Background(), Sequence{Backend: "b", Generation: 1, Retries: 1, Attempt: attA})
	}()
	<-inWait
	attB, callsB := outcomes(success())
	if out := s.Generate(ctxB, Sequence{Backend: "b", Generation: 1, Attempt: attB}); out.Err != nil || callsB.Load() != 1 {
		t.Fatalf("B during A's backoff: err %v, calls %d", out.Err, callsB.Load())
	}
	close(resume)
	if out := <-doneA; out.Err != nil || callsA.Load() != 2 {
		t.Fatalf("A: err %v, calls %d", out.Err, callsA.Load())
	}
	// Generate neither took nor returned the admission unit held above.
	if s.admission.TryAcquire(1) {
		t.Fatal("Generate released an admission unit it did not own")
	}
	admitted()
	if !s.admission.TryAcquire(1) {
		t.Fatal("Generate took an admission unit")
	}
	s.admission.Release(1)
}

// 10. A provider pause is backend-wide.

func TestProviderPauseIsBackendWide(t *testing.T) {
	t.Parallel()
	c := newClock()
	backends := map[string]Backend{"b": {MaxActive: 1}, "c": {MaxActive: 1}}
	s, waiting := fakeSched(t, c, jitterNone, backends)
	attA, _ := outcomes(statusAt(429, epoch.Add(10*time.Second)))
	if out := s.Generate(context.Background(), Sequence{Backend: "b", Generation: 1, Attempt: attA}); out.StatusCode != 429 {
		t.Fatalf("A: %+v", out)
	}

	attC, callsC := outcomes(success())
	if out := s.Generate(context.Background(), Sequence{Backend: "c", Generation: 1, Attempt: attC}); out.Err != nil || callsC.Load() != 1 {
		t.Fatalf("other backend: err %v", out.Err)
	}
	if w := announced(waiting); len(w) != 0 {
		t.Fatalf("another backend waited for %q", w)
	}
	sameWaits(t, c.Waits())

	rec, evs := newRecorder(c, nil)
	attB, callsB := outcomes(success())
	if out := s.Generate(context.Background(), Sequence{Backend: "b", Generation: 1, Attempt: attB, Recorder: rec}); out.Err != nil || callsB.Load() != 1 {
		t.Fatalf("B: err %v", out.Err)
	}
	sameStrings(t, "announced", announced(waiting), []string{"backend pause"})
	sameWaits(t, c.Waits(), 10*time.Second)
	sameStrings(t, "events", evStrings(*evs), []string{
		`attempt g1 a1 dispatched=true failure="" status=200 outcome="success" cw=10s`,
	})
	if tot := rec.Totals(); tot.CapacityWait != 10*time.Second {
		t.Fatalf("totals = %+v", tot)
	}
}

func TestCanceledPauseWait(t *testing.T) {
	t.Parallel()
	c := newClock()
	s, waiting := fakeSched(t, c, jitterNone, map[string]Backend{"b": {MaxActive: 1}})
	attA, _ := outcomes(statusAt(503, epoch.Add(10*time.Second)))
	s.Generate(context.Background(), Sequence{Backend: "b", Generation: 1, Attempt: attA})

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c.OnWait(func(ctx context.Context, d time.Duration) error {
		c.Advance(4 * time.Second)
		cancel()
		return ctx.Err()
	})
	rec, evs := newRecorder(c, nil)
	attB, callsB := outcomes(success())
	out := s.Generate(ctx, Sequence{Backend: "b", Generation: 1, Retries: 2, Attempt: attB, Recorder: rec})
	if !errors.Is(out.Err, pktype.ErrCapacity) || !errors.Is(out.Err, context.Canceled) || callsB.Load() != 0 {
		t.Fatalf("err %v, calls %d: want ErrCapacity and context.Canceled, no dispatch", out.Err, callsB.Load())
	}
	sameStrings(t, "announced", announced(waiting), []string{"backend pause"})
	sameWaits(t, c.Waits(), 10*time.Second)
	sameStrings(t, "events", evStrings(*evs), []string{
		`attempt g1 a1 dispatched=false failure="canceled" status=0 outcome="error" cw=4s`,
	})
	if tot := rec.Totals(); tot.Attempts != 0 {
		t.Fatalf("undispatched attempt counted: %+v", tot)
	}
}

func TestWhichStatusesPause(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		code   int
		nb     time.Duration
		pauses bool
	}{
		{429, 10 * time.Second, true},
		{503, 10 * time.Second, true},
		{500, 10 * time.Second, false},
		{502, 10 * time.Second, false},
		{504, 10 * time.Second, false},
		{429, -10 * time.Second, false}, // a past not-before adds nothing
	} {
		c := newClock()
		s, waiting := fakeSched(t, c, jitterNone, map[string]Backend{"b": {MaxActive: 1}})
		attA, _ := outcomes(statusAt(tc.code, epoch.Add(tc.nb)))
		s.Generate(context.Background(), Sequence{Backend: "b", Generation: 1, Attempt: attA})
		attB, _ := outcomes(success())
		if out := s.Generate(context.Background(), Sequence{Backend: "b", Generation: 1, Attempt: attB}); out.Err != nil {
			t.Fatalf("%d: %v", tc.code, out.Err)
		}
		var want []time.Duration
		if tc.pauses {
			want = []time.Duration{tc.nb}
		}
		if got := c.Waits(); !slices.Equal(got, want) {
			t.Errorf("%d with not-before %v: waits %v, want %v (announced %q)", tc.code, tc.nb, got, want, announced(waiting))
		}
	}
}

// TestPauseSeenByPermitWaiter: a caller queued on the backend's only permit
// must honour a pause requested by the response that frees the permit.
func TestPauseSeenByPermitWaiter(t *testing.T) {
	t.Parallel()
	c := newClock()
	s := New(Config{Backends: map[string]Backend{"b": {MaxActive: 1}}, Now: c.Now, Jitter: jitterNone, Wait: c.Wait})
	waits := make(chan string, 8)
	s.onWait = func(what string) { waits <- what }
	bDispatched := make(chan struct{}, 1)
	aIn, aGo := make(chan struct{}), make(chan struct{})
	verdict := make(chan string, 1)
	recA, _ := newRecorder(c, func(e pktype.ExecutionEvent) {
		if e.Kind != pktype.ExecutionAttempt {
			return
		}
		// A's permit is free now; B (queued on it) must see the pause.
		select {
		case w := <-waits:
			verdict <- w
		case <-bDispatched:
			verdict <- "dispatched during the pause"
		}
	})
	doneA := make(chan struct{})
	go func() {
		defer close(doneA)
		s.Generate(context.Background(), Sequence{Backend: "b", Generation: 1, Recorder: recA, Attempt: func(context.Context) llm.Outcome {
			close(aIn)
			<-aGo
			return statusAt(429, c.Now().Add(10*time.Second))
		}})
	}()
	<-aIn
	doneB := make(chan llm.Outcome, 1)
	go func() {
		doneB <- s.Generate(context.Background(), Sequence{Backend: "b", Generation: 1, Attempt: func(context.Context) llm.Outcome {
			bDispatched <- struct{}{}
			return success()
		}})
	}()
	if w := <-waits; w != "backend permit" {
		t.Fatalf("B waited for %q", w)
	}
	close(aGo)
	<-doneA
	if out := <-doneB; out.Err != nil {
		t.Fatal(out.Err)
	}
	if v := <-verdict; v != "backend pause" {
		t.Fatalf("B: %s, want a backend pause wait", v)
	}
}

// 11. Pacing.

func TestRequestPacing(t *testing.T) {
	t.Parallel()
	c := newClock()
	s, waiting := fakeSched(t, c, jitterNone, map[string]Backend{"b": {RequestsPerSecond: 10}})
	acquire := func(ctx context.Context) error {
		release, err := s.acquire(ctx, "b", 1, false)
		if err == nil {
			release()
		}
		return err
	}
	if err := acquire(context.Background()); err != nil {
		t.Fatal(err)
	}
	sameWaits(t, c.Waits())
	if err := acquire(context.Background()); err != nil { // the fake wait advances the clock
		t.Fatal(err)
	}
	// 10/s less the pacing margin: 1s / (10 × 0.98) ≈ 102ms.
	margin := pacingMargin // a variable: the constant division is not an integer
	want := time.Duration(float64(time.Second) / (10 * margin))
	if w := c.Waits(); len(w) != 1 || w[0] < want-time.Millisecond || w[0] > want+time.Millisecond {
		t.Fatalf("second acquisition waits = %v, want one of ~%v", w, want)
	}
	sameStrings(t, "announced", announced(waiting), []string{"backend pacing"})
	c.Advance(want)
	if err := acquire(context.Background()); err != nil {
		t.Fatal(err)
	}
	if w := c.Waits(); len(w) != 1 {
		t.Fatalf("waited again after the interval passed: %v", w)
	}
}

func TestCanceledPacingWaitReturnsReservation(t *testing.T) {
	t.Parallel()
	c := newClock()
	s, _ := fakeSched(t, c, jitterNone, map[string]Backend{"b": {RequestsPerSecond: 10}})
	release, err := s.acquire(context.Background(), "b", 1, false)
	if err != nil {
		t.Fatal(err)
	}
	release()

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c.OnWait(func(ctx context.Context, d time.Duration) error {
		cancel()
		return ctx.Err()
	})
	_, err = s.acquire(ctx, "b", 1, false)
	var ce *CapacityError
	if !errors.Is(err, pktype.ErrCapacity) || !errors.Is(err, context.Canceled) || !errors.As(err, &ce) || ce.What != "backend pacing" {
		t.Fatalf("err = %v, want a canceled backend pacing CapacityError", err)
	}

	c.OnWait(nil)
	release, err = s.acquire(context.Background(), "b", 1, false) // clock unchanged
	if err != nil {
		t.Fatal(err)
	}
	release()
	// One interval (≈102ms), not two: the canceled reservation came back.
	w := c.Waits()
	if len(w) != 2 || w[1] < 100*time.Millisecond || w[1] > 105*time.Millisecond {
		t.Fatalf("waits = %v: the canceled caller's reservation was kept", w)
	}
}

func TestTokenPacingClampsLargeEstimate(t *testing.T) {
	t.Parallel()
	c := newClock()
	s, _ := fakeSched(t, c, jitterNone, map[string]Backend{"b": {TokensPerMinute: 60}})
	for i := range 2 {
		release, err := s.acquire(context.Background(), "b", 1000, false)
		if err != nil {
			t.Fatalf("acquisition %d: %v", i+1, err)
		}
		release()
	}
	// The first is served from the full bucket; the second waits for the
	// bucket to refill, a finite minute, not forever.
	if w := c.Waits(); len(w) != 1 || w[0] < 59*time.Second || w[0] > 60*time.Second {
		t.Fatalf("waits = %v, want one of ~60s", w)
	}
}

func TestTokenPacingChargesUnderestimate(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		total    int
		presence bool
		want     time.Duration // ~wait of the next 30-token acquisition
	}{
		{"reported_over_estimate", 60, true, 30 * time.Second},
		{"unknown_total", 60, false, 0},
		{"within_estimate", 30, true, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c := newClock()
			s, _ := fakeSched(t, c, jitterNone, map[string]Backend{"b": {TokensPerMinute: 60}})
			att, _ := outcomes(llm.Outcome{
				Response: &pktype.GenerateResponse{Text: "ok"}, StatusCode: 200,
				Usage:    pktype.TokenUsage{TotalTokens: tc.total},
				Presence: pktype.TokenUsagePresence{TotalTokens: tc.presence},
			})
			if out := s.Generate(context.Background(), Sequence{Backend: "b", Generation: 1, Tokens: 30, Attempt: att}); out.Err != nil {
				t.Fatal(out.Err)
			}
			sameWaits(t, c.Waits())
			release, err := s.acquire(context.Background(), "b", 30, false)
			if err != nil {
				t.Fatal(err)
			}
			release()
			w := c.Waits()
			switch {
			case tc.want == 0 && len(w) != 0:
				t.Fatalf("waits = %v, want none", w)
			case tc.want != 0 && (len(w) != 1 || w[0] < tc.want-time.Second || w[0] > tc.want):
				t.Fatalf("waits = %v, want one of ~%v", w, tc.want)
			}
		})
	}
}

// 12. Panics do not leak the permit.

func TestObserverPanicPropagatesWithoutLeak(t *testing.T) {
	t.Parallel()
	c := newClock()
	s := New(Config{Backends: map[string]Backend{"b": {MaxActive: 1}}, Now: c.Now, Jitter: jitterNone, Wait: c.Wait})
	rec, _ := newRecorder(c, func(e pktype.ExecutionEvent) {
		if e.Kind == pktype.ExecutionAttempt {
			panic("observer boom")
		}
	})
	att, calls := outcomes(failStatus(503))
	got := func() (r any) {
		defer func() { r = recover() }()
		s.Generate(context.Background(), Sequence{Backend: "b", Generation: 1, Retries: 2, Attempt: att, Recorder: rec})
		return nil
	}()
	if got != "observer boom" || calls.Load() != 1 {
		t.Fatalf("recovered %v after %d attempts, want the observer's panic after 1", got, calls.Load())
	}
	pctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s.onWait = func(what string) {
		t.Errorf("waited for %q: permit leaked by the observer panic", what)
		cancel()
	}
	release, err := s.acquire(pctx, "b", 1, false)
	if err != nil {
		t.Fatal(err)
	}
	release()
}

// 13. The retry budget cannot overflow.

func TestMaxRetriesBudget(t *testing.T) {
	t.Parallel()
	c := newClock()
	s, _ := fakeSched(t, c, jitterNone, nil)
	att, calls := outcomes(failStatus(429), failStatus(503), success())
	out := s.Generate(context.Background(), Sequence{Backend: "b", Generation: 1, Retries: math.MaxUint64, Attempt: att})
	if out.Err != nil || calls.Load() != 3 {
		t.Fatalf("err %v, calls %d: want success on the 3rd attempt", out.Err, calls.Load())
	}
	sameWaits(t, c.Waits(), 250*time.Millisecond, 500*time.Millisecond)
}
