package pktype_test

import (
	"encoding/json"
	"strconv"
	"testing"

	"github.com/promptkit/promptkit/pktype"
)

// A run's parameters win where set (Stop when non-empty); the profile's
// fill the rest.
func TestSamplingOr(t *testing.T) {
	t.Parallel()
	hot, cold, n, seed := 1.5, 0.1, 9, int64(3)
	base := pktype.Sampling{Temperature: &cold, MaxTokens: &n, Stop: []string{"END"}}
	got := pktype.Sampling{Temperature: &hot, Stop: []string{}, Seed: &seed}.Or(base)
	if got.Temperature != &hot || got.MaxTokens != &n || got.TopP != nil || len(got.Stop) != 1 || got.Seed != &seed {
		t.Fatalf("Or = %+v", got)
	}
	if got := (pktype.Sampling{Stop: []string{"x"}}).Or(base); got.Stop[0] != "x" {
		t.Fatalf("Stop = %v, want the run's", got.Stop)
	}
}

// A clone shares nothing with the original.
func TestSamplingClone(t *testing.T) {
	t.Parallel()
	temp, seed := 0.5, int64(1)
	s := pktype.Sampling{Temperature: &temp, Stop: []string{"a"}, Seed: &seed}
	c := s.Clone()
	*c.Temperature, c.Stop[0], *c.Seed = 2, "b", 2
	if temp != 0.5 || s.Stop[0] != "a" || seed != 1 {
		t.Fatalf("clone changed the original: %+v", s)
	}
}

// Embedded, the parameters keep their names and order in JSON.
func TestSamplingJSON(t *testing.T) {
	t.Parallel()
	temp, topP, n, seed := 0.5, 0.9, 64, int64(7)
	b, err := json.Marshal(struct {
		Model string `json:"model"`
		pktype.Sampling
	}{"m", pktype.Sampling{Temperature: &temp, TopP: &topP, MaxTokens: &n, Stop: []string{"a"}, Seed: &seed}})
	const want = `{"model":"m","temperature":0.5,"top_p":0.9,"max_tokens":64,"stop":["a"],"seed":7}`
	if err != nil || string(b) != want {
		t.Fatalf("%s, %v; want %s", b, err, want)
	}
}

// Reported yields the known counts by name, in field order.
func TestUsageReported(t *testing.T) {
	t.Parallel()
	u := pktype.Usage{
		TokenUsage: pktype.TokenUsage{PromptTokens: 12, TotalTokens: 40, CachedTokens: 0},
		Known:      pktype.TokenUsagePresence{PromptTokens: true, CachedTokens: true},
	}
	var got []string
	for name, v := range u.Reported() {
		got = append(got, name+"="+strconv.Itoa(v))
	}
	if len(got) != 2 || got[0] != "prompt_tokens=12" || got[1] != "cached_tokens=0" {
		t.Fatalf("Reported = %v", got)
	}
}

// A run's extra parameters win over the profile's by name; its
// max_tokens and its max_completion_tokens each replace the profile's
// either, so that never both are sent; nothing of the profile's changes.
func TestSamplingOrExtra(t *testing.T) {
	t.Parallel()
	n := 100
	raw := func(s string) json.RawMessage { return json.RawMessage(s) }
	base := pktype.Sampling{MaxTokens: &n, Extra: pktype.Params{"top_k": raw(`20`), "min_p": raw(`0.1`)}}
	got := pktype.Sampling{Extra: pktype.Params{"top_k": raw(`40`), "max_completion_tokens": raw(`64`)}}.Or(base)
	if string(got.Extra["top_k"]) != `40` || string(got.Extra["min_p"]) != `0.1` || got.MaxTokens != nil || *got.OutputLimit() != 64 {
		t.Errorf("Or = %+v", got)
	}
	m := 8
	profile := pktype.Sampling{Extra: pktype.Params{"max_completion_tokens": raw(`64`), "top_k": raw(`20`)}}
	got = pktype.Sampling{MaxTokens: &m}.Or(profile)
	if _, both := got.Extra["max_completion_tokens"]; both || *got.OutputLimit() != 8 || string(got.Extra["top_k"]) != `20` {
		t.Errorf("a run's max_tokens over a profile's max_completion_tokens: %+v", got)
	}
	if _, ok := profile.Extra["max_completion_tokens"]; !ok {
		t.Error("Or changed the profile's parameters")
	}
	if got := (pktype.Sampling{Extra: pktype.Params{"n": raw(`3`)}}); got.Choices() != 3 || (pktype.Sampling{}).Choices() != 1 {
		t.Errorf("Choices = %d", got.Choices())
	}
}

// Extra parameters written in YAML are kept as their JSON.
func TestParamsYAML(t *testing.T) {
	t.Parallel()
	var p pktype.Params
	err := p.UnmarshalYAML(func(v any) error {
		*(v.(*map[string]any)) = map[string]any{"top_k": 20, "chat_template_kwargs": map[string]any{"enable_thinking": false},
			"stop_token_ids": []any{1, 2}, "guided_choice": []any{"a", "b"}}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"top_k": `20`, "chat_template_kwargs": `{"enable_thinking":false}`, "stop_token_ids": `[1,2]`, "guided_choice": `["a","b"]`}
	for k, v := range want {
		if string(p[k]) != v {
			t.Errorf("%s = %s, want %s", k, p[k], v)
		}
	}
	if err := pktype.CheckParams(pktype.Params{"temperature": raw0()}, "extra."); err == nil || err.Error() != "extra.temperature is a parameter promptkit sets itself; set it as such, not as an extra parameter" {
		t.Errorf("CheckParams = %v", err)
	}
}

func raw0() json.RawMessage { return json.RawMessage(`0`) }
