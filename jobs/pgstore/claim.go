package pgstore

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/promptkit/promptkit/jobs"
)

// notified is a CTE that calls pg_notify once when the CTE named changed
// has rows (and never otherwise, so an empty claim wakes nobody). Every
// statement using it joins it, which makes PostgreSQL evaluate it.
func notified(changed string) string {
	return `notified AS (SELECT count(pg_notify('` + notifyChannel + `', $schema)) AS n FROM (SELECT 1 FROM ` + changed + ` LIMIT 1) one)`
}

// claimSQL claims in one statement: pick with SKIP LOCKED, update, append
// events, notify. It runs under the event lock; SKIP LOCKED means it never
// waits for a row another transaction holds, so it cannot deadlock with a
// transaction waiting for the lock. A job whose dependency is queued or
// running waits; one whose dependency is terminal, or was archived, is
// claimable (the worker checks the dependency's outcome).
//
// The statement runs with a generic plan (see write), so its shape must
// not depend on row estimates: the update finds the picked rows through
// "id = ANY(ARRAY(...))", always primary-key lookups (a join against the
// CTE may become a hash join over the whole table when LIMIT is unknown),
// and the dependency test is a correlated lookup rather than a NOT EXISTS
// the planner could turn into a hash of every queued job.
var claimSQL = named(`
	WITH picked AS (
		SELECT id FROM jobs
		WHERE state = 'queued' AND available_at <= $now AND priority <= $ceiling
			AND (depends_on IS NULL OR coalesce(
				(SELECT d.state NOT IN ('queued', 'running') FROM jobs d WHERE d.id = jobs.depends_on), true))
		ORDER BY priority, available_at, created_at, id
		LIMIT $limit
		FOR UPDATE SKIP LOCKED
	), claimed AS (
		UPDATE jobs SET state = 'running', worker_claim = $worker, claimed_at = $now, started_at = $now,
			running_heartbeat_at = $now, updated_at = $now
		WHERE id = ANY (ARRAY(SELECT id FROM picked))
		RETURNING jobs.*
	), ev AS (
		INSERT INTO job_events (job_id, prompt_id, org_id, type, from_state, to_state, data, at)
		SELECT id, prompt_id, org_id, 'transition', 'queued', 'running',
			jsonb_build_object('worker', $worker::text, 'attempt', attempt)::json, $now
		FROM claimed ORDER BY priority, available_at, created_at, id
	), `+notified("claimed")+`
	SELECT `+jobCols+` FROM claimed, notified ORDER BY priority, available_at, created_at, id`,
	"now", "ceiling", "limit", "worker", "schema")

// Claim atomically moves up to Limit queued jobs to running under Worker,
// in one statement. Concurrent calls are committed together (see
// writeReq). See jobs.Store.
func (s *Store) Claim(ctx context.Context, p jobs.ClaimParams) ([]jobs.Job, error) {
	if p.Worker == "" {
		return nil, fmt.Errorf("pgstore: claim: empty worker: %w", jobs.ErrInvalid)
	}
	r := &claimReq{worker: p.Worker, limit: p.Limit, ceiling: 100}
	if r.limit <= 0 {
		r.limit = 1
	}
	if p.PriorityCeiling != nil {
		r.ceiling = *p.PriorityCeiling
	}
	if err := s.writes.do(ctx, &writeReq{claim: r}); err != nil {
		return nil, fmt.Errorf("pgstore: claim: %w", err)
	}
	return r.out, nil
}

// claimReq is one Claim call in a group-committed batch.
type claimReq struct {
	worker         string
	limit, ceiling int
	out            []jobs.Job
}

// runClaim runs claims in one transaction of their own.
func (s *Store) runClaim(ctx context.Context, reqs []*claimReq) []error {
	b := &claimBatch{reqs: reqs, schema: s.schema}
	err := s.write(ctx, nil, b.locked)
	errs := make([]error, len(reqs))
	for i, r := range reqs {
		if err != nil {
			r.out, errs[i] = nil, err
		}
	}
	if err == nil && b.claimed() > 0 {
		s.broadcast()
	}
	return errs
}

// claimBatch is the part of a writing transaction that claims: one claim
// statement per call, in call order, each seeing the jobs the earlier
// ones took as running. It runs wholly under the event lock (SKIP LOCKED
// never waits).
type claimBatch struct {
	reqs   []*claimReq
	schema string
}

func (b *claimBatch) locked(p *phase, now time.Time) {
	for _, r := range b.reqs {
		p.query(claimSQL.q, claimSQL.args(now, r.ceiling, r.limit, r.worker, b.schema), func(rows pgx.Rows) error {
			var err error
			r.out, err = collectJobs(rows)
			return err
		})
	}
}

// claimed counts the jobs the batch claimed.
func (b *claimBatch) claimed() int {
	n := 0
	for _, r := range b.reqs {
		n += len(r.out)
	}
	return n
}

