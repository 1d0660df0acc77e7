package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/promptkit/promptkit/jobs"
)

// hub is the process's one reader of the event log: it reads new events
// once, on a store notification or every poll interval, and hands each to
// the subscribers that match it. A subscriber whose buffer is full is
// paused rather than slowing the others: it is told it is behind, catches
// up from the store (which holds every event the hub handed out) and
// resumes. A burst therefore costs a slow stream a replay, not its
// connection; only a client that stops reading is cut, by the stream's
// write deadline.
type hub struct {
	st      jobs.Store
	poll    time.Duration
	recheck time.Duration
	// valid reports whether an identity still holds (see Server.valid).
	valid func(context.Context, identity) (bool, error)
	log   *slog.Logger

	mu   sync.Mutex
	subs map[*subscriber]struct{}
	// last is the Seq of the newest event handed out.
	last int64

	stopRun context.CancelFunc
	done    chan struct{}
}

type subscriber struct {
	match func(jobs.Event) bool
	live  chan published
	// behind is signalled (capacity 1) when an event did not fit in live:
	// the hub then skips the subscriber until resume. What live holds
	// precedes the gap, so the subscriber sends it, replays from the store
	// up to resume's Seq and reads live again.
	behind chan struct{}
	paused bool // guarded by hub.mu
	// id is the identity the subscriber acts for (nil: the server's own
	// waiter): the hub looks every recheck interval whether it still
	// holds, and if not ends the subscriber by closing ended.
	id    *identity
	ended chan struct{}
}

// published is an event as the hub hands it out: with its stream data
// (the JSON of stateChanged) encoded once for every client, for a
// transition.
type published struct {
	jobs.Event
	data []byte
}

func newHub(st jobs.Store, poll, recheck time.Duration, valid func(context.Context, identity) (bool, error), log *slog.Logger) *hub {
	return &hub{st: st, poll: poll, recheck: recheck, valid: valid, log: log, subs: map[*subscriber]struct{}{}}
}

// start begins reading after the newest event.
func (h *hub) start(ctx context.Context) error {
	last, err := h.st.LatestEventSeq(ctx)
	if err != nil {
		return err
	}
	h.last = last
	run, cancel := context.WithCancel(context.Background())
	h.stopRun, h.done = cancel, make(chan struct{})
	go func() {
		defer close(h.done)
		h.run(run)
	}()
	return nil
}

// stop ends the reader; safe when never started.
func (h *hub) stop() {
	if h.stopRun != nil {
		h.stopRun()
		<-h.done
	}
}

