package server

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/promptkit/promptkit"
	"github.com/promptkit/promptkit/internal/simulate"
	"github.com/promptkit/promptkit/internal/testkit"
	"github.com/promptkit/promptkit/internal/testkit/enginekit"
	"github.com/promptkit/promptkit/internal/testkit/storekit"
	"github.com/promptkit/promptkit/jobs"
	"github.com/promptkit/promptkit/jobs/worker"
)

// concurrently makes n requests at once, each from call(i), and returns
// how many got each status, and the distinct bodies of the errors.
func concurrently(n int, call func(i int) resp) (map[int]int, map[string]bool) {
	var wg sync.WaitGroup
	var mu sync.Mutex
	codes, errs := map[int]int{}, map[string]bool{}
	for i := range n {
		wg.Go(func() {
			r := call(i)
			mu.Lock()
			defer mu.Unlock()
			codes[r.code]++
			if r.code >= 400 {
				errs[string(r.body)] = true
			}
		})
	}
	wg.Wait()
	return codes, errs
}

// untilRefused makes requests one at a time until one is refused 429 (at
// most n), and returns that answer. Requests refused at once may leave a
// budget short: the calls in flight held their estimates.
func untilRefused(t *testing.T, n int, call func() resp) resp {
	t.Helper()
	for range n {
		switch r := call(); r.code {
		case 200:
		case 429:
			return r
		default:
			t.Fatalf("%d %s, want 200 or 429", r.code, r.body)
		}
	}
	t.Fatalf("%d more requests all admitted", n)
	return resp{}
}

// jobsOf counts the jobs an org has stored.
func (e *env) jobsOf(org string) int {
	e.t.Helper()
	page, err := e.st.ListJobs(e.t.Context(), jobs.ListParams{JobFilter: jobs.JobFilter{OrgID: org}, Limit: 1000})
	if err != nil {
		e.t.Fatal(err)
	}
	return len(page.Jobs)
}

// spentBy sums an org's ledger.
func (e *env) spentBy(org string) jobs.UsageBucket {
	e.t.Helper()
	bs, err := e.st.Usage(e.t.Context(), jobs.UsageParams{OrgID: org})
	if err != nil || len(bs) > 1 {
		e.t.Fatalf("usage: %+v, %v", bs, err)
	}
	if len(bs) == 0 {
		return jobs.UsageBucket{}
	}
	return bs[0]
}

// TestAdmissionRequestsPerMinuteConcurrent: 100 simultaneous
// submissions from one token against an org's 10 requests per minute
// admit exactly 10, on each store, and store 10 jobs; then 40 distinct
// chat completions from another token of the org are all refused, the
// minute being full, and another org is not.
func TestAdmissionRequestsPerMinuteConcurrent(t *testing.T) {
	onQuotaStores(t, func(t *testing.T, q quotaEnv) {
		q.ledger.setLimit(t, jobs.Limit{Scope: jobs.LimitOrg, Subject: "org-a", RequestsPerMinute: 10})
		_, secret := q.tokenOf("org-a")
		codes, _ := concurrently(100, func(i int) resp {
			return q.call("POST", "/v1/prompts", secret, map[string]any{"text": fmt.Sprint("prompt ", i)})
		})
		if codes[202] != 10 || codes[429] != 90 {
			t.Errorf("100 concurrent submissions under 10 per minute: %v, want 10 × 202 and 90 × 429", codes)
		}
		if n := q.jobsOf("org-a"); n != 10 {
			t.Errorf("%d jobs stored, want 10", n)
		}
		_, other := q.tokenOf("org-a")
		codes, _ = concurrently(40, func(i int) resp {
			return q.call("POST", "/v1/chat/completions", other, fmt.Sprintf(`{"model":"default","messages":[{"role":"user","content":"chat %d"}]}`, i))
		})
		if codes[429] != 40 {
			t.Errorf("40 chat completions in a full minute: %v, want 40 × 429", codes)
		}
		_, b := q.tokenOf("org-b")
		q.submit(b, map[string]any{"text": "another org"})
	})
}

