package dispatch

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/promptkit/promptkit/internal/testkit"
)

// TestNoWaitPastDeadlineReturnsAtOnce: with the option, a retry whose
// provider not-before lies past the caller's deadline is not waited for:
// the status failure (with its not-before) comes back at once.
func TestNoWaitPastDeadlineReturnsAtOnce(t *testing.T) {
	t.Parallel()
	c := testkit.NewClock(time.Now()) // deadlines are real: start the fake clock at real now
	epoch := c.Now()
	s, _ := fakeSched(t, c, jitterNone, map[string]Backend{"b": {NoPause: true}})
	ctx, cancel := context.WithDeadline(context.Background(), epoch.Add(time.Minute))
	defer cancel()
	att, calls := outcomes(statusAt(429, epoch.Add(2*time.Minute)), success())
	out := s.Generate(ctx, Sequence{Backend: "b", Generation: 1, Retries: 2, Attempt: att, NoWaitPastDeadline: true})
	if out.StatusCode != 429 || isExhausted(out.Err) || !out.NotBefore.Equal(epoch.Add(2*time.Minute)) {
		t.Fatalf("out = %+v", out)
	}
	if calls.Load() != 1 {
		t.Fatalf("%d attempts, want 1", calls.Load())
	}
	sameWaits(t, c.Waits()) // no wait at all
}

// TestNoWaitPastDeadlineStillWaitsWithinIt: a wait that ends before the
// deadline happens as usual, and without the option a long wait is
// waited (cancellably): long provider delays are never refused up front.
func TestNoWaitPastDeadlineStillWaitsWithinIt(t *testing.T) {
	t.Parallel()
	for _, opt := range []bool{true, false} {
		c := testkit.NewClock(time.Now()) // deadlines are real: start the fake clock at real now
		epoch := c.Now()
		s, _ := fakeSched(t, c, jitterNone, map[string]Backend{"b": {NoPause: true}})
		ctx, cancel := context.WithDeadline(context.Background(), epoch.Add(time.Hour))
		notBefore := epoch.Add(30 * time.Second)
		if !opt {
			notBefore = epoch.Add(2 * time.Hour) // past the deadline: waited anyway
		}
		att, calls := outcomes(statusAt(503, notBefore), success())
		out := s.Generate(ctx, Sequence{Backend: "b", Generation: 1, Retries: 1, Attempt: att, NoWaitPastDeadline: opt})
		cancel()
		if out.Err != nil || calls.Load() != 2 {
			t.Fatalf("opt=%v: out = %+v, calls %d", opt, out, calls.Load())
		}
		sameWaits(t, c.Waits(), notBefore.Sub(epoch))
	}
}

// TestNoWaitPastDeadlinePause: a backend pause that outlasts the deadline
// is refused at once with its end time, without dispatching.
func TestNoWaitPastDeadlinePause(t *testing.T) {
	t.Parallel()
	c := testkit.NewClock(time.Now()) // deadlines are real: start the fake clock at real now
	epoch := c.Now()
	s, _ := fakeSched(t, c, jitterNone, map[string]Backend{"b": {}})
	s.pause("b", epoch.Add(10*time.Minute))
	ctx, cancel := context.WithDeadline(context.Background(), epoch.Add(time.Minute))
	defer cancel()
	att, calls := outcomes(success())
	out := s.Generate(ctx, Sequence{Backend: "b", Generation: 1, Attempt: att, NoWaitPastDeadline: true})
	var ce *CapacityError
	if !errors.As(out.Err, &ce) || !ce.NotBefore.Equal(epoch.Add(10*time.Minute)) || errors.Is(out.Err, context.DeadlineExceeded) {
		t.Fatalf("err = %v", out.Err)
	}
	if calls.Load() != 0 {
		t.Fatal("dispatched during the pause")
	}
	sameWaits(t, c.Waits())
}

// TestWaitDeadline: a wait deadline sooner than ctx's refuses the retry
// wait and the backend pause that would end after it, as ctx's own
// deadline would, and a wait that ends before it is made.
func TestWaitDeadline(t *testing.T) {
	t.Parallel()
	c := testkit.NewClock(time.Now())
	epoch := c.Now()
	s, _ := fakeSched(t, c, jitterNone, map[string]Backend{"b": {NoPause: true}})
	ctx, cancel := context.WithDeadline(context.Background(), epoch.Add(time.Hour))
	defer cancel()
	att, calls := outcomes(statusAt(503, epoch.Add(2*time.Minute)), success())
	out := s.Generate(ctx, Sequence{Backend: "b", Generation: 1, Retries: 2, Attempt: att, NoWaitPastDeadline: true,
		WaitDeadline: epoch.Add(time.Minute)})
	if out.StatusCode != 503 || calls.Load() != 1 {
		t.Fatalf("out = %+v after %d calls, want the 503 at once", out, calls.Load())
	}
	sameWaits(t, c.Waits())

	att, calls = outcomes(statusAt(503, epoch.Add(30*time.Second)), success())
	out = s.Generate(ctx, Sequence{Backend: "b", Generation: 1, Retries: 2, Attempt: att, NoWaitPastDeadline: true,
		WaitDeadline: epoch.Add(time.Minute)})
	if out.Err != nil || calls.Load() != 2 {
		t.Fatalf("a wait within the deadline: out = %+v, %d calls", out, calls.Load())
	}

	paused, _ := fakeSched(t, c, jitterNone, map[string]Backend{"b": {}})
	paused.pause("b", c.Now().Add(10*time.Minute))
	att, calls = outcomes(success())
	out = paused.Generate(ctx, Sequence{Backend: "b", Generation: 1, Attempt: att, NoWaitPastDeadline: true,
		WaitDeadline: c.Now().Add(time.Minute)})
	var ce *CapacityError
	if !errors.As(out.Err, &ce) || calls.Load() != 0 {
		t.Fatalf("a pause past the wait deadline: err = %v, %d calls", out.Err, calls.Load())
	}
}
