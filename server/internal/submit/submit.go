// Package submit is how a request becomes a job, and how the server
// waits for one, for every API that queues work (promptkit's POST
// /v1/prompts, OpenAI's chat completions): Admit spends the identity's
// submission, checks its org's and token's limits (Take), applies the
// admission check and enqueues as the identity under
// its Idempotency-Key (or, for a repeat the route coalesces, the key
// SameRequestKey derives); AwaitJob waits for the job through the events
// hub.
package submit

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"time"

	"github.com/promptkit/promptkit/jobs"
	"github.com/promptkit/promptkit/jobs/quota"
	"github.com/promptkit/promptkit/server/internal/auth"
	"github.com/promptkit/promptkit/server/internal/events"
	"github.com/promptkit/promptkit/server/internal/httpapi"
)

// Jobs queues and waits for the jobs of requests.
type Jobs struct {
	Store jobs.Store
	Auth  *auth.Auth
	Hub   *events.Hub
	// Quotas enforces the stored limits' rates and budgets of the
	// identity's org and token; nil: none.
	Quotas *quota.Quotas
	// Check refuses what no worker could run; nil: the store's own rules
	// only.
	Check jobs.CheckFunc
	// Serving ends when the server closes: waits then answer at once.
	Serving context.Context
	// RunNow, when set, runs a job a caller will wait for at once in a
	// free slot of this process's worker (the interactive fast path);
	// nil: every job goes through the queue.
	RunNow jobs.RunNowFunc
}

// Admitted is a request admitted as a job. When this process's worker
// runs it (Jobs.RunNow), done receives the job as the worker settled it.
type Admitted struct {
	jobs.Enqueued
	done <-chan jobs.Job
}

// Take spends one of the identity's submissions (the server's
// per-identity rate, auth.Auth.Take) and admits it under its org's and
// its token's limits (quota.Quotas.Admit): the reservation of one
// request, which the caller releases when the request turns out not to
// make the provider work (refused, or the repeat of a job already
// queued); or a 429 problem naming what was reached. Every route that
// makes the provider work takes one.
func (s Jobs) Take(ctx context.Context, id auth.Identity) (quota.Reservation, error) {
	if err := s.Auth.Take(id); err != nil {
		return quota.Reservation{}, err
	}
	if s.Quotas == nil {
		return quota.Reservation{}, nil
	}
	r, err := s.Quotas.Admit(ctx, Subject(id))
	return r, httpapi.About("quota", err)
}

// Subject is whom the identity's requests spend for.
func Subject(id auth.Identity) quota.Subject {
	return quota.Subject{Org: id.Org, Token: id.TokenID()}
}

// Spendable checks only the budgets of the identity's org and token
// (creating a batch, whose lines are checked again as they run): nil, or
// a 429 problem naming the budget spent.
func (s Jobs) Spendable(ctx context.Context, id auth.Identity) error {
	if s.Quotas == nil {
		return nil
	}
	return httpapi.About("quota", s.Quotas.Spendable(ctx, Subject(id)))
}

// Admit queues p (normalized) as the identity: one of its submissions is
// taken (Take), the admission check applied, and with an Idempotency-Key the
// request's hash (of its meaning, without org or user) is stored with the
// user, so a repeat finds the same job and another member reusing the key
// gets a conflict. what names the operation in errors ("submission").
// With now (the caller waits for the answer) and RunNow set, a free
// worker slot of this process runs the job at once; otherwise, or with
// no slot free, it is queued.
func (s Jobs) Admit(ctx context.Context, id auth.Identity, p jobs.EnqueueParams, key, hash, what string, now bool) (a Admitted, err error) {
	r, err := s.Take(ctx, id)
	if err != nil {
		return Admitted{}, err
	}
	defer func() {
		if err != nil || a.Existing {
			// Nothing new for the provider to do: the request does not
			// count.
			_ = r.Release(context.WithoutCancel(ctx))
		}
	}()
	if s.Check != nil {
		if err := s.Check(ctx, p); err != nil {
			return Admitted{}, httpapi.About(what, err)
		}
	}
	p.OrgID, p.CreatedBy, p.ReferenceUser, p.TokenID = id.Org, id.User, id.CreatedBy(), id.TokenID()
	if key != "" {
		p.IdempotencyKey, p.RequestHash = key, httpapi.Fingerprint(id.User, hash)
	}
	if now && s.RunNow != nil {
		e, done, err := s.RunNow(ctx, p)
		if !errors.Is(err, jobs.ErrNoSlot) {
			if err != nil {
				return Admitted{}, httpapi.About(what, err)
			}
			return Admitted{Enqueued: e, done: done}, nil
		}
	}
	e, err := s.Store.Enqueue(ctx, p)
	if err != nil {
		return Admitted{}, httpapi.About(what, err)
	}
	return Admitted{Enqueued: e}, nil
}

// SameRequestKey is the Idempotency-Key of a request sent without one,
// for a route that coalesces repeats (POST /v1/chat/completions): derived
// from the caller (its user and token) and the request's hash, so the
// same request from the same caller finds the same job, and another
// caller's never does. The caller sets it to expire
// (jobs.EnqueueParams.KeyExpires), so that a request sent long after
// runs afresh; Admit stores it like a key the client sent.
func SameRequestKey(id auth.Identity, hash string) string {
	sum := sha256.Sum256([]byte(id.User + "\x00" + id.Key + "\x00" + hash))
	return sameRequestPrefix + hex.EncodeToString(sum[:])
}

// sameRequestPrefix marks a derived key in the stored prompt, so that a
// reader of GET /v1/prompts/{id} can tell it from a client's.
const sameRequestPrefix = "same-request:"

// AwaitJob waits up to wait for the admitted job, or jobID (a retry
// superseding it), to end, woken by the hub's events of its prompt; when
// serving ends (the server closes) it looks once more and returns. A job
// this process's worker runs (Admit's RunNow) is answered as the worker
// settles it, without a look at the store, unless it went back to the
// queue. Every wait of the server for a job is this one.
func (s Jobs) AwaitJob(ctx context.Context, org string, a Admitted, jobID string, wait time.Duration) (jobs.Job, error) {
	end, cancel := context.WithTimeout(s.Serving, wait)
	defer cancel()
	if a.done != nil && jobID == a.JobID {
		select {
		case j, ok := <-a.done:
			if ok && j.State.Terminal() {
				return j, nil
			}
		case <-end.Done():
		case <-ctx.Done():
			return jobs.Job{}, ctx.Err()
		}
	}
	wake, stop := s.Hub.Wake(func(e jobs.Event) bool { return e.PromptID == a.PromptID })
	defer stop()
	return jobs.AwaitJob(ctx, s.Store, org, jobID, wake, end.Done())
}
