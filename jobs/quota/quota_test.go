package quota_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/promptkit/promptkit/internal/testkit"
	"github.com/promptkit/promptkit/jobs"
	"github.com/promptkit/promptkit/jobs/quota"
	"github.com/promptkit/promptkit/pktype"
)

// admit is Quotas.Admit's error.
func admit(q *quota.Quotas, ctx context.Context, s quota.Subject) error {
	_, err := q.Admit(ctx, s)
	return err
}

// t0 is 10:00:30 UTC on 15 March: 14 h before the day ends, 16 days and
// 14 h before the month does.
var t0 = time.Date(2030, 3, 15, 10, 0, 30, 0, time.UTC)

// fakeStore holds limits, reservations and ledger buckets, and counts
// the reads. Its Reserve runs one check at a time, as a store does.
type fakeStore struct {
	clock   *testkit.Clock
	reserve sync.Mutex // held by Reserve around its check
	mu      sync.Mutex
	limits  []jobs.Limit
	held    map[string]held // by reservation ID
	n       int
	usage   []entry
	reads   map[string]int
	usageOf []jobs.UsageParams
}

// held is one reservation.
type held struct {
	org, token string
	request    bool
	tokens     int64
	usd        *float64
	expires    time.Time
}

// entry is one ledger bucket at a time.
type entry struct {
	at time.Time
	b  jobs.UsageBucket
}

func (f *fakeStore) Limits(context.Context) ([]jobs.Limit, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.reads["limits"]++
	return append([]jobs.Limit(nil), f.limits...), nil
}

func (f *fakeStore) Reserve(ctx context.Context, p jobs.ReserveParams) (string, error) {
	if _, err := p.Normalize(); err != nil {
		return "", err
	}
	f.reserve.Lock()
	defer f.reserve.Unlock()
	now := f.clock.Now()
	if p.Check != nil {
		if err := p.Check(ctx, f, now); err != nil {
			return "", err
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.n++
	id := fmt.Sprint("r", f.n)
	f.held[id] = held{org: p.OrgID, token: p.TokenID, request: p.Request, tokens: p.Tokens, usd: p.USD, expires: now.Add(p.TTL)}
	return id, nil
}

func (f *fakeStore) Release(_ context.Context, id string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.held, id)
	return nil
}

func (f *fakeStore) Reserved(_ context.Context, p jobs.ReservedParams) (jobs.Reserved, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.reads["reserved"]++
	now := f.clock.Now()
	var r jobs.Reserved
	for _, h := range f.held {
		if !h.expires.After(now) || p.Scope == jobs.LimitOrg && h.org != p.Subject || p.Scope == jobs.LimitToken && h.token != p.Subject {
			continue
		}
		switch {
		case h.request:
			r.Requests++
			if r.NextExpiry.IsZero() || h.expires.Before(r.NextExpiry) {
				r.NextExpiry = h.expires
			}
		default:
			r.Calls++
			r.Tokens += h.tokens
			if h.usd == nil {
				r.UnknownCost++
			} else {
				r.CostUSD += *h.usd
			}
		}
	}
	return r, nil
}

func (f *fakeStore) Usage(_ context.Context, p jobs.UsageParams) ([]jobs.UsageBucket, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.reads["usage"]++
	f.usageOf = append(f.usageOf, p)
	var out []jobs.UsageBucket
	for _, e := range f.usage {
		if e.at.Before(p.From) || !p.To.IsZero() && !e.at.Before(p.To) || p.OrgID != "" && e.b.OrgID != p.OrgID || p.TokenID != "" && e.b.TokenID != p.TokenID {
			continue
		}
		b := e.b
		if p.Groups(jobs.UsageByDay) {
			b.Day = e.at.UTC().Truncate(24 * time.Hour)
		}
		out = append(out, b)
	}
	return out, nil
}

func (f *fakeStore) set(ls ...jobs.Limit) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.limits = ls
}

// submit records a request of org, with token ("": none), admitted at
// at: it counts for a minute.
func (f *fakeStore) submit(org, token string, at time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.n++
	f.held[fmt.Sprint("s", f.n)] = held{org: org, token: token, request: true, expires: at.Add(quota.Window)}
}

func (f *fakeStore) spend(at time.Time, b jobs.UsageBucket) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.usage = append(f.usage, entry{at, b})
}

func (f *fakeStore) count(what string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.reads[what]
}

func setup(t *testing.T) (*fakeStore, *testkit.Clock, *quota.Quotas) {
	t.Helper()
	c := testkit.NewClock(t0)
	f := &fakeStore{clock: c, held: map[string]held{}, reads: map[string]int{}}
	return f, c, quota.New(quota.Config{Store: f, Now: c.Now})
}

