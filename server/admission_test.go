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
// how many got each status.
func concurrently(n int, call func(i int) resp) map[int]int {
	var wg sync.WaitGroup
	var mu sync.Mutex
	codes := map[int]int{}
	for i := range n {
		wg.Go(func() {
			r := call(i)
			mu.Lock()
			defer mu.Unlock()
			codes[r.code]++
		})
	}
	wg.Wait()
	return codes
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

// TestAdmissionRequestsPerMinuteConcurrent: 100 simultaneous
// submissions from one token against an org's 10 requests per minute
// admit exactly 10, on each store, and store 10 jobs; then 40 distinct
// chat completions from another token of the org are all refused, the
// minute being full, and another org is not.
func TestAdmissionRequestsPerMinuteConcurrent(t *testing.T) {
	onQuotaStores(t, func(t *testing.T, q quotaEnv) {
		q.ledger.setLimit(t, jobs.Limit{Scope: jobs.LimitOrg, Subject: "org-a", RequestsPerMinute: 10})
		_, secret := q.tokenOf("org-a")
		codes := concurrently(100, func(i int) resp {
			return q.call("POST", "/v1/prompts", secret, map[string]any{"text": fmt.Sprint("prompt ", i)})
		})
		if codes[202] != 10 || codes[429] != 90 {
			t.Errorf("100 concurrent submissions under 10 per minute: %v, want 10 × 202 and 90 × 429", codes)
		}
		if n := q.jobsOf("org-a"); n != 10 {
			t.Errorf("%d jobs stored, want 10", n)
		}
		_, other := q.tokenOf("org-a")
		codes = concurrently(40, func(i int) resp {
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
	codes := concurrently(100, func(i int) resp {
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
// each call reserves its estimate before it is made, so the ledger ends
// at most one request's cost over the budget, and the rest are refused
// 429 insufficient_quota.
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
		codes := concurrently(40, func(int) resp { return q.call("POST", "/v1/embeddings", secret, body) })
		spent, err := q.st.Usage(t.Context(), jobs.UsageParams{OrgID: "org-a"})
		t.Logf("answers %v, ledger %+v", codes, spent)
		if err != nil || len(spent) != 1 {
			t.Fatalf("usage: %+v, %v", spent, err)
		}
		if got := spent[0]; got.UnknownCost != 0 || got.CostUSD > 0.20+0.05+1e-9 || got.CostUSD < 0.20-1e-9 {
			t.Errorf("ledger: $%.2f over %d calls (%d unknown), want $0.20 to $0.25; answers %v", got.CostUSD, got.Requests, got.UnknownCost, codes)
		}
		if codes[200]+codes[429] != 40 || codes[429] == 0 || int64(codes[200]) != spent[0].Requests {
			t.Errorf("answers %v, ledger calls %d: want each answered call in the ledger, the rest 429", codes, spent[0].Requests)
		}
		refusedOpenAI(t, q.call("POST", "/v1/embeddings", secret, body), "insufficient_quota", "insufficient_quota",
			"The organisation's daily budget of $0.20 is reached.", 12*3600e9)
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
		codes := concurrently(40, func(i int) resp {
			return q.call("POST", "/v1/chat/completions", secret,
				fmt.Sprintf(`{"model":"default","max_tokens":10,"messages":[{"role":"user","content":"hello hello h%04d"}]}`, i))
		})
		spent, err := q.st.Usage(t.Context(), jobs.UsageParams{OrgID: "org-a"})
		t.Logf("answers %v, ledger %+v", codes, spent)
		if err != nil || len(spent) != 1 {
			t.Fatalf("usage: %+v, %v", spent, err)
		}
		perCall := spent[0].CostUSD / float64(spent[0].Requests)
		if got := spent[0]; got.UnknownCost != 0 || got.CostUSD > 0.20+perCall+1e-9 || got.CostUSD < 0.20-perCall {
			t.Errorf("ledger: $%.2f over %d calls, want at most $0.20 and one call ($%.2f)", got.CostUSD, got.Requests, perCall)
		}
		if codes[200]+codes[429] != 40 || codes[429] == 0 || int64(codes[200]) != spent[0].Requests {
			t.Errorf("answers %v, ledger calls %d: want each answered chat in the ledger, the rest 429", codes, spent[0].Requests)
		}
	})
}
