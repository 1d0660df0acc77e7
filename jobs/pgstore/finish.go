package pgstore

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/promptkit/promptkit/jobs"
	"github.com/promptkit/promptkit/jobs/internal/finish"
	"github.com/promptkit/promptkit/jobs/internal/queue"
)

// finishReq is one finishing write (a Succeed, Fail, Requeue or
// AppendAttempt call, or one of Reclaim's decisions) in a batch.
type finishReq struct {
	w finish.Write
	// response is a succeeding job's response ID when the store knows the
	// job's prompt (see promptCache).
	response *string
	job      jobs.Job
}

// finishSQL applies a batch of finishing writes in one statement under the
// event lock. Go decides each call's target state, attempts spent, kind,
// message and event data; the statement applies a call only when its job
// is running under its worker (the transaction locked the jobs before the
// lock, so this cannot change under it), returns the calls that took
// effect, by ord, and every other call gets jobs.ErrNotClaimed. A call
// with no target state is an attempt: only its event is written. It
// writes the transitions (HOT updates, see migration 00002; a job going
// back to the queue leaves its worker as finish.Write.ClearClaim says, and
// each job leaves job_running, a
// requeued one going back into job_queue), the responses of succeeded jobs
// (with the ID the call brings, or one response_id derives, see
// promptCache), one event per call in call order, and a notification when
// a job changed state.
var finishSQL = named(`
	WITH u AS (
		SELECT * FROM unnest($id::text[], $worker::text[], $state::text[], $inc::int[], $available::timestamptz[],
			$kind::text[], $message::text[], $data::text[], $output::text[], $parsed::text[], $model::text[],
			$usage::text[], $response::text[], $finish_reason::text[], $tool_calls::text[], $attempts::text[],
			$backend::text[], $body::text[], $clear::bool[])
			WITH ORDINALITY AS u(id, worker, state, inc, available, kind, message, data, output, parsed, model,
				usage, response, finish_reason, tool_calls, attempts, backend, body, clear, ord)
	), done AS (
		UPDATE jobs SET
			state = u.state,
			attempt = jobs.attempt + u.inc,
			available_at = coalesce(u.available, jobs.available_at),
			error_kind = NULLIF(u.kind, ''),
			error_message = NULLIF(u.message, ''),
			response_id = CASE WHEN u.state = 'succeeded'
				THEN coalesce(u.response, response_id(jobs.prompt_id, jobs.id)) ELSE jobs.response_id END,
			finished_at = CASE WHEN u.clear THEN NULL ELSE $now::timestamptz END,
			worker_claim = CASE WHEN u.clear THEN NULL ELSE jobs.worker_claim END,
			claimed_at = CASE WHEN u.clear THEN NULL ELSE jobs.claimed_at END,
			started_at = CASE WHEN u.clear THEN NULL ELSE jobs.started_at END,
			running_heartbeat_at = CASE WHEN u.clear THEN NULL ELSE jobs.running_heartbeat_at END,
			updated_at = $now::timestamptz
		FROM u WHERE jobs.id = u.id AND u.state <> '' AND jobs.state = 'running' AND jobs.worker_claim = u.worker
		-- The call's own columns come along, so no later CTE joins u again
		-- (the generic plan's row estimates would make that a nested loop).
		RETURNING jobs.*, u.ord, u.data, u.output, u.parsed, u.model, u.usage, u.finish_reason, u.tool_calls,
			u.attempts, u.backend, u.body
	), att AS (
		SELECT jobs.*, u.ord, u.data FROM u JOIN jobs ON jobs.id = u.id
		WHERE u.state = '' AND jobs.state = 'running' AND jobs.worker_claim = u.worker
	), stopped AS (
		DELETE FROM job_running WHERE job_id = ANY (ARRAY(SELECT id FROM done))
	), requeued AS (
		`+queueRows("done")+`
	), resp AS (
		-- The response IDs cannot collide: each job is running and locked
		-- by this transaction, so the insert cannot wait under the lock.
		INSERT INTO responses (id, prompt_id, job_id, output, parsed, model, usage, created_at, finish_reason,
			tool_calls, backend, body)
		SELECT response_id, prompt_id, id, output, parsed::json, model, usage::json, $now::timestamptz, finish_reason,
			tool_calls::json, backend, body::json
		FROM done WHERE state = 'succeeded'
	), ev AS (
		INSERT INTO job_events (job_id, prompt_id, org_id, type, from_state, to_state, data, at)
		SELECT job_id, prompt_id, org_id, type, from_state, to_state, data::json, $now::timestamptz FROM (
			-- A transition's attempts (a JSON array) come before its own
			-- event: sub orders them.
			SELECT id AS job_id, prompt_id, org_id, 'transition' AS type, 'running' AS from_state, state AS to_state,
				data, ord, 2147483647 AS sub
			FROM done
			UNION ALL
			SELECT id, prompt_id, org_id, 'attempt', NULL, NULL, a.value::text, ord, a.sub
			FROM done, json_array_elements(done.attempts::json) WITH ORDINALITY AS a(value, sub)
			WHERE done.attempts IS NOT NULL
			UNION ALL
			SELECT id, prompt_id, org_id, 'attempt', NULL, NULL, data, ord, 0 FROM att
		) e ORDER BY ord, sub
	), calls AS (
		-- The usage ledger's rows, by the call's ord: each with its job's
		-- owners, only for calls that took effect.
		INSERT INTO usage_ledger (at, job_id, org_id, user_id, token_id, model, backend, input_tokens, output_tokens,
			cached_tokens, reasoning_tokens, cost_usd, status_code, outcome, failure)
		SELECT $now::timestamptz, j.id, j.org_id, j.created_by, j.token_id, c.model, c.backend, c.input, c.output,
			c.cached, c.reasoning, c.cost, c.status, c.outcome, c.failure
		FROM unnest($call_ord::int[], $call_model::text[], $call_backend::text[], $call_in::bigint[],
			$call_out::bigint[], $call_cached::bigint[], $call_reasoning::bigint[], $call_cost::float8[],
			$call_status::int[], $call_outcome::text[], $call_failure::text[])
			AS c(ord, model, backend, input, output, cached, reasoning, cost, status, outcome, failure)
		JOIN (SELECT ord, id, org_id, created_by, token_id FROM done
			UNION ALL SELECT ord, id, org_id, created_by, token_id FROM att) j ON j.ord = c.ord
	), `+notified("done")+`
	SELECT `+jobCols+`, ord FROM done, notified
	UNION ALL
	SELECT `+jobCols+`, ord FROM att`,
	"id", "worker", "state", "inc", "available", "kind", "message", "data", "output", "parsed", "model",
	"usage", "response", "finish_reason", "tool_calls", "attempts", "backend", "body", "clear", "now", "schema",
	"call_ord", "call_model", "call_backend", "call_in", "call_out", "call_cached", "call_reasoning", "call_cost",
	"call_status", "call_outcome", "call_failure")

