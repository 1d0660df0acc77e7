package pktype

import (
	"encoding/json"
	"testing"
)

func TestPriceCost(t *testing.T) {
	t.Parallel()
	p := Price{Model: "m", Input: 2, Output: 8, CachedInput: 0.5}
	all := TokenUsagePresence{PromptTokens: true, CompletionTokens: true, TotalTokens: true, CachedTokens: true}
	rp := Price{Model: "r", Input: 2, Output: 8, Reasoning: 20}
	withReasoning := TokenUsagePresence{PromptTokens: true, CompletionTokens: true, ReasoningTokens: true}
	cases := []struct {
		name      string
		price     Price
		u         TokenUsage
		known     TokenUsagePresence
		embedding bool
		want      Cost
	}{
		// (1000−400)×2 + 400×0.5 + 500×8 = 1200 + 200 + 4000 per million.
		{"cached discount", p, TokenUsage{PromptTokens: 1000, CompletionTokens: 500, CachedTokens: 400}, all, false, Cost{USD: 0.0054, Known: true}},
		{"cached at input price when unset", Price{Input: 2, Output: 8}, TokenUsage{PromptTokens: 1000, CompletionTokens: 500, CachedTokens: 400}, all, false, Cost{USD: 0.006, Known: true}},
		{"cached unreported counts as none cached", p, TokenUsage{PromptTokens: 1000, CompletionTokens: 500},
			TokenUsagePresence{PromptTokens: true, CompletionTokens: true}, false, Cost{USD: 0.006, Known: true}},
		{"known zero usage costs a known zero", p, TokenUsage{}, all, false, Cost{Known: true}},
		{"completion unknown", p, TokenUsage{PromptTokens: 1000}, TokenUsagePresence{PromptTokens: true}, false, Cost{}},
		{"prompt unknown", p, TokenUsage{CompletionTokens: 10}, TokenUsagePresence{CompletionTokens: true}, false, Cost{}},
		{"nothing reported", p, TokenUsage{}, TokenUsagePresence{}, false, Cost{}},
		{"embedding needs only the prompt count", p, TokenUsage{PromptTokens: 1000, TotalTokens: 1000},
			TokenUsagePresence{PromptTokens: true, TotalTokens: true}, true, Cost{USD: 0.002, Known: true}},
		{"cached beyond prompt is capped", p, TokenUsage{PromptTokens: 10, CachedTokens: 50}, all, false, Cost{USD: 10 * 0.5 / 1e6, Known: true}},
		// 1000×2 + (500−300)×8 + 300×20 = 2000 + 1600 + 6000 per million.
		{"reasoning price", rp, TokenUsage{PromptTokens: 1000, CompletionTokens: 500, ReasoningTokens: 300}, withReasoning, false, Cost{USD: 0.0096, Known: true}},
		{"reasoning at output price when unset", p, TokenUsage{PromptTokens: 1000, CompletionTokens: 500, ReasoningTokens: 300}, withReasoning, false, Cost{USD: 0.006, Known: true}},
		{"reasoning unreported prices every completion token at output", rp, TokenUsage{PromptTokens: 1000, CompletionTokens: 500, ReasoningTokens: 300},
			TokenUsagePresence{PromptTokens: true, CompletionTokens: true}, false, Cost{USD: 0.006, Known: true}},
		{"reasoning beyond completion is capped", rp, TokenUsage{CompletionTokens: 10, ReasoningTokens: 50}, withReasoning, false, Cost{USD: 10 * 20 / 1e6, Known: true}},
		{"negative reasoning counts as none", rp, TokenUsage{CompletionTokens: 10, ReasoningTokens: -5}, withReasoning, false, Cost{USD: 10 * 8 / 1e6, Known: true}},
		{"reasoning with completion unknown is unknown", rp, TokenUsage{PromptTokens: 1000, ReasoningTokens: 300},
			TokenUsagePresence{PromptTokens: true, ReasoningTokens: true}, false, Cost{}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := c.price.Cost(c.u, c.known, c.embedding)
			if got.Known != c.want.Known || !near(got.USD, c.want.USD) {
				t.Fatalf("Cost = %+v, want %+v", got, c.want)
			}
		})
	}
}

func near(a, b float64) bool { d := a - b; return d < 1e-12 && d > -1e-12 }

func TestCostAddAndJSON(t *testing.T) {
	t.Parallel()
	a, b := Cost{USD: 1.5, Known: true}, Cost{USD: 0.25, Known: true}
	if got := a.Add(b); got != (Cost{USD: 1.75, Known: true}) {
		t.Errorf("known + known = %+v", got)
	}
	if got := a.Add(Cost{}); got.Known || got.USD != 1.5 {
		t.Errorf("known + unknown = %+v, want unknown with the known part", got)
	}
	for _, c := range []struct {
		cost Cost
		json string
	}{{Cost{USD: 1.75, Known: true}, "1.75"}, {Cost{Known: true}, "0"}, {Cost{USD: 3}, "null"}} {
		b, err := json.Marshal(c.cost)
		if err != nil || string(b) != c.json {
			t.Errorf("Marshal(%+v) = %s, %v; want %s", c.cost, b, err, c.json)
		}
		var back Cost
		if err := json.Unmarshal(b, &back); err != nil {
			t.Fatal(err)
		}
		if want := c.cost; back.Known != want.Known || (want.Known && back.USD != want.USD) {
			t.Errorf("round trip of %+v = %+v", want, back)
		}
	}
}
