package sqlitestore

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/promptkit/promptkit/jobs"
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
	qHeartbeat = wq(`UPDATE jobs SET running_heartbeat_at = ?1
		WHERE state = 'running' AND worker_claim = ?2 AND id IN (SELECT value FROM json_each(?3))`)
	qClaimedPrompt = wq(`SELECT prompt_id, org_id FROM jobs WHERE id = ? AND state = 'running' AND worker_claim = ?`)
	qSucceed       = wq(`UPDATE jobs SET state = 'succeeded', response_id = ?1, finished_at = ?2, updated_at = ?2,
			error_kind = '', error_message = ''
		WHERE id = ?3 AND state = 'running' AND worker_claim = ?4 RETURNING ` + jobCols)
	qInsertResponse = wq(`INSERT INTO responses (id, prompt_id, job_id, output, parsed, model, usage, created_at)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?)`)
	qRequeue = wq(`UPDATE jobs SET state = 'queued', attempt = attempt + ?1, available_at = ?2,
			error_kind = ?3, error_message = ?4, worker_claim = NULL, claimed_at = NULL, started_at = NULL,
			running_heartbeat_at = NULL, updated_at = ?5
		WHERE id = ?6 AND state = 'running' AND worker_claim = ?7 RETURNING ` + jobCols)
	qFail = wq(`UPDATE jobs SET state = 'failed', error_kind = ?1, error_message = ?2, finished_at = ?3, updated_at = ?3
		WHERE id = ?4 AND state = 'running' AND worker_claim = ?5 RETURNING ` + jobCols)
	qJobForUpdate = wq(`SELECT ` + jobCols + ` FROM jobs WHERE id = ?1 AND (?2 = '' OR org_id = ?2)`)
	qCancel       = wq(`UPDATE jobs SET state = 'cancelled', finished_at = ?1, updated_at = ?1
		WHERE id = ?2 AND state IN ('queued', 'running') RETURNING ` + jobCols)
	qSupersede = wq(`UPDATE jobs SET state = 'superseded', updated_at = ?1
		WHERE id = ?2 AND state IN ('succeeded', 'failed', 'cancelled')`)
	// Reclaim, first the jobs that go back to the queue, then every other
	// job with a lost heartbeat fails as stuck.
	qReclaimRequeue = wq(`UPDATE jobs SET state = 'queued', attempt = attempt + 1, available_at = ?1,
			error_kind = 'worker_crash', error_message = 'heartbeat lost; job reclaimed',
			worker_claim = NULL, claimed_at = NULL, started_at = NULL, running_heartbeat_at = NULL, updated_at = ?1
		WHERE state = 'running' AND running_heartbeat_at < ?2 AND attempt < max_attempts AND started_at > ?3
		RETURNING ` + jobCols)
	qReclaimFail = wq(`UPDATE jobs SET state = 'failed', error_kind = 'stuck',
			error_message = 'heartbeat lost; attempts spent or running too long', finished_at = ?1, updated_at = ?1
		WHERE state = 'running' AND running_heartbeat_at < ?2
		RETURNING ` + jobCols)
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
	if p.Worker == "" {
		return nil, fmt.Errorf("sqlitestore: claim: %w: empty worker", jobs.ErrInvalid)
	}
	limit := p.Limit
	if limit <= 0 {
		limit = 1
	}
	ceiling := 100
	if p.PriorityCeiling != nil {
		ceiling = *p.PriorityCeiling
	}
	var claimed []jobs.Job
	err := s.grouped(ctx, "claim", func(w *wtx) error {
		rows, err := w.query(qClaim, p.Worker, w.now, ceiling, limit)
		if err != nil {
			return err
		}
		if claimed, err = scanJobs(rows); err != nil {
			return err
		}
		slices.SortFunc(claimed, claimOrder)
		for _, j := range claimed {
			w.transition(j, jobs.Queued, jobs.Running)
		}
		return nil
	})
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
	if err != nil {
		return 0, err
	}
	if int(n) < len(ids) {
		return int(n), fmt.Errorf("sqlitestore: heartbeat: %d of %d jobs: %w", len(ids)-int(n), len(ids), jobs.ErrNotClaimed)
	}
	return int(n), nil
}

