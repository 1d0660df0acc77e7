package pktype

import (
	"bytes"
	"encoding/json"
	"iter"
)

// TokenUsage holds the five token counts OpenAI-compatible providers report.
// A count the provider did not report is zero here; TokenUsagePresence, or
// Usage, tells unknown from zero.
type TokenUsage struct {
	PromptTokens     int `json:"prompt_tokens"`
	CompletionTokens int `json:"completion_tokens"`
	TotalTokens      int `json:"total_tokens"`
	CachedTokens     int `json:"cached_tokens"`
	ReasoningTokens  int `json:"reasoning_tokens"`
}

// Add returns the field-wise sum of u and o.
func (u TokenUsage) Add(o TokenUsage) TokenUsage {
	return TokenUsage{
		PromptTokens:     u.PromptTokens + o.PromptTokens,
		CompletionTokens: u.CompletionTokens + o.CompletionTokens,
		TotalTokens:      u.TotalTokens + o.TotalTokens,
		CachedTokens:     u.CachedTokens + o.CachedTokens,
		ReasoningTokens:  u.ReasoningTokens + o.ReasoningTokens,
	}
}

// TokenUsagePresence says, per field, whether the provider reported a count.
type TokenUsagePresence struct {
	PromptTokens     bool `json:"prompt_tokens"`
	CompletionTokens bool `json:"completion_tokens"`
	TotalTokens      bool `json:"total_tokens"`
	CachedTokens     bool `json:"cached_tokens"`
	ReasoningTokens  bool `json:"reasoning_tokens"`
}

// Usage is the token usage of a run or a stored answer: the counts, and
// which of them the provider reported. A count is known when the provider
// reported it on at least one dispatched attempt; its value is then the
// sum of what was reported. An unknown count is 0 in TokenUsage and must
// not be read as zero.
//
// In JSON an unknown count is null, never 0:
//
//	{"prompt_tokens": 12, "completion_tokens": 3, "total_tokens": 15, "cached_tokens": null, "reasoning_tokens": null}
type Usage struct {
	TokenUsage
	Known TokenUsagePresence
}

// fields lists the five counts with their JSON names, so the encoder,
// the decoder and Reported cannot disagree on a name.
func (u *Usage) fields() [5]struct {
	name  string
	value *int
	known *bool
} {
	type f = struct {
		name  string
		value *int
		known *bool
	}
	return [5]f{
		{"prompt_tokens", &u.PromptTokens, &u.Known.PromptTokens},
		{"completion_tokens", &u.CompletionTokens, &u.Known.CompletionTokens},
		{"total_tokens", &u.TotalTokens, &u.Known.TotalTokens},
		{"cached_tokens", &u.CachedTokens, &u.Known.CachedTokens},
		{"reasoning_tokens", &u.ReasoningTokens, &u.Known.ReasoningTokens},
	}
}

// MarshalJSON writes the five counts, null for an unknown one.
func (u Usage) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, f := range u.fields() {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(`"` + f.name + `":`)
		if *f.known {
			b.WriteString(itoa(*f.value))
		} else {
			b.WriteString("null")
		}
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

// UnmarshalJSON reads what MarshalJSON writes: a number is a known count,
// null or a missing key an unknown one. It also reads the older stored form
// whose counts are all numbers and whose "known" object says which are
// known.
func (u *Usage) UnmarshalJSON(data []byte) error {
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(data, &raw); err != nil {
		return err
	}
	var legacy *TokenUsagePresence
	if k, ok := raw["known"]; ok {
		legacy = new(TokenUsagePresence)
		if err := json.Unmarshal(k, legacy); err != nil {
			return err
		}
	}
	*u = Usage{}
	for _, f := range u.fields() {
		v, ok := raw[f.name]
		if !ok || string(v) == "null" {
			continue
		}
		if err := json.Unmarshal(v, f.value); err != nil {
			return err
		}
		*f.known = true
	}
	if legacy != nil {
		u.Known = *legacy
		for _, f := range u.fields() {
			if !*f.known {
				*f.value = 0
			}
		}
	}
	return nil
}

// Reported yields the counts the provider reported, by their JSON names,
// in field order: what a record that keeps only known counts stores.
func (u Usage) Reported() iter.Seq2[string, int] {
	return func(yield func(string, int) bool) {
		for _, f := range u.fields() {
			if *f.known && !yield(f.name, *f.value) {
				return
			}
		}
	}
}

func itoa(n int) string {
	b, _ := json.Marshal(n) // cannot fail for an int
	return string(b)
}

// ObservedTokenCount is one observed token count. On an attempt, Known and
// Complete are both true exactly when the provider reported the field as a
// non-null integer. On a finished event, Value sums the known
// contributions, Known means at least one attempt reported the field, and
// Complete means every dispatched attempt did. A run with no dispatched
// attempt reports known, complete zeros. Unknown counts have Value 0.
type ObservedTokenCount struct {
	Value    int
	Known    bool
	Complete bool
}

// ObservedTokenUsage is usage as observed, telling unknown from zero and
// partial from complete. It is observation metadata, not complete cost
// accounting: a provider may bill for calls it did not report usage for.
type ObservedTokenUsage struct {
	PromptTokens     ObservedTokenCount
	CompletionTokens ObservedTokenCount
	TotalTokens      ObservedTokenCount
	CachedTokens     ObservedTokenCount
	ReasoningTokens  ObservedTokenCount
}

// Counts returns the five counts in field order, for code that treats
// them alike.
func (u *ObservedTokenUsage) Counts() [5]*ObservedTokenCount {
	return [5]*ObservedTokenCount{&u.PromptTokens, &u.CompletionTokens, &u.TotalTokens, &u.CachedTokens, &u.ReasoningTokens}
}

// Usage returns the observed values and which of them are known.
func (u ObservedTokenUsage) Usage() Usage {
	var out Usage
	f := out.fields()
	for i, c := range u.Counts() {
		if c.Known {
			*f[i].value, *f[i].known = c.Value, true
		}
	}
	return out
}
