package promptkit_test

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/promptkit/promptkit"
	"github.com/promptkit/promptkit/providertest"
)

// costEngine runs profile "default" (model "priced") and "other" (model
// "unpriced") against srv, with a price for "priced" only, reasoning
// priced apart.
func costEngine(t *testing.T, srv *providertest.Server) *promptkit.Engine {
	t.Helper()
	eng, err := promptkit.New(promptkit.Config{
		Backends: []promptkit.Backend{{ID: "b", BaseURL: srv.URL}},
		Profiles: []promptkit.Profile{
			{ID: "default", Backend: "b", Model: "priced", RepairBudget: 1},
			{ID: "other", Backend: "b", Model: "unpriced"},
		},
		Prices: []promptkit.Price{{Model: "priced", Input: 2, Output: 10, CachedInput: 1, Reasoning: 30}},
	})
	if err != nil {
		t.Fatal(err)
	}
	return eng
}

func TestRunCost(t *testing.T) {
	t.Parallel()
	usage := func(p, c, cached int) providertest.Usage {
		return providertest.Usage{PromptTokens: p, CompletionTokens: c, TotalTokens: p + c, CachedTokens: cached}
	}
	schema := json.RawMessage(`{"type":"object","required":["a"],"properties":{"a":{"type":"integer"}}}`)
	cases := []struct {
		name     string
		req      promptkit.RunRequest
		replies  []providertest.Response
		attempts []promptkit.Cost
		want     promptkit.Cost
	}{
		{"repair priced per attempt", promptkit.RunRequest{Text: "x", OutputSchema: schema}, []providertest.Response{
			{Text: "no", Usage: usage(1000, 100, 200)},
			{Text: `{"a": 1}`, Usage: usage(2000, 10, 0)},
		}, []promptkit.Cost{
			{USD: (800*2 + 200*1 + 100*10) / 1e6, Known: true},
			{USD: (2000*2 + 10*10) / 1e6, Known: true},
		}, promptkit.Cost{USD: (800*2 + 200*1 + 100*10 + 2000*2 + 10*10) / 1e6, Known: true}},
		{"one attempt without usage makes the run's cost unknown", promptkit.RunRequest{Text: "x", OutputSchema: schema}, []providertest.Response{
			{Text: "no", Usage: providertest.Usage{Mode: providertest.UsageAbsent}},
			{Text: `{"a": 1}`, Usage: usage(2000, 10, 0)},
		}, []promptkit.Cost{{}, {USD: (2000*2 + 10*10) / 1e6, Known: true}}, promptkit.Cost{USD: (2000*2 + 10*10) / 1e6}},
		{"reasoning tokens at the reasoning price", promptkit.RunRequest{Text: "x"}, []providertest.Response{
			{Text: "ok", Usage: providertest.Usage{PromptTokens: 1000, CompletionTokens: 100, TotalTokens: 1100, ReasoningTokens: 40}},
		}, []promptkit.Cost{{USD: (1000*2 + 60*10 + 40*30) / 1e6, Known: true}}, promptkit.Cost{USD: (1000*2 + 60*10 + 40*30) / 1e6, Known: true}},
		{"unreported reasoning tokens cost output", promptkit.RunRequest{Text: "x"}, []providertest.Response{
			{Text: "ok", Usage: providertest.Usage{Mode: providertest.UsagePartial, PromptTokens: 1000, CompletionTokens: 100}},
		}, []promptkit.Cost{{USD: (1000*2 + 100*10) / 1e6, Known: true}}, promptkit.Cost{USD: (1000*2 + 100*10) / 1e6, Known: true}},
		{"model without a price", promptkit.RunRequest{Text: "x", ProfileID: "other"}, []providertest.Response{
			{Text: "ok", Usage: usage(10, 10, 0)},
		}, []promptkit.Cost{{}}, promptkit.Cost{}},
		{"the request's model is priced", promptkit.RunRequest{Text: "x", ProfileID: "other", Model: "priced"}, []providertest.Response{
			{Text: "ok", Usage: usage(10, 10, 0)},
		}, []promptkit.Cost{{USD: 120 / 1e6, Known: true}}, promptkit.Cost{USD: 120 / 1e6, Known: true}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			srv := providertest.NewServer()
			t.Cleanup(srv.Close)
			srv.Enqueue(c.replies...)
			var log eventLog
			req := c.req
			req.Observer = log.Observe
			res, err := costEngine(t, srv).Run(context.Background(), req)
			if err != nil {
				t.Fatal(err)
			}
			var got []promptkit.Cost
			for _, ev := range log.Events() {
				if ev.Kind == promptkit.ExecutionAttempt {
					got = append(got, ev.Cost)
				}
			}
			if len(got) != len(c.attempts) {
				t.Fatalf("attempt costs %+v, want %+v", got, c.attempts)
			}
			for i := range got {
				if !sameCost(got[i], c.attempts[i]) {
					t.Errorf("attempt %d cost %+v, want %+v", i+1, got[i], c.attempts[i])
				}
			}
			if fin := lastEvent(t, log.Events()); !sameCost(fin.Cost, c.want) {
				t.Errorf("finished cost %+v, want %+v", fin.Cost, c.want)
			}
			if !sameCost(res.Cost, c.want) {
				t.Errorf("result cost %+v, want %+v", res.Cost, c.want)
			}
		})
	}
}

