package sqlitestore

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strconv"
	"time"

	"github.com/promptkit/promptkit/jobs"
	"github.com/promptkit/promptkit/jobs/internal/listing"
	"github.com/promptkit/promptkit/jobs/internal/usageq"
)

// Reads run on the reader pool unless noted. An empty org ID matches every
// org: "(?2 = ” OR org_id = ?2)" costs nothing on primary-key lookups.
const (
	qGetPrompt = `SELECT ` + promptCols + ` FROM prompts WHERE id = ?1 AND (?2 = '' OR org_id = ?2)`
	// qHasPrompt is qGetPrompt's test alone: no prompt read and decoded.
	qHasPrompt   = `SELECT 1 FROM prompts WHERE id = ?1 AND (?2 = '' OR org_id = ?2)`
	qGetJob      = `SELECT ` + jobCols + ` FROM jobs WHERE id = ?1 AND (?2 = '' OR org_id = ?2)`
	qGetResponse = `SELECT ` + responseCols + `
		FROM responses r JOIN jobs j ON j.id = r.job_id WHERE r.id = ?1 AND (?2 = '' OR j.org_id = ?2)`
	qPromptJobs = `SELECT ` + jobCols + ` FROM jobs WHERE prompt_id = ? ORDER BY created_at, id`
	qJobEvents  = `SELECT seq, job_id, prompt_id, org_id, type, from_state, to_state, data, at
		FROM job_events WHERE job_id = ? ORDER BY seq`
	// The log from a position, each event with its job's creator and
	// attempt. CROSS JOIN makes SQLite keep job_events the outer loop: it
	// walks the primary key from ?1 in order and stops after ?4 matches,
	// looking each job up by its primary key; the filters check those
	// rows (readers follow the head of the log, where the walk is short).
	qEventsAfter = `SELECT e.seq, e.job_id, e.prompt_id, e.org_id, e.type, e.from_state, e.to_state, e.data, e.at,
			j.created_by, j.attempt
		FROM job_events e CROSS JOIN jobs j ON j.id = e.job_id
		WHERE e.seq > ?1 AND (?2 = '' OR e.org_id = ?2) AND (?3 = '' OR j.created_by = ?3)
		ORDER BY e.seq LIMIT ?4`
	qCounts    = `SELECT state, count(*) FROM jobs GROUP BY state`
	qCountsOrg = `SELECT state, count(*) FROM jobs WHERE org_id = ? GROUP BY state`
	// Every org's jobs by state (org ?2, any when empty), with the failed
	// ones counted again when they finished at or after ?1.
	qOrgCounts = `SELECT org_id, state, count(*), sum(CASE WHEN state = 'failed' AND finished_at >= ?1 THEN 1 ELSE 0 END)
		FROM jobs WHERE (?2 = '' OR org_id = ?2) GROUP BY org_id, state ORDER BY org_id`
	// The metrics window: jobs whose outcome stands (a superseded job's
	// outcome was replaced by its retry, which is counted instead).
	qWindow = `SELECT org_id, finished_at - created_at, state, error_kind FROM jobs
		WHERE finished_at IS NOT NULL AND finished_at >= ?1 AND (?2 = '' OR org_id = ?2)
			AND state IN ('succeeded', 'failed', 'cancelled')
		ORDER BY org_id`
	// A prompt's ancestors, nearest first, up to ?3 steps and no further
	// than the first one missing (archived); the prompt itself is depth 0,
	// so no row at all means the prompt is unknown. Each with the output
	// of its latest succeeded job, NULL when it has none.
	qThread = `WITH RECURSIVE thread (id, parent_id, text, depth) AS (
			SELECT id, parent_id, text, 0 FROM prompts WHERE id = ?1 AND (?2 = '' OR org_id = ?2)
			UNION ALL
			SELECT p.id, p.parent_id, p.text, t.depth + 1 FROM thread t JOIN prompts p ON p.id = t.parent_id
			WHERE t.depth < ?3)
		SELECT id, text, depth, (SELECT r.output FROM jobs j JOIN responses r ON r.id = j.response_id
			WHERE j.prompt_id = thread.id AND j.state = 'succeeded' ORDER BY j.created_at DESC, j.id DESC LIMIT 1)
		FROM thread ORDER BY depth DESC`
)

