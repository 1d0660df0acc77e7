package server

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/promptkit/promptkit"
	"github.com/promptkit/promptkit/internal/openaiapi"
	"github.com/promptkit/promptkit/internal/simulate"
	"github.com/promptkit/promptkit/internal/testkit"
	"github.com/promptkit/promptkit/internal/testkit/enginekit"
	"github.com/promptkit/promptkit/internal/testkit/storekit"
	"github.com/promptkit/promptkit/jobs"
	"github.com/promptkit/promptkit/jobs/quota"
	"github.com/promptkit/promptkit/jobs/worker"
)

// quotaNoon is the quota tests' clock: noon UTC on 3 December, 12 hours
// before the day ends and 28 days 12 hours before the month does.
var quotaNoon = time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)

// ledger is a quota.Store: a real store (its limits and submissions),
// with usage injected in memory unless fromStore.
type ledger struct {
	jobs.Store
	mu    sync.Mutex
	spent []spentAt
	// fromStore reads the store's own ledger instead of spent.
	fromStore bool
}

type spentAt struct {
	at time.Time
	b  jobs.UsageBucket
}

func (l *ledger) Usage(ctx context.Context, p jobs.UsageParams) ([]jobs.UsageBucket, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.fromStore {
		return l.Store.Usage(ctx, p)
	}
	var out []jobs.UsageBucket
	for _, s := range l.spent {
		if s.at.Before(p.From) || !p.To.IsZero() && !s.at.Before(p.To) || p.OrgID != "" && s.b.OrgID != p.OrgID || p.TokenID != "" && s.b.TokenID != p.TokenID {
			continue
		}
		b := s.b
		if p.Groups(jobs.UsageByDay) {
			b.Day = s.at.UTC().Truncate(24 * time.Hour)
		}
		out = append(out, b)
	}
	return out, nil
}

// setLimit stores a limit in the store.
func (l *ledger) setLimit(t *testing.T, lim jobs.Limit) {
	t.Helper()
	if _, err := l.SetLimit(context.Background(), lim); err != nil {
		t.Fatalf("SetLimit: %v", err)
	}
}

// spend records usage at a time.
func (l *ledger) spend(at time.Time, b jobs.UsageBucket) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.spent = append(l.spent, spentAt{at, b})
}

// quotaEnv is a server over a store on a fake clock, enforcing the
// limits of a ledger over that store.
type quotaEnv struct {
	*env
	ledger *ledger
}

// onQuotaStores runs fn on a quotaEnv per store.
func onQuotaStores(t *testing.T, fn func(t *testing.T, q quotaEnv)) {
	storekit.Each(t, func(t *testing.T, db storekit.DB) {
		clock := testkit.NewClock(quotaNoon)
		st := db.Open(t, jobs.Options{Now: clock.Now})
		fn(t, newQuotaEnv(t, st, clock))
	})
}

func newQuotaEnv(t *testing.T, st jobs.Store, clock *testkit.Clock, opts ...option) quotaEnv {
	l := &ledger{Store: st}
	e := setupStore(t, st, append([]option{func(c *Config) {
		c.Now = clock.Now
		c.Quotas = quota.New(quota.Config{Store: l, Now: clock.Now})
	}}, opts...)...)
	e.clock = clock
	return quotaEnv{env: e, ledger: l}
}

// tokenOf creates a member token of org and returns its ID and secret.
func (e *env) tokenOf(org string) (id, secret string) {
	e.t.Helper()
	secret, hash := jobs.NewTokenSecret()
	tok, err := e.st.CreateToken(context.Background(), jobs.CreateTokenParams{OrgID: org, UserID: "u-" + org, Role: jobs.RoleMember, Hash: hash})
	if err != nil {
		e.t.Fatal(err)
	}
	return tok.ID, secret
}

// refused checks a 429 in promptkit's REST shape: code, a message naming
// the limit, and Retry-After.
func refused(t *testing.T, r resp, code, msg string, retry time.Duration) {
	t.Helper()
	var body apiError
	r.decode(t, &body)
	if r.code != 429 || body.Error.Code != code || body.Error.Message != msg || r.header.Get("Retry-After") != strconv.Itoa(int(retry.Seconds())) {
		t.Errorf("got %d Retry-After %q %s; want 429 %s %q Retry-After %v", r.code, r.header.Get("Retry-After"), r.body, code, msg, retry)
	}
}

