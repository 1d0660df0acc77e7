//go:build linux

package faults_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/promptkit/promptkit/internal/testkit"
	"github.com/promptkit/promptkit/jobs"
	"github.com/promptkit/promptkit/jobs/worker"
)

// The budget run's shape: every call costs budgetCallUSD (1,000 tokens at
// $100 a million), the token may spend budgetUSD a day, and there are
// jobs enough for three times that. Every budgetHoldEvery-th provider
// call is held until its client goes: serve is killed with it in flight,
// between the call and its bookkeeping.
const (
	budgetJobs        = 30
	budgetUSD         = 1.0
	budgetCallUSD     = 0.1
	budgetConcurrency = 2
	budgetHoldEvery   = 4
	budgetMaxRounds   = 12
)

// budgetProvider answers every call with 600 input and 400 output tokens,
// except every budgetHoldEvery-th, which it holds until its client goes,
// counting it in held and waking the test through wake.
type budgetProvider struct {
	calls atomic.Int64
	held  atomic.Int64
	wake  chan struct{}
}

func (b *budgetProvider) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	_, _ = io.Copy(io.Discard, r.Body)
	if b.calls.Add(1)%budgetHoldEvery == 0 {
		b.held.Add(1)
		select {
		case b.wake <- struct{}{}:
		default:
		}
		<-r.Context().Done()
		return
	}
	writeCompletion(w, "ok", 600, 400)
}

// TestBudgetKill runs a token's jobs through `promptkit serve` processes
// under a daily budget, SIGKILLing serve whenever the provider holds a
// call (the call made, its bookkeeping not), and starting the next serve
// once the killed one's jobs are reclaimed. At the end every job has
// either succeeded, once, or failed as budget_exceeded; the ledger's
// spend, the lost calls counted at the mean, is at least the budget and
// past it by no more than the calls in flight (one per serve slot), as is
// the provider's own count of calls; the ledger has every call the
// provider saw; and the token's submissions are refused with 429 naming
// its budget.
func TestBudgetKill(t *testing.T) {
	t.Run("sqlite", func(t *testing.T) { budgetKill(t, openSQLite(t, t.TempDir())) })
	t.Run("postgres", func(t *testing.T) { budgetKill(t, openPostgresSchema(t)) })
}

