package pktype

import "cmp"

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
}

// Or returns s with each parameter s leaves unset taken from base: a
// run's overrides over a profile's defaults. Stop is unset when empty.
func (s Sampling) Or(base Sampling) Sampling {
	out := Sampling{
		Temperature: cmp.Or(s.Temperature, base.Temperature),
		TopP:        cmp.Or(s.TopP, base.TopP),
		MaxTokens:   cmp.Or(s.MaxTokens, base.MaxTokens),
		Stop:        base.Stop,
		Seed:        cmp.Or(s.Seed, base.Seed),
	}
	if len(s.Stop) > 0 {
		out.Stop = s.Stop
	}
	return out
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
	}
}

func clonePtr[T any](p *T) *T {
	if p == nil {
		return nil
	}
	v := *p
	return &v
}
