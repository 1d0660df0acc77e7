// Package jobs is the durable job service's domain: prompts, jobs and their
// state machine, responses, the append-only event log, and the Store
// interface that the SQLite and PostgreSQL stores implement with one
// behaviour (jobs/jobstest is the conformance suite both run).
//
// # What is where
//
// The package holds every row a store keeps, because the Store contract
// names them all; by file:
//
//   - jobs.go, params.go, check.go, policy.go, details.go, bulk.go,
//     deleteprompt.go, await.go: prompts,
//     jobs, their states and events, the parameter rules, the failure
//     policy (what is retried, after how long), job histories, bulk
//     actions, and the one wait (Await);
//   - chat.go, embedding.go, responses.go, dialect.go: requests and answers
//     in promptkit's own terms (no API dialect's shapes), the stored
//     Responses request, and what a dialect's codec hands the service
//     (RequestError, Target);
//   - batch.go: files and batches, and the batch state machine;
//   - limits.go, reserve.go, usage.go: limits per org and token,
//     admission reservations, and the usage ledger with its spend reads;
//   - tokens.go, workers.go, pacing.go: API tokens, worker processes'
//     beats and drains, and shared backend pacing;
//   - store.go, notifier.go: the Store contract (rows) and the Notifier
//     (wake-ups and answer pieces, beside the rows).
//
// The rules the two drivers share live under jobs/internal (storeops,
// queue, finish, …); docs/architecture.md draws the layers.
//
// # States
//
// A job is queued, running, succeeded, failed, cancelled or superseded.
// The last four are terminal: a terminal job never changes again. The
// allowed transitions are exactly those Transitions lists; any other is an
// *TransitionError naming both states. A retry never revives a job: it
// creates a new job whose Supersedes names the old one, and moves the old
// one to superseded.
//
// # Double execution
//
// A claim stamps the job with the worker's claim token. Every finalizing
// write (succeed, requeue, fail, heartbeat) is conditioned on
// state = running AND worker_claim = the caller's token, so when a job was
// reclaimed and claimed again, the stale worker's writes change nothing and
// return ErrNotClaimed.
//
// # Event log ordering
//
// Every transition and every execution attempt appends a row to
// job_events with a sequence number. Readers page through events "after
// sequence N", so a row that commits later with a smaller sequence would
// be skipped forever — the classic trap with database sequences under
// concurrent transactions. Both stores avoid it the same way: a
// transaction stamps updated_at and allocates event sequence numbers only
// at its end, while holding a database-wide event lock until it commits
// (SQLite's single writer lock; a PostgreSQL transaction-scoped advisory
// lock, one per schema). Sequence order therefore equals commit order, and a reader that
// takes the same lock sees every change stamped before its as_of time.
//
// # Messaging
//
// Store holds rows; messaging lives beside it, in a Notifier
// (Store.Notifier): wake-ups when work may have changed, and the pieces
// of running jobs' answers as backends generate them. Consumers take it
// explicitly (worker.Config.Notifier, batch.Config.Notifier,
// server.Config.Notifier; each defaults to its store's). Both stores
// build on LocalNotifier, the in-process fan-out: SQLite's reaches other
// processes on the file only through its commits (it polls for them),
// PostgreSQL's LISTENs for the notifications its statements send and
// carries answer pieces between processes. A Notifier is a hint: readers
// still poll the store, and the stored answer is the answer.
package jobs

import (
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/google/uuid"

	"github.com/promptkit/promptkit/pktype"
)

// State is a job's lifecycle state.
type State string

// States.
const (
	Queued     State = "queued"
	Running    State = "running"
	Succeeded  State = "succeeded"
	Failed     State = "failed"
	Cancelled  State = "cancelled"
	Superseded State = "superseded"
)

// States returns every state, in lifecycle order.
func States() []State {
	return []State{Queued, Running, Succeeded, Failed, Cancelled, Superseded}
}

// Valid reports whether s is one of the six states.
func (s State) Valid() bool {
	switch s {
	case Queued, Running, Succeeded, Failed, Cancelled, Superseded:
		return true
	}
	return false
}

// Terminal reports whether s never changes again (except to superseded).
func (s State) Terminal() bool {
	return s == Succeeded || s == Failed || s == Cancelled || s == Superseded
}

// Transition is one allowed edge of the state machine.
type Transition struct {
	From, To State
	// Trigger says what causes it.
	Trigger string
}

// transitions is the state machine: every allowed edge, and nothing else.
var transitions = [...]Transition{
	{Queued, Running, "a worker claims the job"},
	{Queued, Cancelled, "a user or operator cancels before a claim"},
	{Running, Succeeded, "the response is written"},
	{Running, Queued, "transient failure with attempts left, reclaim after a lost heartbeat, or hand-back at shutdown"},
	{Running, Failed, "retry budget spent, non-retryable error, dependency failed, or stuck"},
	{Running, Cancelled, "a user or operator cancels; a late result is discarded"},
	{Succeeded, Superseded, "a retry replaces the result"},
	{Failed, Superseded, "a retry"},
	{Cancelled, Superseded, "a retry after cancel"},
}

