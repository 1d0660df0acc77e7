// Package deltas carries the pieces of running jobs' answers, as the
// backend generates them, from the worker running a job to the requests
// waiting for it (jobs.Notifier's PublishDelta and SubscribeDeltas): a Hub
// fans them out in one process, and Payload and Parse are their form in
// PostgreSQL notifications, for the processes sharing a database.
//
// Delivery is best effort and never blocks the worker: a reader that
// falls behind misses pieces. A reader that subscribes late gets the
// job's first pieces again if they came recently (a request subscribes
// once its job is stored, and a worker of this process may have started
// it already); later ones it misses. Pieces are numbered
// (pktype.StreamDelta.Index), so a reader can tell, and a reader must
// treat the stored answer as the answer.
package deltas

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"time"

	"github.com/promptkit/promptkit/pktype"
)

// Buffer is how many pieces a reader may fall behind before it misses
// some: a few seconds of a fast backend's output.
const Buffer = 256

// A job's first RecentPieces pieces are kept for RecentFor after its
// first, for a reader that subscribes late.
const (
	RecentPieces = 64
	RecentFor    = 10 * time.Second
)

// Hub holds one process's readers, by job, and each job's recent first
// pieces. The zero value is ready; it is safe for concurrent use.
type Hub struct {
	// Now is the clock of RecentFor; nil: time.Now.
	Now func() time.Time

	mu     sync.Mutex
	subs   map[string]map[chan pktype.StreamDelta]struct{}
	recent map[string][]pktype.StreamDelta
	// since lists the jobs in recent by the time of their first piece,
	// oldest first, so expiry looks only at the front.
	since []started
}

type started struct {
	jobID string
	at    time.Time
}

func (h *Hub) now() time.Time {
	if h.Now != nil {
		return h.Now()
	}
	return time.Now()
}

// expire drops the recent pieces of jobs that started over RecentFor ago.
// The caller holds h.mu.
func (h *Hub) expire(now time.Time) {
	n := 0
	for n < len(h.since) && now.Sub(h.since[n].at) >= RecentFor {
		delete(h.recent, h.since[n].jobID)
		n++
	}
	h.since = h.since[n:]
}

// Subscribe returns a channel that receives the job's recent first
// pieces, then the pieces of jobID's answer delivered from now on; it is
// closed when ctx ends.
func (h *Hub) Subscribe(ctx context.Context, jobID string) <-chan pktype.StreamDelta {
	ch := make(chan pktype.StreamDelta, Buffer)
	if ctx.Err() != nil {
		close(ch)
		return ch
	}
	h.mu.Lock()
	h.expire(h.now())
	for _, d := range h.recent[jobID] { // fewer than Buffer: they fit
		ch <- d
	}
	if h.subs == nil {
		h.subs = map[string]map[chan pktype.StreamDelta]struct{}{}
	}
	if h.subs[jobID] == nil {
		h.subs[jobID] = map[chan pktype.StreamDelta]struct{}{}
	}
	h.subs[jobID][ch] = struct{}{}
	h.mu.Unlock()
	context.AfterFunc(ctx, func() {
		h.mu.Lock()
		defer h.mu.Unlock()
		delete(h.subs[jobID], ch)
		if len(h.subs[jobID]) == 0 {
			delete(h.subs, jobID)
		}
		close(ch)
	})
	return ch
}

// Deliver passes d to jobID's readers without blocking: a reader whose
// buffer is full misses it. It keeps the job's first pieces for a reader
// yet to come.
func (h *Hub) Deliver(jobID string, d pktype.StreamDelta) {
	h.mu.Lock()
	defer h.mu.Unlock()
	now := h.now()
	h.expire(now)
	if r, ok := h.recent[jobID]; !ok {
		if h.recent == nil {
			h.recent = map[string][]pktype.StreamDelta{}
		}
		h.recent[jobID] = []pktype.StreamDelta{d}
		h.since = append(h.since, started{jobID, now})
	} else if len(r) < RecentPieces {
		h.recent[jobID] = append(r, d)
	}
	for ch := range h.subs[jobID] {
		select {
		case ch <- d:
		default:
		}
	}
}

// MaxPayload is the largest notification payload PostgreSQL takes (8000
// bytes), less a margin; a piece that does not fit is not sent.
const MaxPayload = 7900

// ErrTooLarge is a piece whose payload would exceed MaxPayload.
var ErrTooLarge = errors.New("deltas: piece too large for a notification")

// wire is a piece in a notification: the schema scopes it to one store
// (stores on other schemas of the database ignore it), and origin names
// the process that sent it, which has already delivered it.
type wire struct {
	Schema string             `json:"s"`
	Origin string             `json:"o"`
	JobID  string             `json:"j"`
	Delta  pktype.StreamDelta `json:"d"`
}

// Payload is d's notification payload. A piece whose backend chunk
// (pktype.StreamDelta.Raw) does not fit goes without it: a reader then
// relays what promptkit reads of it (its text, reasoning and calls)
// instead of the chunk as the backend framed it.
func Payload(schema, origin, jobID string, d pktype.StreamDelta) (string, error) {
	b, err := json.Marshal(wire{Schema: schema, Origin: origin, JobID: jobID, Delta: d})
	if err == nil && len(b) > MaxPayload && d.Raw != nil {
		d.Raw = nil
		b, err = json.Marshal(wire{Schema: schema, Origin: origin, JobID: jobID, Delta: d})
	}
	if err != nil {
		return "", err
	}
	if len(b) > MaxPayload {
		return "", ErrTooLarge
	}
	return string(b), nil
}

// Parse reads a payload; ok is false for one that is not for schema, that
// origin sent, or that does not parse.
func Parse(payload, schema, origin string) (jobID string, d pktype.StreamDelta, ok bool) {
	var w wire
	if json.Unmarshal([]byte(payload), &w) != nil || w.Schema != schema || w.Origin == origin || w.JobID == "" {
		return "", d, false
	}
	return w.JobID, w.Delta, true
}
