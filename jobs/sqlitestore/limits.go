package sqlitestore

import (
	"context"

	"github.com/promptkit/promptkit/jobs"
)

// The methods of jobs.Store on limits are storeops.Ops' (embedded in
// Store), which runs them over opsDB: the statements below. Claims and
// enqueues read the table in their own transactions (claimCaps,
// qNextTag).

const limitCols = `scope, subject, requests_per_minute, tokens_per_minute, max_running, daily_usd, monthly_usd,
	weight, updated_at, paused`

var (
	qUpsertLimit = wq(`INSERT INTO limits (` + limitCols + `) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, 0)
		ON CONFLICT (scope, subject) DO UPDATE SET requests_per_minute = excluded.requests_per_minute,
			tokens_per_minute = excluded.tokens_per_minute, max_running = excluded.max_running,
			daily_usd = excluded.daily_usd, monthly_usd = excluded.monthly_usd, weight = excluded.weight,
			updated_at = excluded.updated_at
		RETURNING ` + limitCols)
	qDeleteLimit = wq(`DELETE FROM limits WHERE scope = ?1 AND subject = ?2`)
	// qPauseLimit sets only the paused flag (SetLimit keeps it: its upsert
	// leaves the column alone).
	qPauseLimit = wq(`INSERT INTO limits (scope, subject, paused, updated_at) VALUES ('org', ?1, ?2, ?3)
		ON CONFLICT (scope, subject) DO UPDATE SET paused = excluded.paused, updated_at = excluded.updated_at
		RETURNING ` + limitCols)
)

const qListLimits = `SELECT ` + limitCols + ` FROM limits ORDER BY scope, subject`

func scanLimit(r scanner) (jobs.Limit, error) {
	var (
		l         jobs.Limit
		scope     string
		updatedAt int64
	)
	if err := r.Scan(&scope, &l.Subject, &l.RequestsPerMinute, &l.TokensPerMinute, &l.MaxRunning,
		&l.DailyUSD, &l.MonthlyUSD, &l.Weight, &updatedAt, &l.Paused); err != nil {
		return jobs.Limit{}, err
	}
	l.Scope, l.UpdatedAt = jobs.LimitScope(scope), fromMicros(updatedAt)
	return l, nil
}

// LimitUpsert writes in a transaction of its own.
func (d *opsDB) LimitUpsert(ctx context.Context, l jobs.Limit) (jobs.Limit, error) {
	var out jobs.Limit
	err := d.store().tx(ctx, func(w *wtx) error {
		var err error
		out, err = scanLimit(w.queryRow(qUpsertLimit, string(l.Scope), l.Subject, l.RequestsPerMinute,
			l.TokensPerMinute, l.MaxRunning, l.DailyUSD, l.MonthlyUSD, l.Weight, w.now))
		return err
	})
	return out, err
}

// LimitPause writes in a transaction of its own.
func (d *opsDB) LimitPause(ctx context.Context, org string, paused bool) (jobs.Limit, error) {
	var out jobs.Limit
	err := d.store().tx(ctx, func(w *wtx) error {
		var err error
		out, err = scanLimit(w.queryRow(qPauseLimit, org, paused, w.now))
		return err
	})
	return out, err
}

func (d *opsDB) LimitDelete(ctx context.Context, scope jobs.LimitScope, subject string) error {
	return d.store().tx(ctx, func(w *wtx) error {
		res, err := w.exec(qDeleteLimit, string(scope), subject)
		if err != nil {
			return err
		}
		n, err := res.RowsAffected()
		if err == nil && n == 0 {
			return jobs.ErrNotFound
		}
		return err
	})
}

func (d *opsDB) LimitList(ctx context.Context) ([]jobs.Limit, error) {
	return readAll(ctx, d.store(), scanLimit, qListLimits)
}

// CallsInsert writes in a transaction of its own.
func (d *opsDB) CallsInsert(ctx context.Context, p jobs.RecordCallsParams) error {
	return d.store().tx(ctx, func(w *wtx) error {
		return w.insertCalls(jobs.Job{OrgID: p.OrgID, CreatedBy: p.UserID, TokenID: p.TokenID}, p.Calls)
	})
}
