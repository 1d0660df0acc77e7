package pgstore

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/promptkit/promptkit/jobs"
	"github.com/promptkit/promptkit/jobs/internal/listing"
	"github.com/promptkit/promptkit/jobs/internal/usageq"
)

// GetPrompt returns a prompt, or jobs.ErrNotFound. See jobs.Store.
func (s *Store) GetPrompt(ctx context.Context, orgID, id string) (jobs.Prompt, error) {
	p, err := scanPrompt(s.pool.QueryRow(ctx, `SELECT `+promptCols+` FROM prompts WHERE id = $1 AND ($2 = '' OR org_id = $2)`, id, orgID))
	if err != nil {
		return jobs.Prompt{}, fmt.Errorf("pgstore: get prompt %s: %w", id, notFound(err))
	}
	return p, nil
}

// GetJob returns a job, or jobs.ErrNotFound. See jobs.Store.
func (s *Store) GetJob(ctx context.Context, orgID, id string) (jobs.Job, error) {
	j, err := scanJob(s.pool.QueryRow(ctx, `SELECT `+jobCols+` FROM jobs WHERE id = $1 AND ($2 = '' OR org_id = $2)`, id, orgID))
	if err != nil {
		return jobs.Job{}, fmt.Errorf("pgstore: get job %s: %w", id, notFound(err))
	}
	return j, nil
}

// GetResponse returns a response, or jobs.ErrNotFound. See jobs.Store.
func (s *Store) GetResponse(ctx context.Context, orgID, id string) (jobs.Response, error) {
	r, err := scanResponse(s.pool.QueryRow(ctx, `
		SELECT `+responseCols+` FROM responses r JOIN prompts p ON p.id = r.prompt_id
		WHERE r.id = $1 AND ($2 = '' OR p.org_id = $2)`, id, orgID))
	if err != nil {
		return jobs.Response{}, fmt.Errorf("pgstore: get response %s: %w", id, notFound(err))
	}
	return r, nil
}

// PromptJobs returns a prompt's jobs, oldest first. See jobs.Store.
func (s *Store) PromptJobs(ctx context.Context, orgID, promptID string) ([]jobs.Job, error) {
	var exists bool
	err := s.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM prompts WHERE id = $1 AND ($2 = '' OR org_id = $2))`, promptID, orgID).Scan(&exists)
	if err == nil && !exists {
		err = jobs.ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("pgstore: prompt jobs %s: %w", promptID, err)
	}
	out, err := s.queryJobs(ctx, `SELECT `+jobCols+` FROM jobs WHERE prompt_id = $1 ORDER BY created_at, id`, promptID)
	if err != nil {
		return nil, fmt.Errorf("pgstore: prompt jobs %s: %w", promptID, err)
	}
	return out, nil
}

// JobEvents returns a job's events in sequence order, or jobs.ErrNotFound
// when the job does not exist in the org (or was archived). See
// jobs.Store.
func (s *Store) JobEvents(ctx context.Context, orgID, jobID string) ([]jobs.Event, error) {
	var exists bool
	err := s.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM jobs WHERE id = $1 AND ($2 = '' OR org_id = $2))`, jobID, orgID).Scan(&exists)
	if err == nil && !exists {
		err = jobs.ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("pgstore: job events %s: %w", jobID, err)
	}
	rows, err := s.pool.Query(ctx, `SELECT `+eventCols+` FROM job_events WHERE job_id = $1 AND ($2 = '' OR org_id = $2) ORDER BY seq`, jobID, orgID)
	if err != nil {
		return nil, fmt.Errorf("pgstore: job events %s: %w", jobID, err)
	}
	out, err := pgx.CollectRows(rows, scanEvent)
	if err != nil {
		return nil, fmt.Errorf("pgstore: job events %s: %w", jobID, err)
	}
	return out, nil
}

// listDialect is how listing.Query writes for PostgreSQL.
var listDialect = listing.Dialect{
	Placeholder: func(n int) string { return "$" + strconv.Itoa(n) },
	Time:        func(t time.Time) any { return t },
}

// ListJobs returns a page of jobs, newest first, with keyset pagination
// on (created_at, id) (listing.List). See jobs.Store.
func (s *Store) ListJobs(ctx context.Context, p jobs.ListParams) (jobs.JobPage, error) {
	page, err := listing.List(ctx, p, listDialect, jobCols, s.queryJobs)
	if err != nil {
		return jobs.JobPage{}, fmt.Errorf("pgstore: list jobs: %w", err)
	}
	return page, nil
}

