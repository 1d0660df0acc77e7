package sqlitestore

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/promptkit/promptkit/jobs"
	"github.com/promptkit/promptkit/jobs/internal/finish"
)

var (
	// The claim is one statement: SQLite has a single writer, so the
	// subquery's choice cannot be taken by anyone else before the UPDATE
	// applies it. NOT EXISTS rather than "depends_on IN (terminal jobs)"
	// keeps a child claimable when its (terminal) parent was archived.
	qClaim = wq(`UPDATE jobs SET state = 'running', worker_claim = ?1, claimed_at = ?2, started_at = ?2,
			running_heartbeat_at = ?2, updated_at = ?2
		WHERE id IN (
			SELECT j.id FROM jobs j
			WHERE j.state = 'queued' AND j.available_at <= ?2 AND j.priority <= ?3
				AND (j.depends_on IS NULL OR NOT EXISTS (
					SELECT 1 FROM jobs d WHERE d.id = j.depends_on AND d.state IN ('queued', 'running')))
			ORDER BY j.priority, j.available_at, j.created_at, j.id
			LIMIT ?4)
		RETURNING ` + jobCols)
	// qClaimable says whether some queued job may be claimable (it
	// ignores dependencies: it may say yes when the claim then finds
	// nothing, never the reverse).
	qClaimable = `SELECT EXISTS (SELECT 1 FROM jobs WHERE state = 'queued' AND available_at <= ?1 AND priority <= ?2)`
	// qClaimID claims one job by ID, as qClaim would (see
	// jobs.EnqueueParams.ClaimAs).
	qClaimID = wq(`UPDATE jobs SET state = 'running', worker_claim = ?1, claimed_at = ?2, started_at = ?2,
			running_heartbeat_at = ?2, updated_at = ?2
		WHERE id = ?3 AND state = 'queued' RETURNING ` + jobCols)
	qHeartbeat = wq(`UPDATE jobs SET running_heartbeat_at = ?1
		WHERE state = 'running' AND worker_claim = ?2 AND id IN (SELECT value FROM json_each(?3))`)
	qClaimedPrompt = wq(`SELECT prompt_id, org_id, created_by, token_id FROM jobs
		WHERE id = ? AND state = 'running' AND worker_claim = ?`)
	qInsertCall = wq(`INSERT INTO usage_ledger (at, job_id, org_id, user_id, token_id, model, backend,
		input_tokens, output_tokens, cached_tokens, cost_usd) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`)
	// The finishing write: the job moves to the state ?1 Go decided, only
	// while it runs under the caller's claim. A job going back to the
	// queue leaves its worker: no claim, no run times, no finish time.
	qFinish = wq(`UPDATE jobs SET state = ?1, attempt = attempt + ?2, available_at = coalesce(?3, available_at),
			error_kind = ?4, error_message = ?5, response_id = coalesce(?6, response_id),
			finished_at = CASE ?1 WHEN 'queued' THEN NULL ELSE ?7 END,
			worker_claim = CASE ?1 WHEN 'queued' THEN NULL ELSE worker_claim END,
			claimed_at = CASE ?1 WHEN 'queued' THEN NULL ELSE claimed_at END,
			started_at = CASE ?1 WHEN 'queued' THEN NULL ELSE started_at END,
			running_heartbeat_at = CASE ?1 WHEN 'queued' THEN NULL ELSE running_heartbeat_at END,
			updated_at = ?7
		WHERE id = ?8 AND state = 'running' AND worker_claim = ?9 RETURNING ` + jobCols)
	qInsertResponse = wq(`INSERT INTO responses (id, prompt_id, job_id, output, parsed, model, usage, created_at,
		finish_reason, tool_calls) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`)
	qJobForUpdate = wq(`SELECT ` + jobCols + ` FROM jobs WHERE id = ?1 AND (?2 = '' OR org_id = ?2)`)
	qCancel       = wq(`UPDATE jobs SET state = 'cancelled', finished_at = ?1, updated_at = ?1
		WHERE id = ?2 AND state IN ('queued', 'running') RETURNING ` + jobCols)
	qSupersede = wq(`UPDATE jobs SET state = 'superseded', updated_at = ?1
		WHERE id = ?2 AND state IN ('succeeded', 'failed', 'cancelled')`)
	// Reclaim's candidates: running jobs whose heartbeat is older than the
	// cutoff (the partial index jobs_reclaim holds exactly the running
	// jobs).
	qExpired = wq(`SELECT ` + jobCols + ` FROM jobs WHERE state = 'running' AND running_heartbeat_at < ?1
		ORDER BY running_heartbeat_at, id`)
)

