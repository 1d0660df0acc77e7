package jobs

import (
	"context"
	"encoding/json"
	"io"
	"time"
)

// Store persists prompts, jobs, responses and events. Implementations:
// jobs/sqlitestore and jobs/pgstore; jobs/jobstest is the conformance
// suite that defines the behaviour both must have.
//
// All methods are safe for concurrent use, by many goroutines and by many
// processes sharing one database. Timestamps come from the store's clock
// (Options.Now), so tests can move time. IDs are UUIDv7 strings made by
// the store. Methods taking an org ID scope their reads to that org; an
// empty org ID means "any org" (operators). Every method normalizes its
// parameters with their Normalize method first, so the rules (defaults,
// bounds, what is invalid) are the same on every store; an invalid
// parameter is an error matching ErrInvalid.
type Store interface {
	// Enqueue inserts a prompt and its queued job in one transaction and
	// records the job's first event (→ queued). With an IdempotencyKey, a
	// repeat for the same org returns the first call's IDs and Existing
	// true, inserting nothing (unless the key expired: see KeyExpires).
	// Of concurrent calls with one expired key, one stores a new prompt
	// and the others return its IDs. Returns ErrInvalid for what
	// EnqueueParams.Normalize refuses, or a ParentID / DependsOn that does
	// not exist in the org.
	Enqueue(ctx context.Context, p EnqueueParams) (Enqueued, error)
	// EnqueueBatch enqueues many prompts in one transaction; results are
	// in input order. Either all are stored or none.
	EnqueueBatch(ctx context.Context, ps []EnqueueParams) ([]Enqueued, error)

	// Claim atomically moves up to Limit queued jobs to running under
	// Worker: lowest priority number first, then, among jobs of equal
	// priority, the orgs in turn by their shares (fair sharing, below),
	// each org's own jobs in the order they were queued; only jobs with
	// available_at <= now, priority <= PriorityCeiling, and whose
	// DependsOn job (if any) is no longer queued or running (terminal, or
	// archived), and never so many of one org's that more of its jobs run
	// than its Limit's MaxRunning (counting its running jobs on the
	// database; the others stay queued and hold up no other org's). It
	// sets claimed_at, started_at and running_heartbeat_at to now and
	// worker_claim to Worker, and keeps attempt. A job is claimed by at
	// most one caller, across goroutines and processes. Returns the
	// claimed jobs in claim order.
	//
	// Fair sharing is start-time fair queueing: a job gets a virtual start
	// tag when it is queued (by Enqueue, EnqueueBatch or Retry; a job
	// requeued keeps its tag): its org's previous tag at its priority, or
	// the smallest tag among the available queued jobs of that priority if
	// that is later (or, when none is queued, the largest tag ever given
	// at that priority), plus 1/weight (Limit.Weight; 1 without a limit).
	// Claim order within a priority is tag order, so an org that queued
	// thousands of jobs is served in turn with one that queues a few
	// later, and an org back from idling neither waits behind the others'
	// backlog nor jumps ahead of it.
	Claim(ctx context.Context, p ClaimParams) ([]Job, error)
	// Heartbeat sets running_heartbeat_at = now on the given jobs that are
	// running under Worker (updated_at is left alone), and returns how many
	// it updated; when that is fewer than the distinct IDs given, the
	// error is ErrNotClaimed as well. It never waits for a job another
	// transaction is changing (finishing, cancelling, reclaiming): that job
	// counts as not updated.
	Heartbeat(ctx context.Context, p HeartbeatParams) (int, error)
	// Claimed returns which of ids (in no particular order) are running
	// under worker, changing nothing: how a worker finds, in one read, the
	// runs to stop after a cancel or a reclaim.
	Claimed(ctx context.Context, worker string, ids []string) ([]string, error)

	// Succeed writes the response (ID ResponseID(prompt, job)) and moves
	// the job running → succeeded, only if it is running under Worker;
	// otherwise (an unknown job included) it changes nothing and returns
	// ErrNotClaimed. The same holds for Requeue, Fail and AppendAttempt.
	Succeed(ctx context.Context, p SucceedParams) (Job, error)
	// Requeue moves a job running under Worker back to queued with
	// available_at = AvailableAt, clearing the claim and recording the
	// error. Attempt increases by one unless Handback is set (a graceful
	// shutdown hands work back without spending an attempt). Returns
	// ErrNotClaimed when the job is not running under Worker.
	Requeue(ctx context.Context, p RequeueParams) (Job, error)
	// Fail moves a job running under Worker to failed with the kind and
	// message (which the caller has already redacted). ErrNotClaimed
	// otherwise.
	Fail(ctx context.Context, p FailParams) (Job, error)
	// AppendAttempt records one execution attempt of a job running under
	// Worker as an EventAttempt with Data. ErrNotClaimed otherwise.
	AppendAttempt(ctx context.Context, p AttemptParams) error

	// Cancel moves a queued or running job to cancelled. A terminal job
	// is a *TransitionError. A running job's worker finds out through
	// ErrNotClaimed on its next write (and through a notification); the
	// call it may have made since its last attempt event gets a usage
	// ledger row of unknown usage and cost (LostCall), as at Reclaim.
	// The cancelled event's data carries p.By and p.Bulk (TransitionData).
	Cancel(ctx context.Context, p CancelParams) (Job, error)
	// Retry creates a new queued job for the same prompt (attempt 1, the
	// old job's priority, max_attempts and options unless overridden,
	// Supersedes = old ID) and moves the old job to superseded, in one
	// transaction. Only succeeded, failed or cancelled jobs can be
	// retried; others are a *TransitionError. Both events' data carry
	// p.By and p.Bulk (TransitionData).
	Retry(ctx context.Context, p RetryParams) (Job, error)
	// Reclaim handles running jobs whose heartbeat is older than
	// ReclaimAfter (strictly: heartbeat < now − ReclaimAfter) as
	// ReclaimParams.Decide says: back to queued (available now, attempt +
	// 1, error_kind worker_crash) or failed as stuck, with its message and
	// an event naming the lost worker. A job another transaction is
	// finishing at that moment is left for the next sweep.
	Reclaim(ctx context.Context, p ReclaimParams) (Reclaimed, error)

	// GetPrompt, GetJob and GetResponse return ErrNotFound when the ID
	// does not exist in OrgID (empty: any org).
	GetPrompt(ctx context.Context, orgID, id string) (Prompt, error)
	GetJob(ctx context.Context, orgID, id string) (Job, error)
	GetResponse(ctx context.Context, orgID, id string) (Response, error)
	// GetPrompts and GetResponses read many prompts or responses in one
	// query, into a map keyed by ID (an ID given twice is one entry). An
	// ID that does not exist in OrgID (empty: any org) is simply absent;
	// it is no error. More than MaxListLimit IDs is ErrInvalid; none is
	// an empty map.
	GetPrompts(ctx context.Context, orgID string, ids []string) (map[string]Prompt, error)
	GetResponses(ctx context.Context, orgID string, ids []string) (map[string]Response, error)
	// PromptJobs returns every job of a prompt, oldest first (its retry
	// history). ErrNotFound for an unknown prompt.
	PromptJobs(ctx context.Context, orgID, promptID string) ([]Job, error)
	// JobEvents returns a job's events in sequence order; ErrNotFound for
	// an unknown job.
	JobEvents(ctx context.Context, orgID, jobID string) ([]Event, error)
	// Thread returns the conversation before a prompt, in one query: up to
	// Depth ancestors (following parent_id), oldest first, each with the
	// answer of its latest succeeded job. An ancestor that was archived
	// ends the thread. ErrNotFound for an unknown prompt.
	Thread(ctx context.Context, p ThreadParams) ([]Turn, error)
	// ListJobs returns jobs matching the filters, newest first, a page at
	// a time: pass the returned Next as After to continue (keyset
	// pagination on (created_at, id); stable under concurrent inserts).
	ListJobs(ctx context.Context, p ListParams) (JobPage, error)
	// CountJobs returns how many jobs match f exactly (ErrInvalid for
	// what JobFilter.Normalize refuses).
	CountJobs(ctx context.Context, f JobFilter) (int, error)
	// ChangesSince returns jobs whose updated_at is after Since (all jobs
	// when Since is zero), oldest change first, and AsOf: pass AsOf as the
	// next Since and no change is ever missed, even one committing
	// concurrently with this call. AsOf lies just below the store's clock
	// reading, so a change stamped in that same instant is returned again
	// rather than missed: a change may be returned twice.
	ChangesSince(ctx context.Context, p ChangesParams) (Changes, error)
	// EventsAfter returns up to Limit events with Seq > After in sequence
	// order. No event can commit later with a Seq at or below the last one
	// returned, so paging by Seq never misses one.
	EventsAfter(ctx context.Context, p EventsParams) ([]Event, error)
	// LatestEventSeq is the Seq of the newest event (0 when there is
	// none): EventsAfter from it returns only events committed later.
	LatestEventSeq(ctx context.Context) (int64, error)
	// Metrics counts jobs by state (every state present, zero included),
	// latency percentiles of jobs that succeeded, failed or were cancelled
	// since Since (superseded jobs are left out: their retry replaced the
	// outcome), error rate by kind, and with ByOrg the average and p95
	// latency per org and each org's jobs by state (OrgCounts).
	Metrics(ctx context.Context, p MetricsParams) (Metrics, error)
	// Archive deletes terminal jobs finished before Before, with their
	// events and responses, and prompts left without jobs, ArchiveBatch
	// jobs per transaction. Returns the number of jobs deleted (also with
	// an error: what was deleted stays deleted, consistently). Files and
	// batches are not archived (they stay until deleted); a batch's
	// prompts and jobs are archived like any others.
	Archive(ctx context.Context, before time.Time) (int, error)
	// DeletePrompt deletes a prompt whose jobs are all terminal, with its
	// jobs, their events and their responses, in one transaction.
	// ErrNotFound when the prompt does not exist in orgID (empty: any
	// org); ErrPromptActive, deleting nothing, when one of its jobs is
	// queued or running (cancel it first). Prompts that name it (ParentID,
	// a job's DependsOn) are left as they are, as Archive leaves them.
	DeletePrompt(ctx context.Context, orgID, id string) error

	// Usage sums the usage ledger: one row per dispatched provider call,
	// written in the same transaction as the attempt event that reports
	// the call (AppendAttempt, and the AttemptEvents of Succeed, Requeue
	// and Fail: only when the write takes effect), plus one row of unknown
	// usage and cost per running job Reclaim takes from a lost worker or
	// Cancel (or CancelBatchJobs) stops (jobs.LostCall). Rows carry the job's org, creator (user) and token,
	// the call's model and backend, and the store's time; they outlive the
	// job (Archive and DeletePrompt leave them). Buckets come in the order
	// of their group values (day first), one per group present.
	// ErrInvalid for what UsageParams.Normalize refuses.
	Usage(ctx context.Context, p UsageParams) ([]UsageBucket, error)
	// BackendActivity sums the ledger's calls per backend since Since
	// (store clock, inclusive), one entry per backend with calls, ordered
	// by backend. Lost calls (LostCall) have no known backend: they come
	// under Backend "".
	BackendActivity(ctx context.Context, since time.Time) ([]BackendActivity, error)

	// CreateToken stores a token's hash with its org, user and role.
	CreateToken(ctx context.Context, p CreateTokenParams) (Token, error)
	// ListTokens returns the tokens of orgID (empty: every org), revoked
	// ones included, oldest first.
	ListTokens(ctx context.Context, orgID string) ([]Token, error)
	// RevokeToken marks a token revoked (again: no change) and returns it;
	// ErrNotFound for an unknown ID.
	RevokeToken(ctx context.Context, id string) (Token, error)
	// TokenByHash returns the valid token with this hash; ErrNotFound for
	// an unknown or revoked one.
	TokenByHash(ctx context.Context, hash []byte) (Token, error)
	// HasTokens reports whether any valid (not revoked) token exists.
	HasTokens(ctx context.Context) (bool, error)

	// SetLimit stores the limit of its scope and subject, replacing the
	// one stored (every field), and returns it with UpdatedAt stamped.
	// ErrInvalid for what Limit.Normalize refuses.
	SetLimit(ctx context.Context, l Limit) (Limit, error)
	// DeleteLimit deletes the limit of a scope and subject; ErrNotFound
	// when there is none.
	DeleteLimit(ctx context.Context, scope LimitScope, subject string) error
	// Limits returns every stored limit, ordered by scope, then subject.
	Limits(ctx context.Context) ([]Limit, error)
	// PauseOrg sets or clears the pause of an org's queue (Limit.Paused):
	// it upserts only the paused flag of the org's limit (creating a limit
	// with no other bound when there is none) and returns the stored
	// limit. A paused org's queued jobs stay queued (Claim and ClaimAs
	// treat it as at its MaxRunning), its running jobs finish, and it
	// holds up no other org's jobs. ErrInvalid for an empty org.
	PauseOrg(ctx context.Context, org string, paused bool) (Limit, error)
	// Reserve stores a reservation (see ReserveParams) if its Check admits
	// it, and returns its ID; Check's error, as it is, otherwise. The
	// reservations of an org, and of a token, are made one at a time
	// across every process on the database: a check sees every
	// reservation made before it. Expired reservations of the org are
	// deleted on the way. ErrInvalid for what ReserveParams.Normalize
	// refuses.
	Reserve(ctx context.Context, p ReserveParams) (string, error)
	// Release deletes a call's reservation once the call is in the ledger
	// (or was never made); a released or expired one: no error.
	Release(ctx context.Context, id string) error
	// Reserved sums the open reservations of an org or a token: the
	// requests reserved in the last minute and the calls in flight.
	Reserved(ctx context.Context, p ReservedParams) (Reserved, error)

	// RecordCalls adds provider calls made for no job (the front door's
	// embeddings) to the usage ledger, as the org, user and token's, in
	// one transaction: budgets and Usage then count them like a job's.
	// ErrInvalid for what RecordCallsParams.Normalize refuses.
	RecordCalls(ctx context.Context, p RecordCallsParams) error

	// CreateFile stores a file, reading Content to its end (at most
	// MaxBytes, else ErrFileTooLarge and nothing stored), and returns it
	// with an ID "file-" + UUIDv7.
	CreateFile(ctx context.Context, p CreateFileParams) (File, error)
	// GetFile returns a file's description; ErrNotFound when it does not
	// exist in orgID (empty: any org).
	GetFile(ctx context.Context, orgID, id string) (File, error)
	// ListFiles returns a page of files, newest first, and whether more
	// follow.
	ListFiles(ctx context.Context, p FileListParams) ([]File, bool, error)
	// ReadFile writes a file's content to w, a chunk at a time (one query
	// per chunk, so no transaction stays open while w is slow).
	// ErrNotFound as GetFile.
	ReadFile(ctx context.Context, orgID, id string, w io.Writer) error
	// DeleteFile deletes a file and its content; ErrNotFound as GetFile.
	DeleteFile(ctx context.Context, orgID, id string) error

	// CreateBatch stores a batch in status validating with ID "batch_" +
	// UUIDv7; ErrNotFound when the input file does not exist in the org.
	CreateBatch(ctx context.Context, p CreateBatchParams) (Batch, error)
	// GetBatch returns a batch (see Batch.Counts); ErrNotFound when it
	// does not exist in orgID (empty: any org).
	GetBatch(ctx context.Context, orgID, id string) (Batch, error)
	// ListBatches returns a page of batches, newest first, and whether
	// more follow.
	ListBatches(ctx context.Context, p BatchListParams) ([]Batch, bool, error)
	// ActiveBatches returns every batch, of any org, that is not terminal,
	// oldest first: the batch processor's work list. Unlike every other
	// read, its Counts are the stored ones, not its jobs counted
	// (BatchProgress counts them).
	ActiveBatches(ctx context.Context) ([]Batch, error)
	// MoveBatch moves a batch From → To (stamping To's time; in_progress
	// keeps expires_at), only if it is From: otherwise ErrBatchChanged
	// and nothing changes. ErrNotFound for an unknown batch.
	MoveBatch(ctx context.Context, p MoveBatchParams) (Batch, error)
	// CancelBatch moves a validating or in_progress batch of orgID to
	// cancelling; a batch already cancelling or cancelled is returned as
	// it is; another terminal or finalizing one is ErrBatchChanged.
	CancelBatch(ctx context.Context, orgID, id string) (Batch, error)
	// FinishBatch stores the output and error files and moves the batch
	// From → To in one transaction (ErrBatchChanged, storing nothing, if
	// it is not From).
	FinishBatch(ctx context.Context, p FinishBatchParams) (Batch, error)
	// BatchProgress counts the batch's current jobs by outcome.
	BatchProgress(ctx context.Context, batchID string) (BatchProgress, error)
	// CancelBatchJobs cancels the batch's queued and running jobs and
	// returns how many it cancelled.
	CancelBatchJobs(ctx context.Context, batchID string) (int, error)
	// BatchResults returns a page of the batch's lines in prompt ID
	// order, each with its current job and that job's response.
	BatchResults(ctx context.Context, p BatchResultsParams) ([]BatchResult, error)

	// Check returns nil when the store can work: the database answers,
	// its schema is the one this build migrates to (not older, not newer),
	// and it accepts writes. Check proves the last with a small probe
	// write of its own, which waits its turn behind the store's other
	// writes for as long as ctx allows. Because a small write can succeed
	// where real ones fail (on a full disk, say), Check also fails while
	// the store's latest real write (Enqueue, EnqueueBatch, Claim,
	// Heartbeat, Succeed, Requeue, Fail, AppendAttempt, Cancel, Retry,
	// Reclaim, Archive, DeletePrompt, CreateToken, RevokeToken, CreateFile, DeleteFile,
	// CreateBatch, MoveBatch, CancelBatch, FinishBatch, CancelBatchJobs,
	// PauseOrg, HoldBackend, ReportWorker, DrainWorker)
	// failed for a database reason less than 10 seconds ago on the store's
	// clock, and no write has stored anything since; its error then names
	// that write's error and wraps it. A database reason is any error but ErrNotClaimed,
	// ErrInvalid, ErrNotFound, ErrIllegalTransition,
	// ErrIdempotencyConflict, ErrFileTooLarge, ErrBatchChanged, an
	// upload's reader failing, the store being closed, and the error a
	// call gets because its ctx ended. A write that stores nothing (a Claim
	// finding no job) counts neither way. Past the 10 seconds, the probe
	// alone decides.
	Check(ctx context.Context) error

	// Notifier returns the store's messaging, apart from its rows:
	// wake-ups and running jobs' answer pieces (see Notifier). It is one
	// Notifier for the store's life; the store wakes it after its own
	// commits, and Close closes its Notify channels.
	Notifier() Notifier

	// SyncPacing records one process's pacing news (see PacingUpdate for
	// how each merges; a pause or rate stamps UpdatedAt with the store's
	// time) and the peer's presence on each backend updated, in one
	// transaction, then returns every backend's shared pacing with the
	// peers seen within PeerTTL, by backend. Without updates it only
	// reads, and returns backends with a pause, a rate or a peer present.
	// ErrInvalid for what PacingSyncParams.Normalize refuses.
	SyncPacing(ctx context.Context, p PacingSyncParams) ([]BackendPacing, error)

	// HoldBackend sets or clears an operator's hold on a backend, on its
	// shared pacing row (BackendPacing.Held; SyncPacing returns a held
	// backend even when only reading). Engines sharing pacing dispatch
	// nothing new to a held backend. ErrInvalid for a backend name
	// NormalizeBackend refuses.
	HoldBackend(ctx context.Context, backend string, held bool) error

	// ReportWorker records a worker process's beat (upserting it by
	// Worker, stamping SeenAt with the store's time, and StartedAt on its
	// first report) and returns whether the worker is asked to drain.
	// ErrInvalid for what WorkerReport.Normalize refuses.
	ReportWorker(ctx context.Context, r WorkerReport) (draining bool, err error)
	// Workers returns the workers seen at or after seenSince, by Worker.
	Workers(ctx context.Context, seenSince time.Time) ([]WorkerInfo, error)
	// DrainWorker asks a worker to drain (claim nothing more and let its
	// running jobs finish), or with drain false undoes it, and returns
	// the worker. ErrNotFound for a worker that never reported.
	DrainWorker(ctx context.Context, worker string, drain bool) (WorkerInfo, error)

	// Close releases the store.
	Close() error
}

