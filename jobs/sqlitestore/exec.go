package sqlitestore

import (
	"cmp"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/promptkit/promptkit/jobs"
	"github.com/promptkit/promptkit/jobs/internal/finish"
	"github.com/promptkit/promptkit/jobs/internal/queue"
)

var (
	// The claim is one statement: SQLite has a single writer, so the
	// subquery's choice cannot be taken by anyone else before the UPDATE
	// applies it. NOT EXISTS rather than "depends_on IN (terminal jobs)"
	// keeps a child claimable when its (terminal) parent was archived.
	// RETURNING adds the start tag, for scanClaimed.
	qClaim = wq(`UPDATE jobs SET state = 'running', worker_claim = ?1, claimed_at = ?2, started_at = ?2,
			running_heartbeat_at = ?2, updated_at = ?2
		WHERE id IN (
			SELECT j.id FROM jobs j
			WHERE ` + claimableSQL + `
			ORDER BY j.priority, j.fair_tag, j.id
			LIMIT ?4)
		RETURNING ` + jobCols + `, fair_tag`)
	// qCaps lists the capped orgs (queue.Limit.Capped: a concurrency
	// limit or a pause) with their limit, pause and running jobs, from
	// which caps decides their room (pickCapped); it is empty without such
	// limits, and the claim is then qClaim alone.
	qCaps = wq(`SELECT l.subject, l.max_running, l.paused, (` + orgRunningSQL + `)
		FROM limits l WHERE l.scope = 'org' AND ` + queue.CappedSQL("l"))
	// qPickFree picks, in claim order, the claimable jobs of the orgs
	// without a concurrency limit (?4: the others, a JSON array); the
	// unary + keeps SQLite on jobs_claim rather than an org index.
	qPickFree = wq(`SELECT j.id, j.priority, j.fair_tag FROM jobs j
		WHERE ` + claimableSQL + ` AND +j.org_id NOT IN (SELECT value FROM json_each(?4))
		ORDER BY j.priority, j.fair_tag, j.id LIMIT ?5`)
	// qPickOrg picks, in claim order, the claimable jobs of org ?4 up to
	// the place (?6, ?7, ?8) in claim order.
	qPickOrg = wq(`SELECT j.id, j.priority, j.fair_tag FROM jobs j
		WHERE ` + claimableSQL + ` AND +j.org_id = ?4 AND (j.priority, j.fair_tag, j.id) <= (?6, ?7, ?8)
		ORDER BY j.priority, j.fair_tag, j.id LIMIT ?5`)
	// qPickFreeSkip and qPickOrgSkip are qPickFree and qPickOrg leaving
	// out the jobs whose prompt's profile is in ?6 and ?9 (JSON arrays:
	// jobs.ClaimParams.SkipProfiles); the claim uses them only then, so
	// the plan of the others never changes.
	qPickFreeSkip = wq(`SELECT j.id, j.priority, j.fair_tag FROM jobs j
		WHERE ` + claimableSQL + ` AND +j.org_id NOT IN (SELECT value FROM json_each(?4))
			AND NOT EXISTS (SELECT 1 FROM prompts p WHERE p.id = j.prompt_id
				AND p.profile IN (SELECT value FROM json_each(?6)))
		ORDER BY j.priority, j.fair_tag, j.id LIMIT ?5`)
	qPickOrgSkip = wq(`SELECT j.id, j.priority, j.fair_tag FROM jobs j
		WHERE ` + claimableSQL + ` AND +j.org_id = ?4 AND (j.priority, j.fair_tag, j.id) <= (?6, ?7, ?8)
			AND NOT EXISTS (SELECT 1 FROM prompts p WHERE p.id = j.prompt_id
				AND p.profile IN (SELECT value FROM json_each(?9)))
		ORDER BY j.priority, j.fair_tag, j.id LIMIT ?5`)
	// qClaimIDs claims the queued jobs ?3 (a JSON array) picked.
	qClaimIDs = wq(`UPDATE jobs SET state = 'running', worker_claim = ?1, claimed_at = ?2, started_at = ?2,
			running_heartbeat_at = ?2, updated_at = ?2
		WHERE id IN (SELECT value FROM json_each(?3)) AND state = 'queued'
		RETURNING ` + jobCols + `, fair_tag`)
	// qClaimable says whether some queued job may be claimable (it
	// ignores dependencies: it may say yes when the claim then finds
	// nothing, never the reverse), and whether some org has a concurrency
	// limit or a pause (see Claim).
	qClaimable = `SELECT EXISTS (SELECT 1 FROM jobs WHERE state = 'queued' AND available_at <= ?1 AND priority <= ?2),
		EXISTS (SELECT 1 FROM limits l WHERE ` + queue.CappedSQL("l") + `)`
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
		input_tokens, output_tokens, cached_tokens, reasoning_tokens, cost_usd, status_code, outcome, failure)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`)
	// The finishing write: the job moves to the state ?1 Go decided, only
	// while it runs under the caller's claim. A job Go sends back to the
	// queue (?10, finish.Write.ClearClaim) leaves its worker: no claim, no
	// run times, no finish time.
	qFinish = wq(`UPDATE jobs SET state = ?1, attempt = attempt + ?2, available_at = coalesce(?3, available_at),
			error_kind = ?4, error_message = ?5, response_id = coalesce(?6, response_id),
			finished_at = CASE WHEN ?10 THEN NULL ELSE ?7 END,
			worker_claim = CASE WHEN ?10 THEN NULL ELSE worker_claim END,
			claimed_at = CASE WHEN ?10 THEN NULL ELSE claimed_at END,
			started_at = CASE WHEN ?10 THEN NULL ELSE started_at END,
			running_heartbeat_at = CASE WHEN ?10 THEN NULL ELSE running_heartbeat_at END,
			updated_at = ?7
		WHERE id = ?8 AND state = 'running' AND worker_claim = ?9 RETURNING ` + jobCols)
	qInsertResponse = wq(`INSERT INTO responses (id, prompt_id, job_id, output, parsed, model, usage, created_at,
		finish_reason, tool_calls, backend, body) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`)
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

// orgRunningSQL counts the running jobs of the org of the limits row l,
// through jobs_reclaim, which holds only them.
const orgRunningSQL = `SELECT count(*) FROM jobs INDEXED BY jobs_reclaim WHERE state = 'running' AND org_id = l.subject`

// claimableSQL says whether the job j is claimable at ?2 under priority
// ceiling ?3.
const claimableSQL = `j.state = 'queued' AND j.available_at <= ?2 AND j.priority <= ?3
				AND (j.depends_on IS NULL OR NOT EXISTS (
					SELECT 1 FROM jobs d WHERE d.id = j.depends_on AND d.state IN ('queued', 'running')))`

// queuePos is a queued job's place in claim order.
type queuePos struct {
	id       string
	priority int
	tag      float64
}

func (a queuePos) compare(b queuePos) int {
	switch {
	case a.priority != b.priority:
		return a.priority - b.priority
	case a.tag != b.tag:
		return cmp.Compare(a.tag, b.tag)
	default:
		return strings.Compare(a.id, b.id)
	}
}

// scanClaimed reads claimed jobs (jobCols and fair_tag) and sorts them
// into claim order: RETURNING does not promise the subquery's order.
func scanClaimed(rows *sql.Rows) ([]jobs.Job, error) {
	defer rows.Close()
	type claimed struct {
		job jobs.Job
		pos queuePos
	}
	var all []claimed
	for rows.Next() {
		var tag float64
		j, err := scanJob(tagScanner{rows, &tag})
		if err != nil {
			return nil, err
		}
		all = append(all, claimed{j, queuePos{j.ID, j.Priority, tag}})
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	slices.SortFunc(all, func(a, b claimed) int { return a.pos.compare(b.pos) })
	out := make([]jobs.Job, len(all))
	for i, c := range all {
		out[i] = c.job
	}
	return out, nil
}

// tagScanner scans a row of jobCols and one more column, the start tag.
type tagScanner struct {
	r   scanner
	tag *float64
}

func (t tagScanner) Scan(dest ...any) error { return t.r.Scan(append(dest, t.tag)...) }

// claim claims up to limit jobs for worker in w: qClaim, unless some org
// has a concurrency limit or a pause, which the caller read (capped), or
// profiles are skipped (skip, a JSON array; "" for none): pickCapped,
// then qClaimIDs.
func (w *wtx) claim(worker string, ceiling, limit int, capped bool, skip string) ([]jobs.Job, error) {
	var caps map[string]int
	var err error
	if capped {
		if caps, err = w.caps(); err != nil {
			return nil, err
		}
	}
	var rows *sql.Rows
	if len(caps) == 0 && skip == "" {
		rows, err = w.query(qClaim, worker, w.now, ceiling, limit)
	} else {
		var picked []string
		if picked, err = w.pickCapped(caps, ceiling, limit, skip); err != nil || len(picked) == 0 {
			return nil, err
		}
		list, _ := json.Marshal(picked)
		rows, err = w.query(qClaimIDs, worker, w.now, string(list))
	}
	if err != nil {
		return nil, err
	}
	return scanClaimed(rows)
}

// caps returns the room (queue.Limit.Room) of each capped org (qCaps).
func (w *wtx) caps() (map[string]int, error) {
	rows, err := w.query(qCaps)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var caps map[string]int
	for rows.Next() {
		var org string
		var l queue.Limit
		var running int
		if err := rows.Scan(&org, &l.MaxRunning, &l.Paused, &running); err != nil {
			return nil, err
		}
		if caps == nil {
			caps = map[string]int{}
		}
		caps[org] = l.Room(running)
	}
	return caps, rows.Err()
}

// pickCapped picks up to limit jobs in claim order when some orgs have a
// concurrency limit: the first limit jobs of the other orgs, and of each
// limited org at most its room; the two merge in claim order. A limited
// org's queued jobs are thus skipped, never in the way of the others'.
func (w *wtx) pickCapped(caps map[string]int, ceiling, limit int, skip string) ([]string, error) {
	orgs := make([]string, 0, len(caps))
	for org := range caps {
		orgs = append(orgs, org)
	}
	list, _ := json.Marshal(orgs)
	pickFree, pickOrg := qPickFree, qPickOrg
	var freeSkip []any
	if skip != "" {
		pickFree, pickOrg, freeSkip = qPickFreeSkip, qPickOrgSkip, []any{skip}
	}
	all, err := w.picks(pickFree, ceiling, string(list), limit, freeSkip...)
	if err != nil {
		return nil, err
	}
	// A limited org's scan stops where the free one did when that took
	// limit jobs: nothing past it could be claimed. So it costs at most
	// what the free scan did, even for an org with nothing queued.
	bound := []any{math.MaxInt32, 0.0, ""}
	if len(all) == limit {
		last := all[len(all)-1]
		bound = []any{last.priority, last.tag, last.id}
	}
	for org, room := range caps {
		if room <= 0 {
			continue
		}
		args := bound
		if skip != "" {
			args = append(slices.Clone(bound), skip)
		}
		some, err := w.picks(pickOrg, ceiling, org, min(room, limit), args...)
		if err != nil {
			return nil, err
		}
		all = append(all, some...)
	}
	slices.SortFunc(all, queuePos.compare)
	out := make([]string, 0, min(limit, len(all)))
	for _, p := range all[:min(limit, len(all))] {
		out = append(out, p.id)
	}
	return out, nil
}

// picks runs a pick query (qPickFree, qPickOrg with its bound, and their
// Skip variants with the skipped profiles last).
func (w *wtx) picks(q string, ceiling int, org string, limit int, bound ...any) ([]queuePos, error) {
	rows, err := w.query(q, append([]any{nil, w.now, ceiling, org, limit}, bound...)...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []queuePos
	for rows.Next() {
		var p queuePos
		if err := rows.Scan(&p.id, &p.priority, &p.tag); err != nil {
			return nil, err
		}
		out = append(out, p)
	}
	return out, rows.Err()
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
	// was committed after it looked: a valid moment for the claim. The
	// same read says whether some org has a concurrency limit, so that
	// without one the claim is qClaim alone (a limit set since applies
	// from the next claim).
	var some, capped bool
	now := max(s.nowMicros(), s.floor.Load()) // as a transaction would stamp it
	if err := s.readRow(ctx, qClaimable, now, *p.PriorityCeiling).Scan(&some, &capped); err != nil {
		return nil, fmt.Errorf("sqlitestore: claim: %w", err)
	}
	if !some {
		return nil, nil
	}
	var skip string
	if len(p.SkipProfiles) > 0 {
		list, _ := json.Marshal(p.SkipProfiles)
		skip = string(list)
	}
	data := jobs.TransitionData{Worker: p.Worker}.JSON()
	var claimed []jobs.Job
	err = s.grouped(ctx, "claim", func(w *wtx) error {
		var err error
		if claimed, err = w.claim(p.Worker, *p.PriorityCeiling, p.Limit, capped, skip); err != nil {
			return err
		}
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
	return s.finish(ctx, "succeed", finish.Succeed(p))
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
	p, err := p.Normalize()
	if err != nil {
		return jobs.Job{}, fmt.Errorf("sqlitestore: cancel: %w", err)
	}
	var j jobs.Job
	err = s.write(ctx, "cancel", func(w *wtx) error {
		old, err := w.jobFor(p.JobID, p.OrgID, jobs.Cancelled)
		if err != nil {
			return err
		}
		j, err = w.cancel(old, p.Data())
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
		fresh := p.Replacement(old, jobs.NewID(), fromMicros(w.now))
		oldData, newData := p.Data(fresh.ID)
		w.transition(old, old.State, jobs.Superseded, oldData)
		if err := w.insertJob(fresh, newData); err != nil {
			return err
		}
		j, err = scanJob(w.queryRow(qJobForUpdate, fresh.ID, ""))
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
		responseID, w.now, f.JobID, f.Worker, f.ClearClaim))
	if errors.Is(err, sql.ErrNoRows) {
		return jobs.Job{}, jobs.ErrNotClaimed
	}
	if err != nil {
		return jobs.Job{}, err
	}
	if f.To == jobs.Succeeded {
		a := f.Answer
		usage, calls := f.AnswerJSON()
		if _, err := w.exec(qInsertResponse, responseID, promptID, f.JobID, a.Output, nullBytes(a.Parsed),
			a.Model, string(usage), w.now, a.FinishReason, nullBytes(calls), a.Backend, nullBytes(a.Body)); err != nil {
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
			nullInt(c.InputTokens), nullInt(c.OutputTokens), nullInt(c.CachedInputTokens), nullInt(c.ReasoningTokens),
			nullFloat(c.CostUSD), c.StatusCode, c.Outcome, c.Failure); err != nil {
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
