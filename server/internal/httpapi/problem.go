package httpapi

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/promptkit/promptkit"
	"github.com/promptkit/promptkit/internal/openaiapi"
	"github.com/promptkit/promptkit/jobs"
	"github.com/promptkit/promptkit/jobs/quota"
)

// Problem is a failure as the API answers it: one classification, which
// each Dialect encodes in its API's shape. A handler returns one for a
// refusal of its own; Classify makes one of any other error.
type Problem struct {
	Status int
	// Code and Message are promptkit's words: a snake_case code and a
	// message that names parameters and limits, never request content.
	Code    string
	Message string
	// OpenAICode and OpenAIMessage are OpenAI's words for the same
	// problem, where they differ (OpenAI's messages are sentences); empty:
	// Code and Message.
	OpenAICode    string
	OpenAIMessage string
	// OpenAIType is OpenAI's error type where the status does not decide
	// it (OpenAIType); empty: by the status.
	OpenAIType string
	// Param names the parameter at fault (OpenAI's param); "" when none.
	Param string
	// RetryAfter, when positive, is sent as Retry-After.
	RetryAfter time.Duration
	// Cause is what went wrong inside, for a 5xx: logged, never sent.
	Cause error
	// what names the operation in the log ("prompt", "listing").
	what string
}

func (p *Problem) Error() string { return p.Message }

func (p *Problem) Unwrap() error { return p.Cause }

// Invalid is a 400 for a parameter of the request (param may be "").
func Invalid(param, msg string) *Problem {
	return &Problem{Status: http.StatusBadRequest, Code: "invalid_request", Message: msg, Param: param}
}

// OpenAIInvalid is a 400 invalid_request_error in OpenAI's words, with
// OpenAI's code (invalid_value, unsupported_value, …).
func OpenAIInvalid(param, code, msg string) *Problem {
	return &Problem{Status: http.StatusBadRequest, Code: code, Message: msg, Param: param}
}

// NotFound is a 404 for a resource named what ("prompt", "file").
func NotFound(what string) *Problem {
	return &Problem{Status: http.StatusNotFound, Code: "not_found", Message: what + ": not found", OpenAIMessage: "No such " + what + "."}
}

// TooLarge is the 413 of a body over limit bytes.
func TooLarge(limit int64) *Problem {
	return &Problem{Status: http.StatusRequestEntityTooLarge, Code: "too_large", OpenAICode: "request_too_large",
		Message: fmt.Sprintf("the body is over %d bytes", limit), OpenAIMessage: fmt.Sprintf("The body is over %d bytes.", limit)}
}

// RateLimited is the 429 of a rate of the server's own reached for d:
// limit names it ("the token's submission rate of 20 a second").
func RateLimited(d time.Duration, limit string) *Problem {
	msg := limit + " is reached; retry after the Retry-After delay"
	return &Problem{Status: http.StatusTooManyRequests, Code: "rate_limited", OpenAICode: "rate_limit_exceeded", RetryAfter: d,
		Message: msg, OpenAIMessage: sentence(msg)}
}

// LimitReached is the 429 of a limit of the caller's org or token
// (jobs/quota): its message names the limit. A rate is OpenAI's
// rate_limit_exceeded; a spent budget its insufficient_quota (type and
// code), and REST's budget_exceeded. RetryAfter is until the window
// frees a place or the budget's period resets.
func LimitReached(e *quota.Exceeded) *Problem {
	p := &Problem{Status: http.StatusTooManyRequests, Code: "rate_limited", OpenAICode: "rate_limit_exceeded",
		Message: e.Error(), OpenAIMessage: sentence(e.Error()), RetryAfter: e.RetryAfter}
	if e.Rule.Budget() {
		p.Code, p.OpenAICode, p.OpenAIType = string(jobs.KindBudgetExceeded), openaiapi.TypeInsufficientQuota, openaiapi.TypeInsufficientQuota
	}
	return p
}

// sentence makes a message of promptkit's words one of OpenAI's: a
// capital first letter and a full stop.
func sentence(msg string) string {
	if msg == "" {
		return msg
	}
	return strings.ToUpper(msg[:1]) + msg[1:] + "."
}

// Internal is a 500 whose cause is logged, never sent.
func Internal(what string, cause error) *Problem {
	return &Problem{Status: http.StatusInternalServerError, Code: "internal", OpenAICode: "internal_error",
		Message: "internal error", OpenAIMessage: "The server had an error while processing the request.", Cause: cause, what: what}
}

// About names the operation or resource an error came from ("prompt",
// "batch"), for the words of a 404 or a 409 and for the log of a 500.
func About(what string, err error) error {
	if err == nil {
		return nil
	}
	return &about{what: what, err: err}
}

type about struct {
	what string
	err  error
}

