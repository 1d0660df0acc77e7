package promptkit

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/promptkit/promptkit/internal/dispatch"
	"github.com/promptkit/promptkit/internal/llm"
	"github.com/promptkit/promptkit/internal/observe"
)

// Errors returned by the engine. Match them with errors.Is: every error the
// engine returns wraps at least one of them, except that a context that
// ends before or between attempts is returned as the context's own error
// (errors.Is(err, context.Canceled) or context.DeadlineExceeded). Error
// strings never contain prompts, rendered text, request or response
// bodies, provider messages, URLs or credentials; an injected client's own
// error text is included as the client wrote it.
var (
	// ErrInvalidConfig: Config (or a loaded file) is unusable. Returned by
	// New and the loaders.
	ErrInvalidConfig = errors.New("promptkit: invalid config")
	// ErrInvalidRequest: a RunRequest or prepared handle is unusable, inputs
	// fail the prompt's input schema, the template cannot render, or a
	// backend's credential variable is unset.
	ErrInvalidRequest = errors.New("promptkit: invalid request")
	// ErrPromptNotFound: RunRequest.PromptID names no loaded prompt.
	ErrPromptNotFound = errors.New("promptkit: prompt not found")
	// ErrProfileNotFound: the selected profile does not exist.
	ErrProfileNotFound = errors.New("promptkit: profile not found")
	// ErrLLMGenerate: a generation call failed. The more specific
	// ErrTransport, ErrMalformedResponse or a *GenerationError (provider
	// status) usually matches too; an injected client's own error stays
	// reachable with errors.Is/As.
	ErrLLMGenerate = llm.ErrGenerate
	// ErrTransport: the request could not be carried out (connection
	// failure, per-attempt timeout, unreadable body). Context errors stay
	// reachable: a timeout also matches context.DeadlineExceeded.
	ErrTransport = llm.ErrTransport
	// ErrMalformedResponse: a 2xx response that is not a valid
	// chat-completion envelope, or a nil response from an injected client.
	ErrMalformedResponse = llm.ErrMalformed
	// ErrCapacity: a run could not get admission or a backend permit, either
	// because the admission queue is full or because its context ended while
	// waiting (then the context error matches too).
	ErrCapacity = dispatch.ErrCapacity
	// ErrRetriesExhausted: every attempt of a generation failed with a
	// retry-eligible status (429, 500, 502, 503, 504) and the transient
	// retry budget is spent. The error is a *RetryExhaustedError whose
	// cause is the last *GenerationError.
	ErrRetriesExhausted = llm.ErrRetriesExhausted
	// ErrValidation: the output could not be validated for an operational
	// reason. An output that completes validation and is rejected is not an
	// error: it is a RunResult whose Validation.Status is "invalid".
	ErrValidation = errors.New("promptkit: output validation failed to run")
)

// GenerationError is a provider's non-2xx answer. It matches ErrLLMGenerate.
//
// Error and GoString print only the status: provider text can echo prompts
// or secrets. Detail returns the provider's message, truncated, stripped of
// control characters and with the backend's API key replaced by
// "[REDACTED]"; log it only where provider text is acceptable.
type GenerationError struct {
	backendID  string
	statusCode int
	detail     string
	notBefore  time.Time
}

// RetryAfter returns the time before which the provider asked not to be
// called again (its Retry-After header, resolved when the response
// arrived), or the zero time when it sent none.
func (e *GenerationError) RetryAfter() time.Time {
	if e == nil {
		return time.Time{}
	}
	return e.notBefore
}

// StatusCode returns the HTTP status. Zero for a nil receiver.
func (e *GenerationError) StatusCode() int {
	if e == nil {
		return 0
	}
	return e.statusCode
}

// Detail returns the redacted provider message. Empty for a nil receiver.
func (e *GenerationError) Detail() string {
	if e == nil {
		return ""
	}
	return e.detail
}

// BackendID returns the backend that answered.
func (e *GenerationError) BackendID() string {
	if e == nil {
		return ""
	}
	return e.backendID
}

func (e *GenerationError) Error() string {
	if e == nil {
		return "<nil>"
	}
	return fmt.Sprintf("promptkit: backend %q returned HTTP %d", e.backendID, e.statusCode)
}

// GoString keeps %#v from printing Detail.
func (e *GenerationError) GoString() string {
	if e == nil {
		return "(*promptkit.GenerationError)(nil)"
	}
	return fmt.Sprintf("&promptkit.GenerationError{BackendID:%q, StatusCode:%d}", e.backendID, e.statusCode)
}

// Is reports ErrLLMGenerate.
func (e *GenerationError) Is(target error) bool { return target == ErrLLMGenerate }

// opError wraps a cause with an operation label without copying anything
// sensitive: the label is built from identifiers only.
type opError struct {
	op    string
	cause error
}