// runFinish runs finishing writes in one transaction of their own.
func (s *Store) runFinish(ctx context.Context, reqs []*finishReq) []error {
	b := newFinishBatch(reqs, s.schema)
	if err := s.writeOneTrip(ctx, b.pre, b.locked); err != nil {
		for i := range b.errs {
			b.errs[i] = err
		}
		return b.errs
	}
	if b.changed {
		s.notify.Broadcast()
	}
	return b.errs
}

// finishBatch is the part of a writing transaction that finishes jobs: it
// locks the jobs before the event lock (in ID order, so concurrent batches
// cannot deadlock) and applies the calls in one statement under the lock
// (finishSQL), which checks each call's claim. A call whose job is not
// running under its worker gets jobs.ErrNotClaimed and changes nothing.
// The calls name distinct jobs (the group commit's key sees to it).
type finishBatch struct {
	reqs    []*finishReq
	errs    []error
	schema  string
	changed bool // a job changed state
}

func newFinishBatch(reqs []*finishReq, schema string) *finishBatch {
	return &finishBatch{reqs: reqs, errs: make([]error, len(reqs)), schema: schema}
}

func (b *finishBatch) pre(p *phase) {
	ids := make([]string, len(b.reqs))
	for i, r := range b.reqs {
		ids[i] = r.w.JobID
	}
	p.exec(`SELECT 1 FROM jobs WHERE id = ANY($1) ORDER BY id FOR UPDATE`, ids)
}

