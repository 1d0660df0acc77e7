package jobs

import (
	"context"
	"errors"
)

// CheckFunc refuses at submission what no worker could run, given params
// the submitter normalized (EnqueueParams.Normalize, the store's own
// rules): what the engine says about the request (worker.Check is the one
// the CLI wires). The server and the batch processor take the same one,
// so a request and a batch line are refused alike. Its error must not
// quote the request.
type CheckFunc func(ctx context.Context, p EnqueueParams) error

// RunNowFunc runs a job at once in a free slot of this process's worker
// (worker.Worker.RunNow is the one the CLI wires): it stores p claimed by
// that worker (EnqueueParams.ClaimAs) and runs it, without a round trip
// through the queue. The channel receives the job as its settling write
// left it, then closes; it closes without a value when there was no such
// write (the job was cancelled, the worker stopped), and is nil for an
// idempotent repeat (Enqueued.Existing), which runs nothing, and for a job
// stored queued because its org is at its Limit's MaxRunning (Enqueued.
// Claimed nil), which the workers run in turn. When the job
// cannot run here now it stores nothing and returns ErrNoSlot: the caller
// enqueues as usual.
type RunNowFunc func(ctx context.Context, p EnqueueParams) (Enqueued, <-chan Job, error)

// ErrNoSlot is a RunNowFunc's answer when the job cannot run in this
// process now (no free slot, the worker is stopping, or the job is not one
// it would claim now); nothing was stored.
var ErrNoSlot = errors.New("jobs: no free worker slot here")
