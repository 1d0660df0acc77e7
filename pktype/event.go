package pktype

import "time"

// ExecutionObserver receives a run's execution events, synchronously and
// in order, on the goroutine that called Run or RunPrepared.
//
// Events of one run never overlap; events of different runs may arrive
// concurrently, so an observer shared by runs must synchronize itself. The
// engine holds no lock and no backend permit while it calls the observer,
// but the run cannot progress until the observer returns, and the run's
// admission slot stays taken meanwhile: never block on work that needs the
// same run's admission. A panic in the observer propagates to the caller
// of Run; no further events are delivered for that run. Events carry
// metadata only: no URLs, headers, keys, bodies, diagnostics or provider
// text (identifiers such as prompt IDs can still be sensitive).
type ExecutionObserver func(ExecutionEvent)

// ExecutionEventKind says what an event reports.
type ExecutionEventKind string

// Event kinds. A run emits ExecutionStarted once, then ExecutionAttempt
// after every attempt to acquire a permit and call the provider,
// ExecutionRetryDelay after every transient-retry wait that started, and
// ExecutionFinished once when it returns normally.
const (
	ExecutionStarted    ExecutionEventKind = "started"
	ExecutionAttempt    ExecutionEventKind = "attempt"
	ExecutionRetryDelay ExecutionEventKind = "retry_delay"
	ExecutionFinished   ExecutionEventKind = "finished"
)

// ExecutionOutcome is the outcome of an attempt or a run.
type ExecutionOutcome string

// Outcomes. For an attempt, success means the generation succeeded, not
// that its output later passed validation.
const (
	ExecutionOutcomeNone          ExecutionOutcome = ""
	ExecutionOutcomeSuccess       ExecutionOutcome = "success"
	ExecutionOutcomeInvalidOutput ExecutionOutcome = "invalid_output"
	ExecutionOutcomeError         ExecutionOutcome = "error"
)

// ExecutionFailureKind classifies a failure without quoting it; Classify
// computes it from an error.
type ExecutionFailureKind string

// Failure kinds.
const (
	ExecutionFailureNone            ExecutionFailureKind = ""
	ExecutionFailureCanceled        ExecutionFailureKind = "canceled"
	ExecutionFailureDeadline        ExecutionFailureKind = "deadline"
	ExecutionFailureTransport       ExecutionFailureKind = "transport"
	ExecutionFailureProviderStatus  ExecutionFailureKind = "provider_status"
	ExecutionFailureMalformed       ExecutionFailureKind = "malformed_response"
	ExecutionFailureCapacity        ExecutionFailureKind = "capacity"
	ExecutionFailureInvalidConfig   ExecutionFailureKind = "invalid_config"
	ExecutionFailureInvalidRequest  ExecutionFailureKind = "invalid_request"
	ExecutionFailurePromptNotFound  ExecutionFailureKind = "prompt_not_found"
	ExecutionFailureProfileNotFound ExecutionFailureKind = "profile_not_found"
	ExecutionFailurePromptRender    ExecutionFailureKind = "prompt_render"
	ExecutionFailureValidation      ExecutionFailureKind = "validation"
	ExecutionFailureGeneration      ExecutionFailureKind = "generation"
	ExecutionFailureOther           ExecutionFailureKind = "other"
)

// ExecutionEvent is one observation. It holds values only and has no
// stable serialized form: translate it into your own records.
type ExecutionEvent struct {
	Kind ExecutionEventKind
	// RunID equals the RunResult's RunID. Empty only if no ID could be
	// made; the run then ends at once with an error finished event.
	RunID string
	Time  time.Time

	// Identities resolved so far. An ordinary Run's started event has none;
	// a prepared run's has its prepared snapshot. Requested but unresolved
	// values are never reported. BackendID is, on an attempt event, the
	// backend the attempt went to (a profile naming a model group chooses
	// one per attempt), and on a finished event the backend of the last
	// dispatched attempt: the one that answered.
	PromptID      string
	PromptVersion string
	ProfileID     string
	BackendID     string
	Model         string

	// Generation is 1 for the initial generation and 2 for the first
	// repair; Attempt is 1-based within a generation. Zero on started and
	// finished events. Dispatched says the provider (or injected client)
	// was called; false when the permit wait was interrupted.
	Generation uint64
	Attempt    uint64
	Dispatched bool

	// CapacityWait is time spent acquiring a backend permit (including a
	// provider-requested pause and pacing); GenerationDuration is dispatch
	// through response decoding; RetryDelay is a transient-retry wait.
	// On finished events these are sums over the run, and Duration is the
	// run's wall time (which also includes rendering, validation and
	// callbacks). On attempt events Duration is CapacityWait plus
	// GenerationDuration; on retry_delay events it equals RetryDelay.
	CapacityWait       time.Duration
	GenerationDuration time.Duration
	RetryDelay         time.Duration
	Duration           time.Duration
	// TimeToFirstDelta, on the attempt event of a streamed call (see
	// promptkit.RunRequest.OnDelta), is dispatch until the answer's first
	// piece arrived; zero when none did or the call was not streamed.
	TimeToFirstDelta time.Duration

	Outcome ExecutionOutcome
	Failure ExecutionFailureKind
	// StatusCode is the provider's HTTP status, 0 when none.
	StatusCode int
	// RetriesExhausted is set on a finished event whose error is
	// ErrRetriesExhausted; Failure still says provider_status.
	RetriesExhausted bool

	Usage ObservedTokenUsage
	// Cost is, on a dispatched attempt, what the call cost by the price of
	// the requested model (see Price.Cost): unknown when the model has no
	// price or the provider did not report the counts it needs. On a
	// finished event it sums the run's dispatched attempts and is known
	// only when every one of theirs is (a run without one costs a known
	// zero). Unknown elsewhere.
	Cost Cost

	// Totals, on finished events only: Attempts counts dispatched calls,
	// TransientRetries dispatched attempts numbered above 1, RepairCalls
	// repair generations that dispatched at least once.
	Attempts         uint64
	TransientRetries uint64
	RepairCalls      uint64
}