// ChangesSince and Archive run on the writer.
var (
	qChanges = wq(`SELECT ` + jobCols + ` FROM jobs WHERE updated_at > ?1
		ORDER BY updated_at, id LIMIT ?2`)
	// "+org_id" and "+created_by" keep the planner on jobs_updated: the
	// range since the last poll is short, while an org's or a user's jobs
	// may be many.
	qChangesFiltered = wq(`SELECT ` + jobCols + ` FROM jobs WHERE updated_at > ?1
		AND (?3 = '' OR +org_id = ?3) AND (?4 = '' OR +created_by = ?4)
		ORDER BY updated_at, id LIMIT ?2`)
	qChangesTie = wq(`SELECT ` + jobCols + ` FROM jobs WHERE updated_at = ?1 AND id > ?2
		AND (?3 = '' OR +org_id = ?3) AND (?4 = '' OR +created_by = ?4) ORDER BY id`)
	qArchivable = wq(`SELECT id, prompt_id FROM jobs
		WHERE state IN ('succeeded', 'failed', 'cancelled', 'superseded') AND finished_at < ?1
		ORDER BY finished_at LIMIT ?2`)
	qArchiveEvents    = wq(`DELETE FROM job_events WHERE job_id IN (SELECT value FROM json_each(?))`)
	qArchiveResponses = wq(`DELETE FROM responses WHERE job_id IN (SELECT value FROM json_each(?))`)
	qArchiveJobs      = wq(`DELETE FROM jobs WHERE id IN (SELECT value FROM json_each(?))`)
	qArchivePrompts   = wq(`DELETE FROM prompts WHERE id IN (SELECT value FROM json_each(?))
		AND NOT EXISTS (SELECT 1 FROM jobs WHERE jobs.prompt_id = prompts.id)`)
)

// GetPrompt implements jobs.Store.
func (s *Store) GetPrompt(ctx context.Context, orgID, id string) (jobs.Prompt, error) {
	p, err := scanPrompt(s.readRow(ctx, qGetPrompt, id, orgID))
	if err != nil {
		return jobs.Prompt{}, fmt.Errorf("sqlitestore: get prompt: %w", notFound(err))
	}
	return p, nil
}

// GetJob implements jobs.Store.
func (s *Store) GetJob(ctx context.Context, orgID, id string) (jobs.Job, error) {
	j, err := scanJob(s.readRow(ctx, qGetJob, id, orgID))
	if err != nil {
		return jobs.Job{}, fmt.Errorf("sqlitestore: get job: %w", notFound(err))
	}
	return j, nil
}

// GetResponse implements jobs.Store.
func (s *Store) GetResponse(ctx context.Context, orgID, id string) (jobs.Response, error) {
	r, err := scanResponse(s.readRow(ctx, qGetResponse, id, orgID))
	if err != nil {
		return jobs.Response{}, fmt.Errorf("sqlitestore: get response: %w", notFound(err))
	}
	return r, nil
}

// PromptJobs implements jobs.Store.
func (s *Store) PromptJobs(ctx context.Context, orgID, promptID string) ([]jobs.Job, error) {
	// The prompt check scopes the call to the org and tells "unknown
	// prompt" apart from "no jobs".
	var one int
	if err := s.readRow(ctx, qHasPrompt, promptID, orgID).Scan(&one); err != nil {
		return nil, fmt.Errorf("sqlitestore: prompt jobs: %w", notFound(err))
	}
	out, err := s.readJobs(ctx, qPromptJobs, promptID)
	if err != nil {
		return nil, fmt.Errorf("sqlitestore: prompt jobs: %w", err)
	}
	return out, nil
}

// JobEvents implements jobs.Store. ErrNotFound when the job does not exist
// in the org (or was archived).
func (s *Store) JobEvents(ctx context.Context, orgID, jobID string) ([]jobs.Event, error) {
	if _, err := s.GetJob(ctx, orgID, jobID); err != nil {
		return nil, fmt.Errorf("sqlitestore: job events: %w", notFound(err))
	}
	rows, err := s.readQuery(ctx, qJobEvents, jobID)
	if err != nil {
		return nil, fmt.Errorf("sqlitestore: job events: %w", err)
	}
	out, err := scanEvents(rows, false)
	if err != nil {
		return nil, fmt.Errorf("sqlitestore: job events: %w", err)
	}
	return out, nil
}

