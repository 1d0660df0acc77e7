package pgstore

import (
	"context"

	"github.com/jackc/pgx/v5"

	"github.com/promptkit/promptkit/jobs"
)

// Limits are written outside the event lock: they have no events, and a
// claim reads them in its own statement (claimSQL), so a limit set while
// a claim runs applies from the next one.

const limitCols = `scope, subject, requests_per_minute, tokens_per_minute, max_running, daily_usd, monthly_usd,
	weight, updated_at, paused`

const (
	upsertLimitSQL = `
		INSERT INTO limits (` + limitCols + `) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, false)
		ON CONFLICT (scope, subject) DO UPDATE SET requests_per_minute = EXCLUDED.requests_per_minute,
			tokens_per_minute = EXCLUDED.tokens_per_minute, max_running = EXCLUDED.max_running,
			daily_usd = EXCLUDED.daily_usd, monthly_usd = EXCLUDED.monthly_usd, weight = EXCLUDED.weight,
			updated_at = EXCLUDED.updated_at
		RETURNING ` + limitCols
	// pauseLimitSQL sets only the paused flag (SetLimit keeps it: its
	// upsert leaves the column alone).
	pauseLimitSQL = `
		INSERT INTO limits (scope, subject, paused, updated_at) VALUES ('org', $1, $2, $3)
		ON CONFLICT (scope, subject) DO UPDATE SET paused = EXCLUDED.paused, updated_at = EXCLUDED.updated_at
		RETURNING ` + limitCols
	deleteLimitSQL = `DELETE FROM limits WHERE scope = $1 AND subject = $2`
	listLimitsSQL  = `SELECT ` + limitCols + ` FROM limits ORDER BY scope, subject`
)

func scanLimit(row pgx.Row) (jobs.Limit, error) {
	var l jobs.Limit
	var scope string
	if err := row.Scan(&scope, &l.Subject, &l.RequestsPerMinute, &l.TokensPerMinute, &l.MaxRunning,
		&l.DailyUSD, &l.MonthlyUSD, &l.Weight, &l.UpdatedAt, &l.Paused); err != nil {
		return jobs.Limit{}, err
	}
	l.Scope, l.UpdatedAt = jobs.LimitScope(scope), l.UpdatedAt.UTC()
	return l, nil
}

func (d *opsDB) LimitUpsert(ctx context.Context, l jobs.Limit) (jobs.Limit, error) {
	return scanLimit(d.pool.QueryRow(ctx, upsertLimitSQL, string(l.Scope), l.Subject, l.RequestsPerMinute,
		l.TokensPerMinute, l.MaxRunning, l.DailyUSD, l.MonthlyUSD, l.Weight, d.store().clock()))
}

func (d *opsDB) LimitPause(ctx context.Context, org string, paused bool) (jobs.Limit, error) {
	return scanLimit(d.pool.QueryRow(ctx, pauseLimitSQL, org, paused, d.store().clock()))
}

func (d *opsDB) LimitDelete(ctx context.Context, scope jobs.LimitScope, subject string) error {
	tag, err := d.pool.Exec(ctx, deleteLimitSQL, string(scope), subject)
	if err != nil {
		return notFound(err)
	}
	if tag.RowsAffected() == 0 {
		return jobs.ErrNotFound
	}
	return nil
}

func (d *opsDB) LimitList(ctx context.Context) ([]jobs.Limit, error) {
	rows, err := d.pool.Query(ctx, listLimitsSQL)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (jobs.Limit, error) { return scanLimit(r) })
}

// recordCallsSQL adds calls made for no job (an empty job_id) to the usage
// ledger, by the rows of callRows.
const recordCallsSQL = `
	INSERT INTO usage_ledger (at, job_id, org_id, user_id, token_id, model, backend, input_tokens, output_tokens,
		cached_tokens, reasoning_tokens, cost_usd, status_code, outcome, failure)
	SELECT $1, '', $2, $3, $4, c.model, c.backend, c.input, c.output, c.cached, c.reasoning, c.cost, c.status,
		c.outcome, c.failure
	FROM unnest($5::text[], $6::text[], $7::bigint[], $8::bigint[], $9::bigint[], $10::bigint[], $11::float8[],
		$12::int[], $13::text[], $14::text[])
		AS c(model, backend, input, output, cached, reasoning, cost, status, outcome, failure)`

func (d *opsDB) CallsInsert(ctx context.Context, p jobs.RecordCallsParams) error {
	var c callRows
	c.add(0, p.Calls)
	_, err := d.pool.Exec(ctx, recordCallsSQL, d.store().clock(), p.OrgID, p.UserID, p.TokenID,
		c.model, c.backend, c.in, c.out, c.cached, c.reasoning, c.cost, c.status, c.outcome, c.failure)
	return err
}