// Succeed implements jobs.Store.
func (s *Store) Succeed(ctx context.Context, p jobs.SucceedParams) (jobs.Job, error) {
	if len(p.Parsed) > 0 && !json.Valid(p.Parsed) {
		return jobs.Job{}, fmt.Errorf("sqlitestore: succeed: %w: parsed is not JSON", jobs.ErrInvalid)
	}
	usage, err := json.Marshal(p.Usage)
	if err != nil {
		return jobs.Job{}, fmt.Errorf("sqlitestore: succeed: %w", err)
	}
	var j jobs.Job
	err = s.grouped(ctx, "succeed", func(w *wtx) error {
		var promptID, orgID string
		err := w.queryRow(qClaimedPrompt, p.JobID, p.Worker).Scan(&promptID, &orgID)
		if errors.Is(err, sql.ErrNoRows) {
			return jobs.ErrNotClaimed
		}
		if err != nil {
			return err
		}
		rid := jobs.ResponseID(promptID, p.JobID)
		if j, err = scanJob(w.queryRow(qSucceed, rid, w.now, p.JobID, p.Worker)); err != nil {
			return err
		}
		if _, err := w.exec(qInsertResponse, rid, promptID, p.JobID, p.Output, nullBytes(p.Parsed),
			p.Model, string(usage), w.now); err != nil {
			return fmt.Errorf("insert response: %w", err)
		}
		w.transition(j, jobs.Running, jobs.Succeeded)
		return nil
	})
	return j, err
}

// Requeue implements jobs.Store.
func (s *Store) Requeue(ctx context.Context, p jobs.RequeueParams) (jobs.Job, error) {
	inc := 1
	if p.Handback {
		inc = 0
	}
	var j jobs.Job
	err := s.grouped(ctx, "requeue", func(w *wtx) error {
		avail := w.now
		if !p.AvailableAt.IsZero() {
			avail = p.AvailableAt.UnixMicro()
		}
		var err error
		j, err = w.finishRunning(jobs.Queued, qRequeue, inc, avail, string(p.Kind), p.Message, w.now, p.JobID, p.Worker)
		return err
	})
	return j, err
}

// Fail implements jobs.Store. An empty Kind is stored as unknown.
func (s *Store) Fail(ctx context.Context, p jobs.FailParams) (jobs.Job, error) {
	kind := p.Kind
	if kind == jobs.KindNone {
		kind = jobs.KindUnknown
	}
	var j jobs.Job
	err := s.grouped(ctx, "fail", func(w *wtx) error {
		var err error
		j, err = w.finishRunning(jobs.Failed, qFail, string(kind), p.Message, w.now, p.JobID, p.Worker)
		return err
	})
	return j, err
}

// AppendAttempt implements jobs.Store.
func (s *Store) AppendAttempt(ctx context.Context, p jobs.AttemptParams) error {
	if len(p.Data) > 0 && !json.Valid(p.Data) {
		return fmt.Errorf("sqlitestore: append attempt: %w: data is not JSON", jobs.ErrInvalid)
	}
	return s.grouped(ctx, "append attempt", func(w *wtx) error {
		var promptID, orgID string
		err := w.queryRow(qClaimedPrompt, p.JobID, p.Worker).Scan(&promptID, &orgID)
		if errors.Is(err, sql.ErrNoRows) {
			return jobs.ErrNotClaimed
		}
		if err != nil {
			return err
		}
		w.events = append(w.events, jobEvent{jobID: p.JobID, promptID: promptID, orgID: orgID,
			typ: jobs.EventAttempt, data: p.Data})
		return nil
	})
}

