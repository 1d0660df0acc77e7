// Package listing is ListJobs as both job stores run it: one query, the
// same on SQLite and PostgreSQL but for placeholders and the stored form
// of times (Dialect), and the page made of its rows.
package listing

import (
	"context"
	"strings"
	"time"

	"github.com/promptkit/promptkit/jobs"
)

// Dialect is how a store writes what Query puts in its SQL.
type Dialect struct {
	// Placeholder is the n-th parameter's placeholder (n counts from 1).
	Placeholder func(n int) string
	// Time is the stored form of a time.
	Time func(time.Time) any
}

// List runs ListJobs: it normalizes p, reads Query's rows with query and
// makes the page.
func List(ctx context.Context, p jobs.ListParams, d Dialect, cols string,
	query func(ctx context.Context, q string, args ...any) ([]jobs.Job, error)) (jobs.JobPage, error) {
	p, err := p.Normalize()
	if err != nil {
		return jobs.JobPage{}, err
	}
	q, args, err := Query(p, d, cols)
	if err != nil {
		return jobs.JobPage{}, err
	}
	rows, err := query(ctx, q, args...)
	if err != nil {
		return jobs.JobPage{}, err
	}
	return Page(rows, p.Limit), nil
}

// Query returns the ListJobs query for p, which must be normalized, and
// its arguments: cols of the jobs matching p's filters, newest first
// (created_at, then id, descending), after the cursor p.After, one row
// more than p.Limit so that Page can tell whether there is a next page.
// The query's text depends only on which filters are set, so the stores'
// statement caches stay small, and a listing with none of the filters
// JobFilter added for the dashboard (Until, Profile, Backend, priorities,
// BatchID) is the query it always was, with its plans.
func Query(p jobs.ListParams, d Dialect, cols string) (string, []any, error) {
	var b builder
	b.d = d
	b.filter(p.JobFilter)
	if p.After != "" {
		c, err := jobs.DecodeCursor(p.After)
		if err != nil {
			return "", nil, err
		}
		// Keyset pagination: an insert can never shift a position in this
		// order, it only adds rows at one.
		b.where = append(b.where, "(created_at, id) < ("+b.arg(d.Time(c.CreatedAt))+", "+b.arg(c.ID)+")")
	}
	q := `SELECT ` + cols + ` FROM jobs` + b.clause()
	return q + ` ORDER BY created_at DESC, id DESC LIMIT ` + b.arg(p.Limit+1), b.args, nil
}

// CountQuery returns the CountJobs query for f, which must be normalized,
// and its arguments: one row, the count of the jobs matching f.
func CountQuery(f jobs.JobFilter, d Dialect) (string, []any) {
	var b builder
	b.d = d
	b.filter(f)
	return `SELECT count(*) FROM jobs` + b.clause(), b.args
}

// Count runs CountJobs: it normalizes f and reads CountQuery's one value
// with query.
func Count(ctx context.Context, f jobs.JobFilter, d Dialect,
	query func(ctx context.Context, q string, args ...any) (int, error)) (int, error) {
	f, err := f.Normalize()
	if err != nil {
		return 0, err
	}
	q, args := CountQuery(f, d)
	return query(ctx, q, args...)
}

// builder collects a query's conditions and their arguments.
type builder struct {
	d     Dialect
	where []string
	args  []any
}

func (b *builder) arg(v any) string {
	b.args = append(b.args, v)
	return b.d.Placeholder(len(b.args))
}

func (b *builder) clause() string {
	if len(b.where) == 0 {
		return ""
	}
	return ` WHERE ` + strings.Join(b.where, " AND ")
}

// filter adds f's conditions on the jobs table (named jobs, so that the
// subqueries can name its row).
func (b *builder) filter(f jobs.JobFilter) {
	if f.OrgID != "" {
		b.where = append(b.where, "org_id = "+b.arg(f.OrgID))
	}
	if f.CreatedBy != "" {
		b.where = append(b.where, "created_by = "+b.arg(f.CreatedBy))
	}
	if f.State != "" {
		b.where = append(b.where, "state = "+b.arg(string(f.State)))
	}
	if f.Current {
		// A prompt's jobs are its first and its retries; each retry moves
		// the job it replaces to superseded, so exactly one is not.
		b.where = append(b.where, "state <> 'superseded'")
	}
	if !f.Since.IsZero() {
		b.where = append(b.where, "created_at >= "+b.arg(b.d.Time(f.Since)))
	}
	if !f.Until.IsZero() {
		b.where = append(b.where, "created_at < "+b.arg(b.d.Time(f.Until)))
	}
	if f.MinPriority != nil {
		b.where = append(b.where, "priority >= "+b.arg(*f.MinPriority))
	}
	if f.MaxPriority != nil {
		b.where = append(b.where, "priority <= "+b.arg(*f.MaxPriority))
	}
	if f.Profile != "" {
		// The prompt is one primary-key probe per job row read.
		b.where = append(b.where, "EXISTS (SELECT 1 FROM prompts p WHERE p.id = jobs.prompt_id AND p.profile = "+b.arg(f.Profile)+")")
	}
	if f.BatchID != "" {
		// A batch's prompts are a range of their index (batch_id, id).
		b.where = append(b.where, "prompt_id IN (SELECT p.id FROM prompts p WHERE p.batch_id = "+b.arg(f.BatchID)+")")
	}
	if f.Backend != "" {
		// usage_ledger (backend, job_id) answers both plans: a probe per
		// job row read, or the backend's rows as one range to join
		// (migrations 00017 on PostgreSQL, 00014 on SQLite).
		b.where = append(b.where, "EXISTS (SELECT 1 FROM usage_ledger u WHERE u.job_id = jobs.id AND u.backend = "+b.arg(f.Backend)+")")
	}
}

// Page makes a ListJobs page of the rows Query returned: a row beyond
// limit means there is a next page, which Next (jobs.Cursor) continues
// after the page's last job.
func Page(rows []jobs.Job, limit int) jobs.JobPage {
	if len(rows) <= limit {
		return jobs.JobPage{Jobs: rows}
	}
	rows = rows[:limit]
	return jobs.JobPage{Jobs: rows, Next: jobs.CursorAfter(rows[limit-1]).String()}
}
