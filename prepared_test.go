package promptkit_test

import (
	"context"
	"errors"
	"runtime"
	"sync"
	"testing"
	"weak"

	"github.com/promptkit/promptkit"
	"github.com/promptkit/promptkit/providertest"
)

// TestPreparedFreezesRetriesAndObserver: the retry count and the observer
// are fixed at PrepareExecution; later changes to the caller's variables do
// not reach the run.
func TestPreparedFreezesRetriesAndObserver(t *testing.T) {
	t.Parallel()
	r := newSeamRig(t, seamOpts{retries: intp(0)})
	var first, second eventLog
	retries := 1
	observer := promptkit.ExecutionObserver(first.Observe)
	req := promptkit.RunRequest{Text: "x", TransientRetries: &retries, Observer: observer}
	h, err := r.eng.PrepareExecution(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	retries = 0
	observer = second.Observe
	req.Observer = observer
	_ = req

	r.srv.Enqueue(providertest.Status(503), providertest.Reply("ok"))
	res, err := r.eng.RunPrepared(context.Background(), h)
	if err != nil || res.Attempts != 2 || r.srv.Count() != 2 {
		t.Fatalf("res = %+v, err = %v, calls = %d; want the frozen single retry", res, err, r.srv.Count())
	}
	if got := eventKinds(first.Events()); got != "started,attempt,retry_delay,attempt,finished" {
		t.Fatalf("frozen observer got %s", got)
	}
	if n := len(second.Events()); n != 0 {
		t.Fatalf("replacement observer got %d events", n)
	}
}

// TestPreparationEmitsNothing: Prepare and PrepareExecution, successful or
// not, never call the observer.
func TestPreparationEmitsNothing(t *testing.T) {
	t.Parallel()
	r := newSeamRig(t, seamOpts{})
	var log eventLog
	ctx := context.Background()
	good := seamSummarize("x")
	good.Observer = log.Observe
	bad := promptkit.RunRequest{PromptID: "nope", Observer: log.Observe}
	if _, err := r.eng.Prepare(ctx, good); err != nil {
		t.Fatal(err)
	}
	if _, err := r.eng.Prepare(ctx, bad); err == nil {
		t.Fatal("Prepare of unknown prompt succeeded")
	}
	h, err := r.eng.PrepareExecution(ctx, good)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.eng.PrepareExecution(ctx, bad); err == nil {
		t.Fatal("PrepareExecution of unknown prompt succeeded")
	}
	canceled, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := r.eng.PrepareExecution(canceled, good); !errors.Is(err, context.Canceled) {
		t.Fatalf("PrepareExecution with canceled context: %v", err)
	}
	if n := len(log.Events()); n != 0 {
		t.Fatalf("preparation emitted %d events", n)
	}
	if err := r.eng.Discard(h); err != nil {
		t.Fatal(err)
	}
	if n := len(log.Events()); n != 0 || r.srv.Count() != 0 {
		t.Fatalf("discard emitted %d events, provider calls %d", n, r.srv.Count())
	}
}

// TestPreparedClaimRaceObservesOnce: of 16 concurrent RunPrepared calls,
// the winner's run is observed once; the losers emit nothing.
func TestPreparedClaimRaceObservesOnce(t *testing.T) {
	t.Parallel()
	r := newSeamRig(t, seamOpts{})
	var log eventLog
	h, err := r.eng.PrepareExecution(context.Background(), promptkit.RunRequest{Text: "race", Observer: log.Observe})
	if err != nil {
		t.Fatal(err)
	}
	const n = 16
	type result struct {
		res *promptkit.RunResult
		err error
	}
	results := make(chan result, n)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			res, err := r.eng.RunPrepared(context.Background(), h)
			results <- result{res, err}
		}()
	}
	close(start)
	wg.Wait()
	close(results)
	var winner *promptkit.RunResult
	for rr := range results {
		switch {
		case rr.err == nil:
			if winner != nil {
				t.Fatal("two runs won the claim")
			}
			winner = rr.res
		case !errors.Is(rr.err, promptkit.ErrInvalidRequest):
			t.Errorf("loser err = %v", rr.err)
		}
	}
	if winner == nil {
		t.Fatal("no run won the claim")
	}
	evs := log.Events()
	if got := eventKinds(evs); got != "started,attempt,finished" {
		t.Fatalf("events = %s, want one observation sequence", got)
	}
	for _, ev := range evs {
		if ev.RunID != winner.RunID {
			t.Fatalf("event RunID %q, winner %q", ev.RunID, winner.RunID)
		}
	}
	if r.srv.Count() != 1 {
		t.Fatalf("provider calls = %d", r.srv.Count())
	}
}