// scanEvents reads every event of rows and closes it; withJob: each row
// ends with its job's created_by and attempt.
func scanEvents(rows *sql.Rows, withJob bool) ([]jobs.Event, error) {
	defer rows.Close()
	var out []jobs.Event
	for rows.Next() {
		var (
			e             jobs.Event
			typ, from, to string
			data          sql.NullString
			at            int64
		)
		dst := []any{&e.Seq, &e.JobID, &e.PromptID, &e.OrgID, &typ, &from, &to, &data, &at}
		if withJob {
			dst = append(dst, &e.CreatedBy, &e.Attempt)
		}
		if err := rows.Scan(dst...); err != nil {
			return nil, err
		}
		e.Type, e.From, e.To = jobs.EventType(typ), jobs.State(from), jobs.State(to)
		if data.Valid {
			e.Data = json.RawMessage(data.String)
		}
		e.At = fromMicros(at)
		out = append(out, e)
	}
	return out, rows.Err()
}

// ChangesSince implements jobs.Store. It runs inside BEGIN IMMEDIATE on
// the writer: while it holds the lock no write is in flight, so every
// change stamped at or before its clock reading T has committed and every
// later change is stamped at or after T (the store's time never goes back:
// see write). The result is complete, and AsOf
// is T − 1µs rather than T so that a change stamped in the same
// microsecond as T (or under a clock that does not move) is returned by
// the next call too. A page cut by Limit is extended to the end of its last
// timestamp (AsOf is a time, so a page cannot end in the middle of one) and
// AsOf is that timestamp.
func (s *Store) ChangesSince(ctx context.Context, p jobs.ChangesParams) (jobs.Changes, error) {
	p, err := p.Normalize()
	if err != nil {
		return jobs.Changes{}, fmt.Errorf("sqlitestore: changes since: %w", err)
	}
	since := int64(math.MinInt64)
	if !p.Since.IsZero() {
		since = p.Since.UnixMicro()
	}
	var out jobs.Changes
	err = s.write(ctx, "changes since", func(w *wtx) error {
		var rows *sql.Rows
		var err error
		if p.OrgID == "" && p.CreatedBy == "" {
			rows, err = w.query(qChanges, since, p.Limit)
		} else {
			rows, err = w.query(qChangesFiltered, since, p.Limit, p.OrgID, p.CreatedBy)
		}
		if err != nil {
			return err
		}
		if out.Jobs, err = scanJobs(rows); err != nil {
			return err
		}
		asOf := w.now - 1
		if len(out.Jobs) == p.Limit {
			last := out.Jobs[len(out.Jobs)-1]
			u := last.UpdatedAt.UnixMicro()
			if rows, err = w.query(qChangesTie, u, last.ID, p.OrgID, p.CreatedBy); err != nil {
				return err
			}
			more, err := scanJobs(rows)
			if err != nil {
				return err
			}
			out.Jobs = append(out.Jobs, more...)
			asOf = min(u, asOf)
		}
		out.AsOf = fromMicros(asOf)
		return nil
	})
	if err != nil {
		return jobs.Changes{}, err
	}
	return out, nil
}

// EventsAfter implements jobs.Store. It reads from the reader pool: SQLite
// commits one writer at a time and every transaction appends its events
// at its end, so the committed events are always a prefix of the sequence
// and a snapshot never lacks one below its highest Seq.
func (s *Store) EventsAfter(ctx context.Context, p jobs.EventsParams) ([]jobs.Event, error) {
	p, err := p.Normalize()
	if err != nil {
		return nil, fmt.Errorf("sqlitestore: events after: %w", err)
	}
	rows, err := s.readQuery(ctx, qEventsAfter, p.After, p.OrgID, p.CreatedBy, p.Limit)
	if err != nil {
		return nil, fmt.Errorf("sqlitestore: events after: %w", err)
	}
	out, err := scanEvents(rows, true)
	if err != nil {
		return nil, fmt.Errorf("sqlitestore: events after: %w", err)
	}
	return out, nil
}

