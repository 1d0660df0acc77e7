// Package usageq builds the usage ledger's read (jobs.Store.Usage) for
// both stores, so that grouping, filters and the sums are one rule and
// only the SQL dialect differs.
package usageq

import (
	"fmt"
	"strings"
	"time"

	"github.com/promptkit/promptkit/jobs"
)

// Dialect is what differs between the databases.
type Dialect struct {
	// Param names the n-th parameter (from 1).
	Param func(n int) string
	// Time is a time as the database stores it.
	Time func(time.Time) any
	// Day is the expression of a row's UTC day (from its column at).
	Day string
	// ByTime is the ledger as FROM names it for a read of a time range:
	// SQLite's planner would otherwise walk the (backend, job_id) index
	// for a GROUP BY backend, the whole ledger, instead of the range of
	// the (at) index.
	ByTime string
}

// columns are the group dimensions in the order buckets are sorted and
// selected: day first.
var columns = []struct {
	group jobs.UsageGroup
	col   string
}{
	{jobs.UsageByDay, ""}, // the dialect's Day
	{jobs.UsageByOrg, "org_id"},
	{jobs.UsageByUser, "user_id"},
	{jobs.UsageByToken, "token_id"},
	{jobs.UsageByModel, "model"},
	{jobs.UsageByBackend, "backend"},
}

// Query returns the read of a normalized p; a zero To reads every row,
// all being stamped at or before the store's now. Each row is: the day
// (NULL unless grouped by day), org, user, token, model and backend
// (empty unless grouped by them), then Requests, InputTokens,
// OutputTokens, CachedInputTokens, ReasoningTokens, UnknownUsage,
// UnknownCached, UnknownReasoning, CostUSD and UnknownCost (see Dests).
// Only the filters given are in the WHERE clause, so that an org's or a
// token's range read uses its index.
func Query(p jobs.UsageParams, d Dialect) (string, []any) {
	var args []any
	arg := func(v any) string {
		args = append(args, v)
		return d.Param(len(args))
	}
	where := []string{"TRUE"}
	if !p.To.IsZero() {
		where = append(where, "at < "+arg(d.Time(p.To)))
	}
	if !p.From.IsZero() {
		where = append(where, "at >= "+arg(d.Time(p.From)))
	}
	for _, f := range []struct{ col, v string }{
		{"org_id", p.OrgID}, {"user_id", p.UserID}, {"token_id", p.TokenID}, {"model", p.Model}, {"backend", p.Backend},
	} {
		if f.v != "" {
			where = append(where, f.col+" = "+arg(f.v))
		}
	}
	var sel, group []string
	for _, c := range columns {
		expr := c.col
		if c.group == jobs.UsageByDay {
			expr = d.Day
		}
		switch {
		case p.Groups(c.group):
			sel, group = append(sel, expr), append(group, expr)
		case c.group == jobs.UsageByDay:
			sel = append(sel, "NULL")
		default:
			sel = append(sel, "''")
		}
	}
	q := fmt.Sprintf(`SELECT %s,
		count(*),
		CAST(coalesce(sum(input_tokens), 0) AS BIGINT),
		CAST(coalesce(sum(output_tokens), 0) AS BIGINT),
		CAST(coalesce(sum(cached_tokens), 0) AS BIGINT),
		CAST(coalesce(sum(reasoning_tokens), 0) AS BIGINT),
		CAST(coalesce(sum(CASE WHEN input_tokens IS NULL OR output_tokens IS NULL THEN 1 ELSE 0 END), 0) AS BIGINT),
		CAST(coalesce(sum(CASE WHEN cached_tokens IS NULL THEN 1 ELSE 0 END), 0) AS BIGINT),
		CAST(coalesce(sum(CASE WHEN reasoning_tokens IS NULL THEN 1 ELSE 0 END), 0) AS BIGINT),
		CAST(coalesce(sum(cost_usd), 0) AS DOUBLE PRECISION),
		CAST(coalesce(sum(CASE WHEN cost_usd IS NULL THEN 1 ELSE 0 END), 0) AS BIGINT)
	FROM usage_ledger WHERE %s`, strings.Join(sel, ", "), strings.Join(where, " AND "))
	if len(group) > 0 {
		q += " GROUP BY " + strings.Join(group, ", ") + " ORDER BY " + strings.Join(group, ", ")
	}
	return q, args
}

// Dests returns the scan destinations of a row into b, after the day,
// which the store reads itself.
func Dests(b *jobs.UsageBucket) []any {
	return []any{&b.OrgID, &b.UserID, &b.TokenID, &b.Model, &b.Backend,
		&b.Requests, &b.InputTokens, &b.OutputTokens, &b.CachedInputTokens, &b.ReasoningTokens,
		&b.UnknownUsage, &b.UnknownCached, &b.UnknownReasoning, &b.CostUSD, &b.UnknownCost}
}

// Call results as BackendActivity sorts them: a 429 is rate limited
// whatever its outcome; otherwise a known outcome other than success (an
// error, a lost call) is an error. A row of unknown result (outcome ”,
// written before the ledger kept results) is neither.
const (
	succeeded   = "status_code <> 429 AND outcome = 'success'"
	rateLimited = "status_code = 429"
	failed      = "status_code <> 429 AND outcome NOT IN ('success', '')"
)

// ActivityQuery returns the read of Store.BackendActivity since since:
// a range of the ledger's (at) index. Each row is: the backend, Calls,
// Succeeded, RateLimited, Errors, InputTokens, OutputTokens and CostUSD
// (see ActivityDests), then the latest rate-limited and the latest failed
// call's at, NULL when none, which the store reads itself.
func ActivityQuery(since time.Time, d Dialect) (string, []any) {
	return `SELECT backend,
		count(*),
		CAST(coalesce(sum(CASE WHEN ` + succeeded + ` THEN 1 ELSE 0 END), 0) AS BIGINT),
		CAST(coalesce(sum(CASE WHEN ` + rateLimited + ` THEN 1 ELSE 0 END), 0) AS BIGINT),
		CAST(coalesce(sum(CASE WHEN ` + failed + ` THEN 1 ELSE 0 END), 0) AS BIGINT),
		CAST(coalesce(sum(input_tokens), 0) AS BIGINT),
		CAST(coalesce(sum(output_tokens), 0) AS BIGINT),
		CAST(coalesce(sum(cost_usd), 0) AS DOUBLE PRECISION),
		max(CASE WHEN ` + rateLimited + ` THEN at END),
		max(CASE WHEN ` + failed + ` THEN at END)
	FROM ` + d.ByTime + ` WHERE at >= ` + d.Param(1) + `
	GROUP BY backend ORDER BY backend`, []any{d.Time(since)}
}

// ActivityDests returns the scan destinations of a row into a, before the
// two times.
func ActivityDests(a *jobs.BackendActivity) []any {
	return []any{&a.Backend, &a.Calls, &a.Succeeded, &a.RateLimited, &a.Errors, &a.InputTokens, &a.OutputTokens, &a.CostUSD}
}
