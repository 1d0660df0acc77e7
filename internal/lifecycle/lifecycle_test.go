package lifecycle_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"go.uber.org/goleak"

	"github.com/promptkit/promptkit/internal/lifecycle"
)

// Every test ends with no goroutine of a Loop left behind.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// untilStopped is a loop function that returns its context's error once
// Stop cancels it.
func untilStopped(ctx context.Context) error {
	<-ctx.Done()
	return ctx.Err()
}

func TestStopCancelsAndWaits(t *testing.T) {
	t.Parallel()
	ran := make(chan context.Context, 1)
	l := lifecycle.New(func(ctx context.Context) error {
		ran <- ctx
		<-ctx.Done()
		return ctx.Err()
	})
	if err := l.Start(t.Context()); err != nil {
		t.Fatalf("Start: %v", err)
	}
	ctx := <-ran
	if err := l.Stop(t.Context()); err != nil {
		t.Fatalf("Stop: %v, want nil: the loop returned its context's error because Stop cancelled it", err)
	}
	if ctx.Err() == nil {
		t.Fatal("Stop returned with the loop's context still alive")
	}
	select {
	case <-l.Done():
	default:
		t.Fatal("Done is open after Stop returned")
	}
}

func TestStopTwiceReturnsTheSameResult(t *testing.T) {
	t.Parallel()
	boom := errors.New("boom")
	l := lifecycle.New(func(ctx context.Context) error {
		<-ctx.Done()
		return fmt.Errorf("flushing: %w", boom)
	})
	if err := l.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if err := l.Stop(t.Context()); !errors.Is(err, boom) {
			t.Fatalf("Stop #%d: %v, want the loop's error", i+1, err)
		}
	}
}

// A loop that ends by itself is over: Done closes, and Stop returns its
// error.
func TestRunErrorReturnedByStop(t *testing.T) {
	t.Parallel()
	boom := errors.New("boom")
	l := lifecycle.New(func(context.Context) error { return boom })
	if err := l.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	<-l.Done()
	if err := l.Stop(t.Context()); err != boom {
		t.Fatalf("Stop: %v, want %v", err, boom)
	}
	// A context error of the loop's own, not Stop's doing, is an error.
	l = lifecycle.New(func(context.Context) error { return context.Canceled })
	if err := l.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	<-l.Done()
	if err := l.Stop(t.Context()); err != context.Canceled {
		t.Fatalf("Stop: %v, want context.Canceled: the loop returned it before any Stop", err)
	}
}

func TestStopBeforeStart(t *testing.T) {
	t.Parallel()
	ran := false
	l := lifecycle.New(func(context.Context) error { ran = true; return nil })
	for i := range 2 {
		if err := l.Stop(t.Context()); err != nil {
			t.Fatalf("Stop #%d before Start: %v", i+1, err)
		}
	}
	select {
	case <-l.Done():
	default:
		t.Fatal("Done is open after Stop before Start")
	}
	if err := l.Start(t.Context()); !errors.Is(err, lifecycle.ErrStopped) {
		t.Fatalf("Start after Stop: %v, want ErrStopped", err)
	}
	if ran {
		t.Fatal("the loop ran after it was stopped")
	}
	if err := l.Stop(t.Context()); err != nil {
		t.Fatalf("Stop after the refused Start: %v", err)
	}
}