// refusedOpenAI checks a 429 in OpenAI's error object.
func refusedOpenAI(t *testing.T, r resp, typ, code, msg string, retry time.Duration) {
	t.Helper()
	er := r.oaErr(t)
	if r.code != 429 || er.Type != typ || deref(er.Code) != code || er.Param != nil || er.Message != msg ||
		r.header.Get("Retry-After") != strconv.Itoa(int(retry.Seconds())) {
		t.Errorf("got %d Retry-After %q %s; want 429 %s %s %q Retry-After %v", r.code, r.header.Get("Retry-After"), r.body, typ, code, msg, retry)
	}
}

// TestQuotaRequestsPerMinute: an org's submissions in the last minute,
// counted on the database, refuse the one too many on every route with
// 429 naming the limit, Retry-After until the oldest leaves the window;
// another org, and the org once the window has passed, are admitted.
func TestQuotaRequestsPerMinute(t *testing.T) {
	onQuotaStores(t, func(t *testing.T, q quotaEnv) {
		q.ledger.setLimit(t, jobs.Limit{Scope: jobs.LimitOrg, Subject: "org-a", RequestsPerMinute: 2})
		_, a1 := q.tokenOf("org-a")
		_, a2 := q.tokenOf("org-a")
		_, b := q.tokenOf("org-b")
		q.submit(a1, map[string]any{"text": "one"})
		q.clock.Advance(20 * time.Second)
		q.submit(a2, map[string]any{"text": "two"})

		msg := "the organisation's limit of 2 requests per minute is reached"
		// The first submission leaves the window 40 s from now.
		refused(t, q.call("POST", "/v1/prompts", a1, map[string]any{"text": "three"}), "rate_limited", msg, 40*time.Second)
		refused(t, q.call("POST", "/v1/prompts?wait=5s", a2, map[string]any{"text": "three"}), "rate_limited", msg, 40*time.Second)
		oa := "The organisation's limit of 2 requests per minute is reached."
		refusedOpenAI(t, q.call("POST", "/v1/chat/completions", a1, chatBody), openaiapi.TypeRateLimit, "rate_limit_exceeded", oa, 40*time.Second)
		refusedOpenAI(t, q.call("POST", "/v1/responses", a1, `{"model":"default","input":"hi"}`), openaiapi.TypeRateLimit, "rate_limit_exceeded", oa, 40*time.Second)
		refusedOpenAI(t, q.call("POST", "/v1/embeddings", a1, `{"model":"default","input":"hi"}`), openaiapi.TypeRateLimit, "rate_limit_exceeded", oa, 40*time.Second)

		// Another org, and the local identity's, are not held to it.
		q.submit(b, map[string]any{"text": "other org"})
		page, err := q.st.ListJobs(context.Background(), jobs.ListParams{JobFilter: jobs.JobFilter{OrgID: "org-a"}})
		if err != nil || len(page.Jobs) != 2 {
			t.Fatalf("org-a has %d jobs (%v), want 2: a refused request stored one", len(page.Jobs), err)
		}

		q.clock.Advance(40 * time.Second)
		q.submit(a1, map[string]any{"text": "three"})
	})
}

// TestQuotaTokenRequestsPerMinute: a token's own submissions fill its
// window; its org's other tokens are not held to it.
func TestQuotaTokenRequestsPerMinute(t *testing.T) {
	onQuotaStores(t, func(t *testing.T, q quotaEnv) {
		id, secret := q.tokenOf("org-a")
		_, other := q.tokenOf("org-a")
		q.ledger.setLimit(t, jobs.Limit{Scope: jobs.LimitToken, Subject: id, RequestsPerMinute: 1})
		q.submit(secret, map[string]any{"text": "one"})
		q.submit(other, map[string]any{"text": "another token"})
		refused(t, q.call("POST", "/v1/prompts", secret, map[string]any{"text": "two"}), "rate_limited",
			"the token's limit of 1 request per minute is reached", time.Minute)
		q.submit(other, map[string]any{"text": "another token again"})
	})
}

