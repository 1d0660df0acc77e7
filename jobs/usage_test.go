package jobs_test

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/promptkit/promptkit/jobs"
	"github.com/promptkit/promptkit/pktype"
)

// An attempt event decodes back to what the worker wrote, and reports a
// ledger call only when it dispatched: counts and cost nil when unknown.
func TestAttemptEventCall(t *testing.T) {
	t.Parallel()
	cost := 0.25
	e := jobs.AttemptEvent{Dispatched: true, Generation: 1, Attempt: 2, Outcome: "success", Model: "m", Backend: "b",
		Usage: jobs.AttemptUsage{TokenUsage: pktype.TokenUsage{PromptTokens: 10, CompletionTokens: 5, CachedTokens: 4, ReasoningTokens: 3},
			Known: pktype.TokenUsagePresence{PromptTokens: true, CompletionTokens: true, CachedTokens: true, ReasoningTokens: true}},
		CostUSD: &cost}
	back, err := jobs.DecodeAttemptEvent(e.JSON())
	if err != nil {
		t.Fatal(err)
	}
	c, ok := back.Call()
	if !ok || c.Model != "m" || c.Backend != "b" || *c.InputTokens != 10 || *c.OutputTokens != 5 || *c.CachedInputTokens != 4 ||
		*c.ReasoningTokens != 3 || *c.CostUSD != 0.25 {
		t.Fatalf("call %+v, %v", c, ok)
	}
	// Unreported counts and cost are absent from the JSON, and unknown.
	bare := jobs.AttemptEvent{Dispatched: true, Model: "m"}
	if c, ok := bare.Call(); !ok || c.InputTokens != nil || c.OutputTokens != nil || c.CachedInputTokens != nil ||
		c.ReasoningTokens != nil || c.CostUSD != nil {
		t.Fatalf("bare call %+v", c)
	}
	var raw map[string]any
	if err := json.Unmarshal(bare.JSON(), &raw); err != nil {
		t.Fatal(err)
	}
	if _, has := raw["usage"]; has {
		t.Errorf("unreported usage in %v", raw)
	}
	if _, has := raw["cost_usd"]; has {
		t.Errorf("unknown cost in %v", raw)
	}
	// An embedding reports no output or reasoning count: it has none. Its
	// cached count stays unknown.
	emb := jobs.AttemptEvent{Dispatched: true, Embedding: true, Usage: jobs.AttemptUsage{TokenUsage: pktype.TokenUsage{PromptTokens: 7},
		Known: pktype.TokenUsagePresence{PromptTokens: true}}}
	if c, _ := emb.Call(); c.OutputTokens == nil || *c.OutputTokens != 0 || c.ReasoningTokens == nil || *c.ReasoningTokens != 0 ||
		c.CachedInputTokens != nil {
		t.Errorf("embedding's output %v, reasoning %v, cached %v; want known 0s and unknown", c.OutputTokens, c.ReasoningTokens, c.CachedInputTokens)
	}
	if _, ok := (jobs.AttemptEvent{Model: "m"}).Call(); ok {
		t.Error("an undispatched attempt reports a call")
	}
	if got := jobs.UsageCalls(e.JSON(), json.RawMessage(`{"dispatched":false}`), json.RawMessage(`[1]`), bare.JSON()); len(got) != 2 {
		t.Errorf("UsageCalls = %d calls, want 2", len(got))
	}
}

// A call keeps its attempt's result; a lost call's outcome says so.
func TestAttemptEventCallResult(t *testing.T) {
	t.Parallel()
	e := jobs.AttemptEvent{Dispatched: true, StatusCode: 429, Outcome: "error", Failure: "provider_status", Backend: "b"}
	back, err := jobs.DecodeAttemptEvent(e.JSON())
	if err != nil {
		t.Fatal(err)
	}
	if c, _ := back.Call(); c.StatusCode != 429 || c.Outcome != "error" || c.Failure != "provider_status" {
		t.Errorf("call %+v, want its 429, error and provider_status", c)
	}
	if jobs.LostCall.Outcome != jobs.UsageOutcomeLost || jobs.LostCall.StatusCode != 0 || jobs.LostCall.Backend != "" {
		t.Errorf("LostCall = %+v", jobs.LostCall)
	}
}

func TestJobCost(t *testing.T) {
	t.Parallel()
	priced := func(usd float64) jobs.Event {
		e := jobs.AttemptEvent{Dispatched: true, CostUSD: &usd}
		return jobs.Event{Type: jobs.EventAttempt, Data: e.JSON()}
	}
	unpriced := jobs.Event{Type: jobs.EventAttempt, Data: (&jobs.AttemptEvent{Dispatched: true}).JSON()}
	idle := jobs.Event{Type: jobs.EventAttempt, Data: (&jobs.AttemptEvent{}).JSON()}
	reclaimed := jobs.Event{Type: jobs.EventTransition, From: jobs.Running, To: jobs.Queued,
		Data: jobs.TransitionData{ErrorKind: jobs.KindWorkerCrash}.JSON()}
	retried := jobs.Event{Type: jobs.EventTransition, From: jobs.Running, To: jobs.Queued,
		Data: jobs.TransitionData{ErrorKind: jobs.KindRateLimit}.JSON()}
	for _, c := range []struct {
		name string
		evs  []jobs.Event
		want pktype.Cost
	}{
		{"none", nil, pktype.Cost{Known: true}},
		{"priced", []jobs.Event{priced(0.5), idle, retried, priced(0.25)}, pktype.Cost{USD: 0.75, Known: true}},
		{"one unknown", []jobs.Event{priced(0.5), unpriced}, pktype.Cost{USD: 0.5}},
		{"reclaimed", []jobs.Event{priced(0.5), reclaimed}, pktype.Cost{USD: 0.5}},
		{"cancelled while running", []jobs.Event{{Type: jobs.EventTransition, From: jobs.Running, To: jobs.Cancelled}}, pktype.Cost{}},
		{"cancelled while queued", []jobs.Event{{Type: jobs.EventTransition, From: jobs.Queued, To: jobs.Cancelled}}, pktype.Cost{Known: true}},
	} {
		if got := jobs.JobCost(c.evs); got != c.want {
			t.Errorf("%s: JobCost = %+v, want %+v", c.name, got, c.want)
		}
	}
}

func TestUsageParamsNormalize(t *testing.T) {
	t.Parallel()
	for _, p := range []jobs.UsageParams{
		{GroupBy: []jobs.UsageGroup{"week"}},
		{GroupBy: []jobs.UsageGroup{jobs.UsageByDay, jobs.UsageByDay}},
	} {
		if _, err := p.Normalize(); !errors.Is(err, jobs.ErrInvalid) {
			t.Errorf("Normalize(%+v) = %v, want ErrInvalid", p, err)
		}
	}
	if _, err := (jobs.UsageParams{GroupBy: []jobs.UsageGroup{jobs.UsageByOrg, jobs.UsageByUser, jobs.UsageByToken,
		jobs.UsageByModel, jobs.UsageByBackend, jobs.UsageByDay}}).Normalize(); err != nil {
		t.Errorf("every group: %v", err)
	}
}