// claimOrder sorts claimed jobs into claim order: RETURNING does not
// promise the subquery's order.
func claimOrder(a, b jobs.Job) int {
	switch {
	case a.Priority != b.Priority:
		return a.Priority - b.Priority
	case !a.AvailableAt.Equal(b.AvailableAt):
		return a.AvailableAt.Compare(b.AvailableAt)
	case !a.CreatedAt.Equal(b.CreatedAt):
		return a.CreatedAt.Compare(b.CreatedAt)
	default:
		if a.ID < b.ID {
			return -1
		}
		if a.ID > b.ID {
			return 1
		}
		return 0
	}
}

// Claim implements jobs.Store: one UPDATE … RETURNING in one transaction,
// plus one queued → running event per job, in claim order.
func (s *Store) Claim(ctx context.Context, p jobs.ClaimParams) ([]jobs.Job, error) {
	p, err := p.Normalize()
	if err != nil {
		return nil, fmt.Errorf("sqlitestore: claim: %w", err)
	}
	// A read first: most claims that find nothing (an idle worker's poll,
	// the wake-up every commit sends) then never take the write lock,
	// which the commits of running jobs are waiting for. A job it misses
	// was committed after it looked: a valid moment for the claim.
	var some bool
	now := max(s.nowMicros(), s.floor.Load()) // as a transaction would stamp it
	if err := s.readRow(ctx, qClaimable, now, *p.PriorityCeiling).Scan(&some); err != nil {
		return nil, fmt.Errorf("sqlitestore: claim: %w", err)
	}
	if !some {
		return nil, nil
	}
	data := jobs.TransitionData{Worker: p.Worker}.JSON()
	var claimed []jobs.Job
	err = s.grouped(ctx, "claim", func(w *wtx) error {
		rows, err := w.query(qClaim, p.Worker, w.now, *p.PriorityCeiling, p.Limit)
		if err != nil {
			return err
		}
		if claimed, err = scanJobs(rows); err != nil {
			return err
		}
		slices.SortFunc(claimed, claimOrder)
		for _, j := range claimed {
			w.transition(j, jobs.Queued, jobs.Running, data)
		}
		return nil
	})
	s.wrote(ctx, "claim", err, len(claimed) > 0)
	if err != nil {
		return nil, err
	}
	return claimed, nil
}

// Heartbeat implements jobs.Store. When some of the jobs are not running
// under Worker (any more), it returns the count it did update together
// with ErrNotClaimed, so the worker learns that a claim was lost.
func (s *Store) Heartbeat(ctx context.Context, p jobs.HeartbeatParams) (int, error) {
	ids := slices.Compact(slices.Sorted(slices.Values(p.JobIDs)))
	if len(ids) == 0 {
		return 0, nil
	}
	list, err := json.Marshal(ids)
	if err != nil {
		return 0, fmt.Errorf("sqlitestore: heartbeat: %w", err)
	}
	var n int64
	err = s.grouped(ctx, "heartbeat", func(w *wtx) error {
		res, err := w.exec(qHeartbeat, w.now, p.Worker, string(list))
		if err != nil {
			return err
		}
		n, err = res.RowsAffected()
		return err
	})
	s.wrote(ctx, "heartbeat", err, n > 0)
	if err != nil {
		return 0, err
	}
	if int(n) < len(ids) {
		return int(n), fmt.Errorf("sqlitestore: heartbeat: %d of %d jobs: %w", len(ids)-int(n), len(ids), jobs.ErrNotClaimed)
	}
	return int(n), nil
}

// finish applies a finishing write through the group commit.
func (s *Store) finish(ctx context.Context, op string, f finish.Write) (jobs.Job, error) {
	var j jobs.Job
	err := s.grouped(ctx, op, func(w *wtx) error {
		var err error
		j, err = w.finish(f)
		return err
	})
	s.wrote(ctx, op, err, err == nil)
	return j, err
}