// exceeded checks err is an *Exceeded for rule, its message and its
// Retry-After.
func exceeded(t *testing.T, err error, rule quota.Rule, msg string, retry time.Duration) {
	t.Helper()
	e, ok := errors.AsType[*quota.Exceeded](err)
	if !ok {
		t.Fatalf("err = %v, want *quota.Exceeded", err)
	}
	if e.Rule != rule || e.Error() != msg || e.RetryAfter != retry {
		t.Errorf("Exceeded = %s %q retry %v, want %s %q retry %v", e.Rule, e.Error(), e.RetryAfter, rule, msg, retry)
	}
	if !errors.Is(err, quota.ErrExceeded) || errors.Is(err, jobs.ErrBudgetExceeded) != rule.Budget() {
		t.Errorf("%v: errors.Is ErrExceeded %t, ErrBudgetExceeded %t", err, errors.Is(err, quota.ErrExceeded), errors.Is(err, jobs.ErrBudgetExceeded))
	}
}

func TestRequestsPerMinute(t *testing.T) {
	t.Parallel()
	f, c, q := setup(t)
	f.set(jobs.Limit{Scope: jobs.LimitOrg, Subject: "a", RequestsPerMinute: 3})
	ctx := t.Context()
	// Three submissions at -50 s, -20 s and -10 s fill the window.
	for _, ago := range []time.Duration{50, 20, 10} {
		f.submit("a", "", t0.Add(-ago*time.Second))
	}
	f.submit("b", "", t0)
	exceeded(t, admit(q, ctx, quota.Subject{Org: "a"}), quota.RequestsPerMinute,
		"the organisation's limit of 3 requests per minute is reached", 10*time.Second)
	if err := admit(q, ctx, quota.Subject{Org: "b"}); err != nil {
		t.Errorf("another org: %v", err)
	}
	// A rate is no budget: a job may still run.
	if err := q.Spendable(ctx, quota.Subject{Org: "a"}); err != nil {
		t.Errorf("Spendable under a rate limit: %v", err)
	}
	// The oldest leaves the window 10 s later.
	c.Advance(10 * time.Second)
	if err := admit(q, ctx, quota.Subject{Org: "a"}); err != nil {
		t.Errorf("after the oldest left the window: %v", err)
	}
}

// A token's requests per minute count only its own submissions.
func TestTokenRequestsPerMinute(t *testing.T) {
	t.Parallel()
	f, _, q := setup(t)
	f.set(jobs.Limit{Scope: jobs.LimitToken, Subject: "tok", RequestsPerMinute: 2})
	ctx := t.Context()
	f.submit("a", "tok", t0.Add(-30*time.Second))
	f.submit("a", "other", t0.Add(-20*time.Second))
	f.submit("a", "", t0.Add(-10*time.Second))
	if err := admit(q, ctx, quota.Subject{Org: "a", Token: "tok"}); err != nil {
		t.Fatalf("1 of 2: %v", err)
	}
	f.submit("a", "tok", t0.Add(-5*time.Second))
	exceeded(t, admit(q, ctx, quota.Subject{Org: "a", Token: "tok"}), quota.RequestsPerMinute,
		"the token's limit of 2 requests per minute is reached", 30*time.Second)
	if err := admit(q, ctx, quota.Subject{Org: "a", Token: "other"}); err != nil {
		t.Errorf("another token: %v", err)
	}
}

func TestTokensPerMinute(t *testing.T) {
	t.Parallel()
	f, c, q := setup(t)
	f.set(jobs.Limit{Scope: jobs.LimitToken, Subject: "tok", TokensPerMinute: 1000})
	ctx := t.Context()
	f.spend(t0.Add(-30*time.Second), jobs.UsageBucket{TokenID: "tok", Requests: 1, InputTokens: 600, OutputTokens: 300})
	if err := admit(q, ctx, quota.Subject{Org: "a", Token: "tok"}); err != nil {
		t.Fatalf("900 of 1000 tokens: %v", err)
	}
	// Unknown usage counts no tokens; another token's none of this one's.
	f.spend(t0.Add(-20*time.Second), jobs.UsageBucket{TokenID: "tok", Requests: 1, UnknownUsage: 1, UnknownCost: 1})
	f.spend(t0.Add(-20*time.Second), jobs.UsageBucket{TokenID: "other", Requests: 1, InputTokens: 5000})
	if err := admit(q, ctx, quota.Subject{Org: "a", Token: "tok"}); err != nil {
		t.Fatalf("unknown usage counted: %v", err)
	}
	f.spend(t0.Add(-10*time.Second), jobs.UsageBucket{TokenID: "tok", Requests: 1, InputTokens: 100})
	exceeded(t, admit(q, ctx, quota.Subject{Org: "a", Token: "tok"}), quota.TokensPerMinute,
		"the token's limit of 1000 tokens per minute is reached", time.Minute)
	if err := admit(q, ctx, quota.Subject{Org: "a", Token: "other"}); err != nil {
		t.Errorf("a token without limits: %v", err)
	}
	c.Advance(31 * time.Second) // the 900 tokens leave the window
	if err := admit(q, ctx, quota.Subject{Org: "a", Token: "tok"}); err != nil {
		t.Errorf("after the window: %v", err)
	}
}

