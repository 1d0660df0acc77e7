// Package observe is the invocation-local recorder: one Recorder per run
// counts dispatched attempts, aggregates usage with presence, measures
// phases and delivers execution events to the run's observer.
//
// A Recorder belongs to one run and is used from that run's goroutine only,
// so it needs no lock; nothing global is kept and nothing is delivered
// asynchronously. The scheduler finds it through the context, which keeps
// recording out of every internal signature. Callers release every lock
// and permit before calling a method that may emit an event.
package observe

import (
	"context"
	"errors"
	"time"

	"github.com/google/uuid"

	"github.com/promptkit/promptkit/internal/llm"
)

// Kind is an event kind.
type Kind string

// Event kinds, in the order a run emits them.
const (
	Started    Kind = "started"
	AttemptEnd Kind = "attempt"
	RetryDelay Kind = "retry_delay"
	Finished   Kind = "finished"
)

// Outcome of an attempt or a run.
type Outcome string

// Outcomes.
const (
	OutcomeNone          Outcome = ""
	OutcomeSuccess       Outcome = "success"
	OutcomeInvalidOutput Outcome = "invalid_output"
	OutcomeError         Outcome = "error"
)

// Failure is a normalized failure category; never an error string.
type Failure string

// Failure categories.
const (
	FailureNone            Failure = ""
	FailureCanceled        Failure = "canceled"
	FailureDeadline        Failure = "deadline"
	FailureTransport       Failure = "transport"
	FailureProviderStatus  Failure = "provider_status"
	FailureMalformed       Failure = "malformed_response"
	FailureCapacity        Failure = "capacity"
	FailureInvalidConfig   Failure = "invalid_config"
	FailureInvalidRequest  Failure = "invalid_request"
	FailurePromptNotFound  Failure = "prompt_not_found"
	FailureProfileNotFound Failure = "profile_not_found"
	FailurePromptLoad      Failure = "prompt_load"
	FailureProfileLoad     Failure = "profile_load"
	FailureArtifactLoad    Failure = "artifact_load"
	FailurePromptRender    Failure = "prompt_render"
	FailureValidation      Failure = "validation"
	FailureGeneration      Failure = "generation"
	FailureOther           Failure = "other"
)

// Count is one observed token count.
type Count struct {
	Value    int
	Known    bool
	Complete bool
}

// Usage is observed usage: per field, what is known and whether every
// dispatched attempt reported it.
type Usage struct {
	PromptTokens     Count
	CompletionTokens Count
	TotalTokens      Count
	CachedTokens     Count
	ReasoningTokens  Count
}

// Identity is what the run has resolved so far.
type Identity struct {
	PromptID      string
	PromptVersion string
	ProfileID     string
	BackendID     string
	Model         string
}

// Event is one execution event. It holds values only.
type Event struct {
	Kind  Kind
	RunID string
	Time  time.Time
	Identity

	Generation uint64
	Attempt    uint64
	Dispatched bool

	CapacityWait       time.Duration
	GenerationDuration time.Duration
	RetryDelay         time.Duration
	Duration           time.Duration

	Outcome          Outcome
	Failure          Failure
	StatusCode       int
	RetriesExhausted bool

	Usage Usage

	Attempts         uint64
	TransientRetries uint64
	RepairCalls      uint64
}

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
	Failure      Failure // FailureNone on success
}

// Totals are the run's aggregate counters. Only dispatched attempts count.
type Totals struct {
	Attempts         uint64
	TransientRetries uint64
	RepairCalls      uint64
	Usage            llm.Usage
	CapacityWait     time.Duration
	Generation       time.Duration
	RetryDelay       time.Duration
}

// Recorder records one run.
type Recorder struct {
	runID    string
	now      func() time.Time
	start    time.Time
	observer func(Event)
	identity Identity
	totals   Totals
	observed Usage
	// lastRepairGen remembers the highest generation above 1 that
	// dispatched, so a repair generation counts once however many
	// attempts it took.
	lastRepairGen uint64
	lastStatus    int
	finished      bool
}

