// Package llm holds what the wire client, the scheduler and the engine
// pass between them for one attempt: its Outcome, and the AttemptError
// that wraps a transport or malformed-response cause. The values they carry
// (requests, responses, usage, errors) are pktype's.
package llm

import (
	"context"
	"errors"
	"time"

	"github.com/promptkit/promptkit/pktype"
)

// Outcome is the result of exactly one attempt: one HTTP exchange or one
// call of an injected client.
type Outcome struct {
	// Response is set on a generation's success and nil on failure.
	Response *pktype.GenerateResponse
	// Embedding is set instead on an embedding call's success: the
	// scheduler runs both kinds of attempt alike.
	Embedding *pktype.EmbeddingResponse
	// Err is nil on success.
	Err error
	// StatusCode is the HTTP status received, 0 when none was.
	StatusCode int
	// Usage and Presence describe what the provider reported, even when a
	// strictly decoded envelope was later found malformed (missing choices).
	Usage    pktype.TokenUsage
	Presence pktype.TokenUsagePresence
	// Received is when response headers arrived; zero when none did.
	Received time.Time
	// FirstDelta is when a streamed answer's first piece (text or tool
	// call) arrived: the time to first token. Zero when the call was not
	// streamed or no piece arrived.
	FirstDelta time.Time
	// NotBefore is the provider's Retry-After, resolved against Received;
	// zero when the provider sent none (or an unusable one).
	NotBefore time.Time
	// Limits are the provider's rate-limit headers, when it sent any.
	Limits RateLimits
	// Backend is the backend the attempt went to, set by the scheduler
	// (a model group chooses one per attempt).
	Backend string
}

// RateLimits are what a provider's rate-limit headers said about one
// backend's budget at Outcome.Received: OpenAI's x-ratelimit-* fields or
// the IETF draft's ratelimit-* fields. A budget whose Known is false was
// not reported.
type RateLimits struct {
	Requests Budget
	Tokens   Budget
}

// Budget is one rate-limit window: Remaining of Limit are left, and the
// window resets (Remaining returns to Limit) Reset after Received.
type Budget struct {
	Known     bool
	Limit     int64
	Remaining int64
	Reset     time.Duration
}

// AttemptError is an attempt that got no usable answer. It wraps a
// transport or malformed-response cause so that errors.Is matches
// pktype.ErrLLMGenerate, Kind (pktype.ErrTransport or
// pktype.ErrMalformedResponse) and the cause (for example
// context.DeadlineExceeded), while Error prints only Kind: the cause's
// text may hold URLs. (A failed job attempt, as the job policy sees it,
// is jobs.Failure.)
type AttemptError struct {
	Kind  error
	Cause error
	// Reason is a fixed phrase safe to print, such as "connection
	// refused"; empty when no safe description is known.
	Reason string
}

func (e *AttemptError) Error() string {
	if e == nil {
		return "<nil>"
	}
	msg := e.Kind.Error()
	switch {
	case errors.Is(e.Cause, context.DeadlineExceeded):
		msg += ": deadline exceeded"
	case errors.Is(e.Cause, context.Canceled):
		msg += ": canceled"
	case e.Reason != "":
		msg += ": " + e.Reason
	}
	return msg
}

// GoString keeps %#v from printing the cause.
func (e *AttemptError) GoString() string { return e.Error() }

// Unwrap exposes both the kind and the cause.
func (e *AttemptError) Unwrap() []error { return []error{pktype.ErrLLMGenerate, e.Kind, e.Cause} }
