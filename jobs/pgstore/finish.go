package pgstore

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/promptkit/promptkit/jobs"
)

// finishReq is one call of Succeed, Fail, Requeue or AppendAttempt, run
// in a group-committed batch (see group).
type finishReq struct {
	op            string // "succeed", "fail", "requeue" or "attempt"
	jobID, worker string
	output, model string // succeed
	parsed, usage *string
	kind, message string // fail, requeue
	inc           int    // requeue: attempts spent (0 for a handback)
	avail         *time.Time
	handback      bool
	data          *string // attempt
	job           jobs.Job
}

// finishSQL applies a batch of finishing writes to jobs this transaction
// has locked and checked, in one statement under the event lock: the
// transitions (HOT updates, see migration 00002; each job leaves
// job_running, and a requeued one goes back into job_queue), the responses
// of succeeded jobs, one event per call in call order, and a notification
// when a job changed state.
var finishSQL = named(`
	WITH u AS (
		SELECT * FROM unnest($op::text[], $id::text[], $response::text[], $output::text[], $parsed::text[],
			$model::text[], $usage::text[], $inc::int[], $available::timestamptz[], $kind::text[],
			$message::text[], $handback::bool[], $data::text[])
			WITH ORDINALITY AS u(op, id, response, output, parsed, model, usage, inc, available, kind,
				message, handback, data, ord)
	), done AS (
		UPDATE jobs SET
			state = CASE u.op WHEN 'succeed' THEN 'succeeded' WHEN 'fail' THEN 'failed' ELSE 'queued' END,
			response_id = CASE WHEN u.op = 'succeed' THEN u.response ELSE jobs.response_id END,
			finished_at = CASE WHEN u.op = 'requeue' THEN NULL ELSE $now::timestamptz END,
			attempt = jobs.attempt + u.inc,
			available_at = CASE WHEN u.op = 'requeue' THEN COALESCE(u.available, $now::timestamptz) ELSE jobs.available_at END,
			worker_claim = CASE WHEN u.op = 'requeue' THEN NULL ELSE jobs.worker_claim END,
			claimed_at = CASE WHEN u.op = 'requeue' THEN NULL ELSE jobs.claimed_at END,
			started_at = CASE WHEN u.op = 'requeue' THEN NULL ELSE jobs.started_at END,
			running_heartbeat_at = CASE WHEN u.op = 'requeue' THEN NULL ELSE jobs.running_heartbeat_at END,
			error_kind = CASE WHEN u.op = 'succeed' THEN NULL ELSE NULLIF(u.kind, '') END,
			error_message = CASE WHEN u.op = 'succeed' THEN NULL ELSE NULLIF(u.message, '') END,
			updated_at = $now::timestamptz
		FROM u WHERE jobs.id = u.id AND u.op <> 'attempt'
		RETURNING jobs.*, u.ord
	), stopped AS (
		DELETE FROM job_running WHERE job_id = ANY (ARRAY(SELECT id FROM done))
	), requeued AS (
		`+queueRows("done")+`
	), resp AS (
		-- The response IDs cannot collide: each job is running and locked
		-- by this transaction, so the insert cannot wait under the lock.
		INSERT INTO responses (id, prompt_id, job_id, output, parsed, model, usage, created_at)
		SELECT u.response, done.prompt_id, done.id, u.output, u.parsed::json, u.model, u.usage::json, $now::timestamptz
		FROM done JOIN u ON u.ord = done.ord WHERE u.op = 'succeed'
	), ev AS (
		INSERT INTO job_events (job_id, prompt_id, org_id, type, from_state, to_state, data, at)
		SELECT job_id, prompt_id, org_id, type, from_state, to_state, data, $now::timestamptz FROM (
			SELECT done.id AS job_id, done.prompt_id, done.org_id, 'transition' AS type,
				'running' AS from_state, done.state AS to_state,
				CASE u.op
					WHEN 'succeed' THEN NULL
					WHEN 'fail' THEN jsonb_build_object('error_kind', u.kind, 'error_message', u.message)::json
					ELSE jsonb_build_object('error_kind', u.kind, 'error_message', u.message, 'handback', u.handback)::json
				END AS data, u.ord
			FROM done JOIN u ON u.ord = done.ord
			UNION ALL
			SELECT jobs.id, jobs.prompt_id, jobs.org_id, 'attempt', NULL, NULL, u.data::json, u.ord
			FROM u JOIN jobs ON jobs.id = u.id WHERE u.op = 'attempt'
		) e ORDER BY ord
	), `+notified("done")+`
	SELECT `+jobCols+`, ord FROM done, notified`,
	"op", "id", "response", "output", "parsed", "model", "usage", "inc", "available", "kind", "message",
	"handback", "data", "now", "schema")

