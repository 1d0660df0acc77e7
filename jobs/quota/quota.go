// Package quota enforces the rates and budgets of the stored limits
// (jobs.Limit) of organisations and tokens: requests and model tokens per
// minute, and spend per UTC day and per calendar month. The server admits
// each request that makes the provider work (Admit), and checks a batch's
// budgets at its creation (Spendable); every provider call, a job's or an
// embeddings request's, reserves its estimated share before it is made
// (Call).
//
// # Admission reserves
//
// What admission counts is in the database, so a limit holds across
// every process on it: the requests admitted in the last minute and the
// calls in flight are reservations (jobs.Store.Reserve), the tokens and
// the spend of finished calls are the usage ledger (jobs.Store.Usage).
// A check and its reservation are one step in the store, made one at a
// time per org and per token: concurrent requests cannot pass a limit
// together, in one process or many. Only the limits themselves are
// cached, for CacheFor (5 s by default): a limit set or changed takes up
// to that long to apply, and a subject without a limit costs no query at
// all while the cache is fresh.
//
// # Spend
//
// The spend of a period is the known cost of its calls, plus each call
// of unknown cost (unknown usage, an unpriced model, a call lost with a
// killed worker) counted at the period's mean known cost per call; when
// the period has no call of known cost, such calls count nothing. A call
// in flight counts its estimate (pktype.CallEstimate), or, when its cost
// cannot be estimated, the mean like a call of unknown cost.
//
// # The bound
//
// A call is admitted only while the spend and the calls in flight are
// below its org's and token's budgets, and it holds its estimate until it
// is in the ledger. So the spend passes a budget by at most the cost of
// the last call admitted below it, plus what the estimates of the calls
// then in flight fell short of their costs (a call without an output
// limit, or priced at the mean).
package quota

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/promptkit/promptkit/jobs"
	"github.com/promptkit/promptkit/pktype"
)