func sameCost(a, b promptkit.Cost) bool {
	return a.Known == b.Known && math.Abs(a.USD-b.USD) < 1e-12
}

func TestRunCostNothingDispatched(t *testing.T) {
	t.Parallel()
	srv := providertest.NewServer()
	t.Cleanup(srv.Close)
	var log eventLog
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := costEngine(t, srv).Run(ctx, promptkit.RunRequest{Text: "x", Observer: log.Observe})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v", err)
	}
	if fin := lastEvent(t, log.Events()); fin.Cost != (promptkit.Cost{Known: true}) {
		t.Errorf("finished cost %+v, want a known zero", fin.Cost)
	}
}

func TestPricesConfig(t *testing.T) {
	t.Parallel()
	cfg, err := promptkit.LoadConfig(fstest.MapFS{"promptkit.yaml": {Data: []byte(`
backends: [{id: b, base_url: "http://127.0.0.1:1"}]
profiles: [{id: p, backend: b, model: m}]
prices:
  - {model: m, input_per_million: 2.5, output_per_million: 10, cached_input_per_million: 1.25, reasoning_per_million: 15}
`)}}, "promptkit.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if want := []promptkit.Price{{Model: "m", Input: 2.5, Output: 10, CachedInput: 1.25, Reasoning: 15}}; len(cfg.Prices) != 1 || cfg.Prices[0] != want[0] {
		t.Fatalf("prices = %+v, want %+v", cfg.Prices, want)
	}
	for _, c := range []struct{ prices, field string }{
		{`[{input_per_million: 1}]`, "prices[0].model"},
		{`[{model: m, input_per_million: -1}]`, "prices[0].input_per_million"},
		{`[{model: m, output_per_million: .nan}]`, "prices[0].output_per_million"},
		{`[{model: m, cached_input_per_million: .inf}]`, "prices[0].cached_input_per_million"},
		{`[{model: m, reasoning_per_million: -0.5}]`, "prices[0].reasoning_per_million"},
		{`[{model: m}, {model: m}]`, "prices[1].model"},
		{`[{model: m, per_token: 1}]`, "per_token"},
	} {
		_, err := promptkit.LoadConfig(fstest.MapFS{"promptkit.yaml": {Data: []byte("prices: " + c.prices)}}, "promptkit.yaml")
		if !errors.Is(err, promptkit.ErrInvalidConfig) || !strings.Contains(err.Error(), c.field) {
			t.Errorf("prices %s: err = %v, want ErrInvalidConfig naming %s", c.prices, err, c.field)
		}
	}
}