// runFinish runs finishing writes in one transaction of their own.
func (s *Store) runFinish(ctx context.Context, reqs []*finishReq) []error {
	b := newFinishBatch(reqs, s.schema)
	if err := s.write(ctx, b.pre, b.locked); err != nil {
		for i := range b.errs {
			b.errs[i] = err
		}
		return b.errs
	}
	if b.changed {
		s.broadcast()
	}
	return b.errs
}

// finishBatch is the part of a writing transaction that finishes jobs: it
// locks the jobs before the event lock (in ID order, so concurrent batches
// cannot deadlock), checks each call's claim, and applies the valid calls
// in one statement under the lock. A call whose job is not running under
// its worker gets jobs.ErrNotClaimed and changes nothing. The calls name
// distinct jobs (the group commit's key sees to it).
type finishBatch struct {
	reqs    []*finishReq
	errs    []error
	schema  string
	held    map[string]heldJob
	changed bool // a job changed state
}

// heldJob is a job row as the batch locked it.
type heldJob struct{ promptID, state, claim string }

func newFinishBatch(reqs []*finishReq, schema string) *finishBatch {
	return &finishBatch{reqs: reqs, errs: make([]error, len(reqs)), schema: schema}
}

func (b *finishBatch) pre(p *phase) {
	ids := make([]string, len(b.reqs))
	for i, r := range b.reqs {
		ids[i] = r.jobID
	}
	p.query(`SELECT id, prompt_id, state, coalesce(worker_claim, '') FROM jobs WHERE id = ANY($1) ORDER BY id FOR UPDATE`,
		[]any{ids}, func(rows pgx.Rows) error {
			b.held = make(map[string]heldJob, len(ids))
			for rows.Next() {
				var id string
				var h heldJob
				if err := rows.Scan(&id, &h.promptID, &h.state, &h.claim); err != nil {
					return err
				}
				b.held[id] = h
			}
			return nil
		})
}

func (b *finishBatch) locked(p *phase, now time.Time) {
	var (
		valid                                          []int
		op, id, response, output, model, kind, message []string
		parsed, usage, data                            []*string
		inc                                            []int
		avail                                          []*time.Time
		handback                                       []bool
	)
	b.changed = false
	for i, r := range b.reqs {
		b.errs[i] = nil
		h, ok := b.held[r.jobID]
		if !ok || jobs.State(h.state) != jobs.Running || r.worker == "" || h.claim != r.worker {
			b.errs[i] = jobs.ErrNotClaimed
			continue
		}
		rid := ""
		if r.op == "succeed" {
			rid = jobs.ResponseID(h.promptID, r.jobID)
		}
		if r.op != "attempt" {
			b.changed = true
		}
		valid = append(valid, i)
		op, id, response, output, model = append(op, r.op), append(id, r.jobID), append(response, rid), append(output, r.output), append(model, r.model)
		kind, message, parsed, usage, data = append(kind, r.kind), append(message, r.message), append(parsed, r.parsed), append(usage, r.usage), append(data, r.data)
		inc, avail, handback = append(inc, r.inc), append(avail, r.avail), append(handback, r.handback)
	}
	if len(valid) == 0 {
		return
	}
	p.query(finishSQL.q, finishSQL.args(op, id, response, output, parsed, model, usage, inc, avail, kind,
		message, handback, data, now, b.schema), func(rows pgx.Rows) error {
		for rows.Next() {
			var ord int
			j, err := scanJob(rows, &ord)
			if err != nil {
				return err
			}
			b.reqs[valid[ord-1]].job = j
		}
		return nil
	})
}

