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
// the subscribers that match it. A subscriber that cannot keep up is
// dropped rather than slowing the others (an event stream then ends, and
// its client reconnects with Last-Event-ID).
type hub struct {
	st   jobs.Store
	poll time.Duration
	log  *slog.Logger

	mu   sync.Mutex
	subs map[*subscriber]struct{}
	// last is the Seq of the newest event handed out.
	last int64

	stopRun context.CancelFunc
	done    chan struct{}
}

type subscriber struct {
	match func(jobs.Event) bool
	// deliver hands over one event without blocking; false drops the
	// subscriber.
	deliver func(published) bool
}

// published is an event as the hub hands it out: with its stream data
// (the JSON of stateChanged) encoded once for every client, for a
// transition.
type published struct {
	jobs.Event
	data []byte
}

func newHub(st jobs.Store, poll time.Duration, log *slog.Logger) *hub {
	return &hub{st: st, poll: poll, log: log, subs: map[*subscriber]struct{}{}}
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
		}
	}
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
				if sub.match(e) && !sub.deliver(p) {
					delete(h.subs, sub)
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

// subscribe adds a subscriber; it receives the matching events after
// start, the Seq of the newest event already handed out. The returned
// function removes it.
func (h *hub) subscribe(match func(jobs.Event) bool, deliver func(published) bool) (unsubscribe func(), start int64) {
	sub := &subscriber{match: match, deliver: deliver}
	h.mu.Lock()
	h.subs[sub] = struct{}{}
	start = h.last
	h.mu.Unlock()
	return func() {
		h.mu.Lock()
		delete(h.subs, sub)
		h.mu.Unlock()
	}, start
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
	live := make(chan published, defaultSSEBuffer)
	dropped := make(chan struct{})
	unsub, start := s.hub.subscribe(
		func(e jobs.Event) bool { return e.Type == jobs.EventTransition && id.owns(e.OrgID, e.CreatedBy) },
		func(p published) bool {
			select {
			case live <- p:
				return true
			default:
				close(dropped)
				return false
			}
		})
	defer unsub()
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
	// per burst of events. Each flush gets its own deadline instead of the
	// server's WriteTimeout, which would cut every stream.
	flush := func() error {
		_ = rc.SetWriteDeadline(time.Now().Add(s.cfg.KeepAlive + 10*time.Second))
		return rc.Flush()
	}
	send := func(p published) error {
		if p.Seq <= sent {
			return nil
		}
		sent = p.Seq
		_, err := fmt.Fprintf(w, "id: %d\nevent: job.state_changed\ndata: %s\n\n", p.Seq, p.data)
		return err
	}
	if _, err := io.WriteString(w, ": promptkit events\n\n"); err != nil || flush() != nil {
		return
	}
	if replay && sent < start {
		if err := s.replay(r.Context(), id, sent, start, send); err != nil {
			if !errors.Is(err, context.Canceled) {
				s.log.Warn("event stream: replay failed", "err", err)
			}
			return
		}
		if flush() != nil {
			return
		}
	}
	keepAlive := time.NewTicker(s.cfg.KeepAlive)
	defer keepAlive.Stop()
	for {
		var err error
		select {
		case p := <-live:
			err = send(p)
			for more := true; more && err == nil; {
				select {
				case p := <-live: // the rest of the burst, then one flush
					err = send(p)
				default:
					more = false
				}
			}
			if err == nil {
				err = flush()
			}
		case <-keepAlive.C:
			if _, err = io.WriteString(w, ": keep-alive\n\n"); err == nil {
				err = flush()
			}
		case <-dropped:
			// Too slow: the client reconnects with Last-Event-ID.
			return
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
