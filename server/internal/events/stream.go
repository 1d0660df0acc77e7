package events

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/promptkit/promptkit/jobs"
	"github.com/promptkit/promptkit/server/internal/auth"
	"github.com/promptkit/promptkit/server/internal/httpapi"
)

// writeGrace is how long past a keep-alive a write to a stream may wait
// before the client is taken for gone.
const writeGrace = 10 * time.Second

// Stream answers GET /v1/events: the caller's job state changes as
// Server-Sent Events. With Last-Event-ID (or ?last_event_id=) it first
// replays what the client missed from the store, then continues live;
// each event is sent once, in Seq order.
func (h *Hub) Stream(w http.ResponseWriter, r *http.Request) error {
	id := auth.Of(r)
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
			return httpapi.Invalid("Last-Event-ID", "Last-Event-ID (or last_event_id) must be the id of an event")
		}
		sent, replay = n, true
	}
	release, full := h.open.acquire(h.cfg.Streams, id)
	if full != "" {
		return tooManyStreams(full, h.cfg.KeepAlive)
	}
	defer release()
	sub, start := h.subscribe(func(e jobs.Event) bool {
		return e.Type == jobs.EventTransition && id.Owns(e.OrgID, e.CreatedBy)
	}, h.cfg.Buffer, &id)
	defer h.remove(sub)
	if h.cfg.Clients != nil {
		h.cfg.Clients(1)
		defer h.cfg.Clients(-1)
	}

	// Each burst of writes gets its own deadline: a client that stops
	// reading is cut by it, and no one else.
	sse, err := httpapi.StartSSE(w, h.cfg.KeepAlive+writeGrace)
	if err != nil {
		return nil // the client left
	}
	send := func(p *published) error {
		if p.Seq <= sent {
			return nil
		}
		sent = p.Seq
		return sse.Frame(p.frame)
	}
	// catchUp sends from the store what came after sent up to until.
	catchUp := func(until int64) error {
		sse.Extend() // a long replay writes much before its flush
		if err := h.replay(r.Context(), id, sent, until, send); err != nil {
			if r.Context().Err() == nil && !errors.Is(err, httpapi.ErrStreamWrite) {
				h.cfg.Log.Warn("event stream: replay failed; the client reconnects", "err", err)
			}
			return err
		}
		return sse.Flush()
	}
	if sse.Comment("promptkit events") != nil || sse.Flush() != nil {
		return nil
	}
	if replay && sent < start && catchUp(start) != nil {
		return nil
	}
	// drain sends what live holds without waiting.
	drain := func() error {
		for {
			select {
			case p := <-sub.live:
				if err := send(p); err != nil {
					return err
				}
			default:
				return nil
			}
		}
	}
	keepAlive := time.NewTicker(h.cfg.KeepAlive)
	defer keepAlive.Stop()
	for {
		var err error
		select {
		case p := <-sub.live:
			// This event, the rest of the burst, then one flush.
			if err = send(p); err == nil {
				err = drain()
			}
			if err == nil {
				err = sse.Flush()
			}
		case <-sub.behind:
			// The hub paused this stream: live holds what came before the
			// gap, the store the rest.
			if err = drain(); err == nil {
				err = catchUp(h.resume(sub))
			}
		case <-keepAlive.C:
			if err = sse.Comment("keep-alive"); err == nil {
				err = sse.Flush()
			}
		case <-sub.ended:
			return nil // the identity no longer holds
		case <-r.Context().Done():
			return nil
		case <-h.cfg.Closing:
			return nil
		}
		if err != nil {
			return nil // the client left; it reconnects with Last-Event-ID
		}
	}
}

// replay sends the caller's transition events after `after` up to `until`
// from the store.
func (h *Hub) replay(ctx context.Context, id auth.Identity, after, until int64, send func(*published) error) error {
	for after < until {
		evs, err := h.st.EventsAfter(ctx, jobs.EventsParams{OrgID: id.Org, CreatedBy: id.CreatedBy(), After: after, Limit: jobs.DefaultPageLimit})
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
