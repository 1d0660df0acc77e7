// Package quota enforces the rates and budgets of the stored limits
// (jobs.Limit) of organisations and tokens: requests and model tokens per
// minute, and spend per UTC day and per calendar month. The server asks
// it before admitting a submission (Admit) or a batch (Spendable); a
// worker asks it before each run of a job (Spendable), which is what
// bounds the spend of queued work and batches.
//
// Everything it counts is read from the database, so a limit holds
// across every process on it: the requests from the jobs created in the
// last 60 s (jobs.Store.Submitted), the tokens and the spend from the
// usage ledger (jobs.Store.Usage). Only the limits themselves are cached,
// for CacheFor (5 s by default): a limit set or changed takes up to that
// long to apply, and a subject without a limit costs no query at all
// while the cache is fresh.
//
// # Spend
//
// The spend of a period is the known cost of its calls, plus each call
// of unknown cost (unknown usage, an unpriced model, a call lost with a
// killed worker) counted at the period's mean known cost per call; when
// the period has no call of known cost, such calls count nothing.
//
// # The bound
//
// A run starts only while its org's and token's spend is below their
// budgets, and the spend is read afresh for each run. So the spend
// recorded passes a budget by at most the calls in flight when it was
// reached: each running job has one call in flight at a time, and a call
// lost to a killed worker is counted when the job is reclaimed, at the
// mean cost.
package quota

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/promptkit/promptkit/jobs"
)

// Store is what enforcement reads: the limits, the jobs created in a
// window and the usage ledger. A jobs.Store is one.
type Store interface {
	Limits(ctx context.Context) ([]jobs.Limit, error)
	Submitted(ctx context.Context, p jobs.SubmittedParams) (time.Time, error)
	Usage(ctx context.Context, p jobs.UsageParams) ([]jobs.UsageBucket, error)
}

var _ Store = jobs.Store(nil)

// DefaultCacheFor is how long the limits read from the store are used
// before they are read again.
const DefaultCacheFor = 5 * time.Second

// Window is the span of the per-minute rates.
const Window = time.Minute

// Config configures Quotas.
type Config struct {
	// Store holds the limits and the usage. Required.
	Store Store
	// CacheFor is how long the limits are cached. Defaults to
	// DefaultCacheFor.
	CacheFor time.Duration
	// Now is the clock: the store's. Defaults to time.Now.
	Now func() time.Time
}

// Quotas checks organisations and tokens against their limits. It is
// safe for concurrent use.
type Quotas struct {
	store    Store
	cacheFor time.Duration
	now      func() time.Time

	// mu guards the cache; a reader holds it while it reads the limits
	// again, so a stale cache costs one read however many callers wait.
	mu     sync.Mutex
	limits map[subject]jobs.Limit
	readAt time.Time
}

type subject struct {
	scope jobs.LimitScope
	id    string
}