// Options configure a store.
type Options struct {
	// Now is the clock. Defaults to time.Now.
	Now func() time.Time
}

// EnqueueParams describes one prompt and its job.
type EnqueueParams struct {
	OrgID     string
	CreatedBy string
	// TokenID is the API token that submitted the job (Token.ID), so that
	// the usage ledger can tell its spend; empty without one.
	TokenID string
	// Text, PromptRef with Inputs, Chat or Embedding: what to run.
	Text      string
	PromptRef string
	Inputs    json.RawMessage
	Chat      *ChatRequest
	Embedding *EmbeddingRequest
	Profile   string
	// BatchID and CustomID make the prompt a line of a batch (its
	// custom_id); both or neither.
	BatchID  string
	CustomID string
	// ParentID continues a thread; CorrelationID is free-form.
	ParentID      string
	CorrelationID string
	// Priority 0–100, lower runs first. Defaults to 50 when nil.
	Priority *int
	// MaxAttempts defaults to 3 when 0.
	MaxAttempts int
	// ExecutionOptions say how the worker runs the job; the store keeps
	// their JSON (ExecutionOptions.JSON). Defaults to none.
	ExecutionOptions ExecutionOptions
	// AvailableAt delays the job (scheduled_for). Defaults to now.
	AvailableAt time.Time
	// DependsOn names a job that must be terminal before this one is
	// claimed.
	DependsOn string
	// ReferenceUser, when set, admits as ParentID and DependsOn only
	// prompts and jobs this user created: a member may continue or wait
	// for only what it can see. Empty: any of the org's (an admin, an
	// operator).
	ReferenceUser string
	// IdempotencyKey makes a repeat (same org and key) return the first
	// IDs.
	IdempotencyKey string
	// RequestHash, with IdempotencyKey, fingerprints the request: a
	// repeat whose RequestHash differs from the first call's (both set)
	// is ErrIdempotencyConflict and stores nothing.
	RequestHash string
	// KeyExpires makes IdempotencyKey expire: it holds only while the
	// key's prompt has a job that is queued or running, or that succeeded
	// (on the store's clock) less than KeyGrace ago. A call with an
	// expired key takes it from the old prompt (which keeps its jobs) and
	// stores a new prompt under it. The server derives such keys from a
	// request and its caller, to make a retry that carries no key of its
	// own find the first attempt's job without answering a request made
	// long after with an old answer; a job that failed or was cancelled
	// releases the key at once, since a retry after a failure asks for
	// another try. Without KeyExpires a key holds as long as its prompt
	// is stored.
	KeyExpires bool
	// KeyGrace, with KeyExpires, is how long the key outlives its
	// prompt's job that succeeded; 0: it holds only while a job is queued
	// or running.
	KeyGrace time.Duration
	// KeyFresh, with KeyExpires, takes the key whatever its prompt's jobs
	// are doing: the call is never a repeat, but a later call with the
	// key (a client's retry of it) finds it. The server's first attempt
	// of a request without a key of its own is such a call: the same
	// request sent twice at once is two samples, not one.
	KeyFresh bool

	// ClaimAs, when set, stores the job claimed by the worker of that
	// name (running, as Claim would leave it, with both its → queued and
	// its queued → running events) instead of queued, in the same
	// transaction: a process with a free worker slot runs what it has just
	// received without a round trip through the queue (see
	// worker.Worker.RunNow). It cannot go with DependsOn or AvailableAt.
	// An idempotent repeat claims nothing, nor does a job whose org is at
	// its Limit's MaxRunning: that job is stored queued (Enqueued.Claimed
	// nil), as Claim would leave it.
	ClaimAs string

	// normalized marks params Normalize returned (see Normalize).
	normalized bool
}

