package pktype

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Error identities. Match them with errors.Is: every error the engine
// returns wraps at least one of them, except that a context that ends
// before or between attempts is returned as the context's own error.
// Error strings never contain prompts, rendered text, request or response
// bodies, provider messages, URLs or credentials; an injected client's own
// error text is included as the client wrote it.
var (
	// ErrInvalidConfig: a Config (or a loaded file) is unusable.
	ErrInvalidConfig = errors.New("promptkit: invalid config")
	// ErrInvalidRequest: a request or prepared handle is unusable, no
	// profile is selected, inputs fail the prompt's input schema, the
	// template cannot render, or a backend's credential is missing.
	ErrInvalidRequest = errors.New("promptkit: invalid request")
	// ErrPromptRender: the inputs fail the prompt's input schema or the
	// template does not render with them. It also matches
	// ErrInvalidRequest.
	ErrPromptRender error = &narrowError{"promptkit: prompt does not render", ErrInvalidRequest}
	// ErrMissingCredential: a backend's API key variable is unset or
	// empty. It also matches ErrInvalidRequest: the request cannot be sent
	// as configured, and only an operator can fix that.
	ErrMissingCredential error = &narrowError{"promptkit: missing credential", ErrInvalidRequest}
	// ErrPromptNotFound: a request names no loaded prompt.
	ErrPromptNotFound = errors.New("promptkit: prompt not found")
	// ErrProfileNotFound: the named profile does not exist.
	ErrProfileNotFound = errors.New("promptkit: profile not found")
	// ErrLLMGenerate: a generation call failed. The more specific
	// ErrTransport, ErrMalformedResponse or a *GenerationError (provider
	// status) usually matches too; an injected client's own error stays
	// reachable with errors.Is/As.
	ErrLLMGenerate = errors.New("promptkit: llm generation failed")
	// ErrTransport: the request could not be carried out (connection
	// failure, per-attempt timeout, unreadable body). Context errors stay
	// reachable: a timeout also matches context.DeadlineExceeded.
	ErrTransport = errors.New("promptkit: transport failure")
	// ErrMalformedResponse: a 2xx response that is not a valid
	// chat-completion envelope, or a nil response from an injected client.
	ErrMalformedResponse = errors.New("promptkit: malformed provider response")
	// ErrCapacity: a run could not get admission or a backend permit, either
	// because the admission queue is full or because its context ended while
	// waiting (then the context error matches too).
	ErrCapacity = errors.New("promptkit: capacity unavailable")
	// ErrRetriesExhausted: every attempt of a generation failed with a
	// retry-eligible status (see RetryableStatus) and the transient retry
	// budget is spent. The error is a *RetryExhaustedError whose cause is
	// the last *GenerationError.
	ErrRetriesExhausted = errors.New("promptkit: transient retries exhausted")
	// ErrValidation: the output could not be validated for an operational
	// reason. An output that completes validation and is rejected is not an
	// error: it is a result whose validation status is "invalid".
	ErrValidation = errors.New("promptkit: output validation failed to run")
)

// narrowError is a sentinel that also matches a broader one.
type narrowError struct {
	msg   string
	broad error
}

func (e *narrowError) Error() string        { return e.msg }
func (e *narrowError) Is(target error) bool { return target == e.broad }

// RetryableStatus reports whether an HTTP status permits a transient retry
// inside the engine: 429, 500, 502, 503 and 504. Every other status, and
// every failure without a status, is returned at once.
func RetryableStatus(code int) bool {
	switch code {
	case 429, 500, 502, 503, 504:
		return true
	}
	return false
}

// GenerationError is a provider's non-2xx answer. It matches ErrLLMGenerate.
//
// Error and GoString print only the backend and the status: provider text
// can echo prompts or secrets. Detail returns the provider's message,
// truncated, stripped of control characters and with the backend's API key
// replaced by "[REDACTED]"; log it only where provider text is acceptable.
// A nil *GenerationError is safe to call.
type GenerationError struct {
	backendID  string
	statusCode int
	detail     string
	notBefore  time.Time
}

// NewGenerationError returns the error for a provider's non-2xx answer.
// detail must already be redacted; retryAfter is the provider's
// Retry-After as a time, zero when it sent none. An injected LLMClient may
// return one so that callers (the job service's failure policy, say) see
// the status.
func NewGenerationError(backendID string, statusCode int, detail string, retryAfter time.Time) *GenerationError {
	return &GenerationError{backendID: backendID, statusCode: statusCode, detail: detail, notBefore: retryAfter}
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
	if e.backendID == "" {
		return fmt.Sprintf("provider returned HTTP %d", e.statusCode)
	}
	return fmt.Sprintf("backend %q returned HTTP %d", e.backendID, e.statusCode)
}

// GoString keeps %#v from printing Detail.
func (e *GenerationError) GoString() string {
	if e == nil {
		return "(*pktype.GenerationError)(nil)"
	}
	return fmt.Sprintf("&pktype.GenerationError{BackendID:%q, StatusCode:%d}", e.backendID, e.statusCode)
}

// Is reports ErrLLMGenerate.
func (e *GenerationError) Is(target error) bool { return target == ErrLLMGenerate }

// RetryExhaustedError reports a generation whose every attempt failed with
// a retry-eligible status. It matches ErrRetriesExhausted, and errors.As
// still reaches the last attempt's *GenerationError through Unwrap. Its
// zero value and a nil pointer are safe to use.
type RetryExhaustedError struct {
	attempts uint64
	cause    error
}

// NewRetryExhaustedError returns the error for a generation that made
// attempts attempts, the last failing with cause.
func NewRetryExhaustedError(attempts uint64, cause error) *RetryExhaustedError {
	return &RetryExhaustedError{attempts: attempts, cause: cause}
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
		return "(*pktype.RetryExhaustedError)(nil)"
	}
	return fmt.Sprintf("&pktype.RetryExhaustedError{Attempts:%d}", e.attempts)
}

// Classify names the kind of a failure without quoting it: context
// identities first (a wait cut short by cancellation is canceled, not
// capacity), then specific causes before broad categories. Exhaustion is
// not a kind of its own: an exhausted run is provider_status, with
// errors.Is(err, ErrRetriesExhausted) telling it apart.
func Classify(err error) ExecutionFailureKind {
	switch {
	case err == nil:
		return ExecutionFailureNone
	case errors.Is(err, context.Canceled):
		return ExecutionFailureCanceled
	case errors.Is(err, context.DeadlineExceeded):
		return ExecutionFailureDeadline
	case errors.Is(err, ErrCapacity):
		return ExecutionFailureCapacity
	case errors.Is(err, ErrInvalidConfig):
		return ExecutionFailureInvalidConfig
	case errors.Is(err, ErrPromptNotFound):
		return ExecutionFailurePromptNotFound
	case errors.Is(err, ErrProfileNotFound):
		return ExecutionFailureProfileNotFound
	case errors.Is(err, ErrPromptRender):
		return ExecutionFailurePromptRender
	case errors.Is(err, ErrInvalidRequest):
		return ExecutionFailureInvalidRequest
	case errors.Is(err, ErrValidation):
		return ExecutionFailureValidation
	case errors.As(err, new(*GenerationError)):
		return ExecutionFailureProviderStatus
	case errors.Is(err, ErrTransport):
		return ExecutionFailureTransport
	case errors.Is(err, ErrMalformedResponse):
		return ExecutionFailureMalformed
	case errors.Is(err, ErrLLMGenerate):
		return ExecutionFailureGeneration
	}
	return ExecutionFailureOther
}