// finish runs one finishing write through the group commit.
func (s *Store) finish(ctx context.Context, r *finishReq) (jobs.Job, error) {
	if err := s.writes.do(ctx, &writeReq{finish: r}); err != nil {
		return jobs.Job{}, err
	}
	return r.job, nil
}

// Succeed writes the response and moves the job running → succeeded, only
// when it runs under Worker; otherwise jobs.ErrNotClaimed. Concurrent
// finishing writes are committed together. See jobs.Store.
func (s *Store) Succeed(ctx context.Context, p jobs.SucceedParams) (jobs.Job, error) {
	if len(p.Parsed) > 0 && !json.Valid(p.Parsed) {
		return jobs.Job{}, fmt.Errorf("pgstore: succeed %s: parsed output is not valid JSON: %w", p.JobID, jobs.ErrInvalid)
	}
	usage, err := json.Marshal(p.Usage)
	if err != nil {
		return jobs.Job{}, fmt.Errorf("pgstore: succeed %s: %w", p.JobID, err)
	}
	j, err := s.finish(ctx, &finishReq{op: "succeed", jobID: p.JobID, worker: p.Worker, output: p.Output,
		parsed: rawPtr(p.Parsed), model: p.Model, usage: new(string(usage))})
	if err != nil {
		return jobs.Job{}, fmt.Errorf("pgstore: succeed %s: %w", p.JobID, err)
	}
	return j, nil
}

// Requeue moves a job running under Worker back to queued; otherwise
// jobs.ErrNotClaimed. See jobs.Store.
func (s *Store) Requeue(ctx context.Context, p jobs.RequeueParams) (jobs.Job, error) {
	r := &finishReq{op: "requeue", jobID: p.JobID, worker: p.Worker, kind: string(p.Kind), message: p.Message,
		inc: 1, handback: p.Handback}
	if p.Handback {
		r.inc = 0
	}
	if !p.AvailableAt.IsZero() {
		r.avail = new(p.AvailableAt.UTC().Truncate(time.Microsecond))
	}
	j, err := s.finish(ctx, r)
	if err != nil {
		return jobs.Job{}, fmt.Errorf("pgstore: requeue %s: %w", p.JobID, err)
	}
	return j, nil
}

// Fail moves a job running under Worker to failed (an empty Kind is
// stored as unknown); otherwise jobs.ErrNotClaimed. See jobs.Store.
func (s *Store) Fail(ctx context.Context, p jobs.FailParams) (jobs.Job, error) {
	kind := p.Kind
	if kind == jobs.KindNone {
		kind = jobs.KindUnknown
	}
	j, err := s.finish(ctx, &finishReq{op: "fail", jobID: p.JobID, worker: p.Worker, kind: string(kind), message: p.Message})
	if err != nil {
		return jobs.Job{}, fmt.Errorf("pgstore: fail %s: %w", p.JobID, err)
	}
	return j, nil
}