func TestDailyBudget(t *testing.T) {
	t.Parallel()
	f, c, q := setup(t)
	f.set(jobs.Limit{Scope: jobs.LimitToken, Subject: "tok", DailyUSD: 5})
	ctx := t.Context()
	s := quota.Subject{Org: "a", Token: "tok"}
	// Yesterday's spend does not count.
	f.spend(t0.Add(-11*time.Hour), jobs.UsageBucket{TokenID: "tok", Requests: 10, CostUSD: 100})
	// Today: three calls at $1 known, one of unknown cost.
	f.spend(t0.Add(-time.Hour), jobs.UsageBucket{TokenID: "tok", Requests: 4, CostUSD: 3, UnknownCost: 1})
	if err := q.Spendable(ctx, s); err != nil {
		t.Fatalf("$4 of $5: %v", err)
	}
	// One more call of unknown cost counts at the mean, $1: $5 reached.
	f.spend(t0.Add(-time.Minute), jobs.UsageBucket{TokenID: "tok", Requests: 1, UnknownCost: 1, UnknownUsage: 1})
	want := "the token's daily budget of $5.00 is reached"
	exceeded(t, q.Spendable(ctx, s), quota.DailyBudget, want, 13*time.Hour+59*time.Minute+30*time.Second)
	exceeded(t, admit(q, ctx, s), quota.DailyBudget, want, 13*time.Hour+59*time.Minute+30*time.Second)
	// The org has no limit; a request without the token is not refused.
	if err := admit(q, ctx, quota.Subject{Org: "a"}); err != nil {
		t.Errorf("the org without the token: %v", err)
	}
	// The next UTC day starts afresh.
	c.Advance(14 * time.Hour)
	if err := admit(q, ctx, s); err != nil {
		t.Errorf("the next day: %v", err)
	}
}

func TestMonthlyBudget(t *testing.T) {
	t.Parallel()
	f, c, q := setup(t)
	f.set(jobs.Limit{Scope: jobs.LimitOrg, Subject: "a", DailyUSD: 10, MonthlyUSD: 20})
	ctx := t.Context()
	f.spend(time.Date(2030, 2, 28, 12, 0, 0, 0, time.UTC), jobs.UsageBucket{OrgID: "a", Requests: 1, CostUSD: 50})
	f.spend(time.Date(2030, 3, 2, 12, 0, 0, 0, time.UTC), jobs.UsageBucket{OrgID: "a", Requests: 1, CostUSD: 19.5})
	if err := admit(q, ctx, quota.Subject{Org: "a"}); err != nil {
		t.Fatalf("$19.50 of $20 this month: %v", err)
	}
	if n := f.count("usage"); n != 1 {
		t.Errorf("a daily and a monthly budget read the usage %d times, want once", n)
	}
	f.spend(t0.Add(-time.Second), jobs.UsageBucket{OrgID: "a", Requests: 1, CostUSD: 0.5})
	untilApril := time.Date(2030, 4, 1, 0, 0, 0, 0, time.UTC).Sub(t0)
	exceeded(t, admit(q, ctx, quota.Subject{Org: "a"}), quota.MonthlyBudget,
		"the organisation's monthly budget of $20.00 is reached", untilApril)
	exceeded(t, q.Spendable(ctx, quota.Subject{Org: "a", Token: "any"}), quota.MonthlyBudget,
		"the organisation's monthly budget of $20.00 is reached", untilApril)
	c.Advance(untilApril)
	if err := admit(q, ctx, quota.Subject{Org: "a"}); err != nil {
		t.Errorf("in April: %v", err)
	}
}