func TestStartTwice(t *testing.T) {
	t.Parallel()
	starts := 0
	l := lifecycle.NewSetup(func(ctx context.Context) (func() error, error) {
		starts++
		return func() error { return untilStopped(ctx) }, nil
	})
	if err := l.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := l.Start(t.Context()); !errors.Is(err, lifecycle.ErrStarted) {
		t.Fatalf("second Start: %v, want ErrStarted", err)
	}
	if err := l.Stop(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := l.Start(t.Context()); !errors.Is(err, lifecycle.ErrStarted) {
		t.Fatalf("Start after Stop: %v, want ErrStarted: a Loop starts once", err)
	}
	if starts != 1 {
		t.Fatalf("setup ran %d times, want 1", starts)
	}
}

// Stop's context bounds its wait; the loop then ends on its own, and a
// later Stop waits for it and returns its result.
func TestStopContextBoundsTheWait(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	boom := errors.New("boom")
	l := lifecycle.New(func(context.Context) error {
		<-release // deaf to its context
		return boom
	})
	if err := l.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if err := l.Stop(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("Stop with an ended context: %v, want context.Canceled", err)
	}
	select {
	case <-l.Done():
		t.Fatal("Done closed while the loop still runs")
	default:
	}
	close(release)
	if err := l.Stop(t.Context()); err != boom {
		t.Fatalf("second Stop: %v, want the loop's error", err)
	}
}

// Once the loop is over, Stop returns its result even with an ended
// context.
func TestStopAfterTheEndIgnoresItsContext(t *testing.T) {
	t.Parallel()
	l := lifecycle.New(func(context.Context) error { return nil })
	if err := l.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	<-l.Done()
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	for range 100 { // both cases of a select would be ready: no coin toss
		if err := l.Stop(ctx); err != nil {
			t.Fatalf("Stop: %v, want nil", err)
		}
	}
}

// Start's context gives the loop its values, not its end: only Stop ends
// the loop.
func TestStartContextDoesNotStopTheLoop(t *testing.T) {
	t.Parallel()
	type key struct{}
	got := make(chan context.Context, 1)
	l := lifecycle.New(func(ctx context.Context) error {
		got <- ctx
		return untilStopped(ctx)
	})
	start, cancel := context.WithCancel(context.WithValue(t.Context(), key{}, "v"))
	if err := l.Start(start); err != nil {
		t.Fatal(err)
	}
	cancel()
	ctx := <-got
	if ctx.Err() != nil {
		t.Fatal("ending Start's context ended the loop's")
	}
	if ctx.Value(key{}) != "v" {
		t.Fatal("the loop's context lacks the values of Start's")
	}
	if err := l.Stop(t.Context()); err != nil {
		t.Fatal(err)
	}
}

// Setup runs before Start returns, with the context Stop cancels.
func TestSetup(t *testing.T) {
	t.Parallel()
	var setupCtx context.Context
	ran := make(chan struct{})
	l := lifecycle.NewSetup(func(ctx context.Context) (func() error, error) {
		setupCtx = ctx
		return func() error { close(ran); return untilStopped(ctx) }, nil
	})
	if err := l.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	if setupCtx == nil {
		t.Fatal("Start returned before setup ran")
	}
	<-ran
	if err := l.Stop(t.Context()); err != nil {
		t.Fatal(err)
	}
	if setupCtx.Err() == nil {
		t.Fatal("Stop left setup's context alive")
	}
}

// A failed setup fails Start and ends the Loop with that result.
func TestSetupFails(t *testing.T) {
	t.Parallel()
	boom := errors.New("boom")
	var setupCtx context.Context
	l := lifecycle.NewSetup(func(ctx context.Context) (func() error, error) {
		setupCtx = ctx
		return nil, boom
	})
	if err := l.Start(t.Context()); err != boom {
		t.Fatalf("Start: %v, want the setup's error", err)
	}
	if setupCtx.Err() == nil {
		t.Fatal("the failed setup's context is still alive")
	}
	<-l.Done()
	for range 2 {
		if err := l.Stop(t.Context()); err != boom {
			t.Fatalf("Stop: %v, want the setup's error", err)
		}
	}
	if err := l.Start(t.Context()); !errors.Is(err, lifecycle.ErrStarted) {
		t.Fatalf("Start again: %v, want ErrStarted", err)
	}
}

// Starts and stops from many goroutines at once: one Start wins, every
// Stop returns the same result, the race detector is quiet.
func TestConcurrentStartStop(t *testing.T) {
	t.Parallel()
	for range 50 {
		l := lifecycle.New(untilStopped)
		var wg sync.WaitGroup
		var mu sync.Mutex
		started := 0
		for i := range 8 {
			wg.Go(func() {
				if i%2 == 0 {
					if l.Start(t.Context()) == nil {
						mu.Lock()
						started++
						mu.Unlock()
					}
					return
				}
				if err := l.Stop(t.Context()); err != nil {
					t.Errorf("Stop: %v", err)
				}
			})
		}
		wg.Wait()
		if started > 1 {
			t.Fatalf("%d Starts succeeded, want at most 1", started)
		}
		if err := l.Stop(t.Context()); err != nil {
			t.Fatal(err)
		}
		<-l.Done()
	}
}
