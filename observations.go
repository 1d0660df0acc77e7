package promptkit

import "github.com/promptkit/promptkit/pktype"

// Execution observation: RunRequest.Observer receives a run's events. The
// types are pktype's; see docs/observation.md for the whole contract.
type (
	ExecutionObserver    = pktype.ExecutionObserver
	ExecutionEvent       = pktype.ExecutionEvent
	ExecutionEventKind   = pktype.ExecutionEventKind
	ExecutionOutcome     = pktype.ExecutionOutcome
	ExecutionFailureKind = pktype.ExecutionFailureKind
	ObservedTokenCount   = pktype.ObservedTokenCount
	ObservedTokenUsage   = pktype.ObservedTokenUsage
)

// Event kinds.
const (
	ExecutionStarted    = pktype.ExecutionStarted
	ExecutionAttempt    = pktype.ExecutionAttempt
	ExecutionRetryDelay = pktype.ExecutionRetryDelay
	ExecutionFinished   = pktype.ExecutionFinished
)

// Outcomes.
const (
	ExecutionOutcomeNone          = pktype.ExecutionOutcomeNone
	ExecutionOutcomeSuccess       = pktype.ExecutionOutcomeSuccess
	ExecutionOutcomeInvalidOutput = pktype.ExecutionOutcomeInvalidOutput
	ExecutionOutcomeError         = pktype.ExecutionOutcomeError
)

// Failure kinds.
const (
	ExecutionFailureNone            = pktype.ExecutionFailureNone
	ExecutionFailureCanceled        = pktype.ExecutionFailureCanceled
	ExecutionFailureDeadline        = pktype.ExecutionFailureDeadline
	ExecutionFailureTransport       = pktype.ExecutionFailureTransport
	ExecutionFailureProviderStatus  = pktype.ExecutionFailureProviderStatus
	ExecutionFailureMalformed       = pktype.ExecutionFailureMalformed
	ExecutionFailureCapacity        = pktype.ExecutionFailureCapacity
	ExecutionFailureInvalidConfig   = pktype.ExecutionFailureInvalidConfig
	ExecutionFailureInvalidRequest  = pktype.ExecutionFailureInvalidRequest
	ExecutionFailurePromptNotFound  = pktype.ExecutionFailurePromptNotFound
	ExecutionFailureProfileNotFound = pktype.ExecutionFailureProfileNotFound
	ExecutionFailurePromptRender    = pktype.ExecutionFailurePromptRender
	ExecutionFailureValidation      = pktype.ExecutionFailureValidation
	ExecutionFailureGeneration      = pktype.ExecutionFailureGeneration
	ExecutionFailureOther           = pktype.ExecutionFailureOther
)