// TestAdmissionAcrossThreeServers: three servers on one PostgreSQL
// database, 100 simultaneous submissions spread over them against 10
// requests per minute: exactly 10 admitted, since each admission is
// checked and reserved under the org's lock in the database.
func TestAdmissionAcrossThreeServers(t *testing.T) {
	t.Parallel()
	db := storekit.Postgres.New(t)
	clock := testkit.NewClock(quotaNoon)
	var servers []quotaEnv
	for range 3 {
		servers = append(servers, newQuotaEnv(t, db.Open(t, jobs.Options{Now: clock.Now}), clock))
	}
	servers[0].ledger.setLimit(t, jobs.Limit{Scope: jobs.LimitOrg, Subject: "org-a", RequestsPerMinute: 10})
	_, secret := servers[0].tokenOf("org-a")
	codes, _ := concurrently(100, func(i int) resp {
		return servers[i%3].call("POST", "/v1/prompts", secret, map[string]any{"text": fmt.Sprint("prompt ", i)})
	})
	if codes[202] != 10 || codes[429] != 90 {
		t.Errorf("100 submissions over 3 servers under 10 per minute: %v, want 10 × 202 and 90 × 429", codes)
	}
	if n := servers[1].jobsOf("org-a"); n != 10 {
		t.Errorf("%d jobs stored, want 10", n)
	}
}

// TestAdmissionEmbeddingsBudget: 40 simultaneous embeddings requests
// against an org's daily budget of $0.20, each request costing $0.05:
// each call reserves its estimate before it is made, so the ledger stays
// within one request's cost over the budget, and the rest are refused 429
// insufficient_quota; then requests one at a time are admitted until the
// budget is reached.
func TestAdmissionEmbeddingsBudget(t *testing.T) {
	storekit.Each(t, func(t *testing.T, db storekit.DB) {
		clock := testkit.NewClock(quotaNoon)
		eng := enginekit.Simulated(t, func(c *promptkit.Config) {
			c.Prices = []promptkit.Price{{Model: simulate.Model, Input: 1e4}} // a cent a token
		})
		q := newQuotaEnv(t, db.Open(t, jobs.Options{Now: clock.Now}), clock, func(c *Config) { c.Engine = eng })
		q.ledger.fromStore = true
		q.ledger.setLimit(t, jobs.Limit{Scope: jobs.LimitOrg, Subject: "org-a", DailyUSD: 0.20})
		_, secret := q.tokenOf("org-a")
		// Five words of six bytes: five tokens, $0.05; estimated at a
		// quarter of the bytes, 7 tokens.
		body := `{"model":"default","input":["` + strings.TrimSpace(strings.Repeat("hello ", 5)) + `"]}`
		embed := func() resp { return q.call("POST", "/v1/embeddings", secret, body) }
		codes, errs := concurrently(40, func(int) resp { return embed() })
		spent := q.spentBy("org-a")
		t.Logf("answers %v, ledger %+v, errors %v", codes, spent, errs)
		if spent.UnknownCost != 0 || spent.CostUSD > 0.20+0.05+1e-9 {
			t.Errorf("ledger: $%.2f over %d calls (%d unknown), want at most $0.25", spent.CostUSD, spent.Requests, spent.UnknownCost)
		}
		if codes[200]+codes[429] != 40 || codes[429] == 0 || int64(codes[200]) != spent.Requests {
			t.Errorf("answers %v, ledger calls %d: want each answered call in the ledger, the rest 429", codes, spent.Requests)
		}
		// Once nothing is in flight, requests are admitted until the
		// budget is reached, and not past one request's cost.
		refusedOpenAI(t, untilRefused(t, 10, embed), "insufficient_quota", "insufficient_quota",
			"The organisation's daily budget of $0.20 is reached.", 12*time.Hour)
		if got := q.spentBy("org-a").CostUSD; got < 0.20-1e-9 || got > 0.25+1e-9 {
			t.Errorf("ledger at the refusal: $%.2f, want $0.20 to $0.25", got)
		}
	})
}