// Enqueued are the IDs of an enqueued prompt and job.
type Enqueued struct {
	PromptID string
	JobID    string
	State    State
	// Existing is true when an idempotency key matched an earlier call.
	Existing bool
	// Claimed is the job as EnqueueParams.ClaimAs claimed it; nil when
	// nothing was claimed.
	Claimed *Job
}

// ClaimParams selects jobs to claim.
type ClaimParams struct {
	Worker string
	// Limit defaults to 1.
	Limit int
	// PriorityCeiling: only priority <= ceiling. Defaults to 100 when nil.
	PriorityCeiling *int
	// SkipProfiles leaves queued the jobs whose prompt's profile is
	// listed ("" is the default profile): a worker passes the profiles
	// whose backends are all held (promptkit.Engine.HeldProfiles). At
	// most MaxSkipProfiles.
	SkipProfiles []string
}

// HeartbeatParams names jobs a worker is still running.
type HeartbeatParams struct {
	Worker string
	JobIDs []string
}

// SucceedParams finalizes a job with its answer.
type SucceedParams struct {
	JobID  string
	Worker string
	// Answer is the job's answer; Normalize makes it storable (see
	// Answer.Normalize).
	Answer Answer
	// AttemptEvents are attempt events (each as AttemptParams.Data) recorded
	// in the same transaction, before the transition's event, and only if
	// the write takes effect: a worker writes a run's last attempt with
	// its result, one transaction instead of two.
	AttemptEvents []json.RawMessage
}