// Cancel implements jobs.Store.
func (s *Store) Cancel(ctx context.Context, p jobs.CancelParams) (jobs.Job, error) {
	var j jobs.Job
	err := s.write(ctx, "cancel", func(w *wtx) error {
		old, err := w.jobFor(p.JobID, p.OrgID, jobs.Cancelled)
		if err != nil {
			return err
		}
		if j, err = scanJob(w.queryRow(qCancel, w.now, p.JobID)); err != nil {
			return err
		}
		w.transition(j, old.State, jobs.Cancelled)
		return nil
	})
	return j, err
}

// Retry implements jobs.Store.
func (s *Store) Retry(ctx context.Context, p jobs.RetryParams) (jobs.Job, error) {
	if p.Priority != nil && (*p.Priority < 0 || *p.Priority > 100) {
		return jobs.Job{}, fmt.Errorf("sqlitestore: retry: %w: priority %d outside 0-100", jobs.ErrInvalid, *p.Priority)
	}
	var j jobs.Job
	err := s.write(ctx, "retry", func(w *wtx) error {
		old, err := w.jobFor(p.JobID, p.OrgID, jobs.Superseded)
		if err != nil {
			return err
		}
		if _, err := w.exec(qSupersede, w.now, old.ID); err != nil {
			return err
		}
		w.transition(old, old.State, jobs.Superseded)
		prio := old.Priority
		if p.Priority != nil {
			prio = *p.Priority
		}
		id, err := w.insertJob(old.PromptID, prio, old.MaxAttempts, old.ExecutionOptions, old.ID, old.DependsOn,
			old.OrgID, old.CreatedBy, w.now)
		if err != nil {
			return err
		}
		j, err = scanJob(w.queryRow(qJobForUpdate, id, ""))
		return err
	})
	return j, err
}

// Default reclaim thresholds (seed §5).
const (
	defaultReclaimAfter = 5 * time.Minute
	defaultStuckAfter   = 15 * time.Minute
)

// Reclaim implements jobs.Store. Zero thresholds mean the seed's defaults,
// 5 and 15 minutes.
func (s *Store) Reclaim(ctx context.Context, p jobs.ReclaimParams) (jobs.Reclaimed, error) {
	reclaimAfter := p.ReclaimAfter
	if reclaimAfter <= 0 {
		reclaimAfter = defaultReclaimAfter
	}
	stuckAfter := p.StuckAfter
	if stuckAfter <= 0 {
		stuckAfter = defaultStuckAfter
	}
	var out jobs.Reclaimed
	err := s.write(ctx, "reclaim", func(w *wtx) error {
		heartbeatCut := w.now - reclaimAfter.Microseconds()
		startedCut := w.now - stuckAfter.Microseconds()
		rows, err := w.query(qReclaimRequeue, w.now, heartbeatCut, startedCut)
		if err != nil {
			return err
		}
		requeued, err := scanJobs(rows)
		if err != nil {
			return err
		}
		if rows, err = w.query(qReclaimFail, w.now, heartbeatCut); err != nil {
			return err
		}
		failed, err := scanJobs(rows)
		if err != nil {
			return err
		}
		for _, j := range requeued {
			w.transition(j, jobs.Running, jobs.Queued)
			out.Requeued = append(out.Requeued, j.ID)
		}
		for _, j := range failed {
			w.transition(j, jobs.Running, jobs.Failed)
			out.Failed = append(out.Failed, j.ID)
		}
		return nil
	})
	return out, err
}

// finishRunning runs a finalizing UPDATE … RETURNING on a job running
// under the caller's claim and records its transition; no row means the
// claim was lost, and nothing changed.
func (w *wtx) finishRunning(to jobs.State, q string, args ...any) (jobs.Job, error) {
	j, err := scanJob(w.queryRow(q, args...))
	if errors.Is(err, sql.ErrNoRows) {
		return j, jobs.ErrNotClaimed
	}
	if err != nil {
		return j, err
	}
	w.transition(j, jobs.Running, to)
	return j, nil
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
