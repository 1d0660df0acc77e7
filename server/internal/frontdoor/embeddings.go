package frontdoor

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/promptkit/promptkit"
	"github.com/promptkit/promptkit/internal/openaiapi"
	"github.com/promptkit/promptkit/jobs"
	"github.com/promptkit/promptkit/jobs/quota"
	"github.com/promptkit/promptkit/server/internal/auth"
	"github.com/promptkit/promptkit/server/internal/httpapi"
	"github.com/promptkit/promptkit/server/internal/submit"
)

// capacityRetryAfter is the Retry-After of a 503 for an engine that
// refused the call at once (its admission queue was full): the queue
// moves in seconds.
const capacityRetryAfter = time.Second

// Embeddings answers POST /v1/embeddings synchronously, through the
// engine's Embed: no job is stored, since an embedding is cheap to compute
// again, holds nothing worth keeping and a client wants it at once. The
// call still shares each backend's permits, pacing, learned rate and
// pause with the workers' runs on this engine, and retries a 429 or 5xx
// within the request, refusing a wait past the server's chat timeout
// (then 429 with the provider's Retry-After). It counts against the
// caller's submission rate limit and its org's and token's limits.
func (a *API) Embeddings(w http.ResponseWriter, r *http.Request) error {
	id := auth.Of(r)
	body, err := httpapi.ReadBody(w, r, a.MaxBody)
	if err != nil {
		return err
	}
	params, err := openaiapi.DecodeEmbeddings(body)
	if err != nil {
		return httpapi.About("decoding", err)
	}
	target, err := a.resolve(params.Model)
	if err != nil {
		return err
	}
	if _, err := a.Jobs.Take(r.Context(), id); err != nil {
		return err
	}
	// An embeddings request is no job: its calls are in the ledger only
	// once it ends (recordCalls), so each call's reservation is held
	// until then, and the request counts as made whatever happens.
	calls := callReservations{a: a, id: id}
	deadline := time.Now().Add(a.chatTimeout())
	// The answer may come later than the server's write timeout.
	_ = http.NewResponseController(w).SetWriteDeadline(deadline.Add(10 * time.Second))
	ctx, cancel := context.WithDeadline(r.Context(), deadline)
	defer cancel()
	// Its provider calls, for the usage ledger: no job records them.
	var made []jobs.UsageCall
	res, err := a.Engine.Embed(ctx, promptkit.EmbedRequest{
		Input:              params.Input,
		ProfileID:          target.Profile,
		Model:              target.Options.Model,
		Backend:            target.Options.PreferProvider,
		Dimensions:         params.Dimensions,
		NoWaitPastDeadline: true,
		BeforeCall:         calls.reserve(deadline),
		Observer: func(ev promptkit.ExecutionEvent) {
			if ev.Kind != promptkit.ExecutionAttempt {
				return
			}
			if c, ok := jobs.NewAttemptEvent(ev, 0, true).Call(); ok {
				made = append(made, c)
			}
		},
	})
	a.recordCalls(r.Context(), id, made)
	calls.release(r.Context())
	if _, ok := errors.AsType[*quota.Exceeded](err); ok {
		return httpapi.About("quota", err)
	}
	if err != nil {
		// The provider's faults are not the server's: logged for the
		// operator at debug, as the answer carries them to the client.
		a.Log.Debug("embeddings failed", "org", id.Org, "profile", target.Profile, "err", err)
		return httpapi.About("embeddings", embeddingProblem(err, time.Now()))
	}
	a.Log.Debug("embeddings", "org", id.Org, "profile", res.ProfileID, "run_id", res.RunID, "inputs", len(params.Input), "attempts", res.Attempts)
	httpapi.WriteJSON(w, http.StatusOK, openaiapi.Embeddings(res.Embeddings, res.Model, res.Usage, params.Base64))
	return nil
}

// callReservations are the reservations of an embeddings request's calls
// under its org's and token's budgets (quota.Quotas.Call).
type callReservations struct {
	a    *API
	id   auth.Identity
	held []quota.Reservation
}

