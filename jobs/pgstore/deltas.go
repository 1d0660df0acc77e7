package pgstore

import (
	"context"
	"sync"
	"time"

	"github.com/promptkit/promptkit/internal/lifecycle"
	"github.com/promptkit/promptkit/jobs"
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

// notifier is a Store's jobs.Notifier: the in-process one, fed by the
// store's commits and its LISTEN loop (Store.listen), extended to carry
// answer pieces between the processes on the database.
type notifier struct {
	*jobs.LocalNotifier
	// schema and origin scope and sign this process's pieces (see
	// deltas.Payload); out sends them.
	schema, origin string
	out            *deltaSender
}

// PublishDelta delivers d to this process's readers and notifies the
// other processes on the database. See jobs.Notifier.
func (n *notifier) PublishDelta(jobID string, d pktype.StreamDelta) {
	n.LocalNotifier.PublishDelta(jobID, d)
	payload, err := deltas.Payload(n.schema, n.origin, jobID, d)
	if err != nil {
		return // too large for a notification: the readers see the gap
	}
	n.out.add(payload)
}

// SubscribeDeltas starts the LISTEN connection if it is not running yet,
// so other processes' pieces arrive. See jobs.Notifier.
func (n *notifier) SubscribeDeltas(ctx context.Context, jobID string) <-chan pktype.StreamDelta {
	n.Watch()
	return n.LocalNotifier.SubscribeDeltas(ctx, jobID)
}

// close closes the Notify channels, stops the LISTEN loop and the sender,
// and waits for both.
func (n *notifier) close() {
	_ = n.LocalNotifier.Close(context.Background())
	_ = n.out.loop.Stop(context.Background())
}

// sendDeltas notifies one batch of payloads, in order.
func (s *Store) sendDeltas(ctx context.Context, payloads []string) error {
	_, err := s.pool.Exec(ctx, `SELECT pg_notify('`+deltaChannel+`', p) FROM unnest($1::text[]) WITH ORDINALITY AS u(p, n) ORDER BY n`, payloads)
	return err
}