func budgetKill(t *testing.T, d *database) {
	ctx, cancel := context.WithTimeout(t.Context(), killDeadline)
	defer cancel()
	dir := t.TempDir()
	provider := &budgetProvider{wake: make(chan struct{}, 1)}
	srv := httptest.NewServer(provider)
	t.Cleanup(srv.Close)
	cfg := filepath.Join(dir, "promptkit.yaml")
	if err := os.WriteFile(cfg, []byte(fmt.Sprintf(`backends:
  - id: fake
    base_url: %s/v1
    timeout: 20s
profiles:
  - id: default
    backend: fake
    model: faults-model
prices:
  - model: faults-model
    input_per_million: 100
    output_per_million: 100
`, srv.URL)), 0o600); err != nil {
		t.Fatal(err)
	}

	secret, hash := jobs.NewTokenSecret()
	tok, err := d.store.CreateToken(ctx, jobs.CreateTokenParams{OrgID: "org", UserID: "faults", Role: jobs.RoleMember, Hash: hash})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.store.SetLimit(ctx, jobs.Limit{Scope: jobs.LimitToken, Subject: tok.ID, DailyUSD: budgetUSD}); err != nil {
		t.Fatal(err)
	}
	day := time.Now().UTC().Truncate(24 * time.Hour)
	ps := make([]jobs.EnqueueParams, budgetJobs)
	for i := range ps {
		ps[i] = jobs.EnqueueParams{OrgID: "org", CreatedBy: "faults", TokenID: tok.ID, Text: jobText(i), MaxAttempts: maxAttempts}
	}
	enq, err := d.store.EnqueueBatch(ctx, ps)
	if err != nil {
		t.Fatal(err)
	}

	args := []string{"serve", "--database", d.DSN, "--config", cfg, "--addr", "127.0.0.1:0",
		"--workers", fmt.Sprint(budgetConcurrency),
		"--heartbeat-interval", killHeartbeat.String(), "--reclaim-after", killReclaimAfter.String(),
		"--stuck-after", "1h", "--shutdown-grace", "10s"}
	var all []*proc
	defer func() {
		if t.Failed() {
			for _, p := range all {
				t.Logf("%s log (tail):\n%s", p.name, tail(p.output(), 15))
			}
		}
	}()
	// The test's own reclaimer takes a killed serve's jobs back before
	// the next serve starts, so that no more jobs run at once than one
	// serve's slots: the calls in flight the bound allows.
	reclaimer, err := worker.NewReclaimer(worker.ReclaimerConfig{Store: d.store, ReclaimAfter: killReclaimAfter, StuckAfter: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	running := func() int {
		c, err := counts(ctx, d.store)
		if err != nil {
			t.Fatalf("counting jobs: %v", err)
		}
		return c[jobs.Running]
	}
	done := func() bool {
		c, err := counts(ctx, d.store)
		if err != nil {
			t.Fatalf("counting jobs: %v", err)
		}
		return c[jobs.Queued]+c[jobs.Running] == 0
	}

	kills := 0
	for round := 0; !done(); round++ {
		if round == budgetMaxRounds {
			t.Fatalf("jobs still unfinished after %d serves", round)
		}
		p := startProc(t, fmt.Sprintf("serve-%d", round+1), args)
		all = append(all, p)
		// Calls held by an earlier serve ended with it.
		seen := provider.held.Load()
		held := false
		if !testkit.Until(ctx, time.Until(deadlineOf(ctx)), func() bool {
			select {
			case <-p.done:
				t.Fatalf("%s exited (%v)", p.name, p.err)
			default:
			}
			held = provider.held.Load() > seen
			return held || done()
		}, d.store.Notifier(), testkit.Chan(p.done), testkit.Chan(provider.wake)) {
			t.Fatalf("serve-%d: neither a held call nor the end", round+1)
		}
		if !held {
			if _, err := p.stop(10 * time.Second); err != nil {
				t.Fatal(err)
			}
			break
		}
		p.kill()
		kills++
		if !testkit.Until(ctx, time.Until(deadlineOf(ctx)), func() bool {
			if _, err := reclaimer.Sweep(ctx); err != nil {
				t.Fatalf("reclaim: %v", err)
			}
			return running() == 0
		}, d.store.Notifier()) {
			t.Fatal("the killed serve's jobs were never reclaimed")
		}
	}

	// Every job succeeded once or failed on the budget: none lost.
	resp, err := d.Responses(ctx)
	if err != nil {
		t.Fatal(err)
	}
	succeeded, refused := 0, 0
	for _, e := range enq {
		j, err := d.store.GetJob(ctx, "", e.JobID)
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case j.State == jobs.Succeeded && resp[j.ID] == 1:
			succeeded++
		case j.State == jobs.Failed && j.ErrorKind == jobs.KindBudgetExceeded &&
			j.ErrorMessage == "the token's daily budget of $1.00 is reached" && resp[j.ID] == 0:
			refused++
		default:
			t.Errorf("job %s: %s %s %q, %d responses", j.ID, j.State, j.ErrorKind, j.ErrorMessage, resp[j.ID])
		}
	}

	// The ledger's spend, lost calls at the mean, and the provider's
	// count: at least the budget, and past it by no more than the calls
	// in flight.
	buckets, err := d.store.Usage(ctx, jobs.UsageParams{TokenID: tok.ID, From: day})
	if err != nil || len(buckets) != 1 {
		t.Fatalf("Usage: %v %+v", err, buckets)
	}
	b := buckets[0]
	known := b.Requests - b.UnknownCost
	spend := b.CostUSD
	if known > 0 {
		spend += float64(b.UnknownCost) * b.CostUSD / float64(known)
	}
	bound := budgetUSD + budgetConcurrency*budgetCallUSD + 1e-9
	calls := provider.calls.Load()
	paid := float64(calls) * budgetCallUSD
	t.Logf("%s: %d jobs: %d succeeded, %d refused by the budget; %d kills; %d provider calls ($%.2f); ledger %d calls, %d of unknown cost, $%.2f known, $%.2f counted (budget $%.2f, bound $%.2f)",
		d.name(), budgetJobs, succeeded, refused, kills, calls, paid, b.Requests, b.UnknownCost, b.CostUSD, spend, budgetUSD, bound)
	if spend < budgetUSD || spend > bound {
		t.Errorf("ledger spend $%.4f, want within [$%.2f, $%.2f]", spend, budgetUSD, bound)
	}
	// The provider's own count may stay under the budget: a lost call is
	// counted whether or not it was made.
	if paid > bound {
		t.Errorf("%d provider calls cost $%.4f, over $%.2f", calls, paid, bound)
	}
	if b.Requests < calls {
		t.Errorf("the ledger has %d calls, the provider saw %d: a call went unrecorded", b.Requests, calls)
	}
	if kills == 0 {
		t.Error("no serve was killed with a call in flight")
	}

	// The token's submissions are refused now, naming its budget.
	p := startProc(t, "serve-final", args)
	all = append(all, p)
	base := serveURL(t, ctx, p)
	post := func(path, body string) (*http.Response, []byte) {
		t.Helper()
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+secret)
		req.Header.Set("Content-Type", "application/json")
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		out, _ := io.ReadAll(res.Body)
		return res, out
	}
	res, body := post("/v1/prompts", `{"text":"one more"}`)
	if res.StatusCode != 429 || res.Header.Get("Retry-After") == "" ||
		!strings.Contains(string(body), `"code":"budget_exceeded","message":"the token's daily budget of $1.00 is reached"`) {
		t.Errorf("POST /v1/prompts after the budget: %d Retry-After %q %s", res.StatusCode, res.Header.Get("Retry-After"), body)
	}
	res, body = post("/v1/chat/completions", `{"model":"default","messages":[{"role":"user","content":"one more"}]}`)
	if res.StatusCode != 429 || !strings.Contains(string(body), `"type":"insufficient_quota"`) {
		t.Errorf("POST /v1/chat/completions after the budget: %d %s", res.StatusCode, body)
	}
	if _, err := p.stop(10 * time.Second); err != nil {
		t.Error(err)
	}
	checkLogs(t, all)
}