// reserve is the request's BeforeCall: a call lasts until deadline at
// most, and its reservation as long, with a margin for the ledger write.
func (c *callReservations) reserve(deadline time.Time) promptkit.BeforeCallFunc {
	q := c.a.Jobs.Quotas
	if q == nil {
		return nil
	}
	return func(ctx context.Context, est promptkit.CallEstimate) error {
		r, err := q.Call(ctx, submit.Subject(c.id), est, time.Until(deadline)+time.Minute)
		if err != nil {
			if errors.Is(err, quota.ErrExceeded) {
				return err
			}
			// The request was admitted; its calls are in the ledger all
			// the same.
			c.a.Log.Warn("embeddings: reserving a call's budget failed; the call goes unreserved", "org", c.id.Org, "err", err)
			return nil
		}
		c.held = append(c.held, r)
		return nil
	}
}

// release returns the reservations, once the calls are in the ledger.
func (c *callReservations) release(ctx context.Context) {
	for i := range c.held {
		if err := c.held[i].Release(context.WithoutCancel(ctx)); err != nil {
			c.a.Log.Debug("embeddings: releasing a call's budget failed; it expires", "org", c.id.Org, "err", err)
		}
	}
}

// recordCalls adds an embeddings request's provider calls to the usage
// ledger, so that spend and budgets count them like a job's. The answer
// does not wait on it failing: the store's health reports a failing write,
// and the operator is told.
func (a *API) recordCalls(ctx context.Context, id auth.Identity, calls []jobs.UsageCall) {
	if len(calls) == 0 {
		return
	}
	err := a.Store.RecordCalls(context.WithoutCancel(ctx), jobs.RecordCallsParams{
		OrgID: id.Org, UserID: id.User, TokenID: id.TokenID(), Calls: calls})
	if err != nil {
		a.Log.Warn("embeddings: recording usage failed", "org", id.Org, "calls", len(calls), "err", err)
	}
}

// embeddingProblem is the answer for an engine error, by the job failure
// policy's kinds (jobs.Classify), answered as a failed chat job's
// (openaiapi.JobError), so that one table decides both: 429 for the
// provider's rate limit (with its Retry-After, else the 60 s a worker
// waits), 400 for a request the provider or the engine refused, 502 for
// the provider's faults, 504 for a timeout. A capacity refusal is a 429
// when it names when to come back (a backend pause past the deadline),
// else a 503. The engine's error text names statuses and kinds, never
// inputs or provider text. A client that went away gets its context error
// back, which the pipeline does not answer.
func embeddingProblem(err error, now time.Time) error {
	if errors.Is(err, context.Canceled) {
		return err
	}
	nb, hasNB := promptkit.NotBefore(err)
	retryAfter := func(fallback time.Duration) time.Duration {
		if hasNB && nb.After(now) {
			return nb.Sub(now)
		}
		return fallback
	}
	// A wait cut short by the timeout is a timeout (below), not capacity.
	if errors.Is(err, promptkit.ErrCapacity) && !errors.Is(err, context.DeadlineExceeded) {
		if hasNB {
			return &httpapi.Problem{Status: http.StatusTooManyRequests, Code: "rate_limit_exceeded", RetryAfter: retryAfter(time.Second),
				Message: "The backend is paused by its provider's rate limit beyond the server's timeout; retry after the Retry-After delay."}
		}
		return &httpapi.Problem{Status: http.StatusServiceUnavailable, Code: "server_overloaded", RetryAfter: capacityRetryAfter,
			Message: "The server is at capacity; retry after the Retry-After delay."}
	}
	f := jobs.Classify(err)
	status, body := openaiapi.JobError(jobs.Job{State: jobs.Failed, ErrorKind: f.Kind, ErrorMessage: err.Error()})
	p := &httpapi.Problem{Status: status, Message: body.Error.Message}
	if body.Error.Code != nil {
		p.Code = *body.Error.Code
	}
	if status == http.StatusTooManyRequests {
		p.RetryAfter = retryAfter(jobRateLimitRetryAfter)
	}
	if status == http.StatusInternalServerError {
		p.Cause = err // promptkit's own fault: logged with the route, never sent
	}
	return p
}
