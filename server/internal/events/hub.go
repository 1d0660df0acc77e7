// Package events is the server's view of the event log: one reader per
// process (the Hub) that reads each new event once and hands it to every
// subscriber — the event streams of GET /v1/events, and the waits of
// requests that answer once a job or batch has ended (Wake).
//
// A stream whose buffer is full is paused rather than slowing the others:
// it is told it is behind, catches up from the store (which holds every
// event the hub handed out) and resumes. A burst therefore costs a slow
// stream a replay, not its connection; only a client that stops reading
// is cut, by the stream's write deadline. A stream whose identity no
// longer holds (a revoked token, local mode ended) is ended.
package events

import (
	"context"
	"encoding/json"
	"log/slog"
	"sync"
	"time"

	"github.com/promptkit/promptkit/internal/lifecycle"
	"github.com/promptkit/promptkit/jobs"
	"github.com/promptkit/promptkit/server/internal/auth"
	"github.com/promptkit/promptkit/server/internal/httpapi"
)

// Config configures a Hub.
type Config struct {
	// Store holds the event log. Required.
	Store jobs.Store
	// Notifier wakes the reader when the log may have grown. Defaults to
	// Store.Notifier().
	Notifier jobs.Notifier
	// Poll is how often the reader looks for new events without a
	// notification.
	Poll time.Duration
	// Recheck is how often open streams' identities are checked (Valid).
	Recheck time.Duration
	// KeepAlive is the interval of the comment line on an idle stream.
	KeepAlive time.Duration
	// Buffer is a stream's live buffer, in events.
	Buffer int
	// Valid reports whether an identity still holds.
	Valid func(context.Context, auth.Identity) (bool, error)
	// Closing, when closed, ends every stream: the server is closing.
	Closing <-chan struct{}
	// Streams bounds the open streams; beyond one, 429. Zero fields take
	// DefaultStreamShares'.
	Streams auth.Shares
	// Clients, when set, is told of each stream opened (+1) and closed
	// (-1).
	Clients func(delta int)
	Log     *slog.Logger
}

// Hub is the process's one reader of the event log.
type Hub struct {
	cfg Config
	st  jobs.Store
	// open counts the streams, for Config.Streams.
	open open

	mu   sync.Mutex
	subs map[*subscriber]struct{}
	// last is the Seq of the newest event handed out.
	last int64

	// loop is the reader (run): one lifecycle for every background loop.
	loop *lifecycle.Loop
}

type subscriber struct {
	match func(jobs.Event) bool
	// wake, for a waiter, receives a coalesced signal per matching event;
	// a stream has live and behind instead.
	wake chan struct{}
	live chan *published
	// behind is signalled (capacity 1) when an event did not fit in live:
	// the hub then skips the subscriber until resume. What live holds
	// precedes the gap, so the subscriber sends it, replays from the store
	// up to resume's Seq and reads live again.
	behind chan struct{}
	paused bool // guarded by Hub.mu
	// id is the identity a stream acts for (nil for a waiter): the hub
	// looks every Recheck whether it still holds, and if not ends the
	// stream by closing ended.
	id    *auth.Identity
	ended chan struct{}
}

// published is an event as the hub hands it out, shared by every
// subscriber (a stream's buffer holds pointers: 8 bytes a slot): for a
// transition, with its stream frame (the SSE event, whose data is the
// JSON of StateChanged) encoded once for every client.
type published struct {
	jobs.Event
	frame []byte
}

// New builds a Hub; nothing runs until Start.
func New(cfg Config) *Hub {
	cfg.Streams = cfg.Streams.Or(DefaultStreamShares)
	h := &Hub{cfg: cfg, st: cfg.Store, subs: map[*subscriber]struct{}{}}
	h.loop = lifecycle.NewSetup(func(ctx context.Context) (func() error, error) {
		// Reading starts after the newest event: a stream replays older
		// ones from the store itself.
		last, err := h.st.LatestEventSeq(ctx)
		if err != nil {
			return nil, err
		}
		h.last = last
		return func() error { h.run(ctx); return nil }, nil
	})
	return h
}

// Start begins reading after the newest event.
func (h *Hub) Start(ctx context.Context) error { return h.loop.Start(ctx) }

// Stop ends the reader and waits for it, as long as ctx allows; safe
// when never started, and twice.
func (h *Hub) Stop(ctx context.Context) error { return h.loop.Stop(ctx) }

func (h *Hub) run(ctx context.Context) {
	n := h.cfg.Notifier
	if n == nil {
		n = h.st.Notifier()
	}
	notify := n.Notify(ctx)
	tick := time.NewTicker(h.cfg.Poll)
	defer tick.Stop()
	recheck := time.NewTicker(h.cfg.Recheck)
	defer recheck.Stop()
	failing := false
	for {
		err := h.read(ctx)
		switch {
		case ctx.Err() != nil:
			return
		case err != nil && !failing:
			// Once per outage: streams stall until the database answers.
			h.cfg.Log.Warn("event reader: reading the event log failed; streams resume when it answers", "err", err)
			failing = true
		case err == nil && failing:
			h.cfg.Log.Info("event reader: reading the event log again")
			failing = false
		}
		select {
		case <-ctx.Done():
			return
		case _, ok := <-notify:
			if !ok {
				notify = nil // the store closed; keep polling until stopped
			}
		case <-tick.C:
		case <-recheck.C:
			h.endInvalid(ctx)
		}
	}
}