// RequeueParams puts a running job back in the queue.
type RequeueParams struct {
	JobID       string
	Worker      string
	AvailableAt time.Time
	Kind        ErrorKind
	Message     string
	// Handback returns the job without spending an attempt.
	Handback bool
	// AttemptEvents: see SucceedParams.
	AttemptEvents []json.RawMessage
}

// FailParams finalizes a job as failed.
type FailParams struct {
	JobID   string
	Worker  string
	Kind    ErrorKind
	Message string
	// AttemptEvents: see SucceedParams.
	AttemptEvents []json.RawMessage
}

// AttemptParams records one execution attempt.
type AttemptParams struct {
	JobID  string
	Worker string
	Data   json.RawMessage
}

// CancelParams names a job to cancel.
type CancelParams struct {
	OrgID string
	JobID string
	// By says who asked ("cli:alice", "token:<id>", "local"; at most
	// MaxActor bytes); the cancelled event's data carries it as "by".
	By string
	// Bulk names the bulk action this cancel is part of (BulkResult.ID);
	// the event's data carries it as "bulk".
	Bulk string
}

// RetryParams names a terminal job to run again.
type RetryParams struct {
	OrgID string
	JobID string
	// Priority overrides the old job's priority when non-nil.
	Priority *int
	// By and Bulk: as CancelParams'; both the old job's superseded event
	// and the new job's queued event carry them.
	By   string
	Bulk string
}

