package jobs

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	"github.com/promptkit/promptkit/pktype"
)

// The failure policy: what a failed job attempt is (its ErrorKind),
// whether another attempt may help (Retryable), and when it may run again
// (Backoff). The worker applies it; the stores only record its decisions.
//
//	error                                         kind               retried
//	HTTP 429                                      rate_limit         yes: at the provider's Retry-After, else after at least 60 s
//	HTTP 401, 403                                 auth               no
//	a missing credential (API key variable)       auth               no
//	every HTTP 5xx                                provider_5xx       yes, with backoff
//	any other HTTP 4xx                            provider_4xx       no
//	per-attempt timeout, job deadline             timeout            yes, with backoff
//	the provider could not be reached             transport          yes, with backoff
//	malformed response                            parse              no
//	output still invalid after repair             parse              no
//	unknown prompt or profile, bad inputs,        invalid_request    no
//	a template that does not render, bad config
//	dependency failed or cancelled                dependency_failed  no
//	worker died (heartbeat lost)                  worker_crash       yes: requeued by Reclaim
//	worker died, attempts spent or ran too long   stuck              no
//	the store refused the result (a NUL, …)       unstorable         no
//	its org's or token's budget is spent          budget_exceeded    no
//	anything else (cancelled, capacity, …)        unknown            yes, with backoff

// errorKinds is the failure policy's one table: every job error kind, in
// ErrorKinds order, with the engine's failure kinds (pktype.Classify) it
// stands for, whether it may heal by itself, and what it means in words.
// A provider status is told apart by its code instead (statusKind): rate
// limit, auth, provider 4xx and 5xx.
var errorKinds = [...]struct {
	kind        ErrorKind
	engine      []pktype.ExecutionFailureKind
	retryable   bool
	description string
	advice      string
}{
	{KindTimeout, []pktype.ExecutionFailureKind{pktype.ExecutionFailureDeadline}, true, "the attempt timed out", "Try again, or try later."},
	{KindRateLimit, nil, true, "the provider rate-limited it", "The provider is busy: try again in a minute or two."},
	{KindProvider5xx, nil, true, "the provider failed (HTTP 5xx)", "Try again, or try later."},
	{KindProvider4xx, nil, false, "the provider refused the request (HTTP 4xx)", "Trying again as it is will not help: change the prompt or choose another profile."},
	{KindParse, []pktype.ExecutionFailureKind{pktype.ExecutionFailureMalformed}, false, "the answer could not be parsed or did not validate", "Try again, or reword the prompt."},
	{KindAuth, nil, false, "the provider refused the credentials, or none is set", "Ask whoever runs this server to check the provider's API key."},
	{KindWorkerCrash, nil, true, "its worker stopped heart-beating (crashed or cut off)", "Try again."},
	{KindStuck, nil, false, "its worker died on the last attempt, or it ran too long", "Try again; if it keeps happening, ask whoever runs this server."},
	{KindTransport, []pktype.ExecutionFailureKind{pktype.ExecutionFailureTransport}, true, "the provider could not be reached", "Try again, or try later."},
	{KindUnknown, []pktype.ExecutionFailureKind{pktype.ExecutionFailureCanceled, pktype.ExecutionFailureCapacity,
		pktype.ExecutionFailureValidation, pktype.ExecutionFailureGeneration, pktype.ExecutionFailureOther}, true, "an unexpected error", "Try again; if it keeps happening, ask whoever runs this server."},
	{KindInvalidRequest, []pktype.ExecutionFailureKind{pktype.ExecutionFailureInvalidConfig, pktype.ExecutionFailureInvalidRequest,
		pktype.ExecutionFailurePromptNotFound, pktype.ExecutionFailureProfileNotFound, pktype.ExecutionFailurePromptRender}, false, "the request cannot be run as given", "Trying again as it is will not help: check the prompt and its profile."},
	{KindDependencyFailed, nil, false, "the job it depends on failed or was cancelled", "Retry the prompt it depends on first."},
	{KindUnstorable, nil, false, "the database refused to store its result", "Try again, or reword the prompt."},
	{KindBudgetExceeded, nil, false, "its organisation's or token's spending budget is spent", "Ask whoever runs this server to raise the budget, or wait until it renews."},
}