// Transitions returns the state machine: every allowed edge, and nothing
// else.
func Transitions() []Transition { return slices.Clone(transitions[:]) }

// CanTransition reports whether from → to is allowed.
func CanTransition(from, to State) bool {
	for _, t := range transitions {
		if t.From == from && t.To == to {
			return true
		}
	}
	return false
}

// CheckTransition returns nil when from → to is allowed and a
// *TransitionError otherwise.
func CheckTransition(from, to State) error {
	if CanTransition(from, to) {
		return nil
	}
	return &TransitionError{From: from, To: to}
}

// ErrorKind classifies why a job attempt failed. Classify maps an error
// to its kind and Retryable says whether another attempt may help; see
// policy.go for the whole failure policy.
type ErrorKind string

// Error kinds.
const (
	KindNone        ErrorKind = ""
	KindTimeout     ErrorKind = "timeout"
	KindRateLimit   ErrorKind = "rate_limit"
	KindProvider5xx ErrorKind = "provider_5xx"
	KindProvider4xx ErrorKind = "provider_4xx"
	KindParse       ErrorKind = "parse"
	KindAuth        ErrorKind = "auth"
	KindWorkerCrash ErrorKind = "worker_crash"
	KindStuck       ErrorKind = "stuck"
	// KindTransport: the provider could not be reached or the connection
	// failed (refused, reset, DNS, TLS) before an answer came.
	KindTransport ErrorKind = "transport"
	KindUnknown   ErrorKind = "unknown"
	// KindInvalidRequest: the job's request cannot be built or sent as
	// given (unknown prompt or profile, inputs failing the input schema, a
	// template that does not render). Only a new request can fix it.
	KindInvalidRequest ErrorKind = "invalid_request"
	// KindDependencyFailed: the job's DependsOn job failed or was
	// cancelled.
	KindDependencyFailed ErrorKind = "dependency_failed"
	// KindUnstorable: the store refused the job's result (a value it
	// cannot hold); retrying would get the same answer and be refused
	// again.
	KindUnstorable ErrorKind = "unstorable"
	// KindBudgetExceeded: the job's org or token had spent its daily or
	// monthly budget when the job was to run, so no provider call was
	// made (see jobs/quota). Its message names the limit.
	KindBudgetExceeded ErrorKind = "budget_exceeded"
)

// Errors returned by stores. Match them with errors.Is.
var (
	// ErrNotFound: no prompt, job or response has that ID (in that org).
	ErrNotFound = errors.New("jobs: not found")
	// ErrNotClaimed: a finalizing write found the job no longer running
	// under the caller's claim; nothing was changed.
	ErrNotClaimed = errors.New("jobs: job is not running under this claim")
	// ErrIllegalTransition: the requested change is not an edge of the
	// state machine. The error is a *TransitionError.
	ErrIllegalTransition = errors.New("jobs: illegal transition")
	// ErrInvalid: parameters are unusable (bad priority, unknown parent…).
	ErrInvalid = errors.New("jobs: invalid parameters")
	// ErrIdempotencyConflict is an idempotency key repeated with a
	// different request (EnqueueParams.RequestHash).
	ErrIdempotencyConflict = errors.New("jobs: idempotency key reused with a different request")
	// ErrBudgetExceeded: an org's or token's daily or monthly budget is
	// spent (see jobs/quota); a job that meets it fails as
	// KindBudgetExceeded.
	ErrBudgetExceeded = errors.New("jobs: budget exceeded")
)

// TransitionError is an illegal transition; it matches ErrIllegalTransition.
type TransitionError struct {
	From, To State
}

func (e *TransitionError) Error() string {
	return fmt.Sprintf("jobs: illegal transition from %s to %s", e.From, e.To)
}

// Is reports ErrIllegalTransition.
func (e *TransitionError) Is(target error) bool { return target == ErrIllegalTransition }

// Prompt is a submitted prompt: ad-hoc text, or a named prompt with inputs.
type Prompt struct {
	ID            string          `json:"id"`
	OrgID         string          `json:"org_id"`
	CreatedBy     string          `json:"created_by"`
	ParentID      string          `json:"parent_id,omitempty"`
	CorrelationID string          `json:"correlation_id,omitempty"`
	Text          string          `json:"text,omitempty"`
	PromptRef     string          `json:"prompt_ref,omitempty"`
	Inputs        json.RawMessage `json:"inputs,omitempty"`
	Chat          *ChatRequest    `json:"chat,omitempty"`
	// Embedding is set for an embeddings request (a batch line for
	// /v1/embeddings): its job computes vectors, not text.
	Embedding      *EmbeddingRequest `json:"embedding,omitempty"`
	Profile        string            `json:"profile,omitempty"`
	BatchID        string            `json:"batch_id,omitempty"`
	CustomID       string            `json:"custom_id,omitempty"`
	IdempotencyKey string            `json:"idempotency_key,omitempty"`
	CreatedAt      time.Time         `json:"created_at"`
}

