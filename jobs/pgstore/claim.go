package pgstore

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/promptkit/promptkit/jobs"
	"github.com/promptkit/promptkit/jobs/internal/finish"
	"github.com/promptkit/promptkit/jobs/internal/queue"
)

// notified is a CTE that calls pg_notify once when the CTE named changed
// has rows (and never otherwise, so an empty claim wakes nobody). Every
// statement using it joins it, which makes PostgreSQL evaluate it.
func notified(changed string) string {
	return `notified AS (SELECT count(pg_notify('` + notifyChannel + `', $schema)) AS n FROM (SELECT 1 FROM ` + changed + ` LIMIT 1) one)`
}

// claimPickSQL picks the jobs of claimSQL, which claims for a run of Claim
// calls (with one priority ceiling and skipped profiles) in
// one statement: pick the sum of their limits from job_queue in claim
// order with SKIP LOCKED, hand the picked jobs out in claim order (the
// first call gets the first $slot entries, and so on: the same jobs the
// calls would get one after the other), move them from job_queue to
// job_running, update them (a HOT update: no indexed column changes, see
// migration 00002), append events (each with its call's data from $data),
// notify. It runs under the event lock;
// SKIP LOCKED on the job row, which another transaction may hold locked
// while it waits for the event lock (to cancel the job, say), means it
// never waits for a row, so it cannot deadlock with a transaction waiting
// for the lock. The queue row needs no lock: only transactions holding
// the event lock write job_queue, and this statement, which holds it,
// sees every earlier holder's commit (a row lock there cost a WAL record
// per claimed job). A job whose dependency is queued or running waits;
// one whose dependency is terminal, or was archived, is claimable (the
// worker checks the dependency's outcome).
//
// $worker and $data have one entry per call; $slot has one entry per
// picked position up to the last call's first: the 1-based index into
// $worker of the call that position goes to; the positions after it go to
// the last call (so one call with a huge limit costs no huge array). One
// statement per batch rather than one per call matters because the whole
// batch runs inside the serialized section.
//
// The statement runs with a generic plan (see writeSettings), so its
// shape must not depend on row estimates: the writes join the picked IDs
// as an unnest of an array (estimated like the finish statement's unnest:
// primary-key lookups; a join against the CTE may become a hash join over
// the whole table when LIMIT is unknown), and the dependency test is a
// correlated lookup rather than a NOT EXISTS the planner could turn into a
// hash of every queued job.
//
// Orgs with a concurrency limit (limits.max_running, the CTE capped:
// queue.CappedSQL) are left out of that scan (free) and claimed apart
// (held): for each, at most its room (queue.RoomSQL: the limit less its
// running jobs, orgRunningSQL), in claim order; the two
// lists merge in claim order. A held scan stops at the last entry free
// took (bound) when free took $limit, since no entry past it could be
// claimed: so it costs at most what free's scan did, even for an org
// with nothing queued. Without such limits capped is empty and the claim
// is the one range scan it was. A paused org (limits.paused) is capped
// with no room. (free filters the limited orgs' entries
// out as it walks: their queued jobs cost it a step each when they lie
// ahead of the jobs it claims.)
func claimPickSQL(skip string) string {
	return `
		WITH capped AS (
			SELECT l.subject AS org, ` + queue.RoomSQL("l", orgRunningSQL) + ` AS room
			FROM limits l WHERE l.scope = 'org' AND ` + queue.CappedSQL("l") + `
		), free AS (
			SELECT q.job_id, q.priority, q.tag FROM job_queue q JOIN jobs j ON j.id = q.job_id
			WHERE ` + gateOpen + ` AND ` + claimableSQL + skip + `
				AND NOT EXISTS (SELECT 1 FROM capped c WHERE c.org = j.org_id)
			ORDER BY q.priority, q.tag, q.job_id
			LIMIT $limit
			FOR UPDATE OF j SKIP LOCKED
		), bound AS (
			SELECT CASE WHEN (SELECT count(*) FROM free) < $limit THEN 32767 ELSE l.priority END AS p, l.tag AS t,
				l.job_id AS id
			FROM (SELECT 1) one LEFT JOIN (
				SELECT priority, tag, job_id FROM free ORDER BY priority DESC, tag DESC, job_id DESC LIMIT 1) l ON true
		), held AS (
			SELECT h.* FROM capped c CROSS JOIN LATERAL (
				SELECT q.job_id, q.priority, q.tag FROM job_queue q JOIN jobs j ON j.id = q.job_id
				WHERE ` + gateOpen + ` AND j.org_id = c.org AND ` + claimableSQL + skip + `
					AND (q.priority, q.tag, q.job_id) <= ((SELECT p FROM bound), (SELECT t FROM bound), (SELECT id FROM bound))
				ORDER BY q.priority, q.tag, q.job_id
				LIMIT least(c.room, $limit)
				FOR UPDATE OF j SKIP LOCKED) h
			WHERE c.room > 0
		)
		SELECT job_id FROM (SELECT * FROM free UNION ALL SELECT * FROM held) u
		ORDER BY priority, tag, job_id
		LIMIT $limit`
}