func (b *finishBatch) locked(p *phase, now time.Time) {
	n := len(b.reqs)
	var (
		id, worker, state, kind = make([]string, n), make([]string, n), make([]string, n), make([]string, n)
		message, output, model  = make([]string, n), make([]string, n), make([]string, n)
		finishReason, backend   = make([]string, n), make([]string, n)
		data, parsed, usage     = make([]*string, n), make([]*string, n), make([]*string, n)
		toolCalls, attempts     = make([]*string, n), make([]*string, n)
		body                    = make([]*string, n)
		clear                   = make([]bool, n)
		response                = make([]*string, n)
		inc                     = make([]int, n)
		avail                   = make([]*time.Time, n)
	)
	b.changed = false
	var c callRows
	for i, r := range b.reqs {
		c.add(i+1, r.w.Calls)
		w := r.w
		b.errs[i] = jobs.ErrNotClaimed // until the statement returns the call
		id[i], worker[i], state[i], kind[i], message[i] = w.JobID, w.Worker, string(w.To), string(w.Kind), w.Message
		a := w.Answer
		u, calls := w.AnswerJSON()
		output[i], model[i], data[i], parsed[i], usage[i] = a.Output, a.Model, rawPtr(w.Data), rawPtr(a.Parsed), rawPtr(u)
		inc[i], response[i], finishReason[i], toolCalls[i] = w.Attempts, r.response, a.FinishReason, rawPtr(calls)
		attempts[i], backend[i], body[i] = attemptsArray(w.AttemptEvents), a.Backend, rawPtr(a.Body)
		clear[i] = w.ClearClaim
		if w.To == jobs.Queued {
			avail[i] = &now
			if !w.AvailableAt.IsZero() {
				avail[i] = &w.AvailableAt
			}
		}
	}
	p.query(finishSQL.q, finishSQL.args(id, worker, state, inc, avail, kind, message, data, output, parsed, model,
		usage, response, finishReason, toolCalls, attempts, backend, body, clear, now, b.schema,
		c.ord, c.model, c.backend, c.in, c.out, c.cached, c.reasoning, c.cost, c.status, c.outcome, c.failure), func(rows pgx.Rows) error {
		for rows.Next() {
			var ord int
			j, err := scanJob(rows, &ord)
			if err != nil {
				return err
			}
			r := b.reqs[ord-1]
			r.job, b.errs[ord-1] = j, nil
			b.changed = b.changed || r.w.Transition()
		}
		return nil
	})
}

// callRows are a batch's usage ledger rows as finishSQL's arrays; ord
// names the call that brings each.
type callRows struct {
	ord                        []int
	model, backend             []string
	in, out, cached, reasoning []*int64
	cost                       []*float64
	status                     []int
	outcome, failure           []string
}

func (c *callRows) add(ord int, calls []jobs.UsageCall) {
	for _, u := range calls {
		c.ord, c.model, c.backend = append(c.ord, ord), append(c.model, u.Model), append(c.backend, u.Backend)
		c.in, c.out, c.cached = append(c.in, u.InputTokens), append(c.out, u.OutputTokens), append(c.cached, u.CachedInputTokens)
		c.reasoning = append(c.reasoning, u.ReasoningTokens)
		c.cost = append(c.cost, u.CostUSD)
		c.status, c.outcome, c.failure = append(c.status, u.StatusCode), append(c.outcome, u.Outcome), append(c.failure, u.Failure)
	}
}

// attemptsArray is a transition's attempt events as one JSON array, nil
// when there are none.
func attemptsArray(ds []json.RawMessage) *string {
	if len(ds) == 0 {
		return nil
	}
	b, _ := json.Marshal(ds) // each is valid JSON: Normalize checked
	return new(string(b))
}