// CountJobs counts the jobs matching f (listing.Count). See jobs.Store.
func (s *Store) CountJobs(ctx context.Context, f jobs.JobFilter) (int, error) {
	n, err := listing.Count(ctx, f, listDialect, func(ctx context.Context, q string, args ...any) (int, error) {
		var n int
		err := s.pool.QueryRow(ctx, q, args...).Scan(&n)
		return n, err
	})
	if err != nil {
		return 0, fmt.Errorf("pgstore: count jobs: %w", err)
	}
	return n, nil
}

// ChangesSince returns jobs changed after Since, oldest change first,
// and the AsOf to pass next. It takes the event lock (shared, so readers do
// not wait for each other), reads the clock T while holding it and raises
// change_floor to T: every change stamped before T has committed by then,
// and every later one will be stamped at or after T, also by a writer that
// read its clock earlier or in a process whose clock is behind (see the
// package doc). The lock is released
// before the read, so a large page never holds writers up; the read's
// snapshot is taken after the lock was granted, so it sees every change
// stamped before T. AsOf is T − 1µs, so a change stamped in T's
// microsecond (or under a clock that does not move) is returned again
// rather than missed. A page cut by Limit is extended to the end of its
// last timestamp, and AsOf is that timestamp, so paging always advances.
// See jobs.Store.
func (s *Store) ChangesSince(ctx context.Context, p jobs.ChangesParams) (jobs.Changes, error) {
	p, err := p.Normalize()
	if err != nil {
		return jobs.Changes{}, fmt.Errorf("pgstore: changes since: %w", err)
	}
	out, err := s.changesSince(ctx, p.Since, p.OrgID, p.CreatedBy, p.Limit)
	if err != nil {
		return jobs.Changes{}, fmt.Errorf("pgstore: changes since: %w", err)
	}
	return out, nil
}

func (s *Store) changesSince(ctx context.Context, since time.Time, orgID, createdBy string, limit int) (out jobs.Changes, err error) {
	err = s.inTx(ctx, func(conn *pgxpool.Conn) error {
		var lock phase
		lock.exec("BEGIN")
		// The floor only has to be visible to writers that take the event
		// lock after this transaction, not to survive a crash: no need to
		// wait for the flush.
		lock.exec(`SELECT pg_advisory_xact_lock_shared($1), set_config('synchronous_commit', 'off', true)`, s.lockKey)
		if err := lock.send(ctx, conn); err != nil {
			return err
		}
		t := s.clock()
		out.AsOf = t.Add(-time.Microsecond)
		var read phase
		// Writers that read their clock before this and take the lock after
		// it must not stamp below T (see writeOneTrip).
		read.exec(`
			INSERT INTO change_floor (at) VALUES ($1)
			ON CONFLICT (one) DO UPDATE SET at = EXCLUDED.at WHERE change_floor.at < EXCLUDED.at`, t)
		read.commit()
		// The read runs after the commit (it holds nobody up), in a
		// transaction of its own, sent in the same round trip, that plans
		// it with sequential scans off (readSettings).
		read.exec("BEGIN")
		read.exec(readSettings)
		// jobs has no index on updated_at (it would keep transitions from
		// being HOT updates, see migration 00002); every change of updated_at
		// appends an event stamped with the same time, so the events find
		// the jobs.
		read.query(`
			SELECT `+jobCols+` FROM jobs
			WHERE id IN (SELECT job_id FROM job_events WHERE at > $1)
				AND updated_at > $1 AND ($2 = '' OR org_id = $2) AND ($4 = '' OR created_by = $4)
			ORDER BY updated_at, id LIMIT $3`, []any{since, orgID, limit, createdBy}, func(rows pgx.Rows) error {
			var err error
			out.Jobs, err = collectJobs(rows)
			return err
		})
		read.commit()
		if err := read.send(ctx, conn); err != nil || len(out.Jobs) < limit {
			return err
		}
		// Finish the last timestamp: every change stamped at it is visible
		// (it was stamped before T), so AsOf can move past it.
		last := out.Jobs[len(out.Jobs)-1]
		rows, err := conn.Query(ctx, `
			SELECT `+jobCols+` FROM jobs
			WHERE id IN (SELECT job_id FROM job_events WHERE at = $1)
				AND updated_at = $1 AND id > $2 AND ($3 = '' OR org_id = $3) AND ($4 = '' OR created_by = $4)
			ORDER BY id`, last.UpdatedAt, last.ID, orgID, createdBy)
		if err != nil {
			return err
		}
		more, err := collectJobs(rows)
		if err != nil {
			return err
		}
		out.Jobs = append(out.Jobs, more...)
		if last.UpdatedAt.Before(out.AsOf) {
			out.AsOf = last.UpdatedAt
		}
		return nil
	})
	return out, err
}

