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