// finish runs one finishing write, op, through the group commit. A call that
// ends the claim forgets the job's prompt; a Succeed names its response
// with it.
func (s *Store) finish(ctx context.Context, op string, w finish.Write) (jobs.Job, error) {
	r := &finishReq{w: w}
	if w.Transition() {
		if pid := s.prompts.take(w.JobID); pid != "" && w.To == jobs.Succeeded {
			r.response = new(jobs.ResponseID(pid, w.JobID))
		}
	}
	err := s.writes.Do(ctx, &writeReq{finish: r})
	s.wrote(ctx, op, err, err == nil)
	if err != nil {
		return jobs.Job{}, err
	}
	return r.job, nil
}

// Succeed writes the response and moves the job running → succeeded, only
// when it runs under Worker; otherwise jobs.ErrNotClaimed. Concurrent
// finishing writes are committed together. See jobs.Store.
func (s *Store) Succeed(ctx context.Context, p jobs.SucceedParams) (jobs.Job, error) {
	p, err := p.Normalize()
	if err != nil {
		return jobs.Job{}, fmt.Errorf("pgstore: succeed %s: %w", p.JobID, err)
	}
	j, err := s.finish(ctx, "succeed", finish.Succeed(p))
	if err != nil {
		return jobs.Job{}, fmt.Errorf("pgstore: succeed %s: %w", p.JobID, err)
	}
	return j, nil
}

// Requeue moves a job running under Worker back to queued; otherwise
// jobs.ErrNotClaimed. See jobs.Store.
func (s *Store) Requeue(ctx context.Context, p jobs.RequeueParams) (jobs.Job, error) {
	p, err := p.Normalize()
	if err != nil {
		return jobs.Job{}, fmt.Errorf("pgstore: requeue %s: %w", p.JobID, err)
	}
	j, err := s.finish(ctx, "requeue", finish.Requeue(p))
	if err != nil {
		return jobs.Job{}, fmt.Errorf("pgstore: requeue %s: %w", p.JobID, err)
	}
	return j, nil
}

// Fail moves a job running under Worker to failed; otherwise
// jobs.ErrNotClaimed. See jobs.Store.
func (s *Store) Fail(ctx context.Context, p jobs.FailParams) (jobs.Job, error) {
	p, err := p.Normalize()
	if err != nil {
		return jobs.Job{}, fmt.Errorf("pgstore: fail %s: %w", p.JobID, err)
	}
	j, err := s.finish(ctx, "fail", finish.Fail(p))
	if err != nil {
		return jobs.Job{}, fmt.Errorf("pgstore: fail %s: %w", p.JobID, err)
	}
	return j, nil
}

// AppendAttempt records one execution attempt of a job running under
// Worker; otherwise jobs.ErrNotClaimed. See jobs.Store.
func (s *Store) AppendAttempt(ctx context.Context, p jobs.AttemptParams) error {
	p, err := p.Normalize()
	if err == nil {
		_, err = s.finish(ctx, "append attempt", finish.Attempt(p))
	}
	if err != nil {
		return fmt.Errorf("pgstore: append attempt %s: %w", p.JobID, err)
	}
	return nil
}

// rawPtr maps empty JSON to NULL.
func rawPtr(b json.RawMessage) *string {
	if len(b) == 0 {
		return nil
	}
	return new(string(b))
}

// cancelSQL moves jobs (locked and checked by this transaction; $from
// holds each one's state) to cancelled, out of job_queue or job_running,
// with one event each in the order given (its data $data, the same for
// all: jobs.CancelParams.Data, NULL for a batch's) and a notification, under the
// event lock (the side tables are written only there, so the deletes
// never wait). Cancel cancels one job with it, CancelBatchJobs a batch's.
var cancelSQL = named(`
	WITH u AS (
		SELECT * FROM unnest($id::text[], $from::text[]) WITH ORDINALITY AS u(id, from_state, ord)
	), done AS (
		UPDATE jobs SET state = 'cancelled', finished_at = $now, updated_at = $now FROM u WHERE jobs.id = u.id
		RETURNING jobs.*, u.from_state, u.ord
	), dequeued AS (
		DELETE FROM job_queue WHERE job_id = ANY ($id::text[])
	), stopped AS (
		DELETE FROM job_running WHERE job_id = ANY ($id::text[])
	), ev AS (
		INSERT INTO job_events (job_id, prompt_id, org_id, type, from_state, to_state, data, at)
		SELECT id, prompt_id, org_id, 'transition', from_state, 'cancelled', $data::json, $now FROM done ORDER BY ord
	), lost AS (
		-- A running job's worker may have a call out that its settling
		-- write, now refused, would have reported: jobs.LostCall.
		INSERT INTO usage_ledger (at, job_id, org_id, user_id, token_id, model, backend, outcome)
		SELECT $now, id, org_id, created_by, token_id, '', '', $lost::text FROM done WHERE from_state = 'running'
	), `+notified("done")+`
	SELECT `+jobCols+` FROM done, notified ORDER BY ord`,
	"now", "id", "from", "lost", "schema", "data")

