// Package lifecycle is the one lifecycle of promptkit's background loops
// (the worker and its heartbeat, the reclaimer, the archiver, the batch
// processor, the server's event reader, the stores' notification
// watchers): a Loop runs one function in a goroutine it owns, from Start
// until Stop. Stop cancels the function's context and waits for it to
// return, for as long as Stop's own context allows; stopping twice, or
// before Start, is safe and returns the same result; a Loop starts once.
//
// A component built on a Loop has the same public shape: New…(cfg) (*T,
// error), Start(ctx) error, Stop(ctx) error.
package lifecycle

import (
	"context"
	"errors"
	"sync"
)

// Errors of Start.
var (
	// ErrStarted is Start's error on a Loop that was started already: a
	// Loop starts once, even after it stopped.
	ErrStarted = errors.New("lifecycle: already started")
	// ErrStopped is Start's error on a Loop stopped before it started.
	ErrStopped = errors.New("lifecycle: stopped before it started")
)

// Loop runs one function in a goroutine it owns, from Start until Stop.
// Create it with New or NewSetup; it is safe for concurrent use.
type Loop struct {
	setup func(ctx context.Context) (func() error, error)
	// done is closed once the function has returned (or setup failed, or
	// Stop came before Start); err is the result, written before.
	done chan struct{}
	err  error

	mu      sync.Mutex
	started bool
	stopped bool               // Stop was called
	cancel  context.CancelFunc // the function's context; nil before Start
}

// New returns a Loop whose Start calls run in a new goroutine, with a
// context that Stop cancels. run should return once that context ends.
func New(run func(ctx context.Context) error) *Loop {
	return NewSetup(func(ctx context.Context) (func() error, error) {
		return func() error { return run(ctx) }, nil
	})
}

// NewSetup returns a Loop whose Start first calls setup, synchronously,
// with the context Stop cancels, and then runs the function setup
// returned in a new goroutine. setup does what must be in place when
// Start returns (subscribing to notifications, say); when it fails, Start
// returns its error and the Loop is over, with that result.
func NewSetup(setup func(ctx context.Context) (run func() error, err error)) *Loop {
	return &Loop{setup: setup, done: make(chan struct{})}
}

// Start starts the loop. ctx's values reach the loop's context, but its
// end does not stop the loop: Stop does. Start returns ErrStarted when the
// Loop was started already, ErrStopped when it was stopped first, and the
// setup's error when it fails (see NewSetup).
func (l *Loop) Start(ctx context.Context) error {
	l.mu.Lock()
	switch {
	case l.started:
		l.mu.Unlock()
		return ErrStarted
	case l.stopped:
		l.mu.Unlock()
		return ErrStopped
	}
	l.started = true
	runCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	l.cancel = cancel
	l.mu.Unlock()
	// A Stop from now on cancels runCtx and waits for done.
	run, err := l.setup(runCtx)
	if err != nil {
		l.finish(cancel, err)
		return err
	}
	go func() {
		err := run()
		if errors.Is(err, context.Canceled) && runCtx.Err() != nil {
			err = nil // stopped as asked: a clean stop
		}
		l.finish(cancel, err)
	}()
	return nil
}

// finish records the loop's result and releases its context.
func (l *Loop) finish(cancel context.CancelFunc, err error) {
	l.err = err
	cancel()
	close(l.done)
}

// Stop cancels the loop's context and waits for its function to return.
// It returns the function's error (nil when the function returned the
// context's error because Stop cancelled it), or ctx's error when ctx
// ends first: the loop then finishes on its own, and a later Stop waits
// again. Stopping twice returns the same result; stopping before Start
// returns nil, and the Loop will not start.
func (l *Loop) Stop(ctx context.Context) error {
	l.mu.Lock()
	switch {
	case l.started:
		l.cancel()
	case !l.stopped:
		close(l.done) // never to start: Start refuses with ErrStopped
	}
	l.stopped = true
	l.mu.Unlock()
	select {
	case <-l.done:
		return l.err
	default:
	}
	select {
	case <-l.done:
		return l.err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Done is closed once the loop is over: its function returned, its setup
// failed, or Stop came before Start.
func (l *Loop) Done() <-chan struct{} { return l.done }