var (
	claimSQL = named(claimFrom(claimPickSQL("")), "now", "ceiling", "limit", "worker", "data", "slot", "schema")
	// claimSkipSQL is claimSQL leaving queued the jobs whose prompt's
	// profile is in $skip (jobs.ClaimParams.SkipProfiles): a claim uses
	// it only then, so claimSQL's plan never changes.
	claimSkipSQL = named(claimFrom(claimPickSQL(skipProfilesSQL)),
		"now", "ceiling", "limit", "worker", "data", "slot", "schema", "skip")
)

// skipProfilesSQL leaves out the job j whose prompt's profile is in $skip.
const skipProfilesSQL = `
				AND NOT EXISTS (SELECT 1 FROM prompts p WHERE p.id = j.prompt_id AND p.profile = ANY($skip::text[]))`

// claimableSQL says whether the job_queue entry q is claimable now.
const claimableSQL = `q.available_at <= $now AND q.priority <= $ceiling
				AND (q.depends_on IS NULL OR coalesce(
					(SELECT d.state NOT IN ('queued', 'running') FROM jobs d WHERE d.id = q.depends_on), true))`

// orgRunningSQL counts the running jobs of the org of the limits row l,
// through job_running under the event lock (so across processes): the
// running count of queue.RoomSQL.
const orgRunningSQL = `SELECT count(*)
				FROM job_running r JOIN jobs rj ON rj.id = r.job_id WHERE rj.org_id = l.subject`

// claimIDsSQL claims the queued jobs $ids, which the transaction has just
// inserted under the event lock (jobs.EnqueueParams.ClaimAs), for one
// call, as claimSQL would: of an org with a concurrency limit, only as
// many as it has room for (queue.RoomSQL: none when paused); the others
// stay queued.
var claimIDsSQL = named(claimFrom(`
		SELECT c.job_id FROM (
			SELECT q.job_id, q.priority, q.tag, j.org_id,
				row_number() OVER (PARTITION BY j.org_id ORDER BY q.priority, q.tag, q.job_id) AS n
			FROM job_queue q JOIN jobs j ON j.id = q.job_id WHERE q.job_id = ANY($ids::text[])
		) c
		WHERE c.n <= coalesce((SELECT `+queue.RoomSQL("l", orgRunningSQL)+`
			FROM limits l WHERE l.scope = 'org' AND l.subject = c.org_id AND `+queue.CappedSQL("l")+`), c.n)
		ORDER BY c.priority, c.tag, c.job_id`),
	"now", "ids", "worker", "data", "slot", "schema")

// claimFrom is the claim statement of the jobs the query picked selects.
func claimFrom(picked string) string {
	return `
	WITH picked AS (` + picked + `
	), ids AS (
		SELECT ARRAY(SELECT job_id FROM picked) AS a
	), dequeued AS (
		DELETE FROM job_queue WHERE job_id = ANY ((SELECT a FROM ids)::text[])
	), claimed AS (
		UPDATE jobs SET state = 'running', worker_claim = ($worker::text[])[` + claimCall + `],
			claimed_at = $now, started_at = $now, running_heartbeat_at = $now, updated_at = $now
		FROM unnest((SELECT a FROM ids)::text[]) WITH ORDINALITY AS u(id, pos)
		WHERE jobs.id = u.id
		RETURNING jobs.*, ` + claimCall + ` AS call
	), running AS (
		INSERT INTO job_running (job_id) SELECT id FROM claimed
	), ev AS (
		INSERT INTO job_events (job_id, prompt_id, org_id, type, from_state, to_state, data, at)
		SELECT id, prompt_id, org_id, 'transition', 'queued', 'running', ($data::text[])[call]::json, $now
		FROM claimed ORDER BY call, priority, fair_tag, id
	), ` + notified("claimed") + `
	SELECT ` + jobCols + `, call FROM claimed, notified ORDER BY call, priority, fair_tag, id`
}

// queueRows is the insert that puts the queued jobs among the rows of the
// CTE named rows (which returns jobs columns) into job_queue, keeping the
// side table's mirror of their claim order (see migrations 00002 and
// 00013).
func queueRows(rows string) string {
	return `INSERT INTO job_queue (job_id, priority, available_at, created_at, depends_on, tag)
		SELECT id, priority, available_at, created_at, depends_on, fair_tag FROM ` + rows + ` WHERE state = 'queued'`
}

// claimCall is the index into $worker of the call that picked position
// u.pos goes to.
const claimCall = `coalesce(($slot::int[])[u.pos], cardinality($worker::text[]))`