func (e *opError) Error() string    { return e.op + ": " + e.cause.Error() }
func (e *opError) Unwrap() error    { return e.cause }
func (e *opError) GoString() string { return e.Error() }

// injectedError wraps an injected client's error so that it also matches
// ErrLLMGenerate, keeping the caller's own identities reachable.
type injectedError struct{ cause error }

func (e *injectedError) Error() string   { return "promptkit: llm generation failed: " + e.cause.Error() }
func (e *injectedError) Unwrap() []error { return []error{llm.ErrGenerate, e.cause} }

// NotBefore returns the earliest time at which trying err's run again can
// help: a provider's Retry-After (a *GenerationError, also inside a
// *RetryExhaustedError), or the end of a backend pause that a run with
// RunRequest.NoWaitPastDeadline refused to wait for (ErrCapacity). ok is
// false when err carries no such time.
func NotBefore(err error) (t time.Time, ok bool) {
	var ge *GenerationError
	if errors.As(err, &ge) && !ge.notBefore.IsZero() {
		return ge.notBefore, true
	}
	var ce *dispatch.CapacityError
	if errors.As(err, &ce) && !ce.NotBefore.IsZero() {
		return ce.NotBefore, true
	}
	return time.Time{}, false
}

// RetryExhaustedError reports a generation whose every attempt failed with
// a retry-eligible status. It matches ErrRetriesExhausted, and errors.As
// still reaches the last attempt's *GenerationError through Unwrap. Its
// zero value and a nil pointer are safe to use.
type RetryExhaustedError struct {
	attempts uint64
	cause    error
}

// Attempts returns how many attempts were dispatched.
func (e *RetryExhaustedError) Attempts() uint64 {
	if e == nil {
		return 0
	}
	return e.attempts
}

// Unwrap returns the last attempt's failure.
func (e *RetryExhaustedError) Unwrap() error {
	if e == nil {
		return nil
	}
	return e.cause
}

// Is reports ErrRetriesExhausted.
func (e *RetryExhaustedError) Is(target error) bool { return target == ErrRetriesExhausted }

func (e *RetryExhaustedError) Error() string {
	if e == nil {
		return "<nil>"
	}
	msg := fmt.Sprintf("%s after %d attempts", ErrRetriesExhausted.Error(), e.attempts)
	if e.cause != nil {
		msg += ": " + e.cause.Error() // the cause's text is already redacted
	}
	return msg
}

// GoString keeps %#v to the redacted text.
func (e *RetryExhaustedError) GoString() string {
	if e == nil {
		return "(*promptkit.RetryExhaustedError)(nil)"
	}
	return fmt.Sprintf("&promptkit.RetryExhaustedError{Attempts:%d}", e.attempts)
}

// publicError converts internal generation errors into the public contract,
// recursively, so an exhaustion keeps its wrapper and its provider cause;
// other causes keep their identities.
func publicError(backendID string, err error) error {
	var ex *llm.ExhaustedError
	if errors.As(err, &ex) {
		return &RetryExhaustedError{attempts: ex.Attempts, cause: publicError(backendID, ex.Cause)}
	}
	var se *llm.StatusError
	if errors.As(err, &se) {
		return &GenerationError{backendID: backendID, statusCode: se.StatusCode, detail: se.Detail, notBefore: se.NotBefore}
	}
	return err
}

// renderError is an ErrInvalidRequest caused by the inputs or the
// template, told apart so observation can say prompt_render. Its message
// names the prompt and input locations, never input values.
type renderError struct{ msg string }

func (e *renderError) Error() string        { return ErrInvalidRequest.Error() + ": " + e.msg }
func (e *renderError) Is(target error) bool { return target == ErrInvalidRequest }

// classify maps a run's error to its observation failure kind: context
// identities first, then specific causes, then broad categories.
func classify(err error) observe.Failure {
	switch {
	case err == nil:
		return observe.FailureNone
	case errors.Is(err, context.Canceled):
		return observe.FailureCanceled
	case errors.Is(err, context.DeadlineExceeded):
		return observe.FailureDeadline
	case errors.Is(err, ErrCapacity):
		return observe.FailureCapacity
	case errors.Is(err, ErrInvalidConfig):
		return observe.FailureInvalidConfig
	case errors.Is(err, ErrPromptNotFound):
		return observe.FailurePromptNotFound
	case errors.Is(err, ErrProfileNotFound):
		return observe.FailureProfileNotFound
	case errors.As(err, new(*renderError)):
		return observe.FailurePromptRender
	case errors.Is(err, ErrInvalidRequest):
		return observe.FailureInvalidRequest
	case errors.Is(err, ErrValidation):
		return observe.FailureValidation
	case errors.As(err, new(*GenerationError)):
		return observe.FailureProviderStatus
	}
	return observe.Classify(err)
}
