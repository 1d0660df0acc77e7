package metrics

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/promptkit/promptkit/internal/testkit"
	"github.com/promptkit/promptkit/jobs"
)

// The usage ledger's totals by org and model are counters; models outside
// Options.Models share one series; the ledger is read once per
// UsageInterval, and a failed read reports nothing rather than stale
// totals.
func TestUsageTotals(t *testing.T) {
	t.Parallel()
	var reads atomic.Int32
	var fail atomic.Bool
	st := countsStore(nil)
	st.usage = func(_ context.Context, p jobs.UsageParams) ([]jobs.UsageBucket, error) {
		reads.Add(1)
		if p.OrgID != "" || !p.Groups(jobs.UsageByOrg) || !p.Groups(jobs.UsageByModel) || len(p.GroupBy) != 2 {
			t.Errorf("Usage(%+v), want every org by org and model", p)
		}
		if fail.Load() {
			return nil, errors.New("database down")
		}
		return []jobs.UsageBucket{
			{OrgID: "acme", Model: "m", Requests: 3, InputTokens: 100, OutputTokens: 20, CachedInputTokens: 10, ReasoningTokens: 8,
				CostUSD: 0.5, UnknownCost: 1, UnknownUsage: 1},
			{OrgID: "acme", Model: "secret-a", Requests: 1, InputTokens: 5, OutputTokens: 5, ReasoningTokens: 2, CostUSD: 0.25},
			{OrgID: "acme", Model: "secret-b", Requests: 2, UnknownCost: 2, UnknownUsage: 2},
		}, nil
	}
	clock := testkit.NewClock(t0)
	m := newTest(t, st, Options{Now: clock.Now, Models: []string{"m"}, UsageInterval: time.Minute})
	want := `
# HELP promptkit_usage_cost_usd_total Known cost in USD of the provider calls in the usage ledger, by org and requested model (configured prices; calls of unknown cost are in promptkit_usage_unknown_cost_requests_total, not here).
# TYPE promptkit_usage_cost_usd_total counter
promptkit_usage_cost_usd_total{model="_OTHER",org="acme"} 0.25
promptkit_usage_cost_usd_total{model="m",org="acme"} 0.5
# HELP promptkit_usage_requests_total Provider calls in the usage ledger (calls lost with a worker included), by org and requested model.
# TYPE promptkit_usage_requests_total counter
promptkit_usage_requests_total{model="_OTHER",org="acme"} 3
promptkit_usage_requests_total{model="m",org="acme"} 3
# HELP promptkit_usage_tokens_total Known token counts of the provider calls in the usage ledger, by org, requested model and type (input, output, cached_input, reasoning); cached_input tokens are a part of input, reasoning tokens a part of output.
# TYPE promptkit_usage_tokens_total counter
promptkit_usage_tokens_total{model="_OTHER",org="acme",type="cached_input"} 0
promptkit_usage_tokens_total{model="_OTHER",org="acme",type="input"} 5
promptkit_usage_tokens_total{model="_OTHER",org="acme",type="output"} 5
promptkit_usage_tokens_total{model="_OTHER",org="acme",type="reasoning"} 2
promptkit_usage_tokens_total{model="m",org="acme",type="cached_input"} 10
promptkit_usage_tokens_total{model="m",org="acme",type="input"} 100
promptkit_usage_tokens_total{model="m",org="acme",type="output"} 20
promptkit_usage_tokens_total{model="m",org="acme",type="reasoning"} 8
# HELP promptkit_usage_unknown_cost_requests_total Provider calls in the usage ledger whose cost is unknown (no price for the model, or usage not reported), by org and requested model.
# TYPE promptkit_usage_unknown_cost_requests_total counter
promptkit_usage_unknown_cost_requests_total{model="_OTHER",org="acme"} 2
promptkit_usage_unknown_cost_requests_total{model="m",org="acme"} 1
`
	names := []string{"promptkit_usage_cost_usd_total", "promptkit_usage_requests_total", "promptkit_usage_tokens_total",
		"promptkit_usage_unknown_cost_requests_total"}
	if err := testutil.GatherAndCompare(m.reg, strings.NewReader(want), names...); err != nil {
		t.Fatal(err)
	}
	clock.Advance(time.Minute - time.Nanosecond)
	scrape(t, m)
	if n := reads.Load(); n != 1 {
		t.Fatalf("%d ledger reads within the interval, want 1", n)
	}
	clock.Advance(time.Nanosecond)
	fail.Store(true)
	if body := scrape(t, m); strings.Contains(body, "promptkit_usage_") || reads.Load() != 2 {
		t.Fatalf("after a failed read (%d reads), the scrape shows usage:\n%s", reads.Load(), body)
	}
	fail.Store(false)
	if body := scrape(t, m); !strings.Contains(body, `promptkit_usage_cost_usd_total{model="m",org="acme"} 0.5`) {
		t.Fatalf("after recovery:\n%s", body)
	}
}
