// Package problem is promptkit's one classification of a failure as an
// API answers it, whatever the API's dialect: an HTTP status, a Kind for
// the classes the dialects word differently, and promptkit's code and
// message. Each dialect encodes the classification in its API's shape
// (server/internal/httpapi's Problem carries it; internal/openaiapi
// writes OpenAI's error object), so no dialect classifies a failure a
// second time.
package problem

import (
	"cmp"
	"net/http"

	"github.com/promptkit/promptkit/jobs"
)

// Kind is a class of failure that dialects may name in their own words
// (a code, an error type). The empty Kind is none of them: the failure's
// code is promptkit's in every dialect.
type Kind string

// The kinds.
const (
	// BadValue: a parameter's value (a query parameter, a header) is
	// refused.
	BadValue Kind = "bad_value"
	// BadBody: the body is not the JSON the route reads.
	BadBody Kind = "bad_body"
	// Unauthenticated: no valid credential.
	Unauthenticated Kind = "unauthenticated"
	// TooLarge: the body is over the server's cap.
	TooLarge Kind = "too_large"
	// RateLimited: a rate (the server's, the caller's org's or token's,
	// the provider's) is reached; waiting cures it.
	RateLimited Kind = "rate_limited"
	// BudgetSpent: a spending budget is spent; waiting a moment does not
	// cure it.
	BudgetSpent Kind = "budget_spent"
	// Internal: promptkit's own fault, its cause logged, never sent.
	Internal Kind = "internal"
)

// Failure is the answer to a request whose job ended without one.
type Failure struct {
	Status int
	Kind   Kind
	// Code is the job's error kind (or "cancelled"); "" when the job has
	// no error.
	Code string
	// Message is the kind's description and the job's stored (redacted)
	// message, as a sentence.
	Message string
}

// OfJob classifies a job that ended without an answer (failed or
// cancelled), by its error kind:
//
//	rate_limit                                429 RateLimited
//	budget_exceeded                           429 BudgetSpent
//	invalid_request, provider_4xx             400
//	timeout                                   504
//	provider_5xx, transport, parse, auth      502 (the provider's fault)
//	anything else (worker_crash, stuck, ...)  500 (promptkit's fault)
//	a cancelled job                           409, code cancelled
//
// The code is the error kind.
func OfJob(j jobs.Job) Failure {
	switch j.State {
	case jobs.Cancelled:
		return Failure{Status: http.StatusConflict, Code: "cancelled", Message: "The request's job was cancelled before it finished."}
	case jobs.Failed:
	default:
		return Failure{Status: http.StatusInternalServerError, Message: "The request's job has no error."}
	}
	f := Failure{Status: http.StatusInternalServerError, Code: cmp.Or(string(j.ErrorKind), string(jobs.KindUnknown)),
		Message: "The request failed: " + cmp.Or(j.ErrorKind.Description(), jobs.KindUnknown.Description()) + "."}
	if j.ErrorMessage != "" {
		f.Message += " " + j.ErrorMessage
	}
	switch j.ErrorKind {
	case jobs.KindRateLimit:
		f.Status, f.Kind = http.StatusTooManyRequests, RateLimited
	case jobs.KindBudgetExceeded:
		f.Status, f.Kind = http.StatusTooManyRequests, BudgetSpent
	case jobs.KindInvalidRequest, jobs.KindProvider4xx:
		f.Status = http.StatusBadRequest
	case jobs.KindTimeout:
		f.Status = http.StatusGatewayTimeout
	case jobs.KindProvider5xx, jobs.KindTransport, jobs.KindParse, jobs.KindAuth, jobs.KindUnstorable:
		f.Status = http.StatusBadGateway
	}
	return f
}