// ReclaimParams sets the reclaim thresholds.
type ReclaimParams struct {
	// ReclaimAfter is the heartbeat age of a dead worker. Defaults to
	// DefaultReclaimAfter (4m).
	ReclaimAfter time.Duration
	// StuckAfter is the run time after which a dead worker's job fails as
	// stuck instead of going back to the queue. Defaults to 15m.
	StuckAfter time.Duration
}

// Reclaimed lists the jobs Reclaim moved.
type Reclaimed struct {
	Requeued []string
	Failed   []string
}

// JobFilter selects jobs: every set field must match. Zero values do not
// filter. ListJobs, CountJobs and the bulk actions (CancelMatching,
// RetryMatching) take it.
type JobFilter struct {
	OrgID     string
	CreatedBy string
	State     State
	// Current leaves out superseded jobs (each prompt once).
	Current bool
	// Since / Until: created at or after Since, and before Until (zero: open).
	Since, Until time.Time
	// Profile: the prompt's profile ID exactly (the front door's model name resolves to one).
	Profile string
	// Backend: jobs that made at least one provider call to this backend (the usage ledger's rows of the job).
	Backend string
	// MinPriority / MaxPriority bound the priority, inclusive (nil: open).
	MinPriority, MaxPriority *int
	// BatchID: lines of this batch.
	BatchID string
}

