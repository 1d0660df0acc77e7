package worker_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/promptkit/promptkit"
	"github.com/promptkit/promptkit/jobs"
	"github.com/promptkit/promptkit/jobs/quota"
	"github.com/promptkit/promptkit/jobs/worker"
	"github.com/promptkit/promptkit/providertest"
)

// Config.Budget is asked before a run's first call: a spent budget fails
// the job as budget_exceeded, naming the limit, without a provider call;
// a failure to read the budget is a failed attempt, retried later. A
// reservation made is released once the job is settled, the call in the
// ledger.
func TestBudget(t *testing.T) {
	eachStore(t, func(t *testing.T, f *fixture) {
		f.srv.Enqueue(providertest.Reply("ok"))
		spent := &quota.Exceeded{Scope: jobs.LimitToken, Rule: quota.DailyBudget, Limit: 5}
		var answer error
		var asked, released []string
		w := f.worker("w1", func(c *worker.Config) {
			c.Budget = func(_ context.Context, j jobs.Job, _ promptkit.CallEstimate) (func(context.Context) error, error) {
				asked = append(asked, j.ID)
				return func(context.Context) error {
					if j := f.job(j.ID); !j.State.Terminal() {
						t.Errorf("released before the job was settled: %s", j.State)
					}
					released = append(released, j.ID)
					return nil
				}, answer
			}
		})

		free := f.enqueue(jobs.EnqueueParams{Text: "within budget"})
		f.runOnce(w, 1)
		if j := f.job(free.JobID); j.State != jobs.Succeeded || f.srv.Count() != 1 {
			t.Fatalf("within budget: state=%s kind=%q, provider saw %d", j.State, j.ErrorKind, f.srv.Count())
		}

		answer = spent
		over := f.enqueue(jobs.EnqueueParams{Text: "over budget", MaxAttempts: 3})
		f.runOnce(w, 1)
		j := f.job(over.JobID)
		if j.State != jobs.Failed || j.ErrorKind != jobs.KindBudgetExceeded || j.Attempt != 1 ||
			j.ErrorMessage != "the token's daily budget of $5.00 is reached" {
			t.Errorf("over budget: state=%s kind=%q attempt=%d msg=%q", j.State, j.ErrorKind, j.Attempt, j.ErrorMessage)
		}

		answer = errors.New("database down")
		unread := f.enqueue(jobs.EnqueueParams{Text: "budget unreadable", MaxAttempts: 3})
		f.runOnce(w, 1)
		if j := f.job(unread.JobID); j.State != jobs.Queued || j.ErrorKind != jobs.KindUnknown || j.Attempt != 2 {
			t.Errorf("budget unreadable: state=%s kind=%q attempt=%d, want queued, unknown, attempt 2", j.State, j.ErrorKind, j.Attempt)
		}

		if f.srv.Count() != 1 {
			t.Errorf("provider saw %d requests, want 1: a job over or without its budget called it", f.srv.Count())
		}
		if !eq(asked, []string{free.JobID, over.JobID, unread.JobID}) || !eq(released, []string{free.JobID}) {
			t.Errorf("Budget asked for %v, released %v", asked, released)
		}
	})
}

// The budget is asked again before each later call of a run (a transient
// retry here): spent meanwhile, the run ends there, with no further
// provider call, and the job fails budget_exceeded.
func TestBudgetBeforeLaterCalls(t *testing.T) {
	eachStore(t, func(t *testing.T, f *fixture) {
		f.srv.Enqueue(providertest.Status(503), providertest.Reply("never sent"))
		spent := &quota.Exceeded{Scope: jobs.LimitOrg, Rule: quota.DailyBudget, Limit: 1}
		asked := 0
		w := f.worker("w1", func(c *worker.Config) {
			c.Engine = f.engine(2)
			c.Budget = func(context.Context, jobs.Job, promptkit.CallEstimate) (func(context.Context) error, error) {
				asked++
				if asked == 1 {
					return func(context.Context) error { return nil }, nil // before the run: within budget
				}
				return nil, spent // before the retry: the 503's call spent it
			}
		})
		e := f.enqueue(jobs.EnqueueParams{Text: "retried", MaxAttempts: 3})
		f.runOnce(w, 1)
		j := f.job(e.JobID)
		if j.State != jobs.Failed || j.ErrorKind != jobs.KindBudgetExceeded || j.Attempt != 1 {
			t.Errorf("state=%s kind=%q attempt=%d, want failed budget_exceeded on attempt 1", j.State, j.ErrorKind, j.Attempt)
		}
		if f.srv.Count() != 1 || asked != 2 {
			t.Errorf("provider saw %d calls and the budget was asked %d times, want 1 and 2", f.srv.Count(), asked)
		}
		if evs, _ := f.events(e.JobID); !eq(evs, []string{"→queued", "queued→running", "attempt:503", "running→failed"}) {
			t.Errorf("events = %v", evs)
		}
	})
}

// A rate reached before a call (the org's tokens per minute, filled by
// the calls in flight) is a wait, not a failure: before the run's first
// call, the job goes back to the queue until the window frees, spending
// no attempt and making no call; before a later call, the attempt the
// earlier call made is spent.
func TestBudgetRateWaits(t *testing.T) {
	eachStore(t, func(t *testing.T, f *fixture) {
		f.srv.Enqueue(providertest.Status(503), providertest.Reply("never sent"))
		full := &quota.Exceeded{Scope: jobs.LimitOrg, Rule: quota.TokensPerMinute, Limit: 1000, RetryAfter: 40 * time.Second}
		asked := 0
		w := f.worker("w1", func(c *worker.Config) {
			c.Engine = f.engine(2)
			c.Budget = func(context.Context, jobs.Job, promptkit.CallEstimate) (func(context.Context) error, error) {
				asked++
				if asked == 2 {
					return func(context.Context) error { return nil }, nil // the first run's first call
				}
				return nil, full
			}
		})
		e := f.enqueue(jobs.EnqueueParams{Text: "paced", MaxAttempts: 3})
		start := f.clock.Now()
		f.runOnce(w, 1)
		j := f.job(e.JobID)
		if j.State != jobs.Queued || j.ErrorKind != jobs.KindRateLimit || j.Attempt != 1 || !j.AvailableAt.Equal(start.Add(40*time.Second)) ||
			j.ErrorMessage != "the organisation's limit of 1000 tokens per minute is reached" || f.srv.Count() != 0 {
			t.Fatalf("before the first call: state=%s kind=%q attempt=%d available=%v msg=%q, provider saw %d; want queued rate_limit attempt 1 at +40s, no call",
				j.State, j.ErrorKind, j.Attempt, j.AvailableAt.Sub(start), j.ErrorMessage, f.srv.Count())
		}
		// Its window passed: the first call goes (a 503), the retry waits.
		f.clock.Advance(40 * time.Second)
		f.runOnce(w, 1)
		j = f.job(e.JobID)
		if j.State != jobs.Queued || j.ErrorKind != jobs.KindRateLimit || j.Attempt != 2 || f.srv.Count() != 1 {
			t.Errorf("before a later call: state=%s kind=%q attempt=%d, provider saw %d; want queued rate_limit attempt 2 after 1 call",
				j.State, j.ErrorKind, j.Attempt, f.srv.Count())
		}
	})
}
