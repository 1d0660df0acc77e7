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
// statement caches stay small.
func Query(p jobs.ListParams, d Dialect, cols string) (string, []any, error) {
	var (
		where []string
		args  []any
	)
	arg := func(v any) string {
		args = append(args, v)
		return d.Placeholder(len(args))
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
	if p.Current {
		// A prompt's jobs are its first and its retries; each retry moves
		// the job it replaces to superseded, so exactly one is not.
		where = append(where, "state <> 'superseded'")
	}
	if !p.Since.IsZero() {
		where = append(where, "created_at >= "+arg(d.Time(p.Since)))
	}
	if p.After != "" {
		c, err := jobs.DecodeCursor(p.After)
		if err != nil {
			return "", nil, err
		}
		// Keyset pagination: an insert can never shift a position in this
		// order, it only adds rows at one.
		where = append(where, "(created_at, id) < ("+arg(d.Time(c.CreatedAt))+", "+arg(c.ID)+")")
	}
	q := `SELECT ` + cols + ` FROM jobs`
	if len(where) > 0 {
		q += ` WHERE ` + strings.Join(where, " AND ")
	}
	return q + ` ORDER BY created_at DESC, id DESC LIMIT ` + arg(p.Limit+1), args, nil
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
