// Package observe is the invocation-local recorder: one Recorder per run
// counts dispatched attempts, aggregates usage with presence, measures
// phases and delivers execution events to the run's observer.
//
// A Recorder belongs to one run and is used from that run's goroutine only,
// so it needs no lock; nothing global is kept and nothing is delivered
// asynchronously. The engine passes it to the scheduler with each
// generation sequence. Callers release every lock and permit before
// calling a method that may emit an event.
package observe

import (
	"cmp"
	"time"

	"github.com/google/uuid"

	"github.com/promptkit/promptkit/pktype"
)

// Identity is what the run has resolved so far.
type Identity struct {
	PromptID      string
	PromptVersion string
	ProfileID     string
	BackendID     string
	Model         string
	// Price is Model's price (nil: none), which prices each dispatched
	// attempt; Embedding says the calls produce no completion tokens.
	Price     *pktype.Price
	Embedding bool
}

// Attempt describes one acquisition attempt: a permit was sought and, when
// Dispatched, the provider (or injected client) was called.
type Attempt struct {
	Generation   uint64
	Attempt      uint64
	Backend      string // the backend it went to; "" for none
	Dispatched   bool
	CapacityWait time.Duration
	Duration     time.Duration // dispatch through response decoding
	FirstDelta   time.Duration // dispatch until a streamed answer's first piece; 0 when none
	StatusCode   int
	Usage        pktype.TokenUsage
	Presence     pktype.TokenUsagePresence
	Failure      pktype.ExecutionFailureKind // none on success
}

// Totals are the run's aggregate counters. Only dispatched attempts count.
type Totals struct {
	Attempts         uint64
	TransientRetries uint64
	RepairCalls      uint64
	Usage            pktype.TokenUsage
	// Cost sums the dispatched attempts' costs; known when each is.
	Cost         pktype.Cost
	CapacityWait time.Duration
	Generation   time.Duration
	RetryDelay   time.Duration
}

// Recorder records one run.
type Recorder struct {
	runID    string
	now      func() time.Time
	start    time.Time
	observer pktype.ExecutionObserver
	identity Identity
	totals   Totals
	observed pktype.ObservedTokenUsage
	// lastRepairGen remembers the highest generation above 1 that
	// dispatched, so a repair generation counts once however many
	// attempts it took.
	lastRepairGen uint64
	lastStatus    int
	// lastBackend is the backend of the last dispatched attempt: the
	// one that answered, for the finished event.
	lastBackend string
	finished    bool
}

// NewRunID makes a run ID: a UUIDv7, unique and time-ordered.
func NewRunID() (string, error) {
	id, err := uuid.NewV7()
	if err != nil {
		return "", err
	}
	return id.String(), nil
}

// New starts a recorder now. observer may be nil: then nothing is
// delivered but the counts still work. newID makes the run ID (nil:
// NewRunID); if it fails, RunID is empty rather than invented, and the
// caller ends the run.
func New(now func() time.Time, newID func() (string, error), observer pktype.ExecutionObserver) *Recorder {
	if now == nil {
		now = time.Now
	}
	if newID == nil {
		newID = NewRunID
	}
	r := &Recorder{now: now, start: now(), observer: observer}
	r.totals.Cost.Known = true // no attempt yet: a known zero
	if id, err := newID(); err == nil {
		r.runID = id
	}
	// Zero dispatched attempts: every field is a known, complete zero.
	for _, c := range r.observed.Counts() {
		*c = pktype.ObservedTokenCount{Known: true, Complete: true}
	}
	return r
}

// RunID returns the run's identity, shared with a successful result.
func (r *Recorder) RunID() string { return r.runID }

// Start returns when the run began.
func (r *Recorder) Start() time.Time { return r.start }

// SetIdentity enriches later events with what has been resolved.
func (r *Recorder) SetIdentity(id Identity) {
	if r != nil {
		r.identity = id
	}
}

// Begin emits the started event.
func (r *Recorder) Begin() {
	r.emit(pktype.ExecutionEvent{Kind: pktype.ExecutionStarted})
}