// ErrorKinds returns every non-empty kind.
func ErrorKinds() []ErrorKind {
	out := make([]ErrorKind, len(errorKinds))
	for i, r := range errorKinds {
		out[i] = r.kind
	}
	return out
}

// Retryable reports whether a failure of this kind may heal by itself, so
// that another attempt (while attempts remain) is worth making.
func (k ErrorKind) Retryable() bool {
	for _, r := range errorKinds {
		if r.kind == k {
			return r.retryable
		}
	}
	return false
}

// Description says in words what happened, for people reading a job's
// error: "the provider could not be reached", not "transport". A kind
// this build does not know is described as unknown.
func (k ErrorKind) Description() string {
	if k == KindNone {
		return ""
	}
	for _, r := range errorKinds {
		if r.kind == k {
			return r.description
		}
	}
	return KindUnknown.Description()
}

// Title is Description as a sentence, for the person who asked: "The
// provider could not be reached." (the API's error_title).
func (k ErrorKind) Title() string {
	d := k.Description()
	if d == "" {
		return ""
	}
	return strings.ToUpper(d[:1]) + d[1:] + "."
}

// Advice says what the person who asked can do about a failure of this
// kind, in a sentence: "Try again, or try later." Kept beside
// Description, so every client words a failure the same way (the API's
// error_advice). A kind this build does not know gets unknown's advice.
func (k ErrorKind) Advice() string {
	if k == KindNone {
		return ""
	}
	for _, r := range errorKinds {
		if r.kind == k {
			return r.advice
		}
	}
	return KindUnknown.Advice()
}

// engineKind is the job error kind the engine's failure kind stands for;
// unknown for one errorKinds does not list.
func engineKind(f pktype.ExecutionFailureKind) ErrorKind {
	for _, r := range errorKinds {
		if slices.Contains(r.engine, f) {
			return r.kind
		}
	}
	return KindUnknown
}

// Failure is a failed job attempt as the policy sees it.
type Failure struct {
	Kind ErrorKind
	// RetryAfter is the provider's Retry-After, zero when it sent none.
	RetryAfter time.Time
}

// Classify maps an engine error to the failure policy (see the table
// above): the engine's own classification (pktype.Classify) decides,
// through errorKinds, with the provider's status for a provider answer
// and the missing credential told apart from other invalid requests. It
// reads the error's identities, never its text.
func Classify(err error) Failure {
	if errors.Is(err, pktype.ErrMissingCredential) {
		return Failure{Kind: KindAuth}
	}
	if errors.Is(err, ErrInvalid) { // a stored job the worker cannot use
		return Failure{Kind: KindInvalidRequest}
	}
	if errors.Is(err, ErrBudgetExceeded) { // a run's later call refused (worker.Config.Budget)
		return Failure{Kind: KindBudgetExceeded}
	}
	k := pktype.Classify(err)
	if k == pktype.ExecutionFailureProviderStatus {
		var ge *pktype.GenerationError
		errors.As(err, &ge) // also inside a RetryExhaustedError
		return Failure{Kind: statusKind(ge.StatusCode()), RetryAfter: ge.RetryAfter()}
	}
	return Failure{Kind: engineKind(k)}
}

// statusKind is the kind of a provider's HTTP status.
func statusKind(s int) ErrorKind {
	switch {
	case s == 429:
		return KindRateLimit
	case s == 401 || s == 403:
		return KindAuth
	case s >= 500 && s <= 599:
		return KindProvider5xx
	case s >= 400 && s <= 499:
		return KindProvider4xx
	}
	return KindUnknown
}

// Job backoff: the k-th failed attempt waits base·5^(k−1) (5 s, 25 s,
// 125 s, …, at most maxBackoff) plus a uniform jitter of up to
// min(base, 15 s): 5 s + 0–5 s, then 25 s + 0–15 s, then 125 s + 0–15 s.
const (
	firstBackoff   = 5 * time.Second
	maxBackoff     = time.Hour
	maxJitter      = 15 * time.Second
	rateLimitFloor = 60 * time.Second
)

