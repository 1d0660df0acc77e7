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
	"github.com/promptkit/promptkit/internal/problem"
	"github.com/promptkit/promptkit/jobs"
	"github.com/promptkit/promptkit/jobs/quota"
)

// Problem is a failure as the API answers it: one classification,
// promptkit's own, which each Dialect encodes in its API's shape. A
// handler returns one for a refusal of its own; Classify makes one of any
// other error.
type Problem struct {
	Status int
	// Kind is the class of the failure where dialects name it in their
	// own words (problem.Kind); "": Code is every dialect's code.
	Kind problem.Kind
	// Code and Message are promptkit's words: a snake_case code and a
	// message that names parameters and limits, never request content.
	Code    string
	Message string
	// Sentence is Message as the dialects whose messages are sentences
	// (the SDKs' APIs) say it, where it is not Message itself.
	Sentence string
	// Param names the parameter at fault; "" when none.
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

// OpenAIInvalid is a 400 in the words of a dialect whose messages are
// sentences, with that dialect's code (OpenAI's invalid_value,
// unsupported_value, …), the same in every dialect.
func OpenAIInvalid(param, code, msg string) *Problem {
	return &Problem{Status: http.StatusBadRequest, Code: code, Message: msg, Param: param}
}

// NotFound is a 404 for a resource named what ("prompt", "file").
func NotFound(what string) *Problem {
	return &Problem{Status: http.StatusNotFound, Code: "not_found", Message: what + ": not found", Sentence: "No such " + what + "."}
}

// TooLarge is the 413 of a body over limit bytes.
func TooLarge(limit int64) *Problem {
	return &Problem{Status: http.StatusRequestEntityTooLarge, Kind: problem.TooLarge, Code: "too_large",
		Message: fmt.Sprintf("the body is over %d bytes", limit), Sentence: fmt.Sprintf("The body is over %d bytes.", limit)}
}

// RateLimited is the 429 of a rate of the server's own reached for d:
// limit names it ("the token's submission rate of 20 a second").
func RateLimited(d time.Duration, limit string) *Problem {
	msg := limit + " is reached; retry after the Retry-After delay"
	return &Problem{Status: http.StatusTooManyRequests, Kind: problem.RateLimited, Code: "rate_limited", RetryAfter: d,
		Message: msg, Sentence: sentence(msg)}
}

// LimitReached is the 429 of a limit of the caller's org or token
// (jobs/quota): its message names the limit. A rate is RateLimited; a
// spent budget BudgetSpent, and REST's budget_exceeded. RetryAfter is
// until the window frees a place or the budget's period resets.
func LimitReached(e *quota.Exceeded) *Problem {
	p := &Problem{Status: http.StatusTooManyRequests, Kind: problem.RateLimited, Code: "rate_limited",
		Message: e.Error(), Sentence: sentence(e.Error()), RetryAfter: e.RetryAfter}
	if e.Rule.Budget() {
		p.Kind, p.Code = problem.BudgetSpent, string(jobs.KindBudgetExceeded)
	}
	return p
}

// sentence makes a message of promptkit's words a sentence (Problem's
// Sentence): a capital first letter and a full stop.
func sentence(msg string) string {
	if msg == "" {
		return msg
	}
	return strings.ToUpper(msg[:1]) + msg[1:] + "."
}

// Internal is a 500 whose cause is logged, never sent.
func Internal(what string, cause error) *Problem {
	return &Problem{Status: http.StatusInternalServerError, Kind: problem.Internal, Code: "internal",
		Message: "internal error", Sentence: "The server had an error while processing the request.", Cause: cause, what: what}
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
// is; a request a dialect's decoder refused (jobs.RequestError) as a 400
// naming its parameter; the store's and the engine's sentinels by
// meaning; anything else a 500.
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
	if re, ok := errors.AsType[*jobs.RequestError](err); ok {
		return OpenAIInvalid(re.Param, re.Code, re.Message)
	}
	if te, ok := errors.AsType[*jobs.TransitionError](err); ok {
		return &Problem{Status: http.StatusConflict, Code: "conflict",
			Message: fmt.Sprintf("%s: the job is %s", what, te.From), Sentence: fmt.Sprintf("The job is %s.", te.From)}
	}
	switch {
	case errors.Is(err, jobs.ErrNotFound):
		return NotFound(what)
	case errors.Is(err, jobs.ErrIdempotencyConflict):
		return &Problem{Status: http.StatusUnprocessableEntity, Code: "idempotency_conflict",
			Message:  "the Idempotency-Key was used with a different request",
			Sentence: "The Idempotency-Key was used with a different request."}
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

// Dialect is an API's words at the edge of a family of routes: the
// shape its errors take, and how its callers send their key. The zero
// Dialect is REST; another is made with NewDialect, by the package of its
// routes, so a new API adds its dialect without changing this one.
type Dialect struct{ spec *DialectSpec }

// DialectSpec describes a Dialect.
type DialectSpec struct {
	// Name names the dialect in logs and test failures.
	Name string
	// Body is the JSON body answering p (Write sends p's status, and
	// Retry-After and the challenge of a 401, around it). Required.
	Body func(p *Problem) any
	// Credential reads the caller's key from a request: secret is ""
	// when none usable was sent, and presented reports whether the
	// dialect's credential header was sent at all. Defaults to Bearer.
	Credential func(r *http.Request) (secret string, presented bool)
	// Challenge is the WWW-Authenticate of a 401; "" sends none.
	Challenge string
	// KeyHint says, in a 401's message, how to send the key
	// ("Authorization: Bearer pk_...").
	KeyHint string
	// Lenient: in local mode, a key that is no promptkit token acts as
	// the local identity, for SDKs that always send one (perhaps the
	// user's real key of the provider the API is named after).
	Lenient bool
}

// NewDialect makes a Dialect of spec (see DialectSpec for defaults).
func NewDialect(spec DialectSpec) Dialect {
	if spec.Credential == nil {
		spec.Credential = Bearer
	}
	return Dialect{&spec}
}

// bearerChallenge and bearerHint are the words of the dialects whose key
// is a bearer token.
const (
	bearerChallenge = `Bearer realm="promptkit"`
	bearerHint      = "Authorization: Bearer pk_..."
)

// REST is promptkit's shape: {"error": {"code", "message"}}, its key a
// bearer token, read strictly.
var REST = Dialect{}

var restSpec = DialectSpec{Name: "rest", Credential: Bearer, Challenge: bearerChallenge, KeyHint: bearerHint,
	Body: func(p *Problem) any { return restError{restErrorBody{Code: p.Code, Message: p.Message}} }}

// OpenAI is OpenAI's error object ({"error": {"message", "type",
// "param", "code"}}, openaiapi.ErrorFor), its key a bearer token, read
// leniently (OpenAI's SDKs always send one).
var OpenAI = NewDialect(DialectSpec{Name: "openai", Challenge: bearerChallenge, KeyHint: bearerHint, Lenient: true,
	Body: func(p *Problem) any {
		return openaiapi.ErrorFor(p.Status, p.Kind, p.Code, cmp.Or(p.Sentence, p.Message), p.Param)
	}})

// Spec is d's description (a copy: a Dialect does not change).
func (d Dialect) Spec() DialectSpec {
	if d.spec == nil {
		return restSpec
	}
	return *d.spec
}

func (d Dialect) String() string { return d.Spec().Name }

// Bearer is the key of an Authorization: Bearer header: the REST and
// OpenAI dialects' Credential.
func Bearer(r *http.Request) (secret string, presented bool) {
	h := r.Header.Get("Authorization")
	scheme, secret, ok := strings.Cut(h, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") || strings.TrimSpace(secret) == "" {
		return "", h != ""
	}
	return secret, true
}

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
	spec := d.Spec()
	if p.RetryAfter > 0 {
		w.Header().Set("Retry-After", RetryAfter(p.RetryAfter))
	}
	if p.Status == http.StatusUnauthorized && spec.Challenge != "" {
		w.Header().Set("WWW-Authenticate", spec.Challenge)
	}
	WriteJSON(w, p.Status, spec.Body(p))
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