// endInvalid ends the streams whose identity no longer holds: a token
// revoked here or in another process, or the local identity once a
// token exists. One look per identity, however many streams it has; a
// look that fails keeps the streams (revoking needs the store too).
func (h *Hub) endInvalid(ctx context.Context) {
	h.mu.Lock()
	ids := map[string]auth.Identity{}
	for sub := range h.subs {
		if sub.id != nil {
			ids[sub.id.Key] = *sub.id
		}
	}
	h.mu.Unlock()
	for key, id := range ids {
		if ok, err := h.cfg.Valid(ctx, id); ok || err != nil {
			continue
		}
		h.mu.Lock()
		for sub := range h.subs {
			if sub.id != nil && sub.id.Key == key {
				h.end(sub)
			}
		}
		h.mu.Unlock()
	}
}

// end removes sub and tells it so; h.mu is held.
func (h *Hub) end(sub *subscriber) {
	delete(h.subs, sub)
	close(sub.ended)
}

// EndStreams ends every open stream now, as a restart would: each client
// reconnects and replays what it missed.
func (h *Hub) EndStreams() {
	h.mu.Lock()
	defer h.mu.Unlock()
	for sub := range h.subs {
		if sub.id != nil {
			h.end(sub)
		}
	}
}

// read hands out every event after last, a page at a time.
func (h *Hub) read(ctx context.Context) error {
	const page = jobs.DefaultPageLimit
	for {
		h.mu.Lock()
		after := h.last
		h.mu.Unlock()
		evs, err := h.st.EventsAfter(ctx, jobs.EventsParams{After: after, Limit: page})
		if err != nil {
			return err
		}
		h.mu.Lock()
		for _, e := range evs {
			if e.Seq <= h.last {
				continue
			}
			p := publish(e)
			for sub := range h.subs {
				if !sub.paused && sub.match(e) {
					sub.deliver(p)
				}
			}
			h.last = e.Seq
		}
		h.mu.Unlock()
		if len(evs) < page {
			return nil
		}
	}
}

// deliver hands p to sub without blocking; Hub.mu is held.
func (sub *subscriber) deliver(p *published) {
	if sub.wake != nil {
		select {
		case sub.wake <- struct{}{}:
		default: // a wake is pending already: one look covers both
		}
		return
	}
	select {
	case sub.live <- p:
	default:
		sub.paused = true
		select {
		case sub.behind <- struct{}{}:
		default:
		}
	}
}

// Wake returns a channel that receives a signal, coalesced, after each
// event match accepts, until stop is called: what a request waiting for a
// job or a batch to end looks again on.
func (h *Hub) Wake(match func(jobs.Event) bool) (wake <-chan struct{}, stop func()) {
	sub := &subscriber{match: match, wake: make(chan struct{}, 1)}
	h.add(sub)
	return sub.wake, func() { h.remove(sub) }
}

// subscribe adds a stream's subscriber with a live buffer of size events,
// acting for id; it receives the matching events after start, the Seq of
// the newest event already handed out.
func (h *Hub) subscribe(match func(jobs.Event) bool, size int, id *auth.Identity) (sub *subscriber, start int64) {
	sub = &subscriber{match: match, live: make(chan *published, size), behind: make(chan struct{}, 1), id: id, ended: make(chan struct{})}
	return sub, h.add(sub)
}

func (h *Hub) add(sub *subscriber) (last int64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.subs[sub] = struct{}{}
	return h.last
}

// remove removes sub (again: no change).
func (h *Hub) remove(sub *subscriber) {
	h.mu.Lock()
	delete(h.subs, sub)
	h.mu.Unlock()
}

// resume delivers to a paused sub again, from the events after the Seq it
// returns; the subscriber replays up to that Seq from the store.
func (h *Hub) resume(sub *subscriber) int64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	sub.paused = false
	return h.last
}

// StateChanged is the data of a job.state_changed event.
type StateChanged struct {
	Seq       int64          `json:"seq"`
	PromptID  string         `json:"prompt_id"`
	JobID     string         `json:"job_id"`
	State     jobs.State     `json:"state"`
	From      jobs.State     `json:"from,omitempty"`
	Attempt   int            `json:"attempt"`
	ErrorKind jobs.ErrorKind `json:"error_kind,omitempty"`
	At        time.Time      `json:"at"`
}

// publish encodes a transition's stream frame.
func publish(e jobs.Event) *published {
	p := &published{Event: e}
	if e.Type == jobs.EventTransition {
		data, _ := json.Marshal(StateChangedOf(e)) // strings, ints, a time
		p.frame = httpapi.Frame(e.Seq, eventName, data)
	}
	return p
}

// eventName is the SSE event name of a transition.
const eventName = "job.state_changed"

// StateChangedOf is the stream data of a transition event.
func StateChangedOf(e jobs.Event) StateChanged {
	var d jobs.TransitionData
	_ = json.Unmarshal(e.Data, &d) // the store wrote it; no data is fine
	return StateChanged{Seq: e.Seq, PromptID: e.PromptID, JobID: e.JobID, State: e.To, From: e.From,
		Attempt: e.Attempt, ErrorKind: d.ErrorKind, At: e.At}
}
