// Package notify is the fan-out behind jobs.LocalNotifier's Notify:
// subscribers get a channel each, and a broadcast wakes them all without
// blocking. A hub may own a watcher (a store's LISTEN connection, or its
// poll of other processes' commits): a background loop of the one
// lifecycle (internal/lifecycle), started by the first subscription and
// stopped by Close.
package notify

import (
	"context"
	"sync"

	"github.com/promptkit/promptkit/internal/lifecycle"
)

// Hub holds the subscribers of one store. Create it with New; it is safe
// for concurrent use.
type Hub struct {
	watch *lifecycle.Loop // nil: no watcher

	mu     sync.Mutex
	subs   map[chan struct{}]func() bool // channel → stops its context.AfterFunc
	closed bool
}

// New returns a hub whose first subscription starts watch (nil: none) as
// a background loop, until Close: stores use it to begin watching for
// other processes' changes only once someone listens. watch broadcasts
// what it sees, and returns once its context ends.
func New(watch func(ctx context.Context) error) *Hub {
	h := &Hub{subs: map[chan struct{}]func() bool{}}
	if watch != nil {
		h.watch = lifecycle.New(watch)
	}
	return h
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
	if h.watch != nil {
		// Only the first start counts; later ones are refused, harmlessly.
		// Start spawns the loop and returns: safe under the lock.
		_ = h.watch.Start(context.Background())
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

// Watch starts the watcher, if the hub has one and it has not started,
// without subscribing: for a store whose watcher also carries what is not
// a wake-up (another process's answer pieces).
func (h *Hub) Watch() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.watch != nil && !h.closed {
		_ = h.watch.Start(context.Background()) // only the first start counts
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

// Close closes every channel, so later subscriptions get a closed one and
// start nothing, then stops the watcher and waits for it, as long as ctx
// allows. Calling it again is safe.
func (h *Hub) Close(ctx context.Context) error {
	h.mu.Lock()
	h.closed = true
	for ch, stop := range h.subs {
		stop()
		delete(h.subs, ch)
		close(ch)
	}
	h.mu.Unlock()
	if h.watch == nil {
		return nil
	}
	// Not under the lock: the watcher broadcasts until it stops.
	return h.watch.Stop(ctx)
}