func (a *about) Error() string { return a.what + ": " + a.err.Error() }
func (a *about) Unwrap() error { return a.err }

// Classify maps any error to its Problem, in one table: a Problem as it
// is; a refused OpenAI request as a 400 naming its parameter; the store's
// and the engine's sentinels by meaning; anything else a 500.
func Classify(err error) *Problem {
	what := "request"
	if a, ok := errors.AsType[*about](err); ok {
		what = a.what
	}
	if p, ok := errors.AsType[*Problem](err); ok {
		q := *p // a Problem may be shared: name the operation on a copy
		if q.what == "" {
			q.what = what
		}
		return &q
	}
	if e, ok := errors.AsType[*quota.Exceeded](err); ok {
		return LimitReached(e)
	}
	if re, ok := errors.AsType[*openaiapi.RequestError](err); ok {
		return OpenAIInvalid(re.Param, re.Code, re.Message)
	}
	if te, ok := errors.AsType[*jobs.TransitionError](err); ok {
		return &Problem{Status: http.StatusConflict, Code: "conflict",
			Message: fmt.Sprintf("%s: the job is %s", what, te.From), OpenAIMessage: fmt.Sprintf("The job is %s.", te.From)}
	}
	switch {
	case errors.Is(err, jobs.ErrNotFound):
		return NotFound(what)
	case errors.Is(err, jobs.ErrIdempotencyConflict):
		return &Problem{Status: http.StatusUnprocessableEntity, Code: "idempotency_conflict",
			Message:       "the Idempotency-Key was used with a different request",
			OpenAIMessage: "The Idempotency-Key was used with a different request."}
	case errors.Is(err, jobs.ErrInvalid),
		errors.Is(err, promptkit.ErrInvalidRequest),
		errors.Is(err, promptkit.ErrPromptNotFound),
		errors.Is(err, promptkit.ErrProfileNotFound):
		p := Invalid("", jobs.InvalidMessage(err))
		if ie, ok := errors.AsType[*jobs.InvalidError](err); ok {
			p.Param = ie.Field
		}
		return p
	}
	return Internal(what, err)
}

// Dialect is the error shape of a family of routes.
type Dialect int

const (
	// REST is promptkit's shape: {"error": {"code", "message"}}.
	REST Dialect = iota
	// OpenAI is OpenAI's error object: {"error": {"message", "type",
	// "param", "code"}}.
	OpenAI
)

// restError is the body of a REST error answer.
type restError struct {
	Error restErrorBody `json:"error"`
}

type restErrorBody struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// Write answers p in d's shape.
func (d Dialect) Write(w http.ResponseWriter, p *Problem) {
	if p.RetryAfter > 0 {
		w.Header().Set("Retry-After", RetryAfter(p.RetryAfter))
	}
	if p.Status == http.StatusUnauthorized {
		w.Header().Set("WWW-Authenticate", `Bearer realm="promptkit"`)
	}
	if d == REST {
		WriteJSON(w, p.Status, restError{restErrorBody{Code: p.Code, Message: p.Message}})
		return
	}
	code, msg, typ := p.Code, p.Message, cmp.Or(p.OpenAIType, OpenAIType(p.Status))
	if p.OpenAICode != "" {
		code = p.OpenAICode
	}
	if p.OpenAIMessage != "" {
		msg = p.OpenAIMessage
	}
	WriteJSON(w, p.Status, openaiapi.NewError(msg, typ, p.Param, code))
}

// OpenAIType is the type OpenAI's error object gives a status.
func OpenAIType(status int) string {
	switch {
	case status == http.StatusTooManyRequests:
		return openaiapi.TypeRateLimit
	case status == http.StatusInternalServerError:
		return openaiapi.TypeAPI
	case status >= 500:
		return openaiapi.TypeServer
	}
	return openaiapi.TypeInvalidRequest
}

// Fail answers err in d's shape, logging the cause of a 5xx with the
// route. A request whose client has gone gets nothing: there is no one
// to answer.
func (d Dialect) Fail(w http.ResponseWriter, r *http.Request, log *slog.Logger, err error) {
	if r.Context().Err() != nil && errors.Is(err, context.Canceled) {
		return
	}
	p := Classify(err)
	if p.Status >= 500 && p.Cause != nil {
		log.Error("request failed", "route", r.Pattern, "op", p.what, "err", p.Cause)
	}
	d.Write(w, p)
}

// HandlerFunc is a handler that returns its failure instead of writing
// it: nil once it has answered.
type HandlerFunc func(w http.ResponseWriter, r *http.Request) error

// Handler adapts h, answering its failures in d's shape.
func (d Dialect) Handler(log *slog.Logger, h HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if err := h(w, r); err != nil {
			d.Fail(w, r, log, err)
		}
	}
}
