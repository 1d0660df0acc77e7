package dispatch

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/promptkit/promptkit/internal/llm"
	"github.com/promptkit/promptkit/internal/observe"
	"github.com/promptkit/promptkit/pktype"
)

// waitSignal returns a scheduler whose blocking waits are announced on the
// returned channel.
func waitSignal(cfg Config) (*Scheduler, <-chan string) {
	s := New(cfg)
	ch := make(chan string, 16)
	s.onWait = func(what string) { ch <- what }
	return s, ch
}

func TestAdmitWaitCanceledIsCapacityAndContext(t *testing.T) {
	t.Parallel()
	s, waiting := waitSignal(Config{MaxRuns: 1})
	release, _, err := s.Admit(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() {
		_, _, err := s.Admit(ctx)
		errc <- err
	}()
	if got := <-waiting; got != "admission" {
		t.Fatalf("waiting for %q", got)
	}
	cancel()
	err = <-errc
	if !errors.Is(err, pktype.ErrCapacity) || !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want ErrCapacity and context.Canceled", err)
	}
	release()
	release() // idempotent: must not free a second unit
	r2, _, err := s.Admit(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.Admit(ctxDone()); err == nil {
		t.Fatal("a double release freed a second admission unit")
	}
	r2()
}

func ctxDone() context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	return ctx
}

func TestAdmitQueueLimit(t *testing.T) {
	t.Parallel()
	s, waiting := waitSignal(Config{MaxRuns: 1, MaxWaiting: 1})
	release, _, _ := s.Admit(context.Background())
	got := make(chan error, 1)
	go func() {
		r, _, err := s.Admit(context.Background())
		if err == nil {
			r()
		}
		got <- err
	}()
	<-waiting
	if _, _, err := s.Admit(context.Background()); !errors.Is(err, pktype.ErrCapacity) || errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want an immediate ErrCapacity", err)
	}
	release()
	if err := <-got; err != nil {
		t.Fatal(err)
	}
}

// TestPermitReleasedAfterEachAttempt: a waiter for the backend's only permit gets it
// as soon as the attempt returns.
func TestPermitReleasedAfterEachAttempt(t *testing.T) {
	t.Parallel()
	s, waiting := waitSignal(Config{Backends: map[string]Backend{"b": {MaxActive: 1}}})
	inAttempt := make(chan struct{})
	finish := make(chan struct{})
	seq := Sequence{Backend: "b", Generation: 1, Attempt: func(context.Context) llm.Outcome {
		inAttempt <- struct{}{}
		<-finish
		return llm.Outcome{Response: &pktype.GenerateResponse{Text: "ok"}}
	}}
	done := make(chan llm.Outcome, 2)
	go func() { done <- s.Generate(context.Background(), seq) }()
	<-inAttempt
	go func() { done <- s.Generate(context.Background(), seq) }()
	if got := <-waiting; got != "backend permit" {
		t.Fatalf("second caller waited for %q", got)
	}
	finish <- struct{}{}
	<-inAttempt // the second caller got the only permit
	finish <- struct{}{}
	for i := 0; i < 2; i++ {
		if out := <-done; out.Err != nil {
			t.Fatal(out.Err)
		}
	}
}

func TestPermitReleasedOnPanic(t *testing.T) {
	t.Parallel()
	s := New(Config{Backends: map[string]Backend{"b": {MaxActive: 1}}})
	func() {
		defer func() { _ = recover() }()
		s.Generate(context.Background(), Sequence{Backend: "b", Attempt: func(context.Context) llm.Outcome { panic("boom") }})
	}()
	out := s.Generate(ctxWithTimeout(t), Sequence{Backend: "b", Attempt: func(context.Context) llm.Outcome {
		return llm.Outcome{Response: &pktype.GenerateResponse{}}
	}})
	if out.Err != nil {
		t.Fatalf("permit leaked by a panicking attempt: %v", out.Err)
	}
}

func ctxWithTimeout(t *testing.T) context.Context {
	// A generous bound so a leaked permit fails the test instead of hanging it.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}

func TestCanceledPermitWaitIsRecordedUndispatched(t *testing.T) {
	t.Parallel()
	s, waiting := waitSignal(Config{Backends: map[string]Backend{"b": {MaxActive: 1}}})
	var calls atomic.Int32
	entered := make(chan struct{})
	block := make(chan struct{})
	defer close(block)
	holder := Sequence{Backend: "b", Attempt: func(context.Context) llm.Outcome {
		calls.Add(1)
		close(entered)
		<-block
		return llm.Outcome{}
	}}
	go s.Generate(context.Background(), holder)
	<-entered

	rec := observe.New(time.Now, nil, nil)
	ctx, cancel := context.WithCancel(context.Background())
	outc := make(chan llm.Outcome, 1)
	go func() {
		outc <- s.Generate(ctx, Sequence{Backend: "b", Generation: 1, Recorder: rec, Attempt: func(context.Context) llm.Outcome {
			calls.Add(1)
			return llm.Outcome{}
		}})
	}()
	<-waiting
	cancel()
	out := <-outc
	if !errors.Is(out.Err, pktype.ErrCapacity) || !errors.Is(out.Err, context.Canceled) {
		t.Fatalf("err = %v", out.Err)
	}
	if tot := rec.Totals(); tot.Attempts != 0 || calls.Load() != 1 {
		t.Fatalf("undispatched attempt counted: %+v, calls %d", tot, calls.Load())
	}
}