// Backoff returns when a job whose attempt-th attempt (1-based) failed
// with f may run again: the exponential backoff above, never before the
// provider's Retry-After, and a rate limit without one waits at least
// 60 s. jitter(n) returns a uniform duration in [0, n]; nil uses
// math/rand.
func Backoff(f Failure, attempt int, now time.Time, jitter func(time.Duration) time.Duration) time.Time {
	if jitter == nil {
		jitter = func(n time.Duration) time.Duration { return time.Duration(rand.Int64N(int64(n) + 1)) }
	}
	base := firstBackoff
	for i := 1; i < attempt && base < maxBackoff; i++ {
		base *= 5
	}
	base = min(base, maxBackoff)
	span := min(base, maxJitter)
	at := now.Add(base + min(max(jitter(span), 0), span))
	floor := f.RetryAfter // the provider's, whatever the status
	if floor.IsZero() && f.Kind == KindRateLimit {
		floor = now.Add(rateLimitFloor)
	}
	if floor.After(at) {
		at = floor
	}
	return at
}

// Reclaim messages, one per outcome.
const (
	msgReclaimed     = "heartbeat lost: worker presumed dead; job requeued"
	msgStuckAttempts = "heartbeat lost on the last attempt: failed as stuck"
	msgStuckLongRun  = "heartbeat lost after running longer than the stuck threshold: failed as stuck"
	maxErrorMessage  = 500

	// defaultReclaim is 4m, not 5m, so that a dead worker's job is back in
	// the queue within the design's 5 minutes with margin: the reclaim
	// loop sweeps every tenth of it, and the worst case (a worker killed
	// just after a heartbeat, its heartbeat turning 4m old just after a
	// sweep) is 4m + 24s = 4m24s after the kill. At the default 30s
	// heartbeat, 4m is still eight missed heartbeats.
	defaultReclaim    = 4 * time.Minute
	defaultStuckAfter = 15 * time.Minute
)

// ReclaimDecision is what Reclaim does with one running job whose heartbeat
// is older than ReclaimAfter.
type ReclaimDecision struct {
	To      State // Queued or Failed
	Kind    ErrorKind
	Message string
}

// Decide returns what happens to j, a running job whose heartbeat was lost:
// back to the queue (attempt + 1, worker_crash) when it has attempts left
// and ran less than StuckAfter, else failed as stuck. How long it ran is
// measured by its heartbeats (last heartbeat − start), not by the clock at
// reclaim: time the service was down is not time the job ran, so an outage
// longer than StuckAfter must not fail every job that was running. p must
// be normalized.
func (p ReclaimParams) Decide(j Job) ReclaimDecision {
	switch {
	case j.Attempt >= j.MaxAttempts:
		return ReclaimDecision{To: Failed, Kind: KindStuck, Message: msgStuckAttempts}
	case j.HeartbeatAt.Sub(j.StartedAt) >= p.StuckAfter:
		return ReclaimDecision{To: Failed, Kind: KindStuck, Message: msgStuckLongRun}
	}
	return ReclaimDecision{To: Queued, Kind: KindWorkerCrash, Message: msgReclaimed}
}

// HeartbeatCutoff is the heartbeat time below which (strictly) a running
// job's worker counts as dead at now. p must be normalized.
func (p ReclaimParams) HeartbeatCutoff(now time.Time) time.Time { return now.Add(-p.ReclaimAfter) }

// DependencyOutcome says what a job may do given its DependsOn job dep
// (nil when dep no longer exists: it was archived, so it had finished).
// A dependency that succeeded, even one later superseded by a retry, lets
// the job run; one that failed or was cancelled fails it; one still queued
// or running makes it wait (Claim never hands such a job out).
func DependencyOutcome(dep *Job) (run bool, reason string) {
	switch {
	case dep == nil:
		return true, ""
	case dep.State == Succeeded, dep.State == Superseded && dep.ResponseID != "":
		return true, ""
	case dep.State == Superseded:
		return false, fmt.Sprintf("dependency %s ended without an answer before it was retried", dep.ID)
	default:
		return false, fmt.Sprintf("dependency %s is %s", dep.ID, dep.State)
	}
}