// TestPreparedDiscardAndMisuseEmitNothing: Discard, reuse and foreign or
// nil handles never call an observer, and misuse does not consume or
// disturb the owner's observer.
func TestPreparedDiscardAndMisuseEmitNothing(t *testing.T) {
	t.Parallel()
	r := newSeamRig(t, seamOpts{})
	other := newSeamRig(t, seamOpts{})
	ctx := context.Background()
	var discarded, owned eventLog

	h, err := r.eng.PrepareExecution(ctx, promptkit.RunRequest{Text: "x", Observer: discarded.Observe})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.eng.Discard(h); err != nil {
		t.Fatal(err)
	}
	if _, err := r.eng.RunPrepared(ctx, h); !errors.Is(err, promptkit.ErrInvalidRequest) {
		t.Fatalf("RunPrepared after Discard: %v", err)
	}
	if err := r.eng.Discard(h); err != nil {
		t.Fatalf("second Discard: %v", err)
	}
	if n := len(discarded.Events()); n != 0 {
		t.Fatalf("discarded handle emitted %d events", n)
	}

	foreign, err := other.eng.PrepareExecution(ctx, promptkit.RunRequest{Text: "x", Observer: owned.Observe})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.eng.RunPrepared(ctx, foreign); !errors.Is(err, promptkit.ErrInvalidRequest) {
		t.Fatalf("foreign RunPrepared: %v", err)
	}
	if err := r.eng.Discard(foreign); !errors.Is(err, promptkit.ErrInvalidRequest) {
		t.Fatalf("foreign Discard: %v", err)
	}
	if _, err := r.eng.RunPrepared(ctx, nil); !errors.Is(err, promptkit.ErrInvalidRequest) {
		t.Fatalf("nil handle: %v", err)
	}
	if n := len(owned.Events()); n != 0 {
		t.Fatalf("foreign misuse emitted %d events", n)
	}
	// The owner still runs its handle, with its observer.
	if _, err := other.eng.RunPrepared(ctx, foreign); err != nil {
		t.Fatal(err)
	}
	if got := eventKinds(owned.Events()); got != "started,attempt,finished" {
		t.Fatalf("owner's events = %s", got)
	}
	if _, err := other.eng.RunPrepared(ctx, foreign); !errors.Is(err, promptkit.ErrInvalidRequest) {
		t.Fatalf("reused handle: %v", err)
	}
	if got := eventKinds(owned.Events()); got != "started,attempt,finished" {
		t.Fatalf("reuse emitted events: %s", got)
	}
	if r.srv.Count() != 0 || other.srv.Count() != 1 {
		t.Fatalf("provider calls = %d, %d", r.srv.Count(), other.srv.Count())
	}
}

// observedState is something an observer closure retains.
type observedState struct {
	events int
	_      [256]byte
}

//go:noinline
func prepareWithRetainedObserver(t *testing.T, eng *promptkit.Engine) (*promptkit.PreparedExecution, weak.Pointer[observedState]) {
	st := &observedState{}
	h, err := eng.PrepareExecution(context.Background(), promptkit.RunRequest{Text: "x", Observer: func(promptkit.ExecutionEvent) { st.events++ }})
	if err != nil {
		t.Fatal(err)
	}
	return h, weak.Make(st)
}

// TestPreparedReleasesObserver: once a handle is discarded or claimed and
// run, it no longer retains the observer, although the handle itself is
// still reachable. An injected client keeps the run free of net/http
// goroutines, which may hold the last request's context for a while.
func TestPreparedReleasesObserver(t *testing.T) {
	t.Parallel()
	r := newSeamRig(t, seamOpts{client: &countingClient{resp: &promptkit.GenerateResponse{Text: "ok"}}})
	for _, end := range []string{"discard", "run"} {
		h, wp := prepareWithRetainedObserver(t, r.eng)
		runtime.GC()
		if wp.Value() == nil {
			t.Fatal("observer collected while the handle is pending")
		}
		switch end {
		case "discard":
			if err := r.eng.Discard(h); err != nil {
				t.Fatal(err)
			}
		case "run":
			if _, err := r.eng.RunPrepared(context.Background(), h); err != nil {
				t.Fatal(err)
			}
		}
		runtime.GC()
		if wp.Value() != nil {
			t.Errorf("%s: handle still retains the observer", end)
		}
		runtime.KeepAlive(h)
	}
}

