package pgstore

import (
	"context"
	"encoding/base64"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/promptkit/promptkit/jobs"
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
	rows, err := s.pool.Query(ctx, `SELECT `+jobCols+` FROM jobs WHERE prompt_id = $1 ORDER BY created_at, id`, promptID)
	if err != nil {
		return nil, fmt.Errorf("pgstore: prompt jobs %s: %w", promptID, err)
	}
	out, err := collectJobs(rows)
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

// ListJobs returns a page of jobs, newest first, with keyset pagination
// on (created_at, id). See jobs.Store.
func (s *Store) ListJobs(ctx context.Context, p jobs.ListParams) (jobs.JobPage, error) {
	limit := p.Limit
	if limit <= 0 {
		limit = 50
	}
	limit = min(limit, 1000)
	if p.State != "" && !p.State.Valid() {
		return jobs.JobPage{}, fmt.Errorf("pgstore: list jobs: unknown state %q: %w", p.State, jobs.ErrInvalid)
	}
	var where []string
	var args []any
	arg := func(v any) string {
		args = append(args, v)
		return "$" + strconv.Itoa(len(args))
	}
	if p.OrgID != "" {
		where = append(where, "org_id = "+arg(p.OrgID))
	}
	if p.CreatedBy != "" {
		where = append(where, "created_by = "+arg(p.CreatedBy))
	}
	if p.State != "" {
		where = append(where, "state = "+arg(string(p.State)))
	}
	if !p.Since.IsZero() {
		where = append(where, "created_at >= "+arg(p.Since.UTC().Truncate(time.Microsecond)))
	}
	if p.After != "" {
		at, id, err := decodeCursor(p.After)
		if err != nil {
			return jobs.JobPage{}, fmt.Errorf("pgstore: list jobs: %w", err)
		}
		where = append(where, "(created_at, id) < ("+arg(at)+", "+arg(id)+")")
	}
	q := `SELECT ` + jobCols + ` FROM jobs`
	if len(where) > 0 {
		q += ` WHERE ` + strings.Join(where, " AND ")
	}
	q += ` ORDER BY created_at DESC, id DESC LIMIT ` + arg(limit+1)
	rows, err := s.pool.Query(ctx, q, args...)
	if err != nil {
		return jobs.JobPage{}, fmt.Errorf("pgstore: list jobs: %w", err)
	}
	list, err := collectJobs(rows)
	if err != nil {
		return jobs.JobPage{}, fmt.Errorf("pgstore: list jobs: %w", err)
	}
	var page jobs.JobPage
	if len(list) > limit {
		list = list[:limit]
		last := list[limit-1]
		page.Next = encodeCursor(last.CreatedAt, last.ID)
	}
	page.Jobs = list
	return page, nil
}

// encodeCursor makes an opaque ListJobs cursor from a row's sort key.
func encodeCursor(at time.Time, id string) string {
	return base64.RawURLEncoding.EncodeToString([]byte(strconv.FormatInt(at.UnixMicro(), 10) + "/" + id))
}

func decodeCursor(c string) (time.Time, string, error) {
	raw, err := base64.RawURLEncoding.DecodeString(c)
	if err == nil {
		us, id, ok := strings.Cut(string(raw), "/")
		if n, perr := strconv.ParseInt(us, 10, 64); ok && perr == nil {
			return time.UnixMicro(n).UTC(), id, nil
		}
	}
	return time.Time{}, "", fmt.Errorf("malformed cursor: %w", jobs.ErrInvalid)
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
	limit := p.Limit
	if limit <= 0 {
		limit = 500
	}
	since := p.Since.UTC().Truncate(time.Microsecond)
	out, err := s.changesSince(ctx, since, p.OrgID, limit)
	if err != nil {
		return jobs.Changes{}, fmt.Errorf("pgstore: changes since: %w", err)
	}
	return out, nil
}

func (s *Store) changesSince(ctx context.Context, since time.Time, orgID string, limit int) (out jobs.Changes, err error) {
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
		// it must not stamp below T (see writeOnce).
		read.exec(`
			INSERT INTO change_floor (at) VALUES ($1)
			ON CONFLICT (one) DO UPDATE SET at = EXCLUDED.at WHERE change_floor.at < EXCLUDED.at`, t)
		read.commit()
		// jobs has no index on updated_at (it would keep transitions from
		// being HOT updates, see migration 00002); every change of updated_at
		// appends an event stamped with the same time, so the events find
		// the jobs.
		read.query(`
			SELECT `+jobCols+` FROM jobs
			WHERE id IN (SELECT job_id FROM job_events WHERE at > $1)
				AND updated_at > $1 AND ($2 = '' OR org_id = $2)
			ORDER BY updated_at, id LIMIT $3`, []any{since, orgID, limit}, func(rows pgx.Rows) error {
			var err error
			out.Jobs, err = collectJobs(rows)
			return err
		})
		if err := read.send(ctx, conn); err != nil || len(out.Jobs) < limit {
			return err
		}
		// Finish the last timestamp: every change stamped at it is visible
		// (it was stamped before T), so AsOf can move past it.
		last := out.Jobs[len(out.Jobs)-1]
		rows, err := conn.Query(ctx, `
			SELECT `+jobCols+` FROM jobs
			WHERE id IN (SELECT job_id FROM job_events WHERE at = $1)
				AND updated_at = $1 AND id > $2 AND ($3 = '' OR org_id = $3)
			ORDER BY id`, last.UpdatedAt, last.ID, orgID)
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

// EventsAfter pages through the event log by seq. It needs no lock: seq
// order is commit order (see the package doc). See jobs.Store.
func (s *Store) EventsAfter(ctx context.Context, p jobs.EventsParams) ([]jobs.Event, error) {
	limit := p.Limit
	if limit <= 0 {
		limit = 500
	}
	var rows pgx.Rows
	var err error
	if p.OrgID == "" {
		rows, err = s.pool.Query(ctx, `SELECT `+eventCols+` FROM job_events WHERE seq > $1 ORDER BY seq LIMIT $2`, p.After, limit)
	} else {
		rows, err = s.pool.Query(ctx, `SELECT `+eventCols+` FROM job_events WHERE org_id = $3 AND seq > $1 ORDER BY seq LIMIT $2`, p.After, limit, p.OrgID)
	}
	if err != nil {
		return nil, fmt.Errorf("pgstore: events after: %w", err)
	}
	out, err := pgx.CollectRows(rows, scanEvent)
	if err != nil {
		return nil, fmt.Errorf("pgstore: events after: %w", err)
	}
	return out, nil
}

// Metrics counts jobs by state and summarizes jobs finished since Since
// whose outcome stands (succeeded, failed, cancelled: a superseded job's
// outcome was replaced by its retry, which counts instead). See
// jobs.Store.
func (s *Store) Metrics(ctx context.Context, p jobs.MetricsParams) (jobs.Metrics, error) {
	m := jobs.Metrics{Counts: map[jobs.State]int{}, ErrorRate: map[jobs.ErrorKind]float64{}}
	for _, st := range jobs.States {
		m.Counts[st] = 0
	}
	rows, err := s.pool.Query(ctx, `SELECT state, count(*) FROM jobs WHERE ($1 = '' OR org_id = $1) GROUP BY state`, p.OrgID)
	if err != nil {
		return jobs.Metrics{}, fmt.Errorf("pgstore: metrics: %w", err)
	}
	for rows.Next() {
		var st string
		var n int
		if err := rows.Scan(&st, &n); err != nil {
			rows.Close()
			return jobs.Metrics{}, fmt.Errorf("pgstore: metrics: %w", err)
		}
		m.Counts[jobs.State(st)] = n
	}
	if err := rows.Err(); err != nil {
		return jobs.Metrics{}, fmt.Errorf("pgstore: metrics: %w", err)
	}

	var since *time.Time
	if !p.Since.IsZero() {
		t := p.Since.UTC().Truncate(time.Microsecond)
		since = &t
	}
	// percentile_disc is the nearest-rank percentile: always a latency
	// that some job actually had.
	var pct []*int64
	err = s.pool.QueryRow(ctx, `
		SELECT count(*),
			percentile_disc(ARRAY[0.5, 0.95, 0.99]) WITHIN GROUP (
				ORDER BY (extract(epoch FROM finished_at - created_at) * 1000000)::bigint)
		FROM jobs
		WHERE finished_at IS NOT NULL AND ($1::timestamptz IS NULL OR finished_at >= $1)
			AND ($2 = '' OR org_id = $2) AND state IN ('succeeded', 'failed', 'cancelled')`,
		since, p.OrgID).Scan(&m.Finished, &pct)
	if err != nil {
		return jobs.Metrics{}, fmt.Errorf("pgstore: metrics: %w", err)
	}
	if len(pct) == 3 {
		for i, d := range []*time.Duration{&m.LatencyP50, &m.LatencyP95, &m.LatencyP99} {
			if pct[i] != nil {
				*d = time.Duration(*pct[i]) * time.Microsecond
			}
		}
	}
	if m.Finished == 0 {
		return m, nil
	}
	rows, err = s.pool.Query(ctx, `
		SELECT coalesce(error_kind, 'unknown'), count(*) FROM jobs
		WHERE finished_at IS NOT NULL AND ($1::timestamptz IS NULL OR finished_at >= $1)
			AND ($2 = '' OR org_id = $2) AND state = 'failed'
		GROUP BY 1`, since, p.OrgID)
	if err != nil {
		return jobs.Metrics{}, fmt.Errorf("pgstore: metrics: %w", err)
	}
	for rows.Next() {
		var kind string
		var n int
		if err := rows.Scan(&kind, &n); err != nil {
			rows.Close()
			return jobs.Metrics{}, fmt.Errorf("pgstore: metrics: %w", err)
		}
		m.ErrorRate[jobs.ErrorKind(kind)] = float64(n) / float64(m.Finished)
	}
	if err := rows.Err(); err != nil {
		return jobs.Metrics{}, fmt.Errorf("pgstore: metrics: %w", err)
	}
	return m, nil
}

// archiveChunk bounds one archive transaction, so archiving a large
// backlog neither holds many row locks nor builds one huge transaction.
const archiveChunk = 5000

// Archive deletes terminal jobs finished before before, with their events
// and responses, and prompts left without jobs. It skips jobs another
// transaction holds. jobs has no index on finished_at (it would keep the
// finishing update from being a HOT update, see migration 00002), so
// Archive walks the table once in primary-key order, a chunk of rows per
// transaction. See jobs.Store.
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
			SELECT (SELECT count(*) FROM gone), (SELECT max(id) FROM scanned)`, before, archiveChunk, after).Scan(&n, &last)
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
