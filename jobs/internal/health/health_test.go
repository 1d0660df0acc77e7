package health

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/promptkit/promptkit/jobs"
	"github.com/promptkit/promptkit/jobs/internal/groupcommit"
)

func ctxEnded(err error) bool {
	return errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)
}

// Record remembers database failures, forgets them on a write that
// stored something, and ignores refusals, writes that stored nothing and
// errors caused by the caller's context ending; but not a database error
// that came after the caller gave up.
func TestRecordClassifies(t *testing.T) {
	var w Writes
	now := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
	clock := func() time.Time { return now }
	ctx := t.Context()
	ended, cancel := context.WithCancel(ctx)
	cancel()
	dbErr := fmt.Errorf("store: enqueue: %w", errors.New("disk I/O error"))
	failing := func() bool { return w.Recent(now) != nil }
	record := func(ctx context.Context, err error, stored bool) { w.Record(ctx, "test", err, stored, clock, ctxEnded) }

	for _, c := range []struct {
		what string
		ctx  context.Context
		err  error
	}{
		{"ErrNotClaimed", ctx, fmt.Errorf("x: %w", jobs.ErrNotClaimed)},
		{"ErrInvalid", ctx, fmt.Errorf("x: %w", jobs.ErrInvalid)},
		{"ErrNotFound", ctx, fmt.Errorf("x: %w", jobs.ErrNotFound)},
		{"TransitionError", ctx, fmt.Errorf("x: %w", &jobs.TransitionError{From: jobs.Succeeded, To: jobs.Cancelled})},
		{"ErrIdempotencyConflict", ctx, fmt.Errorf("x: %w", jobs.ErrIdempotencyConflict)},
		{"ErrClosed", ctx, fmt.Errorf("x: %w", groupcommit.ErrClosed)},
		{"ErrFileTooLarge", ctx, fmt.Errorf("x: %w", jobs.ErrFileTooLarge)},
		{"ErrBatchChanged", ctx, fmt.Errorf("x: %w", jobs.ErrBatchChanged)},
		{"the caller's error", ctx, fmt.Errorf("x: %w", Caller(errors.New("upload reader failed")))},
		{"the caller's cancellation", ended, fmt.Errorf("x: %w", context.Canceled)},
	} {
		if record(c.ctx, c.err, false); failing() {
			t.Fatalf("%s was remembered as a failure", c.what)
		}
	}
	if record(ctx, nil, false); failing() {
		t.Fatal("a write that stored nothing was remembered as a failure")
	}
	if record(ended, dbErr, false); !failing() {
		t.Fatal("a database error after the caller gave up was not remembered")
	}
	record(ctx, nil, false)
	record(ctx, fmt.Errorf("x: %w", jobs.ErrNotClaimed), false)
	if !failing() {
		t.Fatal("a write that stored nothing, or a refusal, forgot a failure")
	}
	if err := w.Recent(now); !errors.Is(err, dbErr) {
		t.Fatalf("Recent = %v, want it to wrap %v", err, dbErr)
	}
	if record(ctx, nil, true); failing() {
		t.Fatal("a write that stored something did not forget the failure")
	}
	// A refusal of part of a call that stored the rest (a Heartbeat that
	// updated some of its jobs) stored something.
	record(ctx, dbErr, false)
	if record(ctx, fmt.Errorf("x: %w", jobs.ErrNotClaimed), true); failing() {
		t.Fatal("a partly refused write that stored something did not forget the failure")
	}
	// The window, on the clock; a failure after now (the clock went back)
	// is recent.
	record(ctx, dbErr, false)
	if w.Recent(now.Add(Window-time.Microsecond)) == nil || w.Recent(now.Add(Window)) != nil {
		t.Fatal("the failure is not recent for exactly Window")
	}
	if w.Recent(now.Add(-time.Hour)) == nil {
		t.Fatal("a failure after now (the clock went back) is not recent")
	}
}

// Recording a write's outcome allocates nothing, with or without a
// failure to forget.
func TestRecordAllocatesNothing(t *testing.T) {
	var w Writes
	ctx := t.Context()
	clock := time.Now
	if n := testing.AllocsPerRun(100, func() { w.Record(ctx, "test", nil, true, clock, ctxEnded) }); n != 0 {
		t.Errorf("recording a success: %v allocations", n)
	}
	f := &failure{}
	if n := testing.AllocsPerRun(100, func() {
		w.failed.Store(f)
		w.Record(ctx, "test", nil, true, clock, ctxEnded)
	}); n != 0 {
		t.Errorf("forgetting a failure: %v allocations", n)
	}
	refused := fmt.Errorf("x: %w", jobs.ErrNotClaimed)
	if n := testing.AllocsPerRun(100, func() { w.Record(ctx, "test", refused, false, clock, ctxEnded) }); n != 0 {
		t.Errorf("recording a refusal: %v allocations", n)
	}
}