// New returns Quotas reading cfg.Store.
func New(cfg Config) *Quotas {
	if cfg.CacheFor <= 0 {
		cfg.CacheFor = DefaultCacheFor
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Quotas{store: cfg.Store, cacheFor: cfg.CacheFor, now: cfg.Now}
}

// Subject is whom a request or a job spends for: its org and, when it
// came with one, its token ("" for the local identity or a job queued
// without a token) and the token's user (which the requests per minute
// of a token are counted through).
type Subject struct {
	Org, User, Token string
}

// Rule names one limit of a jobs.Limit.
type Rule string

// Rules.
const (
	RequestsPerMinute Rule = "requests_per_minute"
	TokensPerMinute   Rule = "tokens_per_minute"
	DailyBudget       Rule = "daily_budget"
	MonthlyBudget     Rule = "monthly_budget"
)

// Budget reports whether r bounds spend, not a rate: waiting a moment
// does not cure it.
func (r Rule) Budget() bool { return r == DailyBudget || r == MonthlyBudget }

// ErrExceeded matches every *Exceeded.
var ErrExceeded = errors.New("quota: limit reached")

// Exceeded is a limit reached. Its message names the limit, never a
// secret or a request's content.
type Exceeded struct {
	Scope jobs.LimitScope
	Rule  Rule
	// Limit is the limit's value: requests, tokens or US dollars.
	Limit float64
	// RetryAfter is how long until the limit may admit again: until the
	// window frees a place, or the period resets.
	RetryAfter time.Duration
}

func (e *Exceeded) Error() string {
	who := "the organisation's"
	if e.Scope == jobs.LimitToken {
		who = "the token's"
	}
	switch e.Rule {
	case RequestsPerMinute:
		return fmt.Sprintf("%s limit of %.0f %s per minute is reached", who, e.Limit, plural(e.Limit, "request"))
	case TokensPerMinute:
		return fmt.Sprintf("%s limit of %.0f %s per minute is reached", who, e.Limit, plural(e.Limit, "token"))
	case DailyBudget:
		return fmt.Sprintf("%s daily budget of $%.2f is reached", who, e.Limit)
	}
	return fmt.Sprintf("%s monthly budget of $%.2f is reached", who, e.Limit)
}

// plural is word for a count of n.
func plural(n float64, word string) string {
	if n == 1 {
		return word
	}
	return word + "s"
}

// Is matches ErrExceeded, and jobs.ErrBudgetExceeded for a budget.
func (e *Exceeded) Is(target error) bool {
	return target == ErrExceeded || target == jobs.ErrBudgetExceeded && e.Rule.Budget()
}

// Admit checks a submission of s against every rate and budget of its
// org's and its token's limits, the token's first: nil, an *Exceeded, or
// the store's error. Concurrent submissions checked at once may pass a
// rate together by the few that raced.
func (q *Quotas) Admit(ctx context.Context, s Subject) error {
	return q.check(ctx, s, false)
}

// Spendable checks only the budgets of s (a batch being created, a job
// about to run): nil, an *Exceeded (matching jobs.ErrBudgetExceeded), or
// the store's error.
func (q *Quotas) Spendable(ctx context.Context, s Subject) error {
	return q.check(ctx, s, true)
}

// JobBudget is Spendable for the org and token of job j: what a worker
// asks before each run (worker.Config.Budget).
func (q *Quotas) JobBudget(ctx context.Context, j jobs.Job) error {
	return q.Spendable(ctx, Subject{Org: j.OrgID, User: j.CreatedBy, Token: j.TokenID})
}

func (q *Quotas) check(ctx context.Context, s Subject, budgetsOnly bool) error {
	ls, err := q.limitsOf(ctx, s)
	if err != nil {
		return err
	}
	now := q.now()
	for _, l := range ls {
		if err := q.checkOne(ctx, s, l, now, budgetsOnly); err != nil {
			return err
		}
	}
	return nil
}

// limitsOf returns the limits of s's token and org, in that order, from
// the cache, reading the store when the cache is older than CacheFor.
func (q *Quotas) limitsOf(ctx context.Context, s Subject) ([]jobs.Limit, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	now := q.now()
	if q.limits == nil || now.Sub(q.readAt) >= q.cacheFor || now.Before(q.readAt) {
		ls, err := q.store.Limits(ctx)
		if err != nil {
			return nil, fmt.Errorf("quota: reading the limits: %w", err)
		}
		q.limits = make(map[subject]jobs.Limit, len(ls))
		for _, l := range ls {
			q.limits[subject{l.Scope, l.Subject}] = l
		}
		q.readAt = now
	}
	var out []jobs.Limit
	if l, ok := q.limits[subject{jobs.LimitToken, s.Token}]; ok && s.Token != "" {
		out = append(out, l)
	}
	if l, ok := q.limits[subject{jobs.LimitOrg, s.Org}]; ok && s.Org != "" {
		out = append(out, l)
	}
	return out, nil
}

// checkOne checks l, the limit of s's org or token, at now.
func (q *Quotas) checkOne(ctx context.Context, s Subject, l jobs.Limit, now time.Time, budgetsOnly bool) error {
	exceeded := func(r Rule, limit float64, retry time.Duration) error {
		return &Exceeded{Scope: l.Scope, Rule: r, Limit: limit, RetryAfter: max(retry, time.Second)}
	}
	// To left zero: up to the store's now.
	var usage jobs.UsageParams
	if l.Scope == jobs.LimitToken {
		usage.TokenID = l.Subject
	} else {
		usage.OrgID = l.Subject
	}
	if !budgetsOnly && l.RequestsPerMinute > 0 {
		// The window is the last minute, its start left out: a submission
		// leaves it exactly Window after it was made.
		p := jobs.SubmittedParams{OrgID: s.Org, Since: now.Add(-Window + time.Microsecond), N: l.RequestsPerMinute}
		if l.Scope == jobs.LimitToken {
			p.TokenID, p.CreatedBy = l.Subject, s.User
		}
		at, err := q.store.Submitted(ctx, p)
		if err != nil {
			return fmt.Errorf("quota: counting the requests: %w", err)
		}
		if !at.IsZero() {
			return exceeded(RequestsPerMinute, float64(l.RequestsPerMinute), at.Add(Window).Sub(now))
		}
	}
	if !budgetsOnly && l.TokensPerMinute > 0 {
		p := usage
		p.From = now.Add(-Window)
		t, err := q.total(ctx, p)
		if err != nil {
			return err
		}
		if t.tokens >= int64(l.TokensPerMinute) {
			// The ledger's buckets do not say when their tokens leave the
			// window: a whole window surely frees it.
			return exceeded(TokensPerMinute, float64(l.TokensPerMinute), Window)
		}
	}
	if l.DailyUSD <= 0 && l.MonthlyUSD <= 0 {
		return nil
	}
	// One read for both budgets: the month's usage by day, of which
	// today's bucket is the day's (or, with no monthly budget, today's
	// alone).
	day := now.UTC().Truncate(24 * time.Hour)
	y, m, _ := now.UTC().Date()
	month := time.Date(y, m, 1, 0, 0, 0, 0, time.UTC)
	p := usage
	p.From, p.GroupBy = day, []jobs.UsageGroup{jobs.UsageByDay}
	if l.MonthlyUSD > 0 {
		p.From = month
	}
	bs, err := q.store.Usage(ctx, p)
	if err != nil {
		return fmt.Errorf("quota: reading the usage: %w", err)
	}
	var today, all totals
	for _, b := range bs {
		all.add(b)
		if b.Day.Equal(day) {
			today.add(b)
		}
	}
	if l.DailyUSD > 0 && today.spend() >= l.DailyUSD {
		return exceeded(DailyBudget, l.DailyUSD, day.Add(24*time.Hour).Sub(now))
	}
	if l.MonthlyUSD > 0 && all.spend() >= l.MonthlyUSD {
		return exceeded(MonthlyBudget, l.MonthlyUSD, month.AddDate(0, 1, 0).Sub(now))
	}
	return nil
}

// totals sums a period's usage buckets.
type totals struct {
	requests, unknownCost, tokens int64
	cost                          float64
}

// spend is the period's known cost, plus its calls of unknown cost at
// the mean known cost per call (none when no call's cost is known).
func (t totals) spend() float64 {
	known := t.requests - t.unknownCost
	if t.unknownCost == 0 || known <= 0 {
		return t.cost
	}
	return t.cost + float64(t.unknownCost)*t.cost/float64(known)
}

// add counts bucket b in t.
func (t *totals) add(b jobs.UsageBucket) {
	t.requests += b.Requests
	t.unknownCost += b.UnknownCost
	t.tokens += b.InputTokens + b.OutputTokens
	t.cost += b.CostUSD
}

func (q *Quotas) total(ctx context.Context, p jobs.UsageParams) (totals, error) {
	bs, err := q.store.Usage(ctx, p)
	if err != nil {
		return totals{}, fmt.Errorf("quota: reading the usage: %w", err)
	}
	var t totals
	for _, b := range bs {
		t.add(b)
	}
	return t, nil
}
