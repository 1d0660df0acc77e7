package jobs

import (
	"context"

	"github.com/promptkit/promptkit/jobs/internal/deltas"
	"github.com/promptkit/promptkit/jobs/internal/notify"
	"github.com/promptkit/promptkit/pktype"
)

// Notifier carries a store's messages, apart from its rows: wake-ups when
// work may have changed, and the pieces of running jobs' answers as the
// backends generate them. A store's driver provides it (Store.Notifier):
// the store wakes it after its own commits, and it learns of other
// processes' commits its driver's way (SQLite polls the file, PostgreSQL
// LISTENs). Consumers — workers, the batch processor, the HTTP API's
// waits and streams — take it explicitly, beside the Store.
//
// Everything it carries is a hint: consumers still poll the store, and
// the stored answer is the answer.
type Notifier interface {
	// Notify returns a channel that receives a value, coalesced, whenever
	// this store or another process on the database enqueues work,
	// changes a job's state or changes a batch's status (MoveBatch,
	// CancelBatch, FinishBatch). It is closed when ctx ends or the store
	// closes. Consumers must still poll: a notification is a hint.
	Notify(ctx context.Context) <-chan struct{}

	// PublishDelta passes a piece of running job jobID's answer, as the
	// backend generates it, to the readers waiting for it
	// (SubscribeDeltas): in this process and, on PostgreSQL, in the other
	// processes on the database. It never blocks and may drop a piece (a
	// reader that falls behind, a piece too large for a notification): a
	// reader tells by the pieces' Index, and the stored answer is the
	// answer. On SQLite, other processes' readers get nothing.
	PublishDelta(jobID string, d pktype.StreamDelta)

	// SubscribeDeltas returns a channel that receives the pieces of job
	// jobID's answer published from now on, after its first pieces when
	// they came in the last few seconds (a reader may subscribe once the
	// job is stored, and a worker may have started it); it is closed when
	// ctx ends.
	SubscribeDeltas(ctx context.Context, jobID string) <-chan pktype.StreamDelta
}

// LocalNotifier is the in-process Notifier, for any driver to build on:
// it fans wake-ups and answer pieces out to this process's subscribers.
// The driver calls Broadcast after each commit that should wake consumers, and
// its watcher (see NewLocalNotifier) calls Broadcast, and PublishDelta, for
// what other processes did. A driver that carries pieces across processes
// wraps it, sending its own pieces out besides (pgstore does). Create it
// with NewLocalNotifier; it is safe for concurrent use.
type LocalNotifier struct {
	wake   *notify.Hub
	deltas deltas.Hub
}

var _ Notifier = (*LocalNotifier)(nil)

// NewLocalNotifier returns a notifier whose first subscription (Notify),
// or Watch, starts watch in the background until Close; nil: no watcher.
// A driver passes what watches the database for other processes' commits
// (a poll, a LISTEN connection), so that it runs only once someone
// listens: watch calls Broadcast (and PublishDelta for pieces it receives) and
// returns once its context ends.
func NewLocalNotifier(watch func(ctx context.Context) error) *LocalNotifier {
	return &LocalNotifier{wake: notify.New(watch)}
}

// Notify returns a channel with a buffer of one, so wake-ups coalesce
// while its reader is busy; it comes closed after Close or with ctx
// already ended. See Notifier.
func (n *LocalNotifier) Notify(ctx context.Context) <-chan struct{} { return n.wake.Subscribe(ctx) }

// Broadcast wakes every Notify subscriber without blocking; a full
// channel already holds a pending wake-up.
func (n *LocalNotifier) Broadcast() { n.wake.Broadcast() }

// Watch starts the watcher, if there is one and it has not started,
// without subscribing: for a driver whose watcher also receives other
// processes' answer pieces, when a reader subscribes to those.
func (n *LocalNotifier) Watch() { n.wake.Watch() }

// PublishDelta delivers d to this process's readers of jobID, and keeps
// the job's first pieces for a reader yet to come; it carries nothing to
// other processes. See Notifier.
func (n *LocalNotifier) PublishDelta(jobID string, d pktype.StreamDelta) {
	n.deltas.Deliver(jobID, d)
}

// SubscribeDeltas implements Notifier, for this process's pieces.
func (n *LocalNotifier) SubscribeDeltas(ctx context.Context, jobID string) <-chan pktype.StreamDelta {
	return n.deltas.Subscribe(ctx, jobID)
}

// Close closes every Notify channel (later ones come closed), then stops
// the watcher and waits for it as long as ctx allows. Answer-piece
// channels close when their ctx ends. Calling it again is safe.
func (n *LocalNotifier) Close(ctx context.Context) error { return n.wake.Close(ctx) }