// New starts a recorder now. observer may be nil: then nothing is
// delivered but the counts still work. If no run ID can be made, RunID is
// empty rather than invented.
func New(now func() time.Time, observer func(Event)) *Recorder {
	if now == nil {
		now = time.Now
	}
	r := &Recorder{now: now, start: now(), observer: observer}
	if id, err := uuid.NewV7(); err == nil {
		r.runID = id.String()
	}
	// Zero dispatched attempts: every field is a known, complete zero.
	for _, c := range r.fields() {
		*c = Count{Known: true, Complete: true}
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
	r.emit(Event{Kind: Started})
}

// RecordAttempt adds one attempt to the totals and emits its event. Call
// it with no permit or lock held.
func (r *Recorder) RecordAttempt(a Attempt) {
	if r == nil {
		return
	}
	r.totals.CapacityWait += a.CapacityWait
	r.lastStatus = a.StatusCode
	ev := Event{
		Kind:               AttemptEnd,
		Generation:         a.Generation,
		Attempt:            a.Attempt,
		Dispatched:         a.Dispatched,
		CapacityWait:       a.CapacityWait,
		GenerationDuration: a.Duration,
		Duration:           a.CapacityWait + a.Duration,
		Failure:            a.Failure,
		StatusCode:         a.StatusCode,
		Outcome:            OutcomeSuccess,
	}
	if a.Failure != FailureNone {
		ev.Outcome = OutcomeError
	}
	if a.Dispatched {
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
	r.emit(Event{Kind: RetryDelay, Generation: gen, Attempt: attempt, RetryDelay: elapsed, Duration: elapsed})
}

// Finish emits the finished event with the totals, once. A run failing
// with a provider status reports the last attempt's status.
func (r *Recorder) Finish(outcome Outcome, failure Failure, exhausted bool) {
	if r == nil || r.finished {
		return
	}
	r.finished = true
	t := r.totals
	status := 0
	if failure == FailureProviderStatus {
		status = r.lastStatus
	}
	r.emit(Event{
		StatusCode:         status,
		Kind:               Finished,
		CapacityWait:       t.CapacityWait,
		GenerationDuration: t.Generation,
		RetryDelay:         t.RetryDelay,
		Duration:           r.now().Sub(r.start),
		Outcome:            outcome,
		Failure:            failure,
		RetriesExhausted:   exhausted,
		Usage:              r.observed,
		Attempts:           t.Attempts,
		TransientRetries:   t.TransientRetries,
		RepairCalls:        t.RepairCalls,
	})
}

// Totals returns the counters so far.
func (r *Recorder) Totals() Totals { return r.totals }

// ObservedUsage returns the aggregate observed usage so far.
func (r *Recorder) ObservedUsage() Usage { return r.observed }

func (r *Recorder) emit(ev Event) {
	if r == nil || r.observer == nil {
		return
	}
	ev.RunID = r.runID
	ev.Time = r.now()
	ev.Identity = r.identity
	r.observer(ev)
}

func (r *Recorder) fields() [5]*Count {
	u := &r.observed
	return [5]*Count{&u.PromptTokens, &u.CompletionTokens, &u.TotalTokens, &u.CachedTokens, &u.ReasoningTokens}
}

// aggregate folds one dispatched attempt's usage into the run's: values of
// known fields add up, Known means some attempt reported the field, and
// Complete means every dispatched attempt did.
func (r *Recorder) aggregate(u Usage) {
	first := r.totals.Attempts == 1
	in := [5]Count{u.PromptTokens, u.CompletionTokens, u.TotalTokens, u.CachedTokens, u.ReasoningTokens}
	for i, c := range r.fields() {
		if first {
			*c = Count{} // drop the zero-attempt defaults
			c.Complete = true
		}
		if in[i].Known {
			c.Value += in[i].Value
			c.Known = true
		} else {
			c.Complete = false
		}
	}
}

func attemptUsage(u llm.Usage, p llm.Presence) Usage {
	count := func(v int, known bool) Count {
		if !known {
			return Count{}
		}
		return Count{Value: v, Known: true, Complete: true}
	}
	return Usage{
		PromptTokens:     count(u.PromptTokens, p.PromptTokens),
		CompletionTokens: count(u.CompletionTokens, p.CompletionTokens),
		TotalTokens:      count(u.TotalTokens, p.TotalTokens),
		CachedTokens:     count(u.CachedTokens, p.CachedTokens),
		ReasoningTokens:  count(u.ReasoningTokens, p.ReasoningTokens),
	}
}

type ctxKey struct{}

// NewContext returns ctx carrying r.
func NewContext(ctx context.Context, r *Recorder) context.Context {
	return context.WithValue(ctx, ctxKey{}, r)
}

// FromContext returns the recorder in ctx, or nil. Recorder methods used
// by the scheduler accept a nil receiver.
func FromContext(ctx context.Context) *Recorder {
	r, _ := ctx.Value(ctxKey{}).(*Recorder)
	return r
}

// Classify normalizes a generation-layer error: context identities first,
// then specific causes before broad categories.
func Classify(err error) Failure {
	var se *llm.StatusError
	switch {
	case err == nil:
		return FailureNone
	case errors.Is(err, context.Canceled):
		return FailureCanceled
	case errors.Is(err, context.DeadlineExceeded):
		return FailureDeadline
	case errors.As(err, &se):
		return FailureProviderStatus
	case errors.Is(err, llm.ErrTransport):
		return FailureTransport
	case errors.Is(err, llm.ErrMalformed):
		return FailureMalformed
	case errors.Is(err, llm.ErrGenerate):
		return FailureGeneration
	}
	return FailureOther
}