// TestAdmissionChatBudget: 40 simultaneous chat completions with an
// output limit against an org's daily budget of $0.20, run by a worker
// of 8 slots: each call reserves its estimate before it is made, so the
// ledger ends at most one call's cost over the budget (before, every
// call in flight could pass it), and the chats refused are answered 429
// insufficient_quota.
func TestAdmissionChatBudget(t *testing.T) {
	storekit.Each(t, func(t *testing.T, db storekit.DB) {
		clock := testkit.NewClock(quotaNoon)
		eng := enginekit.Simulated(t, func(c *promptkit.Config) {
			c.Prices = []promptkit.Price{{Model: simulate.Model, Input: 1e4, Output: 1e4}} // a cent a token
		})
		q := newQuotaEnv(t, db.Open(t, jobs.Options{Now: clock.Now}), clock, func(c *Config) { c.Engine = eng })
		q.ledger.fromStore = true
		q.runWorker(func(c *worker.Config) {
			c.Concurrency, c.Now, c.Budget = 8, clock.Now, q.srv.cfg.Quotas.JobCalls(time.Minute)
		})
		q.ledger.setLimit(t, jobs.Limit{Scope: jobs.LimitOrg, Subject: "org-a", DailyUSD: 0.20})
		_, secret := q.tokenOf("org-a")
		// Three tokens in, "Fake provider reply: " and the three back out:
		// $0.12 a chat; estimated $0.14 (a quarter of 17 bytes, and 10 out).
		// Distinct chats: the same one again would be the same job.
		chat := func(i int) resp {
			return q.call("POST", "/v1/chat/completions", secret,
				fmt.Sprintf(`{"model":"default","max_tokens":10,"messages":[{"role":"user","content":"hello hello h%04d"}]}`, i))
		}
		codes, errs := concurrently(40, chat)
		spent := q.spentBy("org-a")
		t.Logf("answers %v, ledger %+v, errors %v", codes, spent, errs)
		if spent.UnknownCost != 0 || spent.CostUSD > 0.20+0.12+1e-9 {
			t.Errorf("ledger: $%.2f over %d calls, want at most $0.20 and one call ($0.12)", spent.CostUSD, spent.Requests)
		}
		if codes[200]+codes[429] != 40 || codes[429] == 0 || int64(codes[200]) != spent.Requests {
			t.Errorf("answers %v, ledger calls %d: want each answered chat in the ledger, the rest 429", codes, spent.Requests)
		}
		next := 40
		untilRefused(t, 10, func() resp { next++; return chat(next) })
		if got := q.spentBy("org-a").CostUSD; got < 0.20-1e-9 || got > 0.32+1e-9 {
			t.Errorf("ledger at the refusal: $%.2f, want $0.20 to $0.32", got)
		}
	})
}

// TestAdmissionEmbeddingsTokensPerMinute: 40 simultaneous embeddings
// requests against an org's 30 tokens per minute, each request 5 tokens
// (estimated 7): each call reserves its tokens before it is made, so the
// minute's ledger ends at most one call's tokens over the limit, and the
// rest are refused 429 rate_limit_exceeded.
func TestAdmissionEmbeddingsTokensPerMinute(t *testing.T) {
	onQuotaStores(t, func(t *testing.T, q quotaEnv) {
		q.ledger.fromStore = true
		q.ledger.setLimit(t, jobs.Limit{Scope: jobs.LimitOrg, Subject: "org-a", TokensPerMinute: 30})
		_, secret := q.tokenOf("org-a")
		body := `{"model":"default","input":["` + strings.TrimSpace(strings.Repeat("hello ", 5)) + `"]}`
		embed := func() resp { return q.call("POST", "/v1/embeddings", secret, body) }
		codes, errs := concurrently(40, func(int) resp { return embed() })
		used := q.spentBy("org-a")
		t.Logf("answers %v, ledger %+v, errors %v", codes, used, errs)
		if used.InputTokens > 30+5 {
			t.Errorf("ledger: %d tokens, want at most 35", used.InputTokens)
		}
		if codes[200]+codes[429] != 40 || codes[429] == 0 || int64(codes[200]) != used.Requests {
			t.Errorf("answers %v, ledger calls %d: want each answered call in the ledger, the rest 429", codes, used.Requests)
		}
		refusedOpenAI(t, untilRefused(t, 10, embed), "rate_limit_error", "rate_limit_exceeded",
			"The organisation's limit of 30 tokens per minute is reached.", time.Minute)
		if got := q.spentBy("org-a").InputTokens; got < 30 || got > 35 {
			t.Errorf("ledger at the refusal: %d tokens, want 30 to 35", got)
		}
	})
}