// eventsAfterSQL is the log from a position, each event with its job's
// creator and attempt, read in the statement's one snapshot. It walks the
// primary key from $1 in order, looks each event's job up by its primary
// key and filters as it goes, stopping after $2 matches: followers read
// near the head of the log, where that walk is short. The lateral
// subquery's OFFSET 0 keeps PostgreSQL from turning that into a hash join
// over every job of the user and a sort, which it prefers when CreatedBy is
// set and its estimates say the walk is long. LEFT: job_events has no
// foreign key, and an event never drops out of the unfiltered log for want
// of its job.
const eventsAfterSQL = `
	SELECT ` + eventColsE + `, j.created_by, j.attempt
	FROM job_events e LEFT JOIN LATERAL (
		SELECT created_by, attempt FROM jobs WHERE jobs.id = e.job_id OFFSET 0
	) j ON true
	WHERE e.seq > $1 AND ($3 = '' OR e.org_id = $3) AND ($4 = '' OR j.created_by = $4)
	ORDER BY e.seq LIMIT $2`

// EventsAfter pages through the event log by seq. It needs no lock: seq
// order is commit order (see the package doc). See jobs.Store.
func (s *Store) EventsAfter(ctx context.Context, p jobs.EventsParams) ([]jobs.Event, error) {
	p, err := p.Normalize()
	if err != nil {
		return nil, fmt.Errorf("pgstore: events after: %w", err)
	}
	rows, err := s.pool.Query(ctx, eventsAfterSQL, p.After, p.Limit, p.OrgID, p.CreatedBy)
	if err != nil {
		return nil, fmt.Errorf("pgstore: events after: %w", err)
	}
	out, err := pgx.CollectRows(rows, scanEventWithJob)
	if err != nil {
		return nil, fmt.Errorf("pgstore: events after: %w", err)
	}
	return out, nil
}

// threadSQL is a prompt's ancestors, nearest first, up to $3 steps and no
// further than the first one missing (archived); the prompt itself is
// depth 0, so no row at all means the prompt is unknown. Each comes with
// the output of its latest succeeded job, NULL when it has none.
const threadSQL = `
	WITH RECURSIVE thread AS (
		SELECT id, parent_id, text, 0 AS depth FROM prompts WHERE id = $1 AND ($2 = '' OR org_id = $2)
		UNION ALL
		SELECT p.id, p.parent_id, p.text, t.depth + 1 FROM thread t JOIN prompts p ON p.id = t.parent_id
		WHERE t.depth < $3
	)
	SELECT t.id, t.text, t.depth, a.output FROM thread t LEFT JOIN LATERAL (
		SELECT r.output FROM jobs j JOIN responses r ON r.id = j.response_id
		WHERE j.prompt_id = t.id AND j.state = 'succeeded' ORDER BY j.created_at DESC, j.id DESC LIMIT 1
	) a ON true
	ORDER BY t.depth DESC`

// Thread returns a prompt's ancestors, oldest first, with their answers,
// in one query (threadSQL). See jobs.Store.
func (s *Store) Thread(ctx context.Context, p jobs.ThreadParams) ([]jobs.Turn, error) {
	p, err := p.Normalize()
	if err != nil {
		return nil, fmt.Errorf("pgstore: thread %s: %w", p.PromptID, err)
	}
	rows, err := s.pool.Query(ctx, threadSQL, p.PromptID, p.OrgID, p.Depth)
	if err != nil {
		return nil, fmt.Errorf("pgstore: thread %s: %w", p.PromptID, err)
	}
	var (
		turns  []jobs.Turn
		t      jobs.Turn
		depth  int
		answer *string
		found  bool
	)
	_, err = pgx.ForEachRow(rows, []any{&t.PromptID, &t.Text, &depth, &answer}, func() error {
		found = true
		if depth > 0 {
			t.Answer, t.Answered = str(answer), answer != nil
			turns = append(turns, t)
		}
		return nil
	})
	if err == nil && !found {
		err = jobs.ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("pgstore: thread %s: %w", p.PromptID, err)
	}
	return turns, nil
}

