// Package notify is the fan-out behind jobs.Store.Notify: subscribers get
// a channel each, and a broadcast wakes them all without blocking.
package notify

import (
	"context"
	"sync"
)

// Hub holds the subscribers of one store. Create it with New; it is safe
// for concurrent use.
type Hub struct {
	start func()

	mu      sync.Mutex
	subs    map[chan struct{}]func() bool // channel → stops its context.AfterFunc
	started bool
	closed  bool
}

// New returns a hub that calls start on the first subscription (with the
// hub's lock held, so it must not block): stores use it to begin watching
// for other processes' changes only once someone listens.
func New(start func()) *Hub {
	return &Hub{start: start, subs: map[chan struct{}]func() bool{}}
}

// Subscribe returns a channel with a buffer of one, so wake-ups coalesce
// while the subscriber is busy. It is closed when ctx ends or the hub
// closes; on a closed hub, or with ctx already ended, it comes closed.
func (h *Hub) Subscribe(ctx context.Context) <-chan struct{} {
	ch := make(chan struct{}, 1)
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed || ctx.Err() != nil {
		close(ch)
		return ch
	}
	if !h.started {
		h.started = true
		if h.start != nil {
			h.start()
		}
	}
	// AfterFunc instead of a goroutine per subscriber; it runs after we
	// release the lock even if ctx ends right now.
	h.subs[ch] = context.AfterFunc(ctx, func() { h.unsubscribe(ch) })
	return ch
}

func (h *Hub) unsubscribe(ch chan struct{}) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if _, ok := h.subs[ch]; ok {
		delete(h.subs, ch)
		close(ch)
	}
}

// Broadcast wakes every subscriber without blocking; a full channel
// already holds a pending wake-up.
func (h *Hub) Broadcast() {
	h.mu.Lock()
	defer h.mu.Unlock()
	for ch := range h.subs {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}

// Close closes every channel; later subscriptions get a closed channel
// and never call start. It reports whether start was called, so the owner
// knows whether to stop what start began. Calling it again does nothing
// (and reports the same).
func (h *Hub) Close() (started bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.closed = true
	for ch, stop := range h.subs {
		stop()
		delete(h.subs, ch)
		close(ch)
	}
	return h.started
}