// Succeed implements jobs.Store.
func (s *Store) Succeed(ctx context.Context, p jobs.SucceedParams) (jobs.Job, error) {
	p, err := p.Normalize()
	if err != nil {
		return jobs.Job{}, fmt.Errorf("sqlitestore: succeed: %w", err)
	}
	f, err := finish.Succeed(p)
	if err != nil {
		return jobs.Job{}, fmt.Errorf("sqlitestore: succeed: %w", err)
	}
	return s.finish(ctx, "succeed", f)
}

// Requeue implements jobs.Store.
func (s *Store) Requeue(ctx context.Context, p jobs.RequeueParams) (jobs.Job, error) {
	p, err := p.Normalize()
	if err != nil {
		return jobs.Job{}, fmt.Errorf("sqlitestore: requeue: %w", err)
	}
	return s.finish(ctx, "requeue", finish.Requeue(p))
}

// Fail implements jobs.Store.
func (s *Store) Fail(ctx context.Context, p jobs.FailParams) (jobs.Job, error) {
	p, err := p.Normalize()
	if err != nil {
		return jobs.Job{}, fmt.Errorf("sqlitestore: fail: %w", err)
	}
	return s.finish(ctx, "fail", finish.Fail(p))
}

// AppendAttempt implements jobs.Store.
func (s *Store) AppendAttempt(ctx context.Context, p jobs.AttemptParams) error {
	p, err := p.Normalize()
	if err != nil {
		return fmt.Errorf("sqlitestore: append attempt: %w", err)
	}
	_, err = s.finish(ctx, "append attempt", finish.Attempt(p))
	return err
}

// Cancel implements jobs.Store.
func (s *Store) Cancel(ctx context.Context, p jobs.CancelParams) (jobs.Job, error) {
	var j jobs.Job
	err := s.write(ctx, "cancel", func(w *wtx) error {
		old, err := w.jobFor(p.JobID, p.OrgID, jobs.Cancelled)
		if err != nil {
			return err
		}
		j, err = w.cancel(old)
		return err
	})
	s.wrote(ctx, "cancel", err, err == nil)
	return j, err
}

// Retry implements jobs.Store.
func (s *Store) Retry(ctx context.Context, p jobs.RetryParams) (jobs.Job, error) {
	p, err := p.Normalize()
	if err != nil {
		return jobs.Job{}, fmt.Errorf("sqlitestore: retry: %w", err)
	}
	var j jobs.Job
	err = s.write(ctx, "retry", func(w *wtx) error {
		old, err := w.jobFor(p.JobID, p.OrgID, jobs.Superseded)
		if err != nil {
			return err
		}
		if _, err := w.exec(qSupersede, w.now, old.ID); err != nil {
			return err
		}
		id := jobs.NewID()
		w.transition(old, old.State, jobs.Superseded, jobs.TransitionData{SupersededBy: id}.JSON())
		if err := w.insertJob(id, old.PromptID, p.PriorityOf(old), old.MaxAttempts, old.ExecutionOptions.JSON(), old.ID, old.DependsOn,
			old.OrgID, old.CreatedBy, old.TokenID, w.now); err != nil {
			return err
		}
		j, err = scanJob(w.queryRow(qJobForUpdate, id, ""))
		return err
	})
	s.wrote(ctx, "retry", err, err == nil)
	return j, err
}

// Reclaim implements jobs.Store: it reads the running jobs whose
// heartbeat is older than the cutoff and applies ReclaimParams.Decide's
// decision to each through the finishing write, conditioned on the lost
// worker's claim.
func (s *Store) Reclaim(ctx context.Context, p jobs.ReclaimParams) (jobs.Reclaimed, error) {
	p, err := p.Normalize()
	if err != nil {
		return jobs.Reclaimed{}, fmt.Errorf("sqlitestore: reclaim: %w", err)
	}
	var out jobs.Reclaimed
	err = s.write(ctx, "reclaim", func(w *wtx) error {
		out = jobs.Reclaimed{}
		now := fromMicros(w.now)
		rows, err := w.query(qExpired, p.HeartbeatCutoff(now).UnixMicro())
		if err != nil {
			return err
		}
		expired, err := scanJobs(rows)
		if err != nil {
			return err
		}
		for _, j := range expired {
			d := p.Decide(j)
			if _, err := w.finish(finish.Reclaim(j, d)); err != nil {
				return err
			}
			if d.To == jobs.Queued {
				out.Requeued = append(out.Requeued, j.ID)
			} else {
				out.Failed = append(out.Failed, j.ID)
			}
		}
		return nil
	})
	s.wrote(ctx, "reclaim", err, len(out.Requeued)+len(out.Failed) > 0)
	if err != nil {
		return jobs.Reclaimed{}, err
	}
	return out, nil
}