// Metrics implements jobs.Store. The window holds jobs that finished at or
// after Since and whose outcome stands (succeeded, failed, cancelled);
// latency percentiles use the nearest-rank method, like PostgreSQL's
// percentile_disc.
func (s *Store) Metrics(ctx context.Context, p jobs.MetricsParams) (jobs.Metrics, error) {
	p, err := p.Normalize()
	if err != nil {
		return jobs.Metrics{}, fmt.Errorf("sqlitestore: metrics: %w", err)
	}
	m := jobs.NewMetrics()
	if err := s.metrics(ctx, p, &m); err != nil {
		return jobs.Metrics{}, fmt.Errorf("sqlitestore: metrics: %w", err)
	}
	return m, nil
}

func (s *Store) metrics(ctx context.Context, p jobs.MetricsParams, m *jobs.Metrics) error {
	var rows *sql.Rows
	var err error
	if p.OrgID == "" {
		rows, err = s.readQuery(ctx, qCounts)
	} else {
		rows, err = s.readQuery(ctx, qCountsOrg, p.OrgID)
	}
	if err != nil {
		return err
	}
	err = eachRow(rows, func() error {
		var st string
		var n int
		err := rows.Scan(&st, &n)
		m.Counts[jobs.State(st)] = n
		return err
	})
	if err != nil {
		return err
	}

	since := int64(math.MinInt64)
	if !p.Since.IsZero() {
		since = p.Since.UnixMicro()
	}
	if rows, err = s.readQuery(ctx, qWindow, since, p.OrgID); err != nil {
		return err
	}
	// Latencies in µs: all of the window's, and the current org's (the
	// rows come ordered by org).
	var all, org []int64
	orgID := ""
	flush := func() {
		if len(org) > 0 && p.ByOrg {
			m.Orgs = append(m.Orgs, orgLatency(orgID, org))
		}
		org = org[:0]
	}
	failed := map[jobs.ErrorKind]int{}
	err = eachRow(rows, func() error {
		var id, st, kind string
		var d int64
		if err := rows.Scan(&id, &d, &st, &kind); err != nil {
			return err
		}
		if id != orgID {
			flush()
			orgID = id
		}
		all, org = append(all, d), append(org, d)
		if jobs.State(st) == jobs.Failed {
			failed[jobs.ErrorKind(kind)]++
		}
		return nil
	})
	if err != nil {
		return err
	}
	flush()
	if p.ByOrg {
		if err := s.orgCounts(ctx, since, p.OrgID, m); err != nil {
			return err
		}
	}
	m.Finished = len(all)
	if len(all) > 0 {
		slices.Sort(all)
		m.LatencyP50 = percentile(all, 0.50)
		m.LatencyP95 = percentile(all, 0.95)
		m.LatencyP99 = percentile(all, 0.99)
		for k, n := range failed {
			m.ErrorRate[k] = float64(n) / float64(len(all))
		}
	}
	return nil
}

// orgCounts fills m.OrgCounts: each org's jobs by state, and its jobs
// that failed at or after since (µs).
func (s *Store) orgCounts(ctx context.Context, since int64, orgID string, m *jobs.Metrics) error {
	rows, err := s.readQuery(ctx, qOrgCounts, since, orgID)
	if err != nil {
		return err
	}
	return eachRow(rows, func() error {
		var org, st string
		var n, failed int
		if err := rows.Scan(&org, &st, &n, &failed); err != nil {
			return err
		}
		if len(m.OrgCounts) == 0 || m.OrgCounts[len(m.OrgCounts)-1].OrgID != org {
			m.OrgCounts = append(m.OrgCounts, jobs.NewOrgCounts(org))
		}
		o := &m.OrgCounts[len(m.OrgCounts)-1]
		o.Counts[jobs.State(st)], o.FailedInWindow = n, o.FailedInWindow+failed
		return nil
	})
}

// orgLatency summarizes one org's latencies (µs, in any order): the
// average in whole microseconds, rounded down, and the p95.
func orgLatency(orgID string, lat []int64) jobs.OrgLatency {
	slices.Sort(lat)
	var sum int64
	for _, d := range lat {
		sum += d
	}
	return jobs.OrgLatency{OrgID: orgID, Finished: len(lat),
		LatencyAverage: time.Duration(sum/int64(len(lat))) * time.Microsecond, LatencyP95: percentile(lat, 0.95)}
}