// ListParams filters and pages ListJobs.
type ListParams struct {
	JobFilter
	// After is the Next of the previous page.
	After string
	// Limit defaults to 50, at most 1000.
	Limit int
}

// JobPage is one page of ListJobs.
type JobPage struct {
	Jobs []Job
	// Next continues the listing; empty on the last page.
	Next string
}

// ChangesParams selects changed jobs.
type ChangesParams struct {
	OrgID string
	// CreatedBy, when set, keeps only jobs created by this user.
	CreatedBy string
	Since     time.Time
	// Limit defaults to 500.
	Limit int
}

// Changes are jobs changed since a time.
type Changes struct {
	Jobs []Job
	// AsOf is the Since of the next call.
	AsOf time.Time
}

// EventsParams pages through the event log.
type EventsParams struct {
	OrgID string
	// CreatedBy, when set, keeps only events of jobs created by this user.
	CreatedBy string
	After     int64
	// Limit defaults to 500.
	Limit int
}

// MetricsParams scopes Metrics.
type MetricsParams struct {
	OrgID string
	// Since bounds the latency and error-rate window. Zero: all time.
	Since time.Time
	// ByOrg adds the latency of each org's jobs in the window (Orgs) and
	// each org's jobs by state (OrgCounts).
	ByOrg bool
}