// claimSlotsMax bounds the $slot array of one claim statement; a call that
// would take it past the bound starts a new statement.
const claimSlotsMax = 1 << 14

// Claim atomically moves up to Limit queued jobs to running under Worker,
// in one statement. Concurrent calls are committed together (see
// writeReq). See jobs.Store.
func (s *Store) Claim(ctx context.Context, p jobs.ClaimParams) ([]jobs.Job, error) {
	p, err := p.Normalize()
	if err != nil {
		return nil, fmt.Errorf("pgstore: claim: %w", err)
	}
	r := newClaimReq(p)
	err = s.writes.Do(ctx, &writeReq{claim: r})
	s.wrote(ctx, "claim", err, err == nil && len(r.out) > 0)
	if err != nil {
		return nil, fmt.Errorf("pgstore: claim: %w", err)
	}
	return r.out, nil
}

// claimReq is one Claim call in a group-committed batch.
type claimReq struct {
	worker         string
	limit, ceiling int
	skip           []string // jobs.ClaimParams.SkipProfiles
	data           string   // its events' data
	out            []jobs.Job
}

// newClaimReq makes the call of normalized parameters.
func newClaimReq(p jobs.ClaimParams) *claimReq {
	return &claimReq{worker: p.Worker, limit: p.Limit, ceiling: *p.PriorityCeiling, skip: p.SkipProfiles,
		data: string(jobs.TransitionData{Worker: p.Worker}.JSON())}
}

// claimGateSQL takes the event lock only when some job may be claimable
// (it ignores dependencies, so it may say yes when the claim then finds
// nothing, never the reverse); otherwise it sets gateSkipped, and the
// claim statement that follows in the same round trip (claimSQL checks
// gateOpen) does nothing. Idle workers poll with Claim; without the gate
// every empty poll would take its turn in the serialized section. An
// empty answer is as of the gate's time, which is a valid moment for the
// Claim to have happened.
const claimGateSQL = `
	SELECT CASE WHEN EXISTS (SELECT 1 FROM job_queue WHERE available_at <= $2 AND priority <= $3)
		THEN (SELECT true FROM pg_advisory_xact_lock($1)) ELSE (SELECT false FROM ` + gateSkipped + `) END`

// runClaim runs claims in one transaction of their own, in one round
// trip, which takes the event lock only if there may be work
// (claimGateSQL).
func (s *Store) runClaim(ctx context.Context, reqs []*claimReq) []error {
	b := &claimBatch{reqs: reqs, schema: s.schema}
	ceiling := 0
	for _, r := range reqs {
		ceiling = max(ceiling, r.ceiling)
	}
	took, err := s.writeOneTripGated(ctx, &lockGate{sql: claimGateSQL, args: []any{s.clock(), ceiling}}, b.locked)
	errs := make([]error, len(reqs))
	for i, r := range reqs {
		if err != nil {
			r.out, errs[i] = nil, err
		} else if !took {
			r.out = []jobs.Job{}
		}
	}
	if err == nil && b.claimed() > 0 {
		b.remember(&s.prompts)
		s.notify.Broadcast()
	}
	return errs
}

// claimBatch is the part of a writing transaction that claims: one claim
// statement per run of consecutive calls with the same priority ceiling
// and skipped profiles (usually the whole batch), in call order, each call getting the jobs it
// would have got had the calls run one after the other. It runs wholly
// under the event lock (SKIP LOCKED never waits).
type claimBatch struct {
	reqs   []*claimReq
	schema string
}

func (b *claimBatch) locked(p *phase, now time.Time) {
	for i := 0; i < len(b.reqs); {
		// The run is b.reqs[i:j]; slots covers its calls but the last.
		j, total := i+1, b.reqs[i].limit
		for j < len(b.reqs) && b.reqs[j].ceiling == b.reqs[i].ceiling && slices.Equal(b.reqs[j].skip, b.reqs[i].skip) &&
			total <= claimSlotsMax && b.reqs[j].limit <= claimSlotsMax {
			total += b.reqs[j].limit
			j++
		}
		run := b.reqs[i:j]
		workers, data := make([]string, len(run)), make([]string, len(run))
		slots := make([]int32, 0, total-run[len(run)-1].limit)
		for k, r := range run {
			r.out = []jobs.Job{}
			workers[k], data[k] = r.worker, r.data
			if k < len(run)-1 {
				for range r.limit {
					slots = append(slots, int32(k+1))
				}
			}
		}
		q, args := claimSQL.q, claimSQL.args(now, run[0].ceiling, total, workers, data, slots, b.schema)
		if len(run[0].skip) > 0 {
			q, args = claimSkipSQL.q, claimSkipSQL.args(now, run[0].ceiling, total, workers, data, slots, b.schema, run[0].skip)
		}
		p.query(q, args, func(rows pgx.Rows) error {
			for rows.Next() {
				var call int
				job, err := scanJob(rows, &call)
				if err != nil {
					return err
				}
				r := run[call-1]
				r.out = append(r.out, job)
			}
			return nil
		})
		i = j
	}
}