// AppendAttempt records one execution attempt of a job running under
// Worker; otherwise jobs.ErrNotClaimed. See jobs.Store.
func (s *Store) AppendAttempt(ctx context.Context, p jobs.AttemptParams) error {
	if len(p.Data) > 0 && !json.Valid(p.Data) {
		return fmt.Errorf("pgstore: append attempt %s: data is not valid JSON: %w", p.JobID, jobs.ErrInvalid)
	}
	if _, err := s.finish(ctx, &finishReq{op: "attempt", jobID: p.JobID, worker: p.Worker, data: rawPtr(p.Data)}); err != nil {
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

// cancelSQL moves one job (locked and checked by this transaction) to
// cancelled, out of job_queue or job_running, with its event and a
// notification, under the event lock (the side tables are written only
// there, so the deletes never wait).
var cancelSQL = named(`
	WITH done AS (
		UPDATE jobs SET state = 'cancelled', finished_at = $now, updated_at = $now WHERE id = $id RETURNING jobs.*
	), dequeued AS (
		DELETE FROM job_queue WHERE job_id = $id
	), stopped AS (
		DELETE FROM job_running WHERE job_id = $id
	), ev AS (
		INSERT INTO job_events (job_id, prompt_id, org_id, type, from_state, to_state, at)
		SELECT id, prompt_id, org_id, 'transition', $from::text, 'cancelled', $now FROM done
	), `+notified("done")+`
	SELECT `+jobCols+` FROM done, notified`,
	"now", "id", "from", "schema")

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
	var old, out jobs.Job
	err := s.write(ctx, func(ph *phase) {
		lockJob(ph, p.OrgID, p.JobID, jobs.Cancelled, &old)
	}, func(ph *phase, now time.Time) {
		ph.queryRow(cancelSQL.q, cancelSQL.args(now, p.JobID, string(old.State), s.schema), scanInto(&out))
	})
	if err != nil {
		return jobs.Job{}, fmt.Errorf("pgstore: cancel %s: %w", p.JobID, err)
	}
	s.broadcast()
	return out, nil
}

// retrySQL supersedes the old job and inserts its replacement (queued,
// so into job_queue too), with both events (old first), in one statement
// under the event lock.
var retrySQL = named(`
	WITH old AS (
		UPDATE jobs SET state = 'superseded', updated_at = $now WHERE id = $old_id RETURNING jobs.*
	), fresh AS (
		INSERT INTO jobs (id, prompt_id, state, priority, attempt, max_attempts, execution_options,
			supersedes, depends_on, org_id, created_by, created_at, updated_at, available_at)
		SELECT $new_id, prompt_id, 'queued', COALESCE($priority::int, priority), 1, max_attempts, execution_options,
			id, depends_on, org_id, created_by, $now, $now, $now
		FROM old
		RETURNING jobs.*
	), queued AS (
		`+queueRows("fresh")+`
	), ev AS (
		INSERT INTO job_events (job_id, prompt_id, org_id, type, from_state, to_state, at)
		SELECT id, prompt_id, org_id, 'transition', $from::text, 'superseded', $now FROM old
		UNION ALL
		SELECT id, prompt_id, org_id, 'transition', NULL, 'queued', $now FROM fresh
	), `+notified("fresh")+`
	SELECT `+jobCols+` FROM fresh, notified`,
	"now", "old_id", "new_id", "priority", "from", "schema")

// Retry supersedes a succeeded, failed or cancelled job with a new queued
// one (same prompt, options and dependency; the old priority unless
// overridden); any other state is a *jobs.TransitionError. See
// jobs.Store.
func (s *Store) Retry(ctx context.Context, p jobs.RetryParams) (jobs.Job, error) {
	if p.Priority != nil && (*p.Priority < 0 || *p.Priority > 100) {
		return jobs.Job{}, fmt.Errorf("pgstore: retry %s: priority %d is outside 0–100: %w", p.JobID, *p.Priority, jobs.ErrInvalid)
	}
	var old, out jobs.Job
	newID := jobs.NewID()
	err := s.write(ctx, func(ph *phase) {
		lockJob(ph, p.OrgID, p.JobID, jobs.Superseded, &old)
	}, func(ph *phase, now time.Time) {
		ph.queryRow(retrySQL.q, retrySQL.args(now, p.JobID, newID, p.Priority, string(old.State), s.schema), scanInto(&out))
	})
	if err != nil {
		return jobs.Job{}, fmt.Errorf("pgstore: retry %s: %w", p.JobID, err)
	}
	s.broadcast()
	return out, nil
}
