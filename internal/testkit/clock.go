package testkit

import (
	"context"
	"slices"
	"sync"
	"time"
)

// Clock is a fake clock: it moves only when told to (Set, Advance, Wait),
// or, made Ticking, by a step on every reading. Its methods fit the
// clock seams of the packages under test: Now for every Now func()
// time.Time, and Jitter and Wait for the retry seams (promptkit's
// NewWithSeams, dispatch's Config), where Wait records what it was asked
// for and advances the clock instead of waiting. It is safe for
// concurrent use.
type Clock struct {
	mu    sync.Mutex
	now   time.Time
	step  time.Duration
	waits []time.Duration
	hook  func(ctx context.Context, d time.Duration) error
}

// A ClockOption configures a Clock.
type ClockOption func(*Clock)

// Ticking makes every reading of Now advance the clock by step first, so
// no two readings are equal: two writes then share a timestamp only if
// they share one reading (a transaction that reads the clock once).
func Ticking(step time.Duration) ClockOption {
	return func(c *Clock) { c.step = step }
}

// NewClock returns a clock showing start.
func NewClock(start time.Time, opts ...ClockOption) *Clock {
	c := &Clock{now: start}
	for _, o := range opts {
		o(c)
	}
	return c
}

// Now returns the clock's time, first advancing it by the Ticking step if
// there is one.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(c.step)
	return c.now
}

// Set moves the clock to t, backwards included.
func (c *Clock) Set(t time.Time) {
	c.mu.Lock()
	c.now = t
	c.mu.Unlock()
}

// Advance moves the clock by d (backwards when d is negative) and returns
// the new time.
func (c *Clock) Advance(d time.Duration) time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
	return c.now
}

// Jitter returns n, the top of the range [0, n]: a backoff drawn with it
// equals its base.
func (c *Clock) Jitter(n time.Duration) time.Duration { return n }

// Wait records d (see Waits), then runs the hook set with OnWait, if any:
// a hook's error is Wait's. Then, unless ctx has ended (its error is
// returned), it advances the clock by d when d is positive and returns
// nil, at once.
func (c *Clock) Wait(ctx context.Context, d time.Duration) error {
	c.mu.Lock()
	c.waits = append(c.waits, d)
	hook := c.hook
	c.mu.Unlock()
	if hook != nil {
		if err := hook(ctx, d); err != nil {
			return err
		}
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if d > 0 {
		c.Advance(d)
	}
	return nil
}

// OnWait sets the hook Wait runs first (nil: none), to block, cancel or
// change the world between attempts.
func (c *Clock) OnWait(hook func(ctx context.Context, d time.Duration) error) {
	c.mu.Lock()
	c.hook = hook
	c.mu.Unlock()
}

// Waits returns the durations Wait was called with, in order.
func (c *Clock) Waits() []time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.waits)
}
