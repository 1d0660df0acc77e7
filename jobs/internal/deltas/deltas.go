// Package deltas carries the pieces of running jobs' answers, as the
// backend generates them, from the worker running a job to the requests
// waiting for it (jobs.Store's PublishDelta and SubscribeDeltas): a Hub
// fans them out in one process, and Payload and Parse are their form in
// PostgreSQL notifications, for the processes sharing a database.
//
// Delivery is best effort and never blocks the worker: a reader that
// falls behind misses pieces, and so does one that subscribes after a
// piece was published. Pieces are numbered (pktype.StreamDelta.Index), so
// a reader can tell, and a reader must treat the stored answer as the
// answer.
package deltas

import (
	"context"
	"encoding/json"
	"errors"
	"sync"

	"github.com/promptkit/promptkit/pktype"
)

// Buffer is how many pieces a reader may fall behind before it misses
// some: a few seconds of a fast backend's output.
const Buffer = 256

// Hub holds one process's readers, by job. The zero value is ready; it is
// safe for concurrent use.
type Hub struct {
	mu   sync.Mutex
	subs map[string]map[chan pktype.StreamDelta]struct{}
}

// Subscribe returns a channel that receives the pieces of jobID's answer
// delivered from now on; it is closed when ctx ends.
func (h *Hub) Subscribe(ctx context.Context, jobID string) <-chan pktype.StreamDelta {
	ch := make(chan pktype.StreamDelta, Buffer)
	if ctx.Err() != nil {
		close(ch)
		return ch
	}
	h.mu.Lock()
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
// buffer is full misses it.
func (h *Hub) Deliver(jobID string, d pktype.StreamDelta) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for ch := range h.subs[jobID] {
		select {
		case ch <- d:
		default:
		}
	}
}

// Subscribed reports whether jobID has a reader in this process.
func (h *Hub) Subscribed(jobID string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.subs[jobID]) > 0
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

// Payload is d's notification payload.
func Payload(schema, origin, jobID string, d pktype.StreamDelta) (string, error) {
	b, err := json.Marshal(wire{Schema: schema, Origin: origin, JobID: jobID, Delta: d})
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
