package worker

import (
	"context"
	"errors"
	"math/rand/v2"
	"time"

	"github.com/promptkit/promptkit"
	"github.com/promptkit/promptkit/jobs"
)

// Decision is what the failure policy says about one failed job attempt.
type Decision struct {
	// Kind is the job's error_kind.
	Kind jobs.ErrorKind
	// Retryable says whether another job attempt may help.
	Retryable bool
	// NotBefore is the provider's Retry-After, when it sent one.
	NotBefore time.Time
}

// Classify maps an engine error to the seed's failure policy (§8). It is
// the one place that decides kinds and retryability:
//
//	status 429                 rate_limit    retry (at least Retry-After, else 60 s)
//	status 401, 403            auth          fail
//	status 500/502/503/504     provider_5xx  retry
//	other 4xx                  provider_4xx  fail
//	timeout, deadline          timeout       retry
//	malformed response         parse         fail
//	bad request, unknown       unknown       fail (a retry cannot help)
//	prompt/profile, config
//	anything else              unknown       retry
//
// A run whose output stays invalid after its repair budget is not an error;
// the worker records it as parse through InvalidOutput.
func Classify(err error) Decision {
	var ge *promptkit.GenerationError
	if errors.As(err, &ge) { // also inside a RetryExhaustedError
		d := Decision{NotBefore: ge.RetryAfter()}
		switch s := ge.StatusCode(); {
		case s == 429:
			d.Kind, d.Retryable = jobs.KindRateLimit, true
		case s == 401 || s == 403:
			d.Kind = jobs.KindAuth
		case s == 500 || s == 502 || s == 503 || s == 504:
			d.Kind, d.Retryable = jobs.KindProvider5xx, true
		case s >= 400 && s < 500:
			d.Kind = jobs.KindProvider4xx
		default:
			d.Kind, d.Retryable = jobs.KindUnknown, true
		}
		return d
	}
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return Decision{Kind: jobs.KindTimeout, Retryable: true}
	case errors.Is(err, promptkit.ErrMalformedResponse):
		return Decision{Kind: jobs.KindParse}
	case errors.Is(err, promptkit.ErrInvalidRequest), errors.Is(err, promptkit.ErrInvalidConfig),
		errors.Is(err, promptkit.ErrPromptNotFound), errors.Is(err, promptkit.ErrProfileNotFound):
		return Decision{Kind: jobs.KindUnknown}
	}
	return Decision{Kind: jobs.KindUnknown, Retryable: true}
}

// InvalidOutput is the decision for an output still invalid after repair.
var InvalidOutput = Decision{Kind: jobs.KindParse}

// Backoff returns when a job that failed its attempt-th attempt (1-based)
// may run again: 5 s + rand(0..5 s) after the first failure, 25 s +
// rand(0..15 s) after later ones, and never before the provider's
// not-before time (Retry-After); a rate limit without one waits 60 s. jitter(n) returns a uniform
// duration in [0, n].
func Backoff(d Decision, attempt int, now time.Time, jitter func(time.Duration) time.Duration) time.Time {
	if jitter == nil {
		jitter = func(n time.Duration) time.Duration { return time.Duration(rand.Int64N(int64(n) + 1)) }
	}
	var wait time.Duration
	if attempt <= 1 {
		wait = 5*time.Second + jitter(5*time.Second)
	} else {
		wait = 25*time.Second + jitter(15*time.Second)
	}
	at := now.Add(wait)
	floor := d.NotBefore // the provider's Retry-After, whatever the status
	if floor.IsZero() && d.Kind == jobs.KindRateLimit {
		floor = now.Add(60 * time.Second)
	}
	if floor.After(at) {
		at = floor
	}
	return at
}