// Archive deletes terminal jobs finished before before, with their events
// and responses, and prompts left without jobs. It skips jobs another
// transaction holds. jobs has no index on finished_at (it would keep the
// finishing update from being a HOT update, see migration 00002), so
// Archive walks the table once in primary-key order, jobs.ArchiveBatch
// jobs per transaction, so archiving a large backlog neither holds many
// row locks nor builds one huge transaction. See jobs.Store.
func (s *Store) Archive(ctx context.Context, before time.Time) (int, error) {
	before = before.UTC().Truncate(time.Microsecond)
	total := 0
	after := ""
	for {
		var n int
		var last *string
		err := s.pool.QueryRow(ctx, `
			WITH scanned AS (
				SELECT id, state, finished_at FROM jobs WHERE id > $3 ORDER BY id LIMIT $2
			), doomed AS (
				-- A terminal job never changes state or finished_at again,
				-- so the test made before the lock still holds under it.
				SELECT id FROM jobs
				WHERE id = ANY (ARRAY(SELECT id FROM scanned
					WHERE finished_at < $1 AND state IN ('succeeded', 'failed', 'cancelled', 'superseded')))
				FOR UPDATE SKIP LOCKED
			), gone AS (
				DELETE FROM jobs WHERE id = ANY (ARRAY(SELECT id FROM doomed)) RETURNING id, prompt_id, response_id
			), events AS (
				DELETE FROM job_events WHERE job_id = ANY (ARRAY(SELECT id FROM gone))
			), responses AS (
				DELETE FROM responses WHERE id = ANY (ARRAY(SELECT response_id FROM gone))
			), orphans AS (
				-- Every sub-statement sees the snapshot before the delete,
				-- so the jobs being deleted are excluded by hand.
				DELETE FROM prompts p
				WHERE p.id = ANY (ARRAY(SELECT prompt_id FROM gone))
					AND NOT EXISTS (SELECT 1 FROM jobs j
						WHERE j.prompt_id = p.id AND j.id <> ALL (ARRAY(SELECT id FROM gone)))
			)
			SELECT (SELECT count(*) FROM gone), (SELECT max(id) FROM scanned)`, before, jobs.ArchiveBatch, after).Scan(&n, &last)
		s.wrote(ctx, "archive", err, err == nil && n > 0)
		if err != nil {
			return total, fmt.Errorf("pgstore: archive: %w", err)
		}
		total += n
		if last == nil {
			return total, nil
		}
		after = *last
	}
}

// windowSQL is the metrics window: jobs finished at or after $1 (all when
// NULL), in org $2 (any when empty), whose outcome stands, with their
// latency in microseconds.
const windowSQL = `
	SELECT org_id, state, error_kind, (extract(epoch FROM finished_at - created_at) * 1000000)::bigint AS us
	FROM jobs
	WHERE finished_at IS NOT NULL AND ($1::timestamptz IS NULL OR finished_at >= $1)
		AND ($2 = '' OR org_id = $2) AND state IN ('succeeded', 'failed', 'cancelled')`

