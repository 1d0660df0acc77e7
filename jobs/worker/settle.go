package worker

import (
	"errors"
	"time"

	"github.com/promptkit/promptkit"
	"github.com/promptkit/promptkit/jobs"
)

// op is the kind of store write that settles a job.
type op string

const (
	opDiscard op = "discard" // the job is no longer ours: write nothing
	opSucceed op = "succeed"
	opRequeue op = "requeue"
	opFail    op = "fail"
)

// write is the store write that settles one job attempt, with the
// attempt events it carries (see attemptLog).
type write struct {
	op      op
	jobID   string
	succeed jobs.SucceedParams
	requeue jobs.RequeueParams
	fail    jobs.FailParams
}

// dropAttempts returns wr without its attempt events.
func (wr write) dropAttempts() write {
	wr.succeed.AttemptEvents, wr.requeue.AttemptEvents, wr.fail.AttemptEvents = nil, nil, nil
	return wr
}

// attempts reports how many attempt events wr carries.
func (wr write) attempts() int {
	return len(wr.succeed.AttemptEvents) + len(wr.requeue.AttemptEvents) + len(wr.fail.AttemptEvents)
}

// answer is the service's form of the engine's result: the one place a
// promptkit.RunResult becomes a jobs.Answer.
func answer(res *promptkit.RunResult) jobs.Answer {
	return jobs.Answer{Output: res.Text, Parsed: res.Output, Model: res.Model, FinishReason: res.FinishReason,
		Backend: res.BackendID, ToolCalls: res.ToolCalls, Usage: res.Usage, Body: res.Raw}
}

// settle decides, from a job and what became of its attempt, the store
// write that finishes the attempt: the jobs package's failure policy
// applied by worker at now. It does no I/O.
// msgPastDeadline ends the message of a job failed rather than retried
// after its client's deadline.
const msgPastDeadline = "; not retried: the next attempt would start after the client stops waiting"

func settle(j jobs.Job, o outcome, worker string, now time.Time, jitter func(time.Duration) time.Duration) write {
	succeed := func(res *promptkit.RunResult) write {
		return write{op: opSucceed, jobID: j.ID, succeed: jobs.SucceedParams{JobID: j.ID, Worker: worker,
			Answer: answer(res), AttemptEvents: o.attempts}}
	}
	requeue := func(at time.Time, kind jobs.ErrorKind, msg string, handback bool) write {
		return write{op: opRequeue, jobID: j.ID, requeue: jobs.RequeueParams{JobID: j.ID, Worker: worker,
			AvailableAt: at, Kind: kind, Message: msg, Handback: handback, AttemptEvents: o.attempts}}
	}
	fail := func(kind jobs.ErrorKind, msg string) write {
		return write{op: opFail, jobID: j.ID, fail: jobs.FailParams{JobID: j.ID, Worker: worker, Kind: kind, Message: msg,
			AttemptEvents: o.attempts}}
	}
	// The engine resolves Retry-After on the wall clock; available_at is
	// on the worker's (and store's) clock. Carry a time over, measured from
	// the run's start so a wait is never shortened.
	onClock := func(t time.Time) time.Time { return o.clockStart.Add(t.Sub(o.wallStart)) }

	switch {
	case errors.Is(o.stopped, errCancelled):
		return write{op: opDiscard, jobID: j.ID}
	case errors.Is(o.stopped, errShutdown):
		return requeue(now, jobs.KindNone, "", true)
	case o.refused != "":
		return fail(o.refused, o.reason)
	case o.err == nil && o.res.Validation.Status == promptkit.ValidationInvalid:
		// Says whether the output was cut off at the token limit; never
		// quotes the output.
		return fail(jobs.KindParse, o.res.OutputProblem())
	case o.err == nil:
		return succeed(o.res)
	}
	// A job whose client stops waiting at a deadline is not put back to
	// run after it: the client gets this failure now, not its own timeout.
	late := func(at time.Time) bool { d, ok := j.Deadline(); return ok && at.After(d) }
	if !o.waitUntil.IsZero() {
		// The org's or token's rate is reached: the job waits for its
		// window as for a provider's Retry-After.
		if late(o.waitUntil) {
			return fail(jobs.KindRateLimit, o.reason+msgPastDeadline)
		}
		return requeue(o.waitUntil, jobs.KindRateLimit, o.reason, o.handback)
	}
	if nb, ok := promptkit.NotBefore(o.err); ok && errors.Is(o.err, promptkit.ErrCapacity) {
		// The backend is paused by the provider past this job's deadline:
		// nothing was sent, so no attempt is spent.
		if late(onClock(nb)) {
			return fail(jobs.KindRateLimit, "backend paused by the provider's Retry-After"+msgPastDeadline)
		}
		return requeue(onClock(nb), jobs.KindRateLimit, "backend paused by the provider's Retry-After", true)
	}
	f := jobs.Classify(o.err)
	if !f.RetryAfter.IsZero() {
		f.RetryAfter = onClock(f.RetryAfter)
	}
	if f.Kind.Retryable() && j.Attempt < j.MaxAttempts {
		at := jobs.Backoff(f, j.Attempt, now, jitter)
		if late(at) {
			return fail(f.Kind, o.err.Error()+msgPastDeadline)
		}
		return requeue(at, f.Kind, o.err.Error(), false)
	}
	return fail(f.Kind, o.err.Error())
}