// cancelJobs queues cancelSQL for olds, jobs locked by this transaction
// that may move to cancelled, with data in each event, and reads the
// cancelled jobs into *dst.
func cancelJobs(p *phase, now time.Time, olds []jobs.Job, data json.RawMessage, schema string, dst *[]jobs.Job) {
	ids, from := make([]string, len(olds)), make([]string, len(olds))
	for i, j := range olds {
		ids[i], from[i] = j.ID, string(j.State)
	}
	p.query(cancelSQL.q, cancelSQL.args(now, ids, from, jobs.LostCall.Outcome, schema, rawPtr(data)), func(rows pgx.Rows) error {
		var err error
		*dst, err = collectJobs(rows)
		return err
	})
}

// scanInto reads one job row into *dst.
func scanInto(dst *jobs.Job) func(pgx.Row) error {
	return func(row pgx.Row) error {
		var err error
		*dst, err = scanJob(row)
		return err
	}
}

// lockJob locks a job's row (in orgID, unless empty) before the event
// lock, reads it into *dst and checks that it may move to state to:
// jobs.ErrNotFound when there is no such job, a *jobs.TransitionError when
// the edge is not allowed.
func lockJob(p *phase, orgID, jobID string, to jobs.State, dst *jobs.Job) {
	p.queryRow(`SELECT `+jobCols+` FROM jobs WHERE id = $1 AND ($2 = '' OR org_id = $2) FOR UPDATE`,
		[]any{jobID, orgID}, func(row pgx.Row) error {
			var err error
			if *dst, err = scanJob(row); err != nil {
				return notFound(err)
			}
			return jobs.CheckTransition(dst.State, to)
		})
}

// Cancel moves a queued or running job to cancelled; a terminal job is a
// *jobs.TransitionError. See jobs.Store.
func (s *Store) Cancel(ctx context.Context, p jobs.CancelParams) (jobs.Job, error) {
	p, err := p.Normalize()
	if err != nil {
		return jobs.Job{}, fmt.Errorf("pgstore: cancel %s: %w", p.JobID, err)
	}
	var old jobs.Job
	var out []jobs.Job
	err = s.writeTwoTrips(ctx, func(ph *phase) {
		lockJob(ph, p.OrgID, p.JobID, jobs.Cancelled, &old)
	}, func(ph *phase, now time.Time) {
		cancelJobs(ph, now, []jobs.Job{old}, p.Data(), s.schema, &out)
	})
	if err == nil && len(out) != 1 {
		err = fmt.Errorf("cancelled %d jobs, want 1", len(out))
	}
	s.wrote(ctx, "cancel", err, err == nil)
	if err != nil {
		return jobs.Job{}, fmt.Errorf("pgstore: cancel %s: %w", p.JobID, err)
	}
	s.notify.Broadcast()
	return out[0], nil
}