// Metrics counts jobs by state and summarizes jobs finished since Since
// whose outcome stands (succeeded, failed, cancelled: a superseded job's
// outcome was replaced by its retry, which counts instead); with ByOrg,
// per org too. See jobs.Store.
func (s *Store) Metrics(ctx context.Context, p jobs.MetricsParams) (jobs.Metrics, error) {
	p, err := p.Normalize()
	if err != nil {
		return jobs.Metrics{}, fmt.Errorf("pgstore: metrics: %w", err)
	}
	// One round trip: the counts, the window's latencies and error
	// rates, and with ByOrg each org's latency and counts.
	m := jobs.NewMetrics()
	var since *time.Time
	if !p.Since.IsZero() {
		since = &p.Since
	}
	b := &pgx.Batch{}

	b.Queue(`SELECT state, count(*) FROM jobs WHERE ($1 = '' OR org_id = $1) GROUP BY state`, p.OrgID).
		Query(func(rows pgx.Rows) error {
			var st string
			var n int
			_, err := pgx.ForEachRow(rows, []any{&st, &n}, func() error {
				m.Counts[jobs.State(st)] = n
				return nil
			})
			return err
		})
	// percentile_disc is the nearest-rank percentile: always a latency
	// that some job actually had.
	var pct []*int64
	b.Queue(`SELECT count(*), percentile_disc(ARRAY[0.5, 0.95, 0.99]) WITHIN GROUP (ORDER BY us)
		FROM (`+windowSQL+`) w`, since, p.OrgID).QueryRow(func(row pgx.Row) error {
		return row.Scan(&m.Finished, &pct)
	})
	b.Queue(`SELECT coalesce(error_kind, 'unknown'), count(*) FROM (`+windowSQL+`) w
		WHERE state = 'failed' GROUP BY 1`, since, p.OrgID).Query(func(rows pgx.Rows) error {
		var kind string
		var n int
		_, err := pgx.ForEachRow(rows, []any{&kind, &n}, func() error {
			m.ErrorRate[jobs.ErrorKind(kind)] = float64(n)
			return nil
		})
		return err
	})
	if p.ByOrg {
		// The average in whole microseconds, rounded down (div truncates
		// the numeric sum), the p95 by nearest rank.
		b.Queue(`SELECT org_id, count(*), div(sum(us), count(*))::bigint, percentile_disc(0.95) WITHIN GROUP (ORDER BY us)
			FROM (`+windowSQL+`) w GROUP BY org_id ORDER BY org_id`, since, p.OrgID).Query(func(rows pgx.Rows) error {
			var o jobs.OrgLatency
			var avg, p95 int64
			_, err := pgx.ForEachRow(rows, []any{&o.OrgID, &o.Finished, &avg, &p95}, func() error {
				o.LatencyAverage, o.LatencyP95 = time.Duration(avg)*time.Microsecond, time.Duration(p95)*time.Microsecond
				m.Orgs = append(m.Orgs, o)
				return nil
			})
			return err
		})
	}
	if p.ByOrg {
		// Every org's jobs by state in one grouped read, with the failed
		// ones counted again when they finished in the window.
		b.Queue(`SELECT org_id, state, count(*), count(*) FILTER (WHERE state = 'failed' AND finished_at IS NOT NULL
				AND ($1::timestamptz IS NULL OR finished_at >= $1))
			FROM jobs WHERE ($2 = '' OR org_id = $2) GROUP BY org_id, state ORDER BY org_id`, since, p.OrgID).
			Query(func(rows pgx.Rows) error {
				var org, st string
				var n, failed int
				_, err := pgx.ForEachRow(rows, []any{&org, &st, &n, &failed}, func() error {
					if len(m.OrgCounts) == 0 || m.OrgCounts[len(m.OrgCounts)-1].OrgID != org {
						m.OrgCounts = append(m.OrgCounts, jobs.NewOrgCounts(org))
					}
					o := &m.OrgCounts[len(m.OrgCounts)-1]
					o.Counts[jobs.State(st)], o.FailedInWindow = n, o.FailedInWindow+failed
					return nil
				})
				return err
			})
	}
	if err := s.pool.SendBatch(ctx, b).Close(); err != nil {
		return jobs.Metrics{}, fmt.Errorf("pgstore: metrics: %w", err)
	}
	for i, d := range []*time.Duration{&m.LatencyP50, &m.LatencyP95, &m.LatencyP99} {
		if i < len(pct) && pct[i] != nil {
			*d = time.Duration(*pct[i]) * time.Microsecond
		}
	}
	for k, n := range m.ErrorRate {
		m.ErrorRate[k] = n / float64(m.Finished)
	}
	return m, nil
}

// checkBatch bounds the IDs of a batch read.
func checkBatch(ids []string) error {
	if len(ids) > jobs.MaxListLimit {
		return fmt.Errorf("%w: %d ids, at most %d", jobs.ErrInvalid, len(ids), jobs.MaxListLimit)
	}
	return nil
}

