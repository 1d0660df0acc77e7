// Package groupcommit runs concurrent calls together: calls that arrive
// while a batch is running are gathered and run as the next batch, so one
// transaction (and one commit) serves many callers. Both job stores put
// their per-job writes through it.
//
// There is no background goroutine. The first caller leads: it runs a
// batch on its own goroutine, and after each batch leadership passes to
// the oldest waiting call. An idle group adds next to no delay: a call
// that finds no batch running leads at once, after one yield to the
// goroutines already runnable (see runBatch).
package groupcommit

import (
	"context"
	"errors"
	"runtime"
	"sync"
)

// ErrClosed is returned by calls made after Close, and by calls still
// waiting when it was called.
var ErrClosed = errors.New("store is closed")

// Group batches calls of type R. Create it with New.
type Group[R any] struct {
	max int
	key func(R) string
	run func(ctx context.Context, reqs []R) []error

	mu      sync.Mutex
	ended   sync.Cond // signalled when a batch ends
	queue   []*call[R]
	leading bool // some call leads, or has been told to
	running bool // a batch is running
	closed  bool
}

type call[R any] struct {
	ctx    context.Context
	req    R
	err    error
	done   chan struct{} // closed once err is set
	lead   chan struct{} // receives once when this call must lead
	taken  bool          // in a running batch: it will be answered by it
	leader bool
}

// New returns a group that runs at most max calls per batch with run,
// which returns each call's error in order. key, if not nil, gives a
// call's conflict key: a batch never holds two calls with the same
// non-empty key, so the second sees the first's effect as if they had run
// one after the other.
func New[R any](max int, key func(R) string, run func(ctx context.Context, reqs []R) []error) *Group[R] {
	g := &Group[R]{max: max, key: key, run: run}
	g.ended.L = &g.mu
	return g
}

// Do runs req in some batch and returns its error. A call whose ctx ends
// before its batch starts is not run and returns the context's error; once
// its batch has started, the call waits for its outcome whatever ctx does
// (one caller giving up must not fail the others). After Close, Do returns
// ErrClosed.
func (g *Group[R]) Do(ctx context.Context, req R) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	c := &call[R]{ctx: ctx, req: req, done: make(chan struct{}), lead: make(chan struct{}, 1)}
	g.mu.Lock()
	if g.closed {
		g.mu.Unlock()
		return ErrClosed
	}
	g.queue = append(g.queue, c)
	if !g.leading {
		g.leading = true
		c.leader = true
		c.lead <- struct{}{}
	}
	g.mu.Unlock()
	for {
		select {
		case <-c.done:
			return c.err
		case <-c.lead:
			g.runBatch(ctx)
		case <-ctx.Done():
			g.mu.Lock()
			select {
			case <-c.done: // answered meanwhile
				g.mu.Unlock()
				return c.err
			default:
			}
			if c.taken {
				g.mu.Unlock()
				<-c.done
				return c.err
			}
			g.remove(c)
			if c.leader {
				// Leadership was handed to us; pass it on.
				g.handOff()
			}
			g.mu.Unlock()
			return ctx.Err()
		}
	}
}

// runBatch cuts the next batch from the queue, runs it, answers its calls
// and hands leadership to the oldest waiting call. ctx is the leader's;
// only its values reach run.
func (g *Group[R]) runBatch(ctx context.Context) {
	// One yield before the batch is cut, so that calls made at the same
	// moment by goroutines already runnable join it: a worker slot's
	// settling write and its next claim go out together, and as one
	// transaction PostgreSQL takes them 3 % faster at 64 slots (SQLite
	// 1 %). Alone, the call loses a scheduler round, well under a
	// microsecond.
	runtime.Gosched()
	g.mu.Lock()
	var batch []*call[R]
	seen := map[string]bool{}
	rest := g.queue[:0:0]
	for _, c := range g.queue {
		if err := c.ctx.Err(); err != nil {
			c.err = err // ended while waiting: not run
			close(c.done)
			continue
		}
		k := ""
		if g.key != nil {
			k = g.key(c.req)
		}
		if len(batch) == g.max || (k != "" && seen[k]) {
			rest = append(rest, c)
			continue
		}
		if k != "" {
			seen[k] = true
		}
		c.taken = true
		batch = append(batch, c)
	}
	g.queue = rest
	g.running = len(batch) > 0
	g.mu.Unlock()

	if len(batch) > 0 {
		reqs := make([]R, len(batch))
		for i, c := range batch {
			reqs[i] = c.req
		}
		errs := g.run(context.WithoutCancel(ctx), reqs)
		for i, c := range batch {
			c.err = errs[i]
			close(c.done)
		}
		// Let the callers just answered run before the next batch is cut:
		// most of them submit their next call at once, and without this
		// the next leader would start with whatever happened to be queued,
		// so batches would alternate between halves of the callers. An
		// idle group loses nothing: nobody waits.
		runtime.Gosched()
	}
	g.mu.Lock()
	g.running = false
	g.ended.Broadcast()
	g.handOff()
	g.mu.Unlock()
}

// handOff makes the oldest waiting call the leader, or marks the group
// idle. g.mu must be held.
func (g *Group[R]) handOff() {
	if len(g.queue) == 0 {
		g.leading = false
		return
	}
	next := g.queue[0]
	next.leader = true
	next.lead <- struct{}{}
}

// remove drops c from the queue. g.mu must be held.
func (g *Group[R]) remove(c *call[R]) {
	for i, q := range g.queue {
		if q == c {
			g.queue = append(g.queue[:i], g.queue[i+1:]...)
			return
		}
	}
}

// Close makes later calls fail with ErrClosed, answers the calls still
// waiting with ErrClosed (they are not run), and returns once the batch in
// hand, if any, has finished. Calling it again does nothing.
func (g *Group[R]) Close() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.closed = true
	for _, c := range g.queue {
		c.err = ErrClosed
		close(c.done)
	}
	g.queue = nil
	// A call told to lead but not yet leading finds nothing to run.
	g.leading = false
	for g.running {
		g.ended.Wait()
	}
}
