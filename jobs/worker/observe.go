package worker

import (
	"cmp"
	"errors"
	"time"

	"github.com/promptkit/promptkit"
	"github.com/promptkit/promptkit/jobs"
)

// JobEvent is one claim or settlement, as Config.Observe sees it.
type JobEvent struct {
	// Job is the job as claimed.
	Job jobs.Job
	// Claimed is true for a claim. Waited is then how long the job had
	// been available before this claim: claimed_at minus the later of
	// created_at and available_at (all on the store's clock), never
	// negative.
	Claimed bool
	Waited  time.Duration
	// Direct is true for a claim made as the job was stored: RunNow ran
	// it at once instead of queueing it (the interactive fast path).
	Direct bool
	// For a settlement, Outcome says what the worker did (one of the
	// Outcome constants) and Ran is the time from the start of the job's
	// execution to the moment its result was in hand, on the worker's
	// clock (Config.Now).
	Outcome string
	Ran     time.Duration
}

// Settlement outcomes of a JobEvent.
const (
	// OutcomeSucceeded: the response was written and the job succeeded.
	OutcomeSucceeded = "succeeded"
	// OutcomeFailed: the job failed for good.
	OutcomeFailed = "failed"
	// OutcomeRetried: the job went back to the queue, spending an attempt.
	OutcomeRetried = "retried"
	// OutcomeHandedBack: the job went back to the queue without spending
	// an attempt (shutdown, or a provider pause past its deadline).
	OutcomeHandedBack = "handed_back"
	// OutcomeDiscarded: the job was no longer ours (cancelled, or
	// reclaimed by another worker), so its result was dropped.
	OutcomeDiscarded = "discarded"
	// OutcomeWriteFailed: the settling write kept failing; the job stays
	// running until the reclaim loop takes it back.
	OutcomeWriteFailed = "write_failed"
)

// Outcomes lists the settlement outcomes, for consumers that set up
// per-outcome series ahead of time.
func Outcomes() []string {
	return []string{OutcomeSucceeded, OutcomeFailed, OutcomeRetried, OutcomeHandedBack, OutcomeDiscarded, OutcomeWriteFailed}
}

// observeClaims tells Config.Observe about freshly claimed jobs, direct
// ones (RunNow) or from the queue.
func (w *Worker) observeClaims(claimed []jobs.Job, direct bool) {
	if w.cfg.Observe == nil {
		return
	}
	for _, j := range claimed {
		// The store stamps claimed_at on the same clock as created_at and
		// available_at; the worker's clock is only a fallback.
		at := j.ClaimedAt
		if at.IsZero() {
			at = w.cfg.Now()
		}
		from := j.CreatedAt
		if j.AvailableAt.After(from) {
			from = j.AvailableAt
		}
		w.cfg.Observe(JobEvent{Job: j, Claimed: true, Waited: max(at.Sub(from), 0), Direct: direct})
	}
}

// settled logs how the write wr, which apply finished with err, settled
// job j after it ran for ran, and tells Config.Observe.
func (w *Worker) settled(j jobs.Job, wr write, err error, ran time.Duration) {
	out := settledOutcome(wr, err)
	ran = max(ran, 0)
	w.logSettled(j, wr, out, ran)
	if w.cfg.Observe != nil {
		w.cfg.Observe(JobEvent{Job: j, Outcome: out, Ran: ran})
	}
}

// settledOutcome names what the write wr, which apply finished with err,
// did: one of the Outcome constants.
func settledOutcome(wr write, err error) string {
	switch {
	case wr.op == opDiscard || errors.Is(err, jobs.ErrNotClaimed):
		return OutcomeDiscarded
	case err != nil:
		return OutcomeWriteFailed
	case wr.op == opSucceed:
		return OutcomeSucceeded
	case wr.op == opFail:
		return OutcomeFailed
	case wr.requeue.Handback:
		return OutcomeHandedBack
	}
	return OutcomeRetried
}

// logSettled logs one Info line per settled job attempt: the job and
// prompt IDs, the outcome, the job's new state, its error kind and how
// long it ran — never prompt, output or provider text. A write that kept
// failing (OutcomeWriteFailed) has apply's error line instead.
func (w *Worker) logSettled(j jobs.Job, wr write, out string, ran time.Duration) {
	attrs := []any{"job", j.ID, "prompt", j.PromptID, "outcome", out}
	switch out {
	case OutcomeWriteFailed:
		return
	case OutcomeSucceeded:
		attrs = append(attrs, "state", jobs.Succeeded)
	case OutcomeFailed:
		attrs = append(attrs, "state", jobs.Failed, "error_kind", cmp.Or(wr.fail.Kind, jobs.KindUnknown))
	case OutcomeRetried, OutcomeHandedBack:
		attrs = append(attrs, "state", jobs.Queued)
		if wr.requeue.Kind != jobs.KindNone {
			attrs = append(attrs, "error_kind", wr.requeue.Kind)
		}
		attrs = append(attrs, "available_at", wr.requeue.AvailableAt)
	case OutcomeDiscarded:
		attrs = append(attrs, "reason", "no longer claimed: cancelled or reclaimed")
		if wr.op != opDiscard {
			attrs = append(attrs, "dropped", wr.op)
		}
	}
	attrs = append(attrs, "attempt", j.Attempt, "max_attempts", j.MaxAttempts, "duration", ran)
	w.log.Info("job settled", attrs...)
}

// chainObservers returns an observer calling first, then second (if set).
func chainObservers(first, second promptkit.ExecutionObserver) promptkit.ExecutionObserver {
	if second == nil {
		return first
	}
	return func(ev promptkit.ExecutionEvent) {
		first(ev)
		second(ev)
	}
}
