// Package observe is the invocation-local recorder: one Recorder per run
// counts dispatched attempts, sums usage with presence and measures phases.
//
// A Recorder belongs to one run and is used from that run's goroutine only,
// so it needs no lock; nothing global is kept. The scheduler finds it through
// the context, which keeps recording out of every internal signature.
package observe

import (
	"context"
	"time"

	"github.com/google/uuid"

	"github.com/promptkit/promptkit/internal/llm"
)

// Attempt describes one acquisition attempt: a permit was sought and, when
// Dispatched, the provider (or injected client) was called.
type Attempt struct {
	Generation   uint64
	Attempt      uint64
	Dispatched   bool
	CapacityWait time.Duration
	Duration     time.Duration // dispatch through response decoding
	StatusCode   int
	Usage        llm.Usage
	Presence     llm.Presence
	Err          error
}

// Totals are the run's aggregate counters. Only dispatched attempts count.
type Totals struct {
	Attempts     uint64
	RepairCalls  uint64
	Usage        llm.Usage
	CapacityWait time.Duration
	Generation   time.Duration
}

// Recorder records one run.
type Recorder struct {
	runID  string
	start  time.Time
	totals Totals
	// lastRepairGen remembers the highest generation above 1 that dispatched,
	// so a repair generation is counted once however many attempts it took.
	lastRepairGen uint64
}

// New starts a recorder at now. If no run ID can be made, RunID is empty
// rather than invented.
func New(now time.Time) *Recorder {
	r := &Recorder{start: now}
	if id, err := uuid.NewV7(); err == nil {
		r.runID = id.String()
	}
	return r
}

// RunID returns the run's identity, shared with a successful result.
func (r *Recorder) RunID() string { return r.runID }

// Start returns when the run began.
func (r *Recorder) Start() time.Time { return r.start }

// RecordAttempt adds one attempt to the totals.
func (r *Recorder) RecordAttempt(a Attempt) {
	if r == nil {
		return
	}
	r.totals.CapacityWait += a.CapacityWait
	if !a.Dispatched {
		return
	}
	r.totals.Attempts++
	r.totals.Generation += a.Duration
	r.totals.Usage = r.totals.Usage.Add(a.Usage)
	if a.Generation > 1 && a.Generation != r.lastRepairGen {
		r.lastRepairGen = a.Generation
		r.totals.RepairCalls++
	}
}

// Totals returns the counters so far.
func (r *Recorder) Totals() Totals { return r.totals }

type ctxKey struct{}

// NewContext returns ctx carrying r.
func NewContext(ctx context.Context, r *Recorder) context.Context {
	return context.WithValue(ctx, ctxKey{}, r)
}

// FromContext returns the recorder in ctx, or nil. All Recorder methods
// used by the scheduler accept a nil receiver.
func FromContext(ctx context.Context) *Recorder {
	r, _ := ctx.Value(ctxKey{}).(*Recorder)
	return r
}