func (h *hub) run(ctx context.Context) {
	notify := h.st.Notify(ctx)
	tick := time.NewTicker(h.poll)
	defer tick.Stop()
	recheck := time.NewTicker(h.recheck)
	defer recheck.Stop()
	failing := false
	for {
		err := h.read(ctx)
		switch {
		case ctx.Err() != nil:
			return
		case err != nil && !failing:
			// Once per outage: streams stall until the database answers.
			h.log.Warn("event reader: reading the event log failed; streams resume when it answers", "err", err)
			failing = true
		case err == nil && failing:
			h.log.Info("event reader: reading the event log again")
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

// endInvalid ends the subscribers whose identity no longer holds: a
// token revoked here or in another process, or the local identity once a
// token exists. One look per identity, however many streams it has; a
// look that fails keeps the streams (revoking needs the store too).
func (h *hub) endInvalid(ctx context.Context) {
	h.mu.Lock()
	ids := map[string]identity{}
	for sub := range h.subs {
		if sub.id != nil {
			ids[sub.id.key] = *sub.id
		}
	}
	h.mu.Unlock()
	for key, id := range ids {
		if ok, err := h.valid(ctx, id); ok || err != nil {
			continue
		}
		h.mu.Lock()
		for sub := range h.subs {
			if sub.id != nil && sub.id.key == key {
				h.end(sub)
			}
		}
		h.mu.Unlock()
	}
}

// end removes sub and tells it so; h.mu is held.
func (h *hub) end(sub *subscriber) {
	delete(h.subs, sub)
	close(sub.ended)
}

// read hands out every event after last, a page at a time.
func (h *hub) read(ctx context.Context) error {
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
				if sub.paused || !sub.match(e) {
					continue
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
			h.last = e.Seq
		}
		h.mu.Unlock()
		if len(evs) < page {
			return nil
		}
	}
}

// subscribe adds a subscriber with a live buffer of size events, acting
// for id (nil: the server itself, never ended); it receives the matching
// events after start, the Seq of the newest event already handed out.
func (h *hub) subscribe(match func(jobs.Event) bool, size int, id *identity) (sub *subscriber, start int64) {
	sub = &subscriber{match: match, live: make(chan published, size), behind: make(chan struct{}, 1), id: id, ended: make(chan struct{})}
	h.mu.Lock()
	h.subs[sub] = struct{}{}
	start = h.last
	h.mu.Unlock()
	return sub, start
}

// unsubscribe removes sub (again: no change).
func (h *hub) unsubscribe(sub *subscriber) {
	h.mu.Lock()
	delete(h.subs, sub)
	h.mu.Unlock()
}

// resume delivers to a paused sub again, from the events after the Seq it
// returns; the subscriber replays up to that Seq from the store.
func (h *hub) resume(sub *subscriber) int64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	sub.paused = false
	return h.last
}

// stateChanged is the data of a job.state_changed event.
type stateChanged struct {
	Seq       int64          `json:"seq"`
	PromptID  string         `json:"prompt_id"`
	JobID     string         `json:"job_id"`
	State     jobs.State     `json:"state"`
	From      jobs.State     `json:"from,omitempty"`
	Attempt   int            `json:"attempt"`
	ErrorKind jobs.ErrorKind `json:"error_kind,omitempty"`
	At        time.Time      `json:"at"`
}

// publish encodes a transition's stream data.
func publish(e jobs.Event) published {
	p := published{Event: e}
	if e.Type == jobs.EventTransition {
		p.data, _ = json.Marshal(newStateChanged(e)) // strings, ints, a time
	}
	return p
}

func newStateChanged(e jobs.Event) stateChanged {
	var d jobs.TransitionData
	_ = json.Unmarshal(e.Data, &d) // the store wrote it; no data is fine
	return stateChanged{Seq: e.Seq, PromptID: e.PromptID, JobID: e.JobID, State: e.To, From: e.From,
		Attempt: e.Attempt, ErrorKind: d.ErrorKind, At: e.At}
}

// events streams the caller's job state changes as Server-Sent Events.
// With Last-Event-ID (or ?last_event_id=) it first replays what the
// client missed from the store, then continues live; each event is sent
// once, in Seq order.
func (s *Server) events(w http.ResponseWriter, r *http.Request) {
	id := identityOf(r)
	var sent int64
	replay := false
	// The header is what a browser's own reconnect sends; the parameter is
	// for a client that opens a new EventSource (e.g. with a new ticket)
	// and cannot set headers. The header wins when both are present.
	v := r.Header.Get("Last-Event-ID")
	if v == "" {
		v = r.URL.Query().Get("last_event_id")
	}
	if v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			writeError(w, http.StatusBadRequest, "invalid_request", "Last-Event-ID (or last_event_id) must be the id of an event")
			return
		}
		sent, replay = n, true
	}
	sub, start := s.hub.subscribe(func(e jobs.Event) bool {
		return e.Type == jobs.EventTransition && id.owns(e.OrgID, e.CreatedBy)
	}, s.cfg.sseBuffer, &id)
	defer s.hub.unsubscribe(sub)
	if s.cfg.Metrics != nil {
		s.cfg.Metrics.SSEClients(1)
		defer s.cfg.Metrics.SSEClients(-1)
	}

	rc := http.NewResponseController(w)
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no") // proxies must not buffer the stream
	w.WriteHeader(http.StatusOK)
	// Writes are buffered by the ResponseWriter; flush sends them, once
	// per burst of events. Each burst gets its own deadline instead of the
	// server's WriteTimeout, which would cut every stream: a client that
	// stops reading is cut by it, and no one else.
	extend := func() { _ = rc.SetWriteDeadline(time.Now().Add(s.cfg.KeepAlive + 10*time.Second)) }
	flush := func() error {
		extend()
		return rc.Flush()
	}
	send := func(p published) error {
		if p.Seq <= sent {
			return nil
		}
		sent = p.Seq
		if _, err := fmt.Fprintf(w, "id: %d\nevent: job.state_changed\ndata: %s\n\n", p.Seq, p.data); err != nil {
			return fmt.Errorf("%w: %w", errStreamWrite, err)
		}
		return nil
	}
	// catchUp sends from the store what came after sent up to until.
	catchUp := func(until int64) error {
		extend() // a long replay writes much before its flush
		if err := s.replay(r.Context(), id, sent, until, send); err != nil {
			if r.Context().Err() == nil && !errors.Is(err, errStreamWrite) {
				s.log.Warn("event stream: replay failed; the client reconnects", "err", err)
			}
			return err
		}
		return flush()
	}
	if _, err := io.WriteString(w, ": promptkit events\n\n"); err != nil || flush() != nil {
		return
	}
	if replay && sent < start && catchUp(start) != nil {
		return
	}
	keepAlive := time.NewTicker(s.cfg.KeepAlive)
	defer keepAlive.Stop()
	for {
		var err error
		select {
		case p := <-sub.live:
			err = send(p)
			for more := true; more && err == nil; {
				select {
				case p := <-sub.live: // the rest of the burst, then one flush
					err = send(p)
				default:
					more = false
				}
			}
			if err == nil {
				err = flush()
			}
		case <-sub.behind:
			// The hub paused this stream: live holds what came before the
			// gap, the store the rest.
			for more := true; more && err == nil; {
				select {
				case p := <-sub.live:
					err = send(p)
				default:
					more = false
				}
			}
			if err == nil {
				err = catchUp(s.hub.resume(sub))
			}
		case <-keepAlive.C:
			if _, err = io.WriteString(w, ": keep-alive\n\n"); err == nil {
				err = flush()
			}
		case <-sub.ended:
			return // the token was revoked, or local mode ended
		case <-r.Context().Done():
			return
		case <-s.streams.Done():
			return
		}
		if err != nil {
			return
		}
	}
}

// errStreamWrite marks a failed write to an event stream's client.
var errStreamWrite = errors.New("writing to the event stream")

// replay sends the caller's transition events after `after` up to `until`
// from the store.
func (s *Server) replay(ctx context.Context, id identity, after, until int64, send func(published) error) error {
	for after < until {
		evs, err := s.st.EventsAfter(ctx, jobs.EventsParams{OrgID: id.org, CreatedBy: id.createdBy(), After: after, Limit: jobs.DefaultPageLimit})
		if err != nil {
			return err
		}
		for _, e := range evs {
			if e.Seq > until {
				return nil
			}
			if e.Type == jobs.EventTransition {
				if err := send(publish(e)); err != nil {
					return err
				}
			}
			after = e.Seq
		}
		if len(evs) < jobs.DefaultPageLimit {
			return nil
		}
	}
	return nil
}
