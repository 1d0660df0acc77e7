package worker

import (
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

// observeClaims tells Config.Observe about freshly claimed jobs.
func (w *Worker) observeClaims(claimed []jobs.Job) {
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
		w.cfg.Observe(JobEvent{Job: j, Claimed: true, Waited: max(at.Sub(from), 0)})
	}
}

// observeSettled tells Config.Observe how the write wr, which apply
// finished with err, settled job j after it ran for ran.
func (w *Worker) observeSettled(j jobs.Job, wr write, err error, ran time.Duration) {
	if w.cfg.Observe == nil {
		return
	}
	var out string
	switch {
	case wr.op == opDiscard || errors.Is(err, jobs.ErrNotClaimed):
		out = OutcomeDiscarded
	case err != nil:
		out = OutcomeWriteFailed
	case wr.op == opSucceed:
		out = OutcomeSucceeded
	case wr.op == opFail:
		out = OutcomeFailed
	case wr.requeue.Handback:
		out = OutcomeHandedBack
	default:
		out = OutcomeRetried
	}
	w.cfg.Observe(JobEvent{Job: j, Outcome: out, Ran: max(ran, 0)})
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