// Unknown-cost calls in a period without a known cost count nothing.
func TestUnknownCostWithoutMean(t *testing.T) {
	t.Parallel()
	f, _, q := setup(t)
	f.set(jobs.Limit{Scope: jobs.LimitOrg, Subject: "a", DailyUSD: 1})
	f.spend(t0.Add(-time.Minute), jobs.UsageBucket{OrgID: "a", Requests: 3, UnknownCost: 3})
	if err := q.Spendable(t.Context(), quota.Subject{Org: "a"}); err != nil {
		t.Errorf("only unknown costs: %v", err)
	}
}

// The limits are read once per CacheFor, however many subjects ask; a
// subject without limits costs no other read; a change applies once the
// cache is stale.
func TestLimitsCached(t *testing.T) {
	t.Parallel()
	f, c, q := setup(t)
	ctx := t.Context()
	for range 3 {
		if err := admit(q, ctx, quota.Subject{Org: "free", Token: "tok"}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := q.Call(ctx, quota.Subject{Org: "free", Token: "tok"}, pktype.CallEstimate{Tokens: 5}, time.Minute); err != nil {
		t.Fatal(err)
	}
	if n := f.count("limits"); n != 1 || f.count("usage")+f.count("reserved") != 0 || len(f.held) != 0 {
		t.Errorf("reads: limits %d, usage %d, reserved %d, reservations %d; want 1, 0, 0, 0", n, f.count("usage"), f.count("reserved"), len(f.held))
	}
	f.set(jobs.Limit{Scope: jobs.LimitOrg, Subject: "free", RequestsPerMinute: 1})
	f.submit("free", "", t0)
	c.Advance(quota.DefaultCacheFor - time.Millisecond)
	if err := admit(q, ctx, quota.Subject{Org: "free"}); err != nil {
		t.Errorf("within the cache: %v", err)
	}
	c.Advance(time.Millisecond)
	if err := admit(q, ctx, quota.Subject{Org: "free"}); !errors.Is(err, quota.ErrExceeded) {
		t.Errorf("after the cache: %v, want the new limit", err)
	}
	if n := f.count("limits"); n != 2 {
		t.Errorf("limits read %d times, want 2", n)
	}
}

// A token's limit is checked before its org's, and both apply.
func TestTokenAndOrg(t *testing.T) {
	t.Parallel()
	f, _, q := setup(t)
	f.set(jobs.Limit{Scope: jobs.LimitOrg, Subject: "a", DailyUSD: 10}, jobs.Limit{Scope: jobs.LimitToken, Subject: "tok", DailyUSD: 2})
	ctx := t.Context()
	f.spend(t0.Add(-time.Minute), jobs.UsageBucket{OrgID: "a", TokenID: "tok", Requests: 1, CostUSD: 2})
	exceeded(t, q.Spendable(ctx, quota.Subject{Org: "a", Token: "tok"}), quota.DailyBudget,
		"the token's daily budget of $2.00 is reached", 13*time.Hour+59*time.Minute+30*time.Second)
	if err := q.Spendable(ctx, quota.Subject{Org: "a", Token: "tok2"}); err != nil {
		t.Errorf("another token of the org: %v", err)
	}
	calls := q.JobCalls(time.Minute)
	if _, err := calls(ctx, jobs.Job{OrgID: "a", CreatedBy: "u", TokenID: "tok"}, pktype.CallEstimate{}); !errors.Is(err, jobs.ErrBudgetExceeded) {
		t.Errorf("JobCalls of the token's job: %v", err)
	}
	if _, err := calls(ctx, jobs.Job{OrgID: "a", CreatedBy: "u"}, pktype.CallEstimate{}); err != nil {
		t.Errorf("JobCalls of a tokenless job of the org: %v", err)
	}
	f.spend(t0.Add(-time.Minute), jobs.UsageBucket{OrgID: "a", TokenID: "tok2", Requests: 1, CostUSD: 8})
	exceeded(t, q.Spendable(ctx, quota.Subject{Org: "a", Token: "tok2"}), quota.DailyBudget,
		"the organisation's daily budget of $10.00 is reached", 13*time.Hour+59*time.Minute+30*time.Second)
}

// Concurrent submissions under a requests per minute admit exactly the
// limit: each is checked and reserved in one step. A request released
// (not used) gives its place back.
func TestAdmitConcurrent(t *testing.T) {
	t.Parallel()
	f, _, q := setup(t)
	f.set(jobs.Limit{Scope: jobs.LimitOrg, Subject: "a", RequestsPerMinute: 10})
	ctx := t.Context()
	var wg sync.WaitGroup
	var mu sync.Mutex
	var admitted []quota.Reservation
	for range 100 {
		wg.Go(func() {
			r, err := q.Admit(ctx, quota.Subject{Org: "a", Token: "tok"})
			if err == nil {
				mu.Lock()
				admitted = append(admitted, r)
				mu.Unlock()
			} else if !errors.Is(err, quota.ErrExceeded) {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if len(admitted) != 10 {
		t.Fatalf("100 concurrent submissions under 10 per minute: %d admitted", len(admitted))
	}
	if err := admitted[0].Release(ctx); err != nil {
		t.Fatal(err)
	}
	if err := admit(q, ctx, quota.Subject{Org: "a"}); err != nil {
		t.Errorf("after a request was given back: %v", err)
	}
	if err := admit(q, ctx, quota.Subject{Org: "a"}); !errors.Is(err, quota.ErrExceeded) {
		t.Errorf("the 11th: %v, want refused", err)
	}
}

// A call in flight counts at its estimate until released: calls are
// admitted while the spend and the calls in flight are below the budget,
// so the spend passes it by at most the last call's cost.
func TestCallReservesBudget(t *testing.T) {
	t.Parallel()
	f, _, q := setup(t)
	f.set(jobs.Limit{Scope: jobs.LimitOrg, Subject: "a", DailyUSD: 1})
	ctx := t.Context()
	s := quota.Subject{Org: "a"}
	est := pktype.CallEstimate{Tokens: 100, Cost: pktype.Cost{USD: 0.4, Known: true}}
	var held []quota.Reservation
	for i := range 3 {
		r, err := q.Call(ctx, s, est, time.Minute)
		if err != nil {
			t.Fatalf("call %d with $%.1f in flight: %v", i+1, 0.4*float64(i), err)
		}
		held = append(held, r)
	}
	want := "the organisation's daily budget of $1.00 is reached"
	_, err := q.Call(ctx, s, est, time.Minute)
	exceeded(t, err, quota.DailyBudget, want, 13*time.Hour+59*time.Minute+30*time.Second)
	// A batch cannot be created while the calls in flight fill the budget.
	exceeded(t, q.Spendable(ctx, s), quota.DailyBudget, want, 13*time.Hour+59*time.Minute+30*time.Second)
	// The first call ended and cost $0.10: in the ledger, released.
	f.spend(t0, jobs.UsageBucket{OrgID: "a", Requests: 1, CostUSD: 0.1})
	if err := held[0].Release(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := q.Call(ctx, s, est, time.Minute); err != nil {
		t.Errorf("$0.90 spent and in flight: %v", err)
	}
}

// A call whose cost cannot be estimated counts at the mean cost per call
// of the period; its tokens count towards the tokens per minute; a
// reservation not released stops counting when its TTL ends.
func TestCallUnknownCostAndTokens(t *testing.T) {
	t.Parallel()
	f, c, q := setup(t)
	f.set(jobs.Limit{Scope: jobs.LimitToken, Subject: "tok", DailyUSD: 1, TokensPerMinute: 1000})
	ctx := t.Context()
	s := quota.Subject{Org: "a", Token: "tok"}
	f.spend(t0.Add(-time.Hour), jobs.UsageBucket{TokenID: "tok", Requests: 2, CostUSD: 0.6})
	if _, err := q.Call(ctx, s, pktype.CallEstimate{Tokens: 10}, time.Minute); err != nil {
		t.Fatalf("$0.60 spent: %v", err)
	}
	// $0.60 + the unknown call at the mean, $0.30: $0.90.
	if _, err := q.Call(ctx, s, pktype.CallEstimate{Tokens: 10}, time.Minute); err != nil {
		t.Fatalf("$0.90 with a call in flight: %v", err)
	}
	_, err := q.Call(ctx, s, pktype.CallEstimate{Tokens: 10}, time.Minute)
	exceeded(t, err, quota.DailyBudget, "the token's daily budget of $1.00 is reached", 13*time.Hour+59*time.Minute+30*time.Second)
	c.Advance(time.Minute) // both expired
	if _, err := q.Call(ctx, s, pktype.CallEstimate{Tokens: 1000}, time.Minute); err != nil {
		t.Fatalf("after the reservations expired: %v", err)
	}
	// The calls in flight fill the rate: the next call waits, and so does
	// a submission.
	_, err = q.Call(ctx, s, pktype.CallEstimate{Tokens: 1}, time.Minute)
	exceeded(t, err, quota.TokensPerMinute, "the token's limit of 1000 tokens per minute is reached", time.Minute)
	exceeded(t, admit(q, ctx, s), quota.TokensPerMinute, "the token's limit of 1000 tokens per minute is reached", time.Minute)
}