// percentile is the nearest-rank percentile of sorted microsecond values:
// the ⌈p·n⌉-th smallest, as percentile_disc computes it.
func percentile(sorted []int64, p float64) time.Duration {
	i := int(math.Ceil(p*float64(len(sorted)))) - 1
	i = max(0, min(i, len(sorted)-1))
	return time.Duration(sorted[i]) * time.Microsecond
}

// eachRow calls scan for every row of rows and closes it.
func eachRow(rows *sql.Rows, scan func() error) error {
	defer rows.Close()
	for rows.Next() {
		if err := scan(); err != nil {
			return err
		}
	}
	return rows.Err()
}

// readAll runs q on the reader pool and scans every row of it.
func readAll[T any](ctx context.Context, s *Store, scan func(scanner) (T, error), q string, args ...any) ([]T, error) {
	rows, err := s.readQuery(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	var out []T
	err = eachRow(rows, func() error {
		v, err := scan(rows)
		out = append(out, v)
		return err
	})
	return out, err
}

// Thread implements jobs.Store with one recursive query (qThread).
func (s *Store) Thread(ctx context.Context, p jobs.ThreadParams) ([]jobs.Turn, error) {
	p, err := p.Normalize()
	if err != nil {
		return nil, fmt.Errorf("sqlitestore: thread: %w", err)
	}
	rows, err := s.readQuery(ctx, qThread, p.PromptID, p.OrgID, p.Depth)
	if err != nil {
		return nil, fmt.Errorf("sqlitestore: thread: %w", err)
	}
	var turns []jobs.Turn
	found := false
	err = eachRow(rows, func() error {
		var t jobs.Turn
		var depth int
		var answer sql.NullString
		if err := rows.Scan(&t.PromptID, &t.Text, &depth, &answer); err != nil {
			return err
		}
		found = true
		if depth > 0 {
			t.Answer, t.Answered = answer.String, answer.Valid
			turns = append(turns, t)
		}
		return nil
	})
	if err == nil && !found {
		err = jobs.ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("sqlitestore: thread: %w", err)
	}
	return turns, nil
}

// Archive implements jobs.Store. It deletes in transactions of up to
// jobs.ArchiveBatch jobs, so archiving a large backlog never blocks
// writers for long; each
// transaction is complete (jobs with their events, responses and orphaned
// prompts), so an error leaves a consistent, partly archived database and
// the returned count of jobs already deleted.
func (s *Store) Archive(ctx context.Context, before time.Time) (int, error) {
	total := 0
	for {
		n := 0
		err := s.write(ctx, "archive", func(w *wtx) error {
			rows, err := w.query(qArchivable, before.UnixMicro(), jobs.ArchiveBatch)
			if err != nil {
				return err
			}
			var jobIDs, promptIDs []string
			for rows.Next() {
				var id, promptID string
				if err := rows.Scan(&id, &promptID); err != nil {
					rows.Close()
					return err
				}
				jobIDs = append(jobIDs, id)
				promptIDs = append(promptIDs, promptID)
			}
			rows.Close()
			if err := rows.Err(); err != nil {
				return err
			}
			if len(jobIDs) == 0 {
				return nil
			}
			jl, _ := json.Marshal(jobIDs)
			pl, _ := json.Marshal(slices.Compact(slices.Sorted(slices.Values(promptIDs))))
			for _, q := range []string{qArchiveEvents, qArchiveResponses, qArchiveJobs} {
				if _, err := w.exec(q, string(jl)); err != nil {
					return err
				}
			}
			if _, err := w.exec(qArchivePrompts, string(pl)); err != nil {
				return err
			}
			n = len(jobIDs)
			return nil
		})
		s.wrote(ctx, "archive", err, n > 0)
		total += n
		if err != nil {
			return total, err
		}
		if n < jobs.ArchiveBatch {
			return total, nil
		}
	}
}

// listDialect is how listing.Query writes for SQLite.
var listDialect = listing.Dialect{
	Placeholder: func(int) string { return "?" },
	Time:        func(t time.Time) any { return t.UnixMicro() },
}

// ListJobs implements jobs.Store (listing.List).
func (s *Store) ListJobs(ctx context.Context, p jobs.ListParams) (jobs.JobPage, error) {
	page, err := listing.List(ctx, p, listDialect, jobCols, s.readJobs)
	if err != nil {
		return jobs.JobPage{}, fmt.Errorf("sqlitestore: list jobs: %w", err)
	}
	return page, nil
}

// CountJobs implements jobs.Store (listing.Count).
func (s *Store) CountJobs(ctx context.Context, f jobs.JobFilter) (int, error) {
	n, err := listing.Count(ctx, f, listDialect, func(ctx context.Context, q string, args ...any) (int, error) {
		var n int
		err := s.readRow(ctx, q, args...).Scan(&n)
		return n, err
	})
	if err != nil {
		return 0, fmt.Errorf("sqlitestore: count jobs: %w", err)
	}
	return n, nil
}

// Batch reads: the IDs go in as one JSON array, so one prepared statement
// serves any number of them.
const (
	qGetPrompts = `SELECT ` + promptCols + ` FROM prompts
		WHERE id IN (SELECT value FROM json_each(?1)) AND (?2 = '' OR org_id = ?2)`
	qGetResponses = `SELECT ` + responseCols + `
		FROM responses r JOIN jobs j ON j.id = r.job_id
		WHERE r.id IN (SELECT value FROM json_each(?1)) AND (?2 = '' OR j.org_id = ?2)`
)

// batchIDs checks the IDs of a batch read and encodes them for json_each.
func batchIDs(ids []string) (string, error) {
	if len(ids) > jobs.MaxListLimit {
		return "", fmt.Errorf("%w: %d ids, at most %d", jobs.ErrInvalid, len(ids), jobs.MaxListLimit)
	}
	b, err := json.Marshal(ids)
	return string(b), err
}

// GetPrompts implements jobs.Store.
func (s *Store) GetPrompts(ctx context.Context, orgID string, ids []string) (map[string]jobs.Prompt, error) {
	arg, err := batchIDs(ids)
	if err != nil {
		return nil, fmt.Errorf("sqlitestore: get prompts: %w", err)
	}
	out := make(map[string]jobs.Prompt, len(ids))
	if len(ids) == 0 {
		return out, nil
	}
	rows, err := s.readQuery(ctx, qGetPrompts, arg, orgID)
	if err != nil {
		return nil, fmt.Errorf("sqlitestore: get prompts: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		p, err := scanPrompt(rows)
		if err != nil {
			return nil, fmt.Errorf("sqlitestore: get prompts: %w", err)
		}
		out[p.ID] = p
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlitestore: get prompts: %w", err)
	}
	return out, nil
}

// GetResponses implements jobs.Store.
func (s *Store) GetResponses(ctx context.Context, orgID string, ids []string) (map[string]jobs.Response, error) {
	arg, err := batchIDs(ids)
	if err != nil {
		return nil, fmt.Errorf("sqlitestore: get responses: %w", err)
	}
	out := make(map[string]jobs.Response, len(ids))
	if len(ids) == 0 {
		return out, nil
	}
	rows, err := s.readQuery(ctx, qGetResponses, arg, orgID)
	if err != nil {
		return nil, fmt.Errorf("sqlitestore: get responses: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		r, err := scanResponse(rows)
		if err != nil {
			return nil, fmt.Errorf("sqlitestore: get responses: %w", err)
		}
		out[r.ID] = r
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlitestore: get responses: %w", err)
	}
	return out, nil
}

// promptCols is the column list scanPrompt reads.
const promptCols = `id, org_id, created_by, parent_id, correlation_id, text, prompt_ref, inputs,
	profile, idempotency_key, created_at, chat, batch_id, custom_id, embedding`

// scanPrompt reads one row of promptCols.
func scanPrompt(r scanner) (jobs.Prompt, error) {
	var (
		p                       jobs.Prompt
		parent, batch, customID sql.NullString
		inputs, chat, embedding sql.NullString
		createdAt               int64
	)
	err := r.Scan(&p.ID, &p.OrgID, &p.CreatedBy, &parent, &p.CorrelationID,
		&p.Text, &p.PromptRef, &inputs, &p.Profile, &p.IdempotencyKey, &createdAt, &chat, &batch, &customID, &embedding)
	if err != nil {
		return jobs.Prompt{}, err
	}
	p.ParentID = parent.String
	if inputs.Valid {
		p.Inputs = json.RawMessage(inputs.String)
	}
	if p.Chat, err = jobs.DecodeChat([]byte(chat.String)); err != nil {
		return jobs.Prompt{}, err
	}
	if p.Embedding, err = jobs.DecodeEmbedding([]byte(embedding.String)); err != nil {
		return jobs.Prompt{}, err
	}
	p.BatchID, p.CustomID = batch.String, customID.String
	p.CreatedAt = fromMicros(createdAt)
	return p, nil
}

// responseCols is the column list scanResponse reads, of responses r.
const responseCols = `r.id, r.prompt_id, r.job_id, r.output, r.parsed, r.model, r.usage, r.created_at, r.finish_reason,
	r.tool_calls, r.backend, r.body`

// scanResponse reads one row of responseCols.
func scanResponse(r scanner) (jobs.Response, error) {
	var (
		resp      jobs.Response
		parsed    sql.NullString
		usage     string
		calls     []byte
		body      []byte
		createdAt int64
	)
	err := r.Scan(&resp.ID, &resp.PromptID, &resp.JobID, &resp.Output, &parsed,
		&resp.Model, &usage, &createdAt, &resp.FinishReason, &calls, &resp.Backend, &body)
	if err != nil {
		return jobs.Response{}, err
	}
	if len(body) > 0 {
		resp.Body = json.RawMessage(body)
	}
	if err := jobs.DecodeToolCalls(calls, &resp); err != nil {
		return jobs.Response{}, err
	}
	if parsed.Valid {
		resp.Parsed = json.RawMessage(parsed.String)
	}
	if err := json.Unmarshal([]byte(usage), &resp.Usage); err != nil {
		return jobs.Response{}, fmt.Errorf("usage: %w", err)
	}
	resp.CreatedAt = fromMicros(createdAt)
	return resp, nil
}

// usageDialect reads the ledger's microsecond times; a day is 86400e6 of
// them (Unix time has no leap seconds).
var usageDialect = usageq.Dialect{
	Param:  func(n int) string { return "?" + strconv.Itoa(n) },
	Time:   func(t time.Time) any { return t.UnixMicro() },
	Day:    "(at - at % 86400000000)",
	ByTime: "usage_ledger INDEXED BY usage_ledger_at",
}

// Usage implements jobs.Store.
func (s *Store) Usage(ctx context.Context, p jobs.UsageParams) ([]jobs.UsageBucket, error) {
	p, err := p.Normalize()
	if err != nil {
		return nil, fmt.Errorf("sqlitestore: usage: %w", err)
	}
	q, args := usageq.Query(p, usageDialect)
	rows, err := s.readQuery(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("sqlitestore: usage: %w", err)
	}
	defer rows.Close()
	var out []jobs.UsageBucket
	for rows.Next() {
		var b jobs.UsageBucket
		var day sql.NullInt64
		if err := rows.Scan(append([]any{&day}, usageq.Dests(&b)...)...); err != nil {
			return nil, fmt.Errorf("sqlitestore: usage: %w", err)
		}
		b.Day = nullTime(day)
		if b.Requests > 0 { // no rows at all still make one row without GROUP BY
			out = append(out, b)
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlitestore: usage: %w", err)
	}
	return out, nil
}

// BackendActivity implements jobs.Store.
func (s *Store) BackendActivity(ctx context.Context, since time.Time) ([]jobs.BackendActivity, error) {
	q, args := usageq.ActivityQuery(since, usageDialect)
	rows, err := s.readQuery(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("sqlitestore: backend activity: %w", err)
	}
	var out []jobs.BackendActivity
	err = eachRow(rows, func() error {
		var a jobs.BackendActivity
		var limited, failed sql.NullInt64
		if err := rows.Scan(append(usageq.ActivityDests(&a), &limited, &failed)...); err != nil {
			return err
		}
		a.LastRateLimitedAt, a.LastErrorAt = nullTime(limited), nullTime(failed)
		out = append(out, a)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("sqlitestore: backend activity: %w", err)
	}
	return out, nil
}