// ThreadParams names a prompt whose history Thread returns.
type ThreadParams struct {
	OrgID    string
	PromptID string
	// Depth is how many ancestors to return at most.
	Depth int
}

// Turn is one earlier prompt of a thread and its answer.
type Turn struct {
	PromptID string
	// Text is the prompt's ad-hoc text; empty for a named prompt.
	Text string
	// Answer is the output of the prompt's latest succeeded job; Answered
	// says whether there is one.
	Answer   string
	Answered bool
}

// Metrics summarize the queue.
type Metrics struct {
	// Counts has every state as a key.
	Counts map[State]int `json:"counts"`
	// Latency of jobs finished in the window, from created_at to
	// finished_at.
	LatencyP50 time.Duration `json:"latency_p50_ns"`
	LatencyP95 time.Duration `json:"latency_p95_ns"`
	LatencyP99 time.Duration `json:"latency_p99_ns"`
	// Finished counts jobs that reached succeeded, failed or cancelled in
	// the window; ErrorRate is failed / finished per kind.
	Finished  int                   `json:"finished"`
	ErrorRate map[ErrorKind]float64 `json:"error_rate"`
	// Orgs, with ByOrg, has one entry per org with jobs finished in the
	// window, ordered by org ID.
	Orgs []OrgLatency `json:"orgs,omitempty"`
	// OrgCounts, with ByOrg, has one entry per org with any job, ordered
	// by org ID: its jobs by state (every state a key) and how many failed
	// in the window.
	OrgCounts []OrgCounts `json:"org_counts,omitempty"`
}

