package jobs_test

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/promptkit/promptkit/jobs"
)

// A submission's execution_options are decoded strictly, each refusal
// naming the key; a NUL is refused as such, never quoted.
func TestParseExecutionOptionsRefuses(t *testing.T) {
	t.Parallel()
	for raw, want := range map[string]string{
		`{"a":`:                  "execution_options is not a JSON object",
		`"fast"`:                 "execution_options is not a JSON object",
		`{"modle": "m1"}`:        `execution_options has an unknown key "modle" (known: model, depth, prefer_provider)`,
		`{"router_model": "m1"}`: "execution_options.router_model is not supported: promptkit does not choose between models; it routes a profile's model across the backends of its model group (see docs/routing.md); set model, or prefer_provider to pin one backend",
		`{"profile": "fast"}`:    "execution_options.profile: set the prompt's profile instead",
		`{"depth": -1}`:          "execution_options.depth: must be from 0 to 1000",
		`{"model": 3}`:           "execution_options.model has the wrong type",
		`{"mo\u0000del": 1}`:     "execution_options: contains a NUL character",
	} {
		_, err := jobs.ParseExecutionOptions(json.RawMessage(raw))
		if !errors.Is(err, jobs.ErrInvalid) || jobs.InvalidMessage(err) != want {
			t.Errorf("%s: %v, want %q", raw, err, want)
		}
	}
}

// The options encode with their keys sorted: the stored form, and what a
// submission's fingerprint hashes.
func TestExecutionOptionsJSON(t *testing.T) {
	t.Parallel()
	d := 2
	for o, want := range map[*jobs.ExecutionOptions]string{
		{}: `{}`,
		{Model: "m", Depth: &d, PreferProvider: "b"}: `{"depth":2,"model":"m","prefer_provider":"b"}`,
	} {
		if got := string(o.JSON()); got != want {
			t.Errorf("%+v: %s, want %s", *o, got, want)
		}
	}
}

// Normalizing normalized params again (as the store does) keeps them as
// they are, and still checks what a submitter sets after normalizing.
func TestNormalizeAgain(t *testing.T) {
	t.Parallel()
	p, err := jobs.Submission{Prompt: "p", Inputs: json.RawMessage(`{"a": 1}`)}.Params()
	if err != nil {
		t.Fatal(err)
	}
	again, err := p.Normalize()
	if err != nil || *again.Priority != jobs.DefaultPriority || again.MaxAttempts != jobs.DefaultMaxAttempts || string(again.Inputs) != `{"a": 1}` {
		t.Fatalf("again: %+v, %v", again, err)
	}
	p.IdempotencyKey = "k\x00"
	if _, err := p.Normalize(); jobs.InvalidMessage(err) != "idempotency_key: contains a NUL character" {
		t.Errorf("a key set after normalizing: %v", err)
	}
}
