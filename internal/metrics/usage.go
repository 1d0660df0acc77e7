package metrics

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/promptkit/promptkit/jobs"
)

// DefaultUsageInterval is how long the spend totals of a scrape are
// reused before the usage ledger is read again.
const DefaultUsageInterval = time.Minute

// usageCollector reports the usage ledger's totals by org and model: the
// deployment's spend and tokens since the ledger began, as counters. The
// ledger is shared by every process, so only the store knows them; one
// read sums the whole ledger, so its result serves the scrapes of an
// interval. Labels: the org (orgs are what the operator creates tokens
// for: a bounded, operator-made set) and the model, kept only when
// configured (else OtherModel). No token or user label: there may be any
// number of them (GET /v1/usage has them).
type usageCollector struct {
	st       jobs.Store
	now      func() time.Time
	timeout  time.Duration
	interval time.Duration
	log      *slog.Logger
	model    func(string) string
	down     outage

	cost, tokens, requests, unknownCost, unknownUsage *prometheus.Desc

	mu     sync.Mutex
	readAt time.Time
	last   map[usageKey]jobs.UsageBucket // nil until a read succeeds
}

type usageKey struct{ org, model string }

func newUsageCollector(st jobs.Store, opts Options, model func(string) string) *usageCollector {
	labels := []string{"org", "model"}
	return &usageCollector{
		st: st, now: opts.Now, timeout: opts.ScrapeTimeout, interval: opts.UsageInterval, log: opts.Logger, model: model,
		cost: prometheus.NewDesc("promptkit_usage_cost_usd_total",
			"Known cost in USD of the provider calls in the usage ledger, by org and requested model (configured prices; calls of unknown cost are in promptkit_usage_unknown_cost_requests_total, not here).", labels, nil),
		tokens: prometheus.NewDesc("promptkit_usage_tokens_total",
			"Known token counts of the provider calls in the usage ledger, by org, requested model and type (input, output, cached_input, reasoning); cached_input tokens are a part of input, reasoning tokens a part of output.", append(labels, "type"), nil),
		requests: prometheus.NewDesc("promptkit_usage_requests_total",
			"Provider calls in the usage ledger (calls lost with a worker included), by org and requested model.", labels, nil),
		unknownCost: prometheus.NewDesc("promptkit_usage_unknown_cost_requests_total",
			"Provider calls in the usage ledger whose cost is unknown (no price for the model, or usage not reported), by org and requested model.", labels, nil),
		unknownUsage: prometheus.NewDesc("promptkit_usage_unknown_usage_requests_total",
			"Provider calls in the usage ledger whose input or output token count is unknown, by org and requested model.", labels, nil),
	}
}

// Describe implements prometheus.Collector.
func (c *usageCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.cost, c.tokens, c.requests, c.unknownCost, c.unknownUsage} {
		ch <- d
	}
}

// Collect implements prometheus.Collector. It reads the ledger when the
// last read is an interval old; when a read fails it reports nothing
// rather than stale totals (and warns once per outage).
func (c *usageCollector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.now()
	if c.last == nil || now.Sub(c.readAt) >= c.interval {
		ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
		bs, err := c.st.Usage(ctx, jobs.UsageParams{GroupBy: []jobs.UsageGroup{jobs.UsageByOrg, jobs.UsageByModel}})
		cancel()
		c.down.report(c.log, "reading the usage ledger", err)
		if err != nil {
			c.last = nil
			return
		}
		// Models outside the configured set share OtherModel's series.
		c.last, c.readAt = map[usageKey]jobs.UsageBucket{}, now
		for _, b := range bs {
			k := usageKey{b.OrgID, c.model(b.Model)}
			t := c.last[k]
			t.Requests += b.Requests
			t.InputTokens += b.InputTokens
			t.OutputTokens += b.OutputTokens
			t.CachedInputTokens += b.CachedInputTokens
			t.ReasoningTokens += b.ReasoningTokens
			t.UnknownUsage += b.UnknownUsage
			t.CostUSD += b.CostUSD
			t.UnknownCost += b.UnknownCost
			c.last[k] = t
		}
	}
	for k, t := range c.last {
		counter := func(d *prometheus.Desc, v float64, extra ...string) {
			ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, v, append([]string{k.org, k.model}, extra...)...)
		}
		counter(c.cost, t.CostUSD)
		counter(c.requests, float64(t.Requests))
		counter(c.unknownCost, float64(t.UnknownCost))
		counter(c.unknownUsage, float64(t.UnknownUsage))
		counter(c.tokens, float64(t.InputTokens), "input")
		counter(c.tokens, float64(t.OutputTokens), "output")
		counter(c.tokens, float64(t.CachedInputTokens), "cached_input")
		counter(c.tokens, float64(t.ReasoningTokens), "reasoning")
	}
}