// OrgCounts is one org's jobs by state in Metrics.
type OrgCounts struct {
	OrgID  string        `json:"org_id"`
	Counts map[State]int `json:"counts"`
	// FailedInWindow counts the org's jobs that failed in the window (and
	// whose outcome stands, as Metrics.ErrorRate counts them).
	FailedInWindow int `json:"failed_in_window"`
}

// NewOrgCounts returns an org's OrgCounts with every state counted as
// zero, for stores to fill.
func NewOrgCounts(orgID string) OrgCounts {
	o := OrgCounts{OrgID: orgID, Counts: map[State]int{}}
	for _, st := range States() {
		o.Counts[st] = 0
	}
	return o
}

// OrgLatency is one org's latency in a Metrics window.
type OrgLatency struct {
	OrgID          string        `json:"org_id"`
	Finished       int           `json:"finished"`
	LatencyAverage time.Duration `json:"latency_avg_ns"`
	LatencyP95     time.Duration `json:"latency_p95_ns"`
}

// NewMetrics returns Metrics with every state counted as zero, for stores
// to fill.
func NewMetrics() Metrics {
	m := Metrics{Counts: map[State]int{}, ErrorRate: map[ErrorKind]float64{}}
	for _, st := range States() {
		m.Counts[st] = 0
	}
	return m
}