// RecordAttempt adds one attempt to the totals and emits its event. Call
// it with no permit or lock held.
func (r *Recorder) RecordAttempt(a Attempt) {
	if r == nil {
		return
	}
	r.totals.CapacityWait += a.CapacityWait
	r.lastStatus = a.StatusCode
	ev := pktype.ExecutionEvent{
		Kind:               pktype.ExecutionAttempt,
		Generation:         a.Generation,
		Attempt:            a.Attempt,
		Dispatched:         a.Dispatched,
		CapacityWait:       a.CapacityWait,
		GenerationDuration: a.Duration,
		Duration:           a.CapacityWait + a.Duration,
		TimeToFirstDelta:   a.FirstDelta,
		Failure:            a.Failure,
		StatusCode:         a.StatusCode,
		Outcome:            pktype.ExecutionOutcomeSuccess,
		BackendID:          a.Backend,
	}
	if a.Failure != pktype.ExecutionFailureNone {
		ev.Outcome = pktype.ExecutionOutcomeError
	}
	if a.Dispatched {
		if a.Backend != "" {
			r.lastBackend = a.Backend
		}
		r.totals.Attempts++
		if a.Attempt > 1 {
			r.totals.TransientRetries++
		}
		r.totals.Generation += a.Duration
		r.totals.Usage = r.totals.Usage.Add(a.Usage)
		if a.Generation > 1 && a.Generation != r.lastRepairGen {
			r.lastRepairGen = a.Generation
			r.totals.RepairCalls++
		}
		ev.Usage = attemptUsage(a.Usage, a.Presence)
		r.aggregate(ev.Usage)
		if p := r.identity.Price; p != nil {
			ev.Cost = p.Cost(a.Usage, a.Presence, r.identity.Embedding)
		}
		r.totals.Cost = r.totals.Cost.Add(ev.Cost)
	}
	r.emit(ev)
}

// RecordDelay emits a retry_delay event after a wait that started, even if
// it was interrupted; gen and attempt name the failed attempt.
func (r *Recorder) RecordDelay(gen, attempt uint64, elapsed time.Duration) {
	if r == nil {
		return
	}
	r.totals.RetryDelay += elapsed
	r.emit(pktype.ExecutionEvent{Kind: pktype.ExecutionRetryDelay, Generation: gen, Attempt: attempt, RetryDelay: elapsed, Duration: elapsed})
}

// Finish emits the finished event with the totals, once. A run failing
// with a provider status reports the last attempt's status.
func (r *Recorder) Finish(outcome pktype.ExecutionOutcome, failure pktype.ExecutionFailureKind, exhausted bool) {
	if r == nil || r.finished {
		return
	}
	r.finished = true
	t := r.totals
	status := 0
	if failure == pktype.ExecutionFailureProviderStatus {
		status = r.lastStatus
	}
	r.emit(pktype.ExecutionEvent{
		StatusCode:         status,
		Kind:               pktype.ExecutionFinished,
		CapacityWait:       t.CapacityWait,
		GenerationDuration: t.Generation,
		RetryDelay:         t.RetryDelay,
		Duration:           r.now().Sub(r.start),
		Outcome:            outcome,
		Failure:            failure,
		RetriesExhausted:   exhausted,
		Usage:              r.observed,
		Cost:               t.Cost,
		Attempts:           t.Attempts,
		TransientRetries:   t.TransientRetries,
		RepairCalls:        t.RepairCalls,
		BackendID:          r.lastBackend,
	})
}

// Totals returns the counters so far.
func (r *Recorder) Totals() Totals { return r.totals }

// ObservedUsage returns the aggregate observed usage so far.
func (r *Recorder) ObservedUsage() pktype.ObservedTokenUsage { return r.observed }

func (r *Recorder) emit(ev pktype.ExecutionEvent) {
	if r == nil || r.observer == nil {
		return
	}
	ev.RunID = r.runID
	ev.Time = r.now()
	id := r.identity
	ev.PromptID, ev.PromptVersion, ev.ProfileID, ev.Model = id.PromptID, id.PromptVersion, id.ProfileID, id.Model
	// An attempt's own backend (a model group chooses one per attempt),
	// and on the finished event the one that answered last.
	ev.BackendID = cmp.Or(ev.BackendID, id.BackendID)
	r.observer(ev)
}

// aggregate folds one dispatched attempt's usage into the run's: values of
// known fields add up, Known means some attempt reported the field, and
// Complete means every dispatched attempt did.
func (r *Recorder) aggregate(u pktype.ObservedTokenUsage) {
	first := r.totals.Attempts == 1
	in := u.Counts()
	for i, c := range r.observed.Counts() {
		if first {
			*c = pktype.ObservedTokenCount{Complete: true} // drop the zero-attempt defaults
		}
		if in[i].Known {
			c.Value += in[i].Value
			c.Known = true
		} else {
			c.Complete = false
		}
	}
}

// attemptUsage is one dispatched attempt's observed usage: a field is
// known and complete exactly when the provider reported it.
func attemptUsage(u pktype.TokenUsage, p pktype.TokenUsagePresence) pktype.ObservedTokenUsage {
	count := func(v int, known bool) pktype.ObservedTokenCount {
		if !known {
			return pktype.ObservedTokenCount{}
		}
		return pktype.ObservedTokenCount{Value: v, Known: true, Complete: true}
	}
	return pktype.ObservedTokenUsage{
		PromptTokens:     count(u.PromptTokens, p.PromptTokens),
		CompletionTokens: count(u.CompletionTokens, p.CompletionTokens),
		TotalTokens:      count(u.TotalTokens, p.TotalTokens),
		CachedTokens:     count(u.CachedTokens, p.CachedTokens),
		ReasoningTokens:  count(u.ReasoningTokens, p.ReasoningTokens),
	}
}