// remember records the claimed jobs' prompts (after the commit).
func (b *claimBatch) remember(c *promptCache) {
	for _, r := range b.reqs {
		for _, j := range r.out {
			c.put(j.ID, j.PromptID)
		}
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
	// SKIP LOCKED: a job another transaction holds is being finished (a
	// group commit may hold several of this worker's jobs, locked in its
	// own order) or taken away; waiting for it could deadlock, and its
	// heartbeat no longer matters. It counts as not updated.
	tag, err := s.pool.Exec(ctx, `
		UPDATE jobs SET running_heartbeat_at = $1
		WHERE id IN (SELECT id FROM jobs WHERE id = ANY($2) AND state = 'running' AND worker_claim = $3
			FOR UPDATE SKIP LOCKED)`,
		s.clock(), ids, p.Worker)
	s.wrote(ctx, "heartbeat", err, err == nil && tag.RowsAffected() > 0)
	if err != nil {
		return 0, fmt.Errorf("pgstore: heartbeat: %w", err)
	}
	n := int(tag.RowsAffected())
	if n < len(ids) {
		return n, fmt.Errorf("pgstore: heartbeat: %d of %d jobs: %w", len(ids)-n, len(ids), jobs.ErrNotClaimed)
	}
	return n, nil
}

// reclaimPickSQL locks the running jobs whose heartbeat is older than $1,
// found through job_running (the running set, small next to the
// history), before the event lock; SKIP LOCKED leaves alone jobs another
// transaction is finishing.
const reclaimPickSQL = `
	SELECT ` + jobCols + ` FROM job_running r JOIN jobs j ON j.id = r.job_id
	WHERE j.state = 'running' AND j.running_heartbeat_at < $1
	ORDER BY j.running_heartbeat_at, j.id
	FOR UPDATE OF j SKIP LOCKED`

// reclaimGateSQL takes the event lock only when some running job's
// heartbeat is older than $2, so an empty sweep serializes with nobody. A
// job reclaimPickSQL locked still qualifies here (its heartbeat cannot
// change while it is locked), so the gate never says no when there is
// work.
const reclaimGateSQL = `
	SELECT CASE WHEN EXISTS (SELECT 1 FROM job_running r JOIN jobs j ON j.id = r.job_id
		WHERE j.state = 'running' AND j.running_heartbeat_at < $2)
		THEN (SELECT true FROM pg_advisory_xact_lock($1)) ELSE false END`

// Reclaim requeues or fails running jobs whose heartbeat is older than
// ReclaimAfter, as ReclaimParams.Decide says for each, in two round trips:
// the first locks the expired jobs, the second applies the decisions
// through the finishing statement (finishSQL), each conditioned on the
// lost worker's claim. See jobs.Store.
func (s *Store) Reclaim(ctx context.Context, p jobs.ReclaimParams) (jobs.Reclaimed, error) {
	p, err := p.Normalize()
	if err != nil {
		return jobs.Reclaimed{}, fmt.Errorf("pgstore: reclaim: %w", err)
	}
	at := s.clock()
	cutoff := p.HeartbeatCutoff(at)
	var (
		expired []jobs.Job
		b       *finishBatch
	)
	_, err = s.writeTwoTripsGated(ctx, func(ph *phase) {
		ph.query(reclaimPickSQL, []any{cutoff}, func(rows pgx.Rows) error {
			var err error
			expired, err = collectJobs(rows)
			return err
		})
	}, &lockGate{sql: reclaimGateSQL, args: []any{cutoff}}, func(ph *phase, now time.Time) {
		reqs := make([]*finishReq, len(expired))
		for i, j := range expired {
			reqs[i] = &finishReq{w: finish.Reclaim(j, p.Decide(j))}
		}
		b = newFinishBatch(reqs, s.schema)
		b.locked(ph, now)
	})
	if err != nil {
		s.wrote(ctx, "reclaim", err, false)
		return jobs.Reclaimed{}, fmt.Errorf("pgstore: reclaim: %w", err)
	}
	var out jobs.Reclaimed
	if b == nil {
		return out, nil
	}
	s.wrote(ctx, "reclaim", nil, b.changed)
	for i, r := range b.reqs {
		switch {
		case b.errs[i] != nil:
		case r.w.To == jobs.Queued:
			out.Requeued = append(out.Requeued, r.w.JobID)
		default:
			out.Failed = append(out.Failed, r.w.JobID)
		}
	}
	if b.changed {
		s.notify.Broadcast()
	}
	return out, nil
}