// retrySQL supersedes the old job and inserts its replacement, the job
// jobs.RetryParams.Replacement decided (queued, so into job_queue too,
// with a new start tag: queue.FairTagsPG), with both events (old first, each
// naming the other), in one statement under the event lock.
var retrySQL = named(`
	WITH old AS (
		UPDATE jobs SET state = 'superseded', updated_at = $now WHERE id = $old_id RETURNING jobs.*
	), src AS (
		SELECT 1 AS ord, $org::text AS org, $priority::int AS prio FROM old
	), `+queue.FairTagsPG("src", "$now::timestamptz")+`, fresh AS (
		INSERT INTO jobs (id, prompt_id, state, priority, attempt, max_attempts, execution_options,
			supersedes, depends_on, org_id, created_by, created_at, updated_at, available_at, token_id, fair_tag)
		SELECT $new_id, $prompt_id, $state, $priority::int, $attempt::int, $max_attempts::int, $options::json,
			NULLIF($supersedes::text, ''), NULLIF($depends_on::text, ''), $org, $created_by,
			$created_at::timestamptz, $updated_at::timestamptz, $available_at::timestamptz, $token_id,
			(SELECT tag FROM fair)
		FROM old
		RETURNING jobs.*
	), queued AS (
		`+queueRows("fresh")+`
	), ev AS (
		INSERT INTO job_events (job_id, prompt_id, org_id, type, from_state, to_state, data, at)
		SELECT id, prompt_id, org_id, 'transition', $from::text, 'superseded', $old_data::json, $now FROM old
		UNION ALL
		SELECT id, prompt_id, org_id, 'transition', NULL, 'queued', $new_data::json, $now FROM fresh
	), `+notified("fresh")+`
	SELECT `+jobCols+` FROM fresh, notified`,
	"now", "old_id", "from", "old_data", "new_data", "schema",
	"new_id", "prompt_id", "state", "priority", "attempt", "max_attempts", "options", "supersedes", "depends_on",
	"org", "created_by", "created_at", "updated_at", "available_at", "token_id")

// Retry supersedes a succeeded, failed or cancelled job with a new queued
// one, jobs.RetryParams.Replacement of the old job read in the first
// trip; any other state is a *jobs.TransitionError. See jobs.Store.
func (s *Store) Retry(ctx context.Context, p jobs.RetryParams) (jobs.Job, error) {
	p, err := p.Normalize()
	if err != nil {
		return jobs.Job{}, fmt.Errorf("pgstore: retry %s: %w", p.JobID, err)
	}
	var old, out jobs.Job
	newID := jobs.NewID()
	oldData, newData := p.Data(newID)
	err = s.writeTwoTrips(ctx, func(ph *phase) {
		lockJob(ph, p.OrgID, p.JobID, jobs.Superseded, &old)
	}, func(ph *phase, now time.Time) {
		j := p.Replacement(old, newID, now)
		ph.queryRow(retrySQL.q, retrySQL.args(now, old.ID, string(old.State), string(oldData), string(newData), s.schema,
			j.ID, j.PromptID, string(j.State), j.Priority, j.Attempt, j.MaxAttempts, string(j.ExecutionOptions.JSON()),
			j.Supersedes, j.DependsOn, j.OrgID, j.CreatedBy, j.CreatedAt, j.UpdatedAt, j.AvailableAt, j.TokenID),
			scanInto(&out))
	})
	s.wrote(ctx, "retry", err, err == nil)
	if err != nil {
		return jobs.Job{}, fmt.Errorf("pgstore: retry %s: %w", p.JobID, err)
	}
	s.notify.Broadcast()
	return out, nil
}

// promptCache maps the jobs this store claimed to their prompts, until a
// finishing call for the job. A Succeed then sends its response ID
// (jobs.ResponseID of prompt and job) with the statement; without it the
// statement derives the ID itself (response_id, migration 00003): two
// SHA-256 hashes a row inside the serialized section, where Go computes
// the ID before the transaction starts. A job's prompt never changes, so an entry cannot be wrong;
// it can only be missing (claimed by another process, or the cache was
// reset), and then the statement falls back. Entries of jobs never
// finished through this store (cancelled, or reclaimed and never reported)
// would accumulate, so the cache starts over when it reaches its bound.
type promptCache struct {
	mu sync.Mutex
	m  map[string]string
}

// promptCacheMax bounds the cache: far more jobs than one process runs at
// once.
const promptCacheMax = 1 << 16

func (c *promptCache) put(jobID, promptID string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil || len(c.m) >= promptCacheMax {
		c.m = make(map[string]string)
	}
	c.m[jobID] = promptID
}

// take returns and forgets a job's prompt ("" when unknown).
func (c *promptCache) take(jobID string) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	p := c.m[jobID]
	delete(c.m, jobID)
	return p
}