// Store is what enforcement reads and writes: the limits, the usage
// ledger and the reservations. A jobs.Store is one.
type Store interface {
	jobs.ReserveReader
	Limits(ctx context.Context) ([]jobs.Limit, error)
	Reserve(ctx context.Context, p jobs.ReserveParams) (string, error)
	Release(ctx context.Context, id string) error
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
// without a token).
type Subject struct {
	Org, Token string
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

// Reservation is a share of limits held (Quotas.Admit, Quotas.Call):
// Release returns it. The zero Reservation holds nothing.
type Reservation struct {
	store Store
	id    string
}

// Release returns the reservation: a request that was not used (refused
// after admission, or the repeat of a job already queued), or a call now
// in the ledger. A reservation not released counts until it expires.
// Releasing twice, or the zero Reservation, does nothing.
func (r *Reservation) Release(ctx context.Context) error {
	if r == nil || r.id == "" {
		return nil
	}
	id := r.id
	r.id = ""
	if err := r.store.Release(ctx, id); err != nil {
		return fmt.Errorf("quota: releasing a reservation: %w", err)
	}
	return nil
}

// Admit admits a submission of s, one that makes the provider work,
// against every rate and budget of its org's and its token's limits, the
// token's first: a Reservation of one request (counted for a minute by
// the requests per minute), an *Exceeded, or the store's error. With a
// requests per minute, the check and the reservation are one step in the
// store: concurrent submissions, in any process on the database, cannot
// pass the rate together.
func (q *Quotas) Admit(ctx context.Context, s Subject) (Reservation, error) {
	ls, err := q.limitsOf(ctx, s)
	if err != nil || len(ls) == 0 {
		return Reservation{}, err
	}
	if !slices.ContainsFunc(ls, func(l jobs.Limit) bool { return l.RequestsPerMinute > 0 }) {
		// Nothing to count: reserving would serialise for no limit. The
		// calls a request makes reserve their own share (Call).
		return Reservation{}, check(ctx, q.store, ls, q.now(), checkRequest)
	}
	return q.reserve(ctx, s, ls, jobs.ReserveParams{Request: true, TTL: Window}, checkRequest)
}

// Call admits a provider call made for s, estimated est, against the
// tokens per minute and the budgets of its org's and token's limits, and
// reserves the estimate (its tokens and its cost) until it is released
// (once the call is in the ledger) or ttl (the longest the call may last)
// has passed: a Reservation, an *Exceeded (a budget's matches
// jobs.ErrBudgetExceeded; a rate's says when to try again), or the
// store's error. A call whose cost cannot be estimated counts at
// the mean cost per call of the period's calls. The check and the
// reservation are one step in the store, so calls admitted at once in
// any process cannot pass a limit together: the spend (the tokens) passes
// it by at most the cost (the tokens) of the last call admitted below it,
// and by what the estimates of the calls then in flight fell short.
func (q *Quotas) Call(ctx context.Context, s Subject, est pktype.CallEstimate, ttl time.Duration) (Reservation, error) {
	return q.call(ctx, s, est, jobs.ReserveParams{TTL: ttl})
}

// call is Call with p's job and TTL.
func (q *Quotas) call(ctx context.Context, s Subject, est pktype.CallEstimate, p jobs.ReserveParams) (Reservation, error) {
	ls, err := q.limitsOf(ctx, s)
	if err != nil {
		return Reservation{}, err
	}
	if !slices.ContainsFunc(ls, func(l jobs.Limit) bool {
		return l.TokensPerMinute > 0 || l.DailyUSD > 0 || l.MonthlyUSD > 0
	}) {
		return Reservation{}, nil
	}
	p.Call, p.Tokens = true, int64(est.Tokens)
	if est.Cost.Known {
		p.USD = &est.Cost.USD
	}
	return q.reserve(ctx, s, ls, p, checkCall)
}

// Spendable checks only the budgets of s (a batch being created): nil,
// an *Exceeded (matching jobs.ErrBudgetExceeded), or the store's error.
// It reserves nothing: each line's calls reserve their own (Call).
func (q *Quotas) Spendable(ctx context.Context, s Subject) error {
	ls, err := q.limitsOf(ctx, s)
	if err != nil {
		return err
	}
	return check(ctx, q.store, ls, q.now(), checkBudgets)
}

// reserve stores p for s if its limits ls admit it, checked as what says.
func (q *Quotas) reserve(ctx context.Context, s Subject, ls []jobs.Limit, p jobs.ReserveParams, what checkKind) (Reservation, error) {
	p.OrgID, p.TokenID = s.Org, s.Token
	p.Check = func(ctx context.Context, r jobs.ReserveReader, now time.Time) error {
		return check(ctx, r, ls, now, what)
	}
	id, err := q.store.Reserve(ctx, p)
	if err != nil {
		if _, ok := errors.AsType[*Exceeded](err); ok {
			return Reservation{}, err
		}
		return Reservation{}, fmt.Errorf("quota: reserving: %w", err)
	}
	return Reservation{store: q.store, id: id}, nil
}

// checkKind says which rules a check applies.
type checkKind int

const (
	checkRequest checkKind = iota // every rule: a submission
	checkCall                     // the tokens per minute and the budgets: a call
	checkBudgets                  // the budgets alone: a batch
)

// JobCalls is a worker's Config.Budget: each call of a job reserved
// (Call) as the job's org's and token's while the job runs under the
// claim it was made under, for at most ttl, the worker's job timeout,
// which no call of a run outlasts.
func (q *Quotas) JobCalls(ttl time.Duration) func(context.Context, jobs.Job, pktype.CallEstimate) (func(context.Context) error, error) {
	return func(ctx context.Context, j jobs.Job, est pktype.CallEstimate) (func(context.Context) error, error) {
		r, err := q.call(ctx, JobSubject(j), est, jobs.ReserveParams{TTL: ttl, JobID: j.ID, ClaimedAt: j.ClaimedAt})
		return r.Release, err
	}
}

// JobSubject is whom job j spends for.
func JobSubject(j jobs.Job) Subject {
	return Subject{Org: j.OrgID, Token: j.TokenID}
}

// check checks the limits ls at now, reading r.
func check(ctx context.Context, r jobs.ReserveReader, ls []jobs.Limit, now time.Time, what checkKind) error {
	for _, l := range ls {
		if err := checkOne(ctx, r, l, now, what); err != nil {
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

// checkOne checks l, the limit of an org or a token, at now, reading r:
// the ledger, and the reservations of the subject open at now.
func checkOne(ctx context.Context, r jobs.ReserveReader, l jobs.Limit, now time.Time, what checkKind) error {
	exceeded := func(rule Rule, limit float64, retry time.Duration) error {
		return &Exceeded{Scope: l.Scope, Rule: rule, Limit: limit, RetryAfter: max(retry, time.Second)}
	}
	rates := what != checkBudgets && l.TokensPerMinute > 0
	budgets := l.DailyUSD > 0 || l.MonthlyUSD > 0
	if !rates && !budgets && (what != checkRequest || l.RequestsPerMinute == 0) {
		return nil
	}
	held, err := r.Reserved(ctx, jobs.ReservedParams{Scope: l.Scope, Subject: l.Subject})
	if err != nil {
		return fmt.Errorf("quota: reading the reservations: %w", err)
	}
	if what == checkRequest && l.RequestsPerMinute > 0 && held.Requests >= l.RequestsPerMinute {
		return exceeded(RequestsPerMinute, float64(l.RequestsPerMinute), held.NextExpiry.Sub(now))
	}
	// To left zero: up to the store's now.
	var usage jobs.UsageParams
	if l.Scope == jobs.LimitToken {
		usage.TokenID = l.Subject
	} else {
		usage.OrgID = l.Subject
	}
	if rates {
		p := usage
		p.From = now.Add(-Window)
		t, err := total(ctx, r, p)
		if err != nil {
			return err
		}
		if t.tokens+held.Tokens >= int64(l.TokensPerMinute) {
			// The ledger's buckets do not say when their tokens leave the
			// window: a whole window surely frees it.
			return exceeded(TokensPerMinute, float64(l.TokensPerMinute), Window)
		}
	}
	if !budgets {
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
	bs, err := r.Usage(ctx, p)
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
	if l.DailyUSD > 0 && today.spend(held) >= l.DailyUSD {
		return exceeded(DailyBudget, l.DailyUSD, day.Add(24*time.Hour).Sub(now))
	}
	if l.MonthlyUSD > 0 && all.spend(held) >= l.MonthlyUSD {
		return exceeded(MonthlyBudget, l.MonthlyUSD, month.AddDate(0, 1, 0).Sub(now))
	}
	return nil
}

// totals sums a period's usage buckets.
type totals struct {
	requests, unknownCost, tokens int64
	cost                          float64
}

// spend is the period's known cost and the estimates of the calls in
// flight (held), plus its calls, and calls in flight, of unknown cost at
// the mean known cost per call (none when no call's cost is known).
func (t totals) spend(held jobs.Reserved) float64 {
	spent := t.cost + held.CostUSD
	unknown := t.unknownCost + int64(held.UnknownCost)
	known := t.requests - t.unknownCost
	if unknown == 0 || known <= 0 {
		return spent
	}
	return spent + float64(unknown)*t.cost/float64(known)
}

// add counts bucket b in t.
func (t *totals) add(b jobs.UsageBucket) {
	t.requests += b.Requests
	t.unknownCost += b.UnknownCost
	t.tokens += b.InputTokens + b.OutputTokens
	t.cost += b.CostUSD
}

func total(ctx context.Context, r jobs.ReserveReader, p jobs.UsageParams) (totals, error) {
	bs, err := r.Usage(ctx, p)
	if err != nil {
		return totals{}, fmt.Errorf("quota: reading the usage: %w", err)
	}
	var t totals
	for _, b := range bs {
		t.add(b)
	}
	return t, nil
}
