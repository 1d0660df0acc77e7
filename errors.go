package promptkit

import (
	"errors"
	"time"

	"github.com/promptkit/promptkit/internal/dispatch"
	"github.com/promptkit/promptkit/pktype"
)

// Errors returned by the engine. Match them with errors.Is: every error the
// engine returns wraps at least one of them, except that a context that
// ends before or between attempts is returned as the context's own error
// (errors.Is(err, context.Canceled) or context.DeadlineExceeded). Error
// strings never contain prompts, rendered text, request or response
// bodies, provider messages, URLs or credentials; an injected client's own
// error text is included as the client wrote it. They are pktype's
// identities: see there for what each means.
var (
	ErrInvalidConfig     = pktype.ErrInvalidConfig
	ErrInvalidRequest    = pktype.ErrInvalidRequest
	ErrPromptRender      = pktype.ErrPromptRender
	ErrMissingCredential = pktype.ErrMissingCredential
	ErrPromptNotFound    = pktype.ErrPromptNotFound
	ErrProfileNotFound   = pktype.ErrProfileNotFound
	ErrLLMGenerate       = pktype.ErrLLMGenerate
	ErrTransport         = pktype.ErrTransport
	ErrMalformedResponse = pktype.ErrMalformedResponse
	ErrCapacity          = pktype.ErrCapacity
	ErrRetriesExhausted  = pktype.ErrRetriesExhausted
	ErrValidation        = pktype.ErrValidation
)

// GenerationError is a provider's non-2xx answer (see pktype).
type GenerationError = pktype.GenerationError

// RetryExhaustedError reports a generation whose every attempt failed with
// a retry-eligible status (see pktype).
type RetryExhaustedError = pktype.RetryExhaustedError

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

func (e *injectedError) Error() string   { return "llm client: " + e.cause.Error() }
func (e *injectedError) Unwrap() []error { return []error{ErrLLMGenerate, e.cause} }

// NotBefore returns the earliest time at which trying err's run again can
// help: a provider's Retry-After (a *GenerationError, also inside a
// *RetryExhaustedError), or the end of a backend pause that a run with
// RunRequest.NoWaitPastDeadline refused to wait for (ErrCapacity). ok is
// false when err carries no such time.
func NotBefore(err error) (t time.Time, ok bool) {
	var ge *GenerationError
	if errors.As(err, &ge) && !ge.RetryAfter().IsZero() {
		return ge.RetryAfter(), true
	}
	var ce *dispatch.CapacityError
	if errors.As(err, &ce) && !ce.NotBefore.IsZero() {
		return ce.NotBefore, true
	}
	return time.Time{}, false
}

// renderError is an ErrPromptRender (and so an ErrInvalidRequest) caused
// by the inputs or the template. Its message names the prompt, input
// locations and keys, schema keywords and template positions, never input
// values.
type renderError struct{ msg string }

func (e *renderError) Error() string { return ErrPromptRender.Error() + ": " + e.msg }
func (e *renderError) Is(target error) bool {
	return target == ErrPromptRender || target == ErrInvalidRequest
}
