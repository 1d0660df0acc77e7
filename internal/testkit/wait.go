package testkit

import (
	"context"
	"reflect"
	"testing"
	"time"
)

// A Source signals that something a wait looks at may have changed: a
// jobs.Notifier (its Notify), a *Logs (every write), or, through Chan, a
// channel that closes when something ends (a process exits).
type Source interface {
	// Notify returns a channel that receives a value, or is closed, when
	// something may have changed; ctx ending unsubscribes.
	Notify(ctx context.Context) <-chan struct{}
}

// Chan makes a Source of ch, a channel that receives or closes on an
// event: a process's exit, a server's shutdown.
func Chan(ch <-chan struct{}) Source { return chanSource(ch) }

type chanSource <-chan struct{}

func (c chanSource) Notify(context.Context) <-chan struct{} { return c }

// Fallback is how often a wait looks again when no Source has signalled:
// notifications are hints (they coalesce, and a listener reconnecting
// misses some), so every wait also looks on this slow tick.
const Fallback = 500 * time.Millisecond

// Until reports whether cond holds: it looks at once, then again whenever
// one of srcs signals and on every Fallback tick, until cond holds (true)
// or timeout passes or ctx ends (false, after a last look). A source whose
// channel closes wakes the wait once and then no more. Until never sleeps:
// it blocks on its sources, a ticker and its deadline.
func Until(ctx context.Context, timeout time.Duration, cond func() bool, srcs ...Source) bool {
	return until(ctx, timeout, Fallback, cond, srcs...)
}

// until is Until with the fallback tick as a parameter, for its tests.
func until(ctx context.Context, timeout, fallback time.Duration, cond func() bool, srcs ...Source) bool {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel() // unsubscribes from srcs
	tick := time.NewTicker(fallback)
	defer tick.Stop()
	cases := []reflect.SelectCase{
		{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(ctx.Done())},
		{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(tick.C)},
	}
	for _, s := range srcs {
		cases = append(cases, reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(s.Notify(ctx))})
	}
	for {
		if cond() {
			return true
		}
		i, _, open := reflect.Select(cases)
		switch {
		case i == 0:
			return cond()
		case i > 1 && !open:
			cases[i].Chan = reflect.Value{} // closed: ignored from now on
		}
	}
}

// WaitFor waits like Until, with t's context, until cond reports ok, and
// fails t when timeout passes first, naming what it waited for and cond's
// last status.
func WaitFor(t testing.TB, timeout time.Duration, what string, cond func() (ok bool, status string), srcs ...Source) {
	t.Helper()
	var status string
	if !Until(t.Context(), timeout, func() bool {
		var ok bool
		ok, status = cond()
		return ok
	}, srcs...) {
		t.Fatalf("timed out after %v waiting for %s; last: %s", timeout, what, status)
	}
}
