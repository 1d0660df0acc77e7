package pgstore

import (
	"context"
	"sync"
	"time"

	"github.com/promptkit/promptkit/internal/lifecycle"
	"github.com/promptkit/promptkit/jobs/internal/deltas"
	"github.com/promptkit/promptkit/pktype"
)

// deltaChannel is the LISTEN/NOTIFY channel of answer pieces (see
// jobs/internal/deltas for the payload).
const deltaChannel = "promptkit_deltas"

// Pieces waiting to be sent: beyond maxPendingDeltas (the database is
// slow or away) new ones are dropped; a send gives up after
// deltaSendTimeout, since a late piece is worth nothing.
const (
	maxPendingDeltas = 4096
	deltaSendTimeout = 2 * time.Second
)

// deltaSender sends this process's pieces as notifications, in the order
// published, from one loop that starts with the first piece and stops
// when the store closes. Each round sends everything pending in one
// statement, so a burst costs one round trip.
type deltaSender struct {
	loop *lifecycle.Loop
	wake chan struct{}

	mu      sync.Mutex
	pending []string
}

func newDeltaSender(send func(ctx context.Context, payloads []string) error) *deltaSender {
	d := &deltaSender{wake: make(chan struct{}, 1)}
	d.loop = lifecycle.New(func(ctx context.Context) error {
		for {
			select {
			case <-ctx.Done():
				return nil
			case <-d.wake:
			}
			d.mu.Lock()
			batch := d.pending
			d.pending = nil
			d.mu.Unlock()
			sctx, cancel := context.WithTimeout(ctx, deltaSendTimeout)
			_ = send(sctx, batch) // best effort: readers fall back on the stored answer
			cancel()
		}
	})
	return d
}

func (d *deltaSender) add(payload string) {
	_ = d.loop.Start(context.Background()) // only the first start counts
	d.mu.Lock()
	if len(d.pending) < maxPendingDeltas {
		d.pending = append(d.pending, payload)
	}
	d.mu.Unlock()
	select {
	case d.wake <- struct{}{}:
	default:
	}
}

// PublishDelta delivers d to this process's readers and notifies the
// other processes on the database. See jobs.Store.
func (s *Store) PublishDelta(jobID string, d pktype.StreamDelta) {
	s.deltas.Deliver(jobID, d)
	payload, err := deltas.Payload(s.schema, s.probeKey, jobID, d)
	if err != nil {
		return // too large for a notification: the readers see the gap
	}
	s.deltaOut.add(payload)
}

// SubscribeDeltas starts the LISTEN connection if it is not running yet.
// See jobs.Store.
func (s *Store) SubscribeDeltas(ctx context.Context, jobID string) <-chan pktype.StreamDelta {
	s.notify.Watch()
	return s.deltas.Subscribe(ctx, jobID)
}

// sendDeltas notifies one batch of payloads, in order.
func (s *Store) sendDeltas(ctx context.Context, payloads []string) error {
	_, err := s.pool.Exec(ctx, `SELECT pg_notify('`+deltaChannel+`', p) FROM unnest($1::text[]) WITH ORDINALITY AS u(p, n) ORDER BY n`, payloads)
	return err
}
