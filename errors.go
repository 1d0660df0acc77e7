package promptkit

import (
	"errors"
	"fmt"

	"github.com/promptkit/promptkit/internal/dispatch"
	"github.com/promptkit/promptkit/internal/llm"
)

// Errors returned by the engine. Match them with errors.Is; every error the
// engine returns wraps at least one of them. Error strings never contain
// prompts, rendered text, request or response bodies, provider messages,
// URLs or credentials.
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

// publicError converts the internal provider status error into the public
// GenerationError; other causes keep their identities.
func publicError(backendID string, err error) error {
	var se *llm.StatusError
	if errors.As(err, &se) {
		return &GenerationError{backendID: backendID, statusCode: se.StatusCode, detail: se.Detail}
	}
	return err
}
