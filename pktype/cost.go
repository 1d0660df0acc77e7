package pktype

import (
	"encoding/json"
	"math"
)

// Price is what one model's tokens cost, in USD per million tokens.
type Price struct {
	// Model is the model the price applies to, as requests name it (the
	// profile's model or a run's override), not as the provider reports it.
	Model string `yaml:"model" json:"model"`
	// Input prices prompt tokens that were not served from the provider's
	// cache; Output prices completion tokens other than reasoning ones.
	Input  float64 `yaml:"input_per_million" json:"input_per_million"`
	Output float64 `yaml:"output_per_million" json:"output_per_million"`
	// CachedInput prices cached prompt tokens. Zero means unset: cached
	// tokens then cost Input, as on a provider without a cache discount.
	CachedInput float64 `yaml:"cached_input_per_million" json:"cached_input_per_million,omitempty"`
	// Reasoning prices reasoning tokens, which providers count among the
	// completion tokens. Zero means unset: reasoning tokens then cost
	// Output, as OpenAI bills them.
	Reasoning float64 `yaml:"reasoning_per_million" json:"reasoning_per_million,omitempty"`
}

// Cost of one call: (prompt − cached) × Input + cached × CachedInput +
// (completion − reasoning) × Output + reasoning × Reasoning, per million
// tokens. It is unknown, never zero, unless the provider reported both
// the prompt and the completion count; an unreported cached count counts
// as none cached, and an unreported reasoning count as none reasoning
// (every completion token at Output). Cached tokens are capped at the
// prompt count, reasoning tokens at the completion count. An embedding
// call reports no completion count and produces none: pass embedding true
// and only the prompt count is needed.
func (p Price) Cost(u TokenUsage, known TokenUsagePresence, embedding bool) Cost {
	if !known.PromptTokens || (!known.CompletionTokens && !embedding) {
		return Cost{}
	}
	cached := 0
	if known.CachedTokens {
		cached = min(max(u.CachedTokens, 0), u.PromptTokens)
	}
	completion, reasoning := 0, 0
	if known.CompletionTokens {
		completion = u.CompletionTokens
		if known.ReasoningTokens {
			reasoning = min(max(u.ReasoningTokens, 0), completion)
		}
	}
	cachedPrice := p.CachedInput
	if cachedPrice == 0 {
		cachedPrice = p.Input
	}
	reasoningPrice := p.Reasoning
	if reasoningPrice == 0 {
		reasoningPrice = p.Output
	}
	usd := (float64(u.PromptTokens-cached)*p.Input + float64(cached)*cachedPrice +
		float64(completion-reasoning)*p.Output + float64(reasoning)*reasoningPrice) / 1e6
	return Cost{USD: usd, Known: true}
}

// CallEstimate is what one provider call is expected to use, estimated
// before it is made: what promptkit.RunRequest.BeforeCall and EmbedRequest.BeforeCall
// are told, so that a caller can hold a share of a budget while the call
// is in flight.
type CallEstimate struct {
	// Tokens estimates the call's tokens: a quarter of its prompt's bytes,
	// plus its output limit (max tokens × choices) when it has one. The
	// same estimate paces a backend's tokens per minute.
	Tokens int
	// Cost prices the estimate as the call's attempts are priced (the
	// requested model's price): the prompt's quarter as input tokens and
	// the output limit as output tokens. Unknown when the model has no
	// price, or when a generation has no output limit: how long its
	// answer will be is then unknown.
	Cost Cost
}

// Cost is an amount spent at a provider, in USD, and whether it is known.
// A call is priced only when its model has a Price and the provider
// reported its usage; otherwise its cost is unknown, which is not zero. A
// sum of costs is known only when every one of them is; USD then still
// sums the known ones (a lower bound).
//
// In JSON a known cost is a number and an unknown one is null.
type Cost struct {
	USD   float64
	Known bool
}

// Add returns the sum of c and o: known only when both are.
func (c Cost) Add(o Cost) Cost {
	return Cost{USD: c.USD + o.USD, Known: c.Known && o.Known}
}

// MarshalJSON writes the amount, or null when it is unknown.
func (c Cost) MarshalJSON() ([]byte, error) {
	if !c.Known {
		return []byte("null"), nil
	}
	if math.IsNaN(c.USD) || math.IsInf(c.USD, 0) {
		return []byte("null"), nil
	}
	return json.Marshal(c.USD)
}

// UnmarshalJSON reads a number (known) or null (unknown).
func (c *Cost) UnmarshalJSON(b []byte) error {
	var v *float64
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	*c = Cost{}
	if v != nil {
		*c = Cost{USD: *v, Known: true}
	}
	return nil
}