// finish applies f to a job running under f.Worker and records its
// event; a job not running under that worker (an unknown one included) is
// jobs.ErrNotClaimed, and nothing changes.
func (w *wtx) finish(f finish.Write) (jobs.Job, error) {
	var promptID, orgID, createdBy, tokenID string
	if !f.Transition() || f.To == jobs.Succeeded {
		// The attempt's event and the response need the prompt, the
		// attempt's ledger row the job's owners.
		err := w.queryRow(qClaimedPrompt, f.JobID, f.Worker).Scan(&promptID, &orgID, &createdBy, &tokenID)
		if errors.Is(err, sql.ErrNoRows) {
			return jobs.Job{}, jobs.ErrNotClaimed
		}
		if err != nil {
			return jobs.Job{}, err
		}
	}
	if !f.Transition() {
		w.events = append(w.events, jobEvent{jobID: f.JobID, promptID: promptID, orgID: orgID,
			typ: jobs.EventAttempt, data: f.Data})
		return jobs.Job{}, w.insertCalls(jobs.Job{ID: f.JobID, OrgID: orgID, CreatedBy: createdBy, TokenID: tokenID}, f.Calls)
	}
	var responseID, available any
	if f.To == jobs.Succeeded {
		responseID = jobs.ResponseID(promptID, f.JobID)
	}
	if f.To == jobs.Queued {
		available = w.now
		if !f.AvailableAt.IsZero() {
			available = f.AvailableAt.UnixMicro()
		}
	}
	j, err := scanJob(w.queryRow(qFinish, string(f.To), f.Attempts, available, string(f.Kind), f.Message,
		responseID, w.now, f.JobID, f.Worker))
	if errors.Is(err, sql.ErrNoRows) {
		return jobs.Job{}, jobs.ErrNotClaimed
	}
	if err != nil {
		return jobs.Job{}, err
	}
	if f.To == jobs.Succeeded {
		if _, err := w.exec(qInsertResponse, responseID, promptID, f.JobID, f.Output, nullBytes(f.Parsed),
			f.Model, string(f.Usage), w.now, f.FinishReason, nullBytes(f.ToolCalls)); err != nil {
			return jobs.Job{}, fmt.Errorf("insert response: %w", err)
		}
	}
	for _, d := range f.AttemptEvents {
		w.events = append(w.events, jobEvent{jobID: f.JobID, promptID: j.PromptID, orgID: j.OrgID,
			typ: jobs.EventAttempt, data: d})
	}
	if err := w.insertCalls(j, f.Calls); err != nil {
		return jobs.Job{}, err
	}
	w.transition(j, jobs.Running, f.To, f.Data)
	return j, nil
}

// insertCalls writes j's provider calls to the usage ledger, at the
// transaction's time; an unknown count or cost is NULL.
func (w *wtx) insertCalls(j jobs.Job, calls []jobs.UsageCall) error {
	for _, c := range calls {
		if _, err := w.exec(qInsertCall, w.now, j.ID, j.OrgID, j.CreatedBy, j.TokenID, c.Model, c.Backend,
			nullInt(c.InputTokens), nullInt(c.OutputTokens), nullInt(c.CachedInputTokens), nullFloat(c.CostUSD)); err != nil {
			return fmt.Errorf("insert usage: %w", err)
		}
	}
	return nil
}

// nullInt maps nil to NULL.
func nullInt(v *int64) any {
	if v == nil {
		return nil
	}
	return *v
}

// nullFloat maps nil to NULL.
func nullFloat(v *float64) any {
	if v == nil {
		return nil
	}
	return *v
}

// jobFor loads a job of the org for an operator transition to to, and
// checks that the state machine allows it.
func (w *wtx) jobFor(jobID, orgID string, to jobs.State) (jobs.Job, error) {
	j, err := scanJob(w.queryRow(qJobForUpdate, jobID, orgID))
	if err != nil {
		return j, notFound(err)
	}
	return j, jobs.CheckTransition(j.State, to)
}
