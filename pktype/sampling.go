package pktype

import (
	"cmp"
	"maps"
)

// Sampling holds the sampling parameters of a generation, each sent to
// the provider when set: a profile's defaults (promptkit.Profile), a
// run's overrides (promptkit.RunRequest), a stored chat request's
// (jobs.ChatRequest) and the rendered request's (GenerateRequest). Every
// one of them embeds it, so the parameters have one set of names, in JSON
// and in YAML.
type Sampling struct {
	Temperature *float64 `json:"temperature,omitempty" yaml:"temperature"`
	TopP        *float64 `json:"top_p,omitempty" yaml:"top_p"`
	MaxTokens   *int     `json:"max_tokens,omitempty" yaml:"max_tokens"`
	Stop        []string `json:"stop,omitempty" yaml:"stop"`
	// Seed asks the provider for deterministic sampling. It has no YAML
	// key: a config file's profiles keep the keys they always had.
	Seed *int64 `json:"seed,omitempty" yaml:"-"`
	// Extra are further parameters sent as given (see Params):
	// reasoning_effort, n, logprobs, a self-hosted server's top_k, ...
	Extra Params `json:"extra,omitempty" yaml:"extra"`
}

// Or returns s with each parameter s leaves unset taken from base: a
// run's overrides over a profile's defaults. Stop is unset when empty; the
// extra parameters are merged, s's over base's. s's max_tokens or
// max_completion_tokens (an extra parameter) replaces base's either: they
// say the same, and a backend may refuse both at once.
func (s Sampling) Or(base Sampling) Sampling {
	out := Sampling{
		Temperature: cmp.Or(s.Temperature, base.Temperature),
		TopP:        cmp.Or(s.TopP, base.TopP),
		MaxTokens:   cmp.Or(s.MaxTokens, base.MaxTokens),
		Stop:        base.Stop,
		Seed:        cmp.Or(s.Seed, base.Seed),
		Extra:       s.Extra.Or(base.Extra),
	}
	if len(s.Stop) > 0 {
		out.Stop = s.Stop
	}
	_, own := s.Extra[ParamMaxCompletionTokens]
	_, inherited := out.Extra[ParamMaxCompletionTokens]
	switch {
	case own && s.MaxTokens == nil:
		out.MaxTokens = nil
	case s.MaxTokens != nil && !own && inherited:
		out.Extra = maps.Clone(out.Extra) // base's own map: not to be changed
		delete(out.Extra, ParamMaxCompletionTokens)
	}
	return out
}

// ParamMaxCompletionTokens is OpenAI's newer name for max_tokens, kept as
// an extra parameter so that it reaches the backend by that name.
const ParamMaxCompletionTokens = "max_completion_tokens"

// OutputLimit is the most tokens the answer may have: MaxTokens, or an
// extra max_completion_tokens; nil when neither is set.
func (s Sampling) OutputLimit() *int {
	if s.MaxTokens != nil {
		return s.MaxTokens
	}
	if n, ok := s.Extra.Int(ParamMaxCompletionTokens); ok {
		return &n
	}
	return nil
}

// Choices is how many answers the request asks for (the extra parameter
// n), at least 1.
func (s Sampling) Choices() int {
	if n, ok := s.Extra.Int("n"); ok && n > 1 {
		return n
	}
	return 1
}

// Clone returns a deep copy, so that a holder of s cannot change the
// copy's values (they are pointers and a slice).
func (s Sampling) Clone() Sampling {
	return Sampling{
		Temperature: clonePtr(s.Temperature),
		TopP:        clonePtr(s.TopP),
		MaxTokens:   clonePtr(s.MaxTokens),
		Stop:        append([]string(nil), s.Stop...),
		Seed:        clonePtr(s.Seed),
		Extra:       s.Extra.Clone(),
	}
}

func clonePtr[T any](p *T) *T {
	if p == nil {
		return nil
	}
	v := *p
	return &v
}