// GetPrompts reads many prompts in one query. See jobs.Store.
func (s *Store) GetPrompts(ctx context.Context, orgID string, ids []string) (map[string]jobs.Prompt, error) {
	if err := checkBatch(ids); err != nil {
		return nil, fmt.Errorf("pgstore: get prompts: %w", err)
	}
	out := make(map[string]jobs.Prompt, len(ids))
	if len(ids) == 0 {
		return out, nil
	}
	rows, err := s.pool.Query(ctx, `SELECT `+promptCols+` FROM prompts WHERE id = ANY($1) AND ($2 = '' OR org_id = $2)`, ids, orgID)
	if err != nil {
		return nil, fmt.Errorf("pgstore: get prompts: %w", err)
	}
	ps, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (jobs.Prompt, error) { return scanPrompt(row) })
	if err != nil {
		return nil, fmt.Errorf("pgstore: get prompts: %w", err)
	}
	for _, p := range ps {
		out[p.ID] = p
	}
	return out, nil
}

// GetResponses reads many responses in one query. See jobs.Store.
func (s *Store) GetResponses(ctx context.Context, orgID string, ids []string) (map[string]jobs.Response, error) {
	if err := checkBatch(ids); err != nil {
		return nil, fmt.Errorf("pgstore: get responses: %w", err)
	}
	out := make(map[string]jobs.Response, len(ids))
	if len(ids) == 0 {
		return out, nil
	}
	rows, err := s.pool.Query(ctx, `
		SELECT `+responseCols+` FROM responses r JOIN prompts p ON p.id = r.prompt_id
		WHERE r.id = ANY($1) AND ($2 = '' OR p.org_id = $2)`, ids, orgID)
	if err != nil {
		return nil, fmt.Errorf("pgstore: get responses: %w", err)
	}
	rs, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (jobs.Response, error) { return scanResponse(row) })
	if err != nil {
		return nil, fmt.Errorf("pgstore: get responses: %w", err)
	}
	for _, r := range rs {
		out[r.ID] = r
	}
	return out, nil
}

// usageDialect groups ledger rows by their UTC day.
var usageDialect = usageq.Dialect{
	Param:  func(n int) string { return "$" + strconv.Itoa(n) },
	Time:   func(t time.Time) any { return t },
	Day:    "(date_trunc('day', at AT TIME ZONE 'UTC') AT TIME ZONE 'UTC')",
	ByTime: "usage_ledger",
}

// Usage sums the usage ledger. See jobs.Store.
func (s *Store) Usage(ctx context.Context, p jobs.UsageParams) ([]jobs.UsageBucket, error) {
	p, err := p.Normalize()
	if err == nil {
		var out []jobs.UsageBucket
		if out, err = usage(ctx, s.pool, p); err == nil {
			return out, nil
		}
	}
	return nil, fmt.Errorf("pgstore: usage: %w", err)
}

// usage sums the ledger for normalized p on q: the pool, or a
// reservation's transaction.
func usage(ctx context.Context, q interface {
	Query(context.Context, string, ...any) (pgx.Rows, error)
}, p jobs.UsageParams) ([]jobs.UsageBucket, error) {
	sql, args := usageq.Query(p, usageDialect)
	rows, err := q.Query(ctx, sql, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []jobs.UsageBucket
	for rows.Next() {
		var b jobs.UsageBucket
		var day *time.Time
		if err := rows.Scan(append([]any{&day}, usageq.Dests(&b)...)...); err != nil {
			return nil, err
		}
		b.Day = tm(day).UTC()
		if b.Requests > 0 { // no rows at all still make one row without GROUP BY
			out = append(out, b)
		}
	}
	return out, rows.Err()
}

// BackendActivity sums the ledger's recent calls per backend. See
// jobs.Store.
func (s *Store) BackendActivity(ctx context.Context, since time.Time) ([]jobs.BackendActivity, error) {
	q, args := usageq.ActivityQuery(since, usageDialect)
	rows, err := s.pool.Query(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("pgstore: backend activity: %w", err)
	}
	defer rows.Close()
	var out []jobs.BackendActivity
	for rows.Next() {
		var a jobs.BackendActivity
		var limited, failed *time.Time
		if err := rows.Scan(append(usageq.ActivityDests(&a), &limited, &failed)...); err != nil {
			return nil, fmt.Errorf("pgstore: backend activity: %w", err)
		}
		a.LastRateLimitedAt, a.LastErrorAt = tm(limited), tm(failed)
		out = append(out, a)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("pgstore: backend activity: %w", err)
	}
	return out, nil
}
