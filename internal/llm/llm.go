// Package llm holds the internal values shared by the wire client, the
// scheduler and the recorder: one generation request, one attempt's outcome,
// usage with presence, and the error identities every layer agrees on.
//
// The root package converts these to and from its public types; nothing here
// is part of the public contract.
package llm

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Message is one chat message.
type Message struct {
	Role    string
	Content string
}

// Request is one fully rendered generation request.
type Request struct {
	Model       string
	Messages    []Message
	Temperature *float64
	TopP        *float64
	MaxTokens   *int
	Stop        []string
	// ResponseSchema, when non-empty, asks the provider for structured
	// output (OpenAI "response_format": {"type":"json_schema"}).
	ResponseSchema []byte
	// SchemaName names the schema in response_format; it must match
	// ^[a-zA-Z0-9_-]{1,64}$.
	SchemaName string
}

// Usage holds the five token counts a provider may report.
type Usage struct {
	PromptTokens     int
	CompletionTokens int
	TotalTokens      int
	CachedTokens     int
	ReasoningTokens  int
}

// Add returns the field-wise sum of u and o.
func (u Usage) Add(o Usage) Usage {
	return Usage{
		PromptTokens:     u.PromptTokens + o.PromptTokens,
		CompletionTokens: u.CompletionTokens + o.CompletionTokens,
		TotalTokens:      u.TotalTokens + o.TotalTokens,
		CachedTokens:     u.CachedTokens + o.CachedTokens,
		ReasoningTokens:  u.ReasoningTokens + o.ReasoningTokens,
	}
}

// Presence says which Usage fields the provider supplied as non-null
// integers. A false field means unknown, not zero.
type Presence struct {
	PromptTokens     bool
	CompletionTokens bool
	TotalTokens      bool
	CachedTokens     bool
	ReasoningTokens  bool
}

// Response is a successful generation.
type Response struct {
	Text         string
	Model        string
	FinishReason string
	Usage        Usage
	Presence     Presence
}

// Outcome is the result of exactly one attempt: one HTTP exchange or one
// call of an injected client.
type Outcome struct {
	// Response is set on success and nil on failure.
	Response *Response
	// Err is nil on success.
	Err error
	// StatusCode is the HTTP status received, 0 when none was.
	StatusCode int
	// Usage and Presence describe what the provider reported, even when a
	// strictly decoded envelope was later found malformed (missing choices).
	Usage    Usage
	Presence Presence
	// Received is when response headers arrived; zero when none did.
	Received time.Time
	// NotBefore is the provider's Retry-After, resolved against Received;
	// zero when the provider sent none (or an unusable one).
	NotBefore time.Time
}

// Error identities shared by all layers. The root package re-exports them.
var (
	// ErrGenerate marks every failure of a generation call.
	ErrGenerate = errors.New("promptkit: llm generation failed")
	// ErrTransport marks a request that could not be carried out: connection
	// refused, reset, timed out, or a body that could not be read.
	ErrTransport = errors.New("promptkit: transport failure")
	// ErrMalformed marks a response that is not a valid chat-completion
	// envelope.
	ErrMalformed = errors.New("promptkit: malformed provider response")
	// ErrMissingCredential marks a backend whose API key variable is unset.
	ErrMissingCredential = errors.New("promptkit: missing credential")
)

// StatusError is a non-2xx provider response. Detail is already redacted
// and truncated; Error never includes it, because provider text may echo
// prompts or secrets.
type StatusError struct {
	StatusCode int
	Detail     string
	// NotBefore is the provider's Retry-After as a time; zero when none.
	NotBefore time.Time
}

func (e *StatusError) Error() string {
	if e == nil {
		return "<nil>"
	}
	return fmt.Sprintf("promptkit: provider returned HTTP %d", e.StatusCode)
}

// GoString keeps %#v from printing Detail.
func (e *StatusError) GoString() string { return e.Error() }

// Is reports ErrGenerate, so callers need not list every cause.
func (e *StatusError) Is(target error) bool { return target == ErrGenerate }

// Failure wraps a transport or malformed-response cause so that errors.Is
// matches ErrGenerate, Kind (ErrTransport or ErrMalformed) and the cause
// (for example context.DeadlineExceeded), while Error prints only Kind: the
// cause's text may hold URLs.
type Failure struct {
	Kind  error
	Cause error
	// Reason is a fixed phrase safe to print, such as "connection
	// refused"; empty when no safe description is known.
	Reason string
}

func (e *Failure) Error() string {
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
func (e *Failure) GoString() string { return e.Error() }

// Unwrap exposes both the kind and the cause.
func (e *Failure) Unwrap() []error { return []error{ErrGenerate, e.Kind, e.Cause} }

// ErrRetriesExhausted marks a generation whose every attempt failed with a
// retry-eligible status.
var ErrRetriesExhausted = errors.New("promptkit: transient retries exhausted")

// ExhaustedError is returned when all attempts of a generation sequence
// failed with retry-eligible statuses. Cause is the last failure.
type ExhaustedError struct {
	Attempts uint64
	Cause    error
}

func (e *ExhaustedError) Error() string {
	if e == nil {
		return "<nil>"
	}
	return fmt.Sprintf("%s after %d attempts: %v", ErrRetriesExhausted.Error(), e.Attempts, e.Cause)
}

// Is reports ErrRetriesExhausted.
func (e *ExhaustedError) Is(target error) bool { return target == ErrRetriesExhausted }

// Unwrap returns the last failure.
func (e *ExhaustedError) Unwrap() error { return e.Cause }

// Eligible reports whether an HTTP status permits a transient retry.
func Eligible(status int) bool {
	switch status {
	case 429, 500, 502, 503, 504:
		return true
	}
	return false
}