// TestPreparedStartedCarriesIdentities: a prepared run's started event
// already has the prepared snapshot, and RunID matches the result.
func TestPreparedStartedCarriesIdentities(t *testing.T) {
	t.Parallel()
	r := newSeamRig(t, seamOpts{})
	var log eventLog
	req := seamSummarize("x")
	req.Observer = log.Observe
	req.Model = "m2"
	h, err := r.eng.PrepareExecution(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	res, err := r.eng.RunPrepared(context.Background(), h)
	if err != nil {
		t.Fatal(err)
	}
	evs := log.Events()
	if len(evs) == 0 || evs[0].Kind != promptkit.ExecutionStarted {
		t.Fatalf("events = %s", eventKinds(evs))
	}
	want := [5]string{"summarize", "3", "default", "local", "m2"}
	for _, ev := range evs {
		if identityOf(ev) != want || ev.RunID != res.RunID {
			t.Fatalf("%s identity = %v RunID %q; want %v, %q", ev.Kind, identityOf(ev), ev.RunID, want, res.RunID)
		}
	}
}

// TestPreparedLaterFailureReportsUsage: a prepared run whose repair fails
// with a provider 400 still finishes, with the usage the first generation
// reported.
func TestPreparedLaterFailureReportsUsage(t *testing.T) {
	t.Parallel()
	r := newSeamRig(t, seamOpts{repairBudget: 1})
	r.srv.Enqueue(
		providertest.Response{Text: "not json", Usage: providertest.Usage{Mode: providertest.UsagePartial, PromptTokens: 4, CompletionTokens: 2}},
		providertest.Status(400),
	)
	var log eventLog
	req := seamSummarize("x")
	req.Observer = log.Observe
	h, err := r.eng.PrepareExecution(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.eng.RunPrepared(context.Background(), h); err == nil {
		t.Fatal("want the repair's provider error")
	}
	evs := log.Events()
	if got := eventKinds(evs); got != "started,attempt,attempt,finished" {
		t.Fatalf("events = %s", got)
	}
	fin := evs[3]
	if fin.Outcome != promptkit.ExecutionOutcomeError || fin.Attempts != 2 || fin.RepairCalls != 1 || fin.TransientRetries != 0 {
		t.Errorf("finished = %+v", fin)
	}
	want := promptkit.ObservedTokenUsage{
		PromptTokens:     promptkit.ObservedTokenCount{Value: 4, Known: true},
		CompletionTokens: promptkit.ObservedTokenCount{Value: 2, Known: true},
	}
	if fin.Usage != want {
		t.Errorf("finished usage = %+v\nwant %+v", fin.Usage, want)
	}
	if evs[2].Generation != 2 || evs[2].StatusCode != 400 {
		t.Errorf("repair attempt = %+v", evs[2])
	}
}

// TestPreparedClaimedThenCanceled: a claimed run whose context is already
// canceled still emits started and finished.
func TestPreparedClaimedThenCanceled(t *testing.T) {
	t.Parallel()
	r := newSeamRig(t, seamOpts{})
	var log eventLog
	h, err := r.eng.PrepareExecution(context.Background(), promptkit.RunRequest{Text: "x", Observer: log.Observe})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := r.eng.RunPrepared(ctx, h); !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v", err)
	}
	evs := log.Events()
	if got := eventKinds(evs); got != "started,finished" || evs[1].Failure != promptkit.ExecutionFailureCanceled {
		t.Fatalf("events = %s %+v", got, evs)
	}
	if _, err := r.eng.RunPrepared(context.Background(), h); !errors.Is(err, promptkit.ErrInvalidRequest) {
		t.Fatalf("handle reusable after a canceled run: %v", err)
	}
}