// Job is one execution of a prompt. Zero times mean "not set".
type Job struct {
	ID               string           `json:"id"`
	PromptID         string           `json:"prompt_id"`
	State            State            `json:"state"`
	Priority         int              `json:"priority"`
	Attempt          int              `json:"attempt"`
	MaxAttempts      int              `json:"max_attempts"`
	ExecutionOptions ExecutionOptions `json:"execution_options"`
	WorkerClaim      string           `json:"worker_claim,omitempty"`
	ClaimedAt        time.Time        `json:"claimed_at,omitzero"`
	StartedAt        time.Time        `json:"started_at,omitzero"`
	HeartbeatAt      time.Time        `json:"running_heartbeat_at,omitzero"`
	FinishedAt       time.Time        `json:"finished_at,omitzero"`
	ResponseID       string           `json:"response_id,omitempty"`
	ErrorKind        ErrorKind        `json:"error_kind,omitempty"`
	ErrorMessage     string           `json:"error_message,omitempty"`
	Supersedes       string           `json:"supersedes,omitempty"`
	DependsOn        string           `json:"depends_on,omitempty"`
	OrgID            string           `json:"org_id"`
	CreatedBy        string           `json:"created_by"`
	// TokenID is the API token the job was submitted with; empty without
	// one (local mode, a job made in process). A retry keeps it.
	TokenID     string    `json:"token_id,omitempty"`
	CreatedAt   time.Time `json:"created_at"`
	UpdatedAt   time.Time `json:"updated_at"`
	AvailableAt time.Time `json:"available_at"`
}

// Answer is a finished job's answer, as the worker hands it to the store
// (SucceedParams.Answer) and the store gives it back (Response.Answer):
// the service's one form of it. The engine's is promptkit.RunResult,
// which the worker turns into an Answer. Its JSON is Response's fields.
type Answer struct {
	Output string          `json:"output"`
	Parsed json.RawMessage `json:"parsed,omitempty"`
	Model  string          `json:"model,omitempty"`
	// FinishReason is the final generation's finish_reason, "" when the
	// provider sent none.
	FinishReason string `json:"finish_reason,omitempty"`
	// Backend is the backend that answered (promptkit.RunResult.BackendID):
	// with a model group (docs/routing.md), one of the profile's backends.
	Backend string `json:"backend,omitempty"`
	// ToolCalls are the tools the model called instead of (or beside)
	// answering, when the request offered tools.
	ToolCalls []pktype.ToolCall `json:"tool_calls,omitempty"`
	// Usage is the run's token usage; an unknown count is null in JSON.
	Usage pktype.Usage `json:"usage"`
	// Body is the final generation's answer as the backend sent it
	// (promptkit.RunResult.Raw; stored as AnswerBody makes it): every
	// choice and field, those promptkit does not model too (reasoning,
	// logprobs, system_fingerprint, usage details, ...). Nil for an
	// answer stored before it was kept, from an injected client, or an
	// embedding.
	Body json.RawMessage `json:"body,omitempty"`
}

// Response is a job's stored answer. Its ID is ResponseID(PromptID,
// JobID), so a second write for the same job collides on the primary key.
type Response struct {
	ID       string `json:"id"`
	PromptID string `json:"prompt_id"`
	JobID    string `json:"job_id"`
	Answer
	CreatedAt time.Time `json:"created_at"`
}

// responseNamespace scopes deterministic response IDs.
var responseNamespace = uuid.MustParse("6f2b4c1e-8d3a-5b7f-9e0c-2a1d4f6b8c3e")

// ResponseID is the deterministic response ID for a prompt's job: a
// name-based UUIDv8 from SHA-256 of the namespace and "promptID/jobID"
// (PostgreSQL computes the same ID inside the statement that writes the
// response; its core has SHA-256 but no SHA-1).
func ResponseID(promptID, jobID string) string {
	return uuid.NewHash(sha256.New(), responseNamespace, []byte(promptID+"/"+jobID), 8).String()
}

// NewID returns a new time-ordered ID (UUIDv7).
func NewID() string {
	return uuid.Must(uuid.NewV7()).String()
}

// EventType says what an event records.
type EventType string

// Event types.
const (
	// EventTransition: a job changed state (From → To); the first event of
	// a job has From empty and To queued.
	EventTransition EventType = "transition"
	// EventAttempt: one execution attempt the engine observed (Data holds
	// status, timings and usage).
	EventAttempt EventType = "attempt"
)

// Event is one row of the append-only event log.
type Event struct {
	Seq      int64  `json:"seq"`
	JobID    string `json:"job_id"`
	PromptID string `json:"prompt_id"`
	OrgID    string `json:"org_id"`
	// CreatedBy is the job's creator, and Attempt the job's attempt when
	// the event was read (EventsAfter fills both; JobEvents leaves them
	// zero).
	CreatedBy string          `json:"created_by,omitempty"`
	Attempt   int             `json:"attempt,omitempty"`
	Type      EventType       `json:"type"`
	From      State           `json:"from,omitempty"`
	To        State           `json:"to,omitempty"`
	Data      json.RawMessage `json:"data,omitempty"`
	At        time.Time       `json:"at"`
}