// Heartbeat sets running_heartbeat_at on the worker's running jobs and
// returns how many it updated; when that is fewer than the distinct IDs
// given, it also returns jobs.ErrNotClaimed so the worker learns it lost a
// claim. A heartbeat is not a state change: it neither stamps updated_at
// nor appends an event, so it does not take the event lock.
func (s *Store) Heartbeat(ctx context.Context, p jobs.HeartbeatParams) (int, error) {
	ids := slices.Compact(slices.Sorted(slices.Values(p.JobIDs)))
	if len(ids) == 0 {
		return 0, nil
	}
	tag, err := s.pool.Exec(ctx, `
		UPDATE jobs SET running_heartbeat_at = $1
		WHERE id = ANY($2) AND state = 'running' AND worker_claim = $3`,
		s.clock(), ids, p.Worker)
	if err != nil {
		return 0, fmt.Errorf("pgstore: heartbeat: %w", err)
	}
	n := int(tag.RowsAffected())
	if n < len(ids) {
		return n, fmt.Errorf("pgstore: heartbeat: %d of %d jobs: %w", len(ids)-n, len(ids), jobs.ErrNotClaimed)
	}
	return n, nil
}

// reclaimSQL handles lost heartbeats in one statement under the event
// lock; SKIP LOCKED leaves alone jobs another transaction is finishing.
// Every SET expression reads the row's old values, so the requeue test is
// the same in each.
var reclaimSQL = named(`
	WITH picked AS (
		SELECT id, worker_claim FROM jobs
		WHERE state = 'running' AND running_heartbeat_at < $heartbeat_cutoff
		ORDER BY running_heartbeat_at, id
		FOR UPDATE SKIP LOCKED
	), moved AS (
		UPDATE jobs SET
			state = CASE WHEN `+requeueTest+` THEN 'queued' ELSE 'failed' END,
			attempt = CASE WHEN `+requeueTest+` THEN attempt + 1 ELSE attempt END,
			available_at = CASE WHEN `+requeueTest+` THEN $now ELSE available_at END,
			worker_claim = CASE WHEN `+requeueTest+` THEN NULL ELSE worker_claim END,
			claimed_at = CASE WHEN `+requeueTest+` THEN NULL ELSE claimed_at END,
			running_heartbeat_at = CASE WHEN `+requeueTest+` THEN NULL ELSE running_heartbeat_at END,
			finished_at = CASE WHEN `+requeueTest+` THEN NULL ELSE $now END,
			error_kind = CASE WHEN `+requeueTest+` THEN 'worker_crash' ELSE 'stuck' END,
			error_message = CASE WHEN `+requeueTest+` THEN 'no heartbeat: worker presumed dead'
				ELSE 'no heartbeat: job declared stuck' END,
			started_at = CASE WHEN `+requeueTest+` THEN NULL ELSE started_at END,
			updated_at = $now
		WHERE id = ANY (ARRAY(SELECT id FROM picked))
		RETURNING jobs.id, jobs.prompt_id, jobs.org_id, jobs.state, jobs.error_kind
	), ev AS (
		INSERT INTO job_events (job_id, prompt_id, org_id, type, from_state, to_state, data, at)
		SELECT moved.id, prompt_id, org_id, 'transition', 'running', state,
			jsonb_build_object('error_kind', error_kind, 'worker', picked.worker_claim)::json, $now
		FROM moved JOIN picked ON picked.id = moved.id ORDER BY moved.id
	), `+notified("moved")+`
	SELECT moved.id, moved.state FROM moved, notified ORDER BY moved.id`,
	"now", "heartbeat_cutoff", "stuck_cutoff", "schema")

// requeueTest says whether a job with a lost heartbeat goes back to the
// queue (attempts left, started less than StuckAfter ago) rather than
// failing as stuck.
const requeueTest = `(attempt < max_attempts AND started_at > $stuck_cutoff)`

// Reclaim requeues or fails running jobs whose heartbeat is older than
// ReclaimAfter (default 5 minutes); StuckAfter defaults to 15 minutes.
// See jobs.Store.
func (s *Store) Reclaim(ctx context.Context, p jobs.ReclaimParams) (jobs.Reclaimed, error) {
	after, stuck := p.ReclaimAfter, p.StuckAfter
	if after == 0 {
		after = 5 * time.Minute
	}
	if stuck == 0 {
		stuck = 15 * time.Minute
	}
	if after < 0 || stuck < 0 {
		return jobs.Reclaimed{}, fmt.Errorf("pgstore: reclaim: negative threshold: %w", jobs.ErrInvalid)
	}
	var out jobs.Reclaimed
	err := s.write(ctx, nil, func(ph *phase, now time.Time) {
		ph.query(reclaimSQL.q, reclaimSQL.args(now, now.Add(-after), now.Add(-stuck), s.schema), func(rows pgx.Rows) error {
			for rows.Next() {
				var id, state string
				if err := rows.Scan(&id, &state); err != nil {
					return err
				}
				if jobs.State(state) == jobs.Queued {
					out.Requeued = append(out.Requeued, id)
				} else {
					out.Failed = append(out.Failed, id)
				}
			}
			return nil
		})
	})
	if err != nil {
		return jobs.Reclaimed{}, fmt.Errorf("pgstore: reclaim: %w", err)
	}
	if len(out.Requeued)+len(out.Failed) > 0 {
		s.broadcast()
	}
	return out, nil
}