// TestQuotaTokensPerMinute: a token's model tokens in the last minute, as
// the ledger holds them, refuse its submissions, not its org's others.
func TestQuotaTokensPerMinute(t *testing.T) {
	onQuotaStores(t, func(t *testing.T, q quotaEnv) {
		id, secret := q.tokenOf("org-a")
		_, other := q.tokenOf("org-a")
		q.ledger.setLimit(t, jobs.Limit{Scope: jobs.LimitToken, Subject: id, TokensPerMinute: 1000})
		q.ledger.spend(quotaNoon.Add(-30*time.Second), jobs.UsageBucket{OrgID: "org-a", TokenID: id, Requests: 1, InputTokens: 700, OutputTokens: 299})
		q.submit(secret, map[string]any{"text": "999 of 1000"})
		q.ledger.spend(quotaNoon.Add(-time.Second), jobs.UsageBucket{OrgID: "org-a", TokenID: id, Requests: 1, OutputTokens: 1})
		refused(t, q.call("POST", "/v1/prompts", secret, map[string]any{"text": "x"}), "rate_limited",
			"the token's limit of 1000 tokens per minute is reached", time.Minute)
		refusedOpenAI(t, q.call("POST", "/v1/chat/completions", secret, chatBody), openaiapi.TypeRateLimit, "rate_limit_exceeded",
			"The token's limit of 1000 tokens per minute is reached.", time.Minute)
		q.submit(other, map[string]any{"text": "another token of the org"})
		q.clock.Advance(time.Minute)
		q.submit(secret, map[string]any{"text": "a minute later"})
	})
}

// TestQuotaDailyBudget: a token whose spend today (unknown costs at the
// day's mean) reached its budget is refused on every route, batches
// included, with insufficient_quota until midnight UTC; another token of
// its org is not, and nothing is stored.
func TestQuotaDailyBudget(t *testing.T) {
	onQuotaStores(t, func(t *testing.T, q quotaEnv) {
		id, secret := q.tokenOf("org-a")
		_, other := q.tokenOf("org-a")
		q.ledger.setLimit(t, jobs.Limit{Scope: jobs.LimitToken, Subject: id, DailyUSD: 5})
		// $4 known over 4 calls, one more of unknown cost: $5.
		q.ledger.spend(quotaNoon.Add(-time.Hour), jobs.UsageBucket{OrgID: "org-a", TokenID: id, Requests: 5, CostUSD: 4, UnknownCost: 1})
		// Yesterday's spend is not today's.
		q.ledger.spend(quotaNoon.Add(-13*time.Hour), jobs.UsageBucket{OrgID: "org-a", TokenID: id, Requests: 1, CostUSD: 100})

		msg, oa := "the token's daily budget of $5.00 is reached", "The token's daily budget of $5.00 is reached."
		refused(t, q.call("POST", "/v1/prompts", secret, map[string]any{"text": "x"}), "budget_exceeded", msg, 12*time.Hour)
		refusedOpenAI(t, q.call("POST", "/v1/chat/completions", secret, chatBody), "insufficient_quota", "insufficient_quota", oa, 12*time.Hour)
		refusedOpenAI(t, q.call("POST", "/v1/embeddings", secret, `{"model":"default","input":"hi"}`), "insufficient_quota", "insufficient_quota", oa, 12*time.Hour)
		refusedOpenAI(t, q.call("POST", "/v1/batches", secret, `{"input_file_id":"file-x","endpoint":"/v1/chat/completions","completion_window":"24h"}`),
			"insufficient_quota", "insufficient_quota", oa, 12*time.Hour)
		for _, s := range []string{id, secret} {
			if strings.Contains(string(q.call("POST", "/v1/prompts", secret, map[string]any{"text": "x"}).body), s) {
				t.Errorf("the answer shows the token")
			}
		}

		q.submit(other, map[string]any{"text": "another token"})
		q.clock.Advance(12 * time.Hour)
		q.submit(secret, map[string]any{"text": "the next day"})
	})
}

// TestQuotaMonthlyBudget: an org's spend this calendar month refuses its
// tokens and the local identity's org is not held to it.
func TestQuotaMonthlyBudget(t *testing.T) {
	onQuotaStores(t, func(t *testing.T, q quotaEnv) {
		_, secret := q.tokenOf("org-a")
		q.ledger.setLimit(t, jobs.Limit{Scope: jobs.LimitOrg, Subject: "org-a", MonthlyUSD: 20})
		q.ledger.spend(time.Date(2026, 12, 1, 8, 0, 0, 0, time.UTC), jobs.UsageBucket{OrgID: "org-a", Requests: 2, CostUSD: 20})
		q.ledger.spend(time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC), jobs.UsageBucket{OrgID: "org-b", Requests: 2, CostUSD: 500})
		january := time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC).Sub(quotaNoon)
		refused(t, q.call("POST", "/v1/prompts", secret, map[string]any{"text": "x"}), "budget_exceeded",
			"the organisation's monthly budget of $20.00 is reached", january)
		_, b := q.tokenOf("org-b")
		q.submit(b, map[string]any{"text": "another org, last month's spend"})
	})
}

