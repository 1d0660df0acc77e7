// Package finish says what the job stores' finishing writes do to a job
// running under a worker — Succeed, Requeue, Fail, AppendAttempt and
// Reclaim's decisions — and what event records each, so that both stores
// apply the same Write and only move rows.
package finish

import (
	"encoding/json"
	"time"

	"github.com/promptkit/promptkit/jobs"
)

// Write is one write to a job running under Worker. A store applies it
// only while the job is running under Worker; otherwise it changes nothing
// and the call gets jobs.ErrNotClaimed.
type Write struct {
	JobID  string
	Worker string
	// To is the state the job moves to: succeeded, queued or failed.
	// Empty for an attempt, which only appends an event.
	To jobs.State
	// ClearClaim says the job leaves its worker (it goes back to the
	// queue): its worker_claim, claimed_at, started_at,
	// running_heartbeat_at and finished_at become NULL. Otherwise they
	// stay, and a transition's finished_at is the transaction's time.
	// The stores apply it as it is; they do not re-decide it from To.
	ClearClaim bool
	// Attempts is added to the job's attempt count.
	Attempts int
	// AvailableAt is a requeued job's not-before time; zero means the
	// transaction's time.
	AvailableAt time.Time
	// Kind and Message are the job's error_kind and error_message (empty
	// clears them).
	Kind    jobs.ErrorKind
	Message string
	// Data is the event's data: jobs.TransitionData for a transition, the
	// caller's for an attempt.
	Data json.RawMessage
	// Answer is the answer of a job that succeeded (normalized, see
	// jobs.Answer.Normalize); zero for any other write. A store writes it
	// with AnswerJSON's encoding of its usage and tool calls.
	Answer jobs.Answer
	// AttemptEvents are attempt events recorded before a transition's event,
	// in the same transaction (jobs.SucceedParams.AttemptEvents).
	AttemptEvents []json.RawMessage
	// Calls are the usage ledger's rows the write adds with its events:
	// the dispatched calls its attempt events report (jobs.UsageCalls),
	// or a reclaimed job's lost call (jobs.LostCall).
	Calls []jobs.UsageCall
}

// Transition reports whether w changes the job's state.
func (w Write) Transition() bool { return w.To != "" }

// Succeed is the write of a normalized SucceedParams.
func Succeed(p jobs.SucceedParams) Write {
	return Write{JobID: p.JobID, Worker: p.Worker, To: jobs.Succeeded, Answer: p.Answer, AttemptEvents: p.AttemptEvents,
		Calls: jobs.UsageCalls(p.AttemptEvents...)}
}

// AnswerJSON is the stored JSON of w's answer's usage and tool calls, the
// one encoding both stores write: toolCalls is nil when there are none,
// and both are nil for a write that is not a success (it stores no
// answer).
func (w Write) AnswerJSON() (usage, toolCalls json.RawMessage) {
	if w.To != jobs.Succeeded {
		return nil, nil
	}
	// Neither can fail: Usage's MarshalJSON writes counts and nulls, and
	// tool calls are strings.
	usage, _ = json.Marshal(w.Answer.Usage)
	if len(w.Answer.ToolCalls) > 0 {
		toolCalls, _ = json.Marshal(w.Answer.ToolCalls)
	}
	return usage, toolCalls
}

// Requeue is the write of a normalized RequeueParams: a hand-back spends
// no attempt.
func Requeue(p jobs.RequeueParams) Write {
	w := Write{JobID: p.JobID, Worker: p.Worker, To: jobs.Queued, ClearClaim: true, Attempts: 1, AvailableAt: p.AvailableAt,
		Kind: p.Kind, Message: p.Message, AttemptEvents: p.AttemptEvents, Calls: jobs.UsageCalls(p.AttemptEvents...),
		Data: jobs.TransitionData{Worker: p.Worker, ErrorKind: p.Kind, ErrorMessage: p.Message, Handback: p.Handback}.JSON()}
	if p.Handback {
		w.Attempts = 0
	}
	return w
}

// Fail is the write of a normalized FailParams.
func Fail(p jobs.FailParams) Write {
	return Write{JobID: p.JobID, Worker: p.Worker, To: jobs.Failed, Kind: p.Kind, Message: p.Message, AttemptEvents: p.AttemptEvents,
		Calls: jobs.UsageCalls(p.AttemptEvents...),
		Data:  jobs.TransitionData{Worker: p.Worker, ErrorKind: p.Kind, ErrorMessage: p.Message}.JSON()}
}

// Attempt is the write of a normalized AttemptParams.
func Attempt(p jobs.AttemptParams) Write {
	return Write{JobID: p.JobID, Worker: p.Worker, Data: p.Data, Calls: jobs.UsageCalls(p.Data)}
}

// Reclaim is the write that applies d to j, a running job whose worker
// was lost: it is conditioned on j's claim, and its event names the lost
// worker. A requeued job spends an attempt and is available at once. The
// lost worker's last call may have gone out unrecorded: the ledger gets a
// row of unknown usage and cost for it.
func Reclaim(j jobs.Job, d jobs.ReclaimDecision) Write {
	w := Write{JobID: j.ID, Worker: j.WorkerClaim, To: d.To, Kind: d.Kind, Message: d.Message, Calls: []jobs.UsageCall{jobs.LostCall},
		Data: jobs.TransitionData{Worker: j.WorkerClaim, ErrorKind: d.Kind, ErrorMessage: d.Message}.JSON()}
	if d.To == jobs.Queued {
		w.Attempts, w.ClearClaim = 1, true
	}
	return w
}