// TestQuotaAcrossServers: two servers on one PostgreSQL database share
// an org's requests per minute: the submissions of both count.
func TestQuotaAcrossServers(t *testing.T) {
	t.Parallel()
	db := storekit.Postgres.New(t)
	clock := testkit.NewClock(quotaNoon)
	one := newQuotaEnv(t, db.Open(t, jobs.Options{Now: clock.Now}), clock)
	two := newQuotaEnv(t, db.Open(t, jobs.Options{Now: clock.Now}), clock)
	one.ledger.setLimit(t, jobs.Limit{Scope: jobs.LimitOrg, Subject: "org-a", RequestsPerMinute: 2})
	_, secret := one.tokenOf("org-a")
	one.submit(secret, map[string]any{"text": "one"})
	two.submit(secret, map[string]any{"text": "two"})
	msg := "the organisation's limit of 2 requests per minute is reached"
	refused(t, one.call("POST", "/v1/prompts", secret, map[string]any{"text": "three"}), "rate_limited", msg, time.Minute)
	refused(t, two.call("POST", "/v1/prompts", secret, map[string]any{"text": "three"}), "rate_limited", msg, time.Minute)
}

// TestQuotaBudgetFromLedger: with prices, the jobs a token runs are
// spent in the store's usage ledger; once its daily budget is reached,
// its submissions are refused, and a job of its queued before is failed
// as budget_exceeded by the worker without a provider call.
func TestQuotaBudgetFromLedger(t *testing.T) {
	onQuotaStores(t, func(t *testing.T, q quotaEnv) {
		q.ledger.fromStore = true
		eng := enginekit.Simulated(t, func(c *promptkit.Config) {
			c.Prices = []promptkit.Price{{Model: simulate.Model, Input: 1e6, Output: 1e6}} // $1 a token
		})
		q.runWorker(func(c *worker.Config) {
			c.Engine, c.Now, c.Budget, c.Logger = eng, q.clock.Now, q.srv.cfg.Quotas.JobCalls(time.Minute), q.logs.DebugLogger()
		})
		id, secret := q.tokenOf("org-a")
		q.ledger.setLimit(t, jobs.Limit{Scope: jobs.LimitToken, Subject: id, DailyUSD: 2})
		// Queued before the budget is spent; run after.
		queued, err := q.st.Enqueue(context.Background(), jobs.EnqueueParams{OrgID: "org-a", CreatedBy: "u-org-a", TokenID: id,
			Text: "queued", AvailableAt: quotaNoon.Add(time.Hour)})
		if err != nil {
			t.Fatal(err)
		}
		var first struct{ Job jobs.Job }
		q.call("POST", "/v1/prompts?wait=30s", secret, map[string]any{"text": "spend it"}).decode(t, &first)
		if first.Job.State != jobs.Succeeded {
			t.Fatalf("the first job: %+v", first.Job)
		}
		buckets, err := q.st.Usage(context.Background(), jobs.UsageParams{TokenID: id, From: quotaNoon.Add(-time.Hour)})
		if err != nil || len(buckets) != 1 || buckets[0].CostUSD < 2 {
			t.Fatalf("the ledger: %+v, %v; want the job's cost, over $2", buckets, err)
		}
		refused(t, q.call("POST", "/v1/prompts", secret, map[string]any{"text": "x"}), "budget_exceeded",
			"the token's daily budget of $2.00 is reached", 12*time.Hour)

		// The worker polls on the wall clock; the queued job is due on the
		// store's.
		q.clock.Advance(time.Hour)
		var j jobs.Job
		testkit.WaitFor(t, time.Minute, "the queued job to end", func() (bool, string) {
			j, err = q.st.GetJob(context.Background(), "", queued.JobID)
			return err == nil && j.State.Terminal(), string(j.State)
		}, q.st.Notifier())
		if j.State != jobs.Failed || j.ErrorKind != jobs.KindBudgetExceeded || j.ErrorMessage != "the token's daily budget of $2.00 is reached" {
			t.Errorf("the queued job: %s %s %q", j.State, j.ErrorKind, j.ErrorMessage)
		}
	})
}
