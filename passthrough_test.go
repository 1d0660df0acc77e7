package promptkit_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/promptkit/promptkit"
	"github.com/promptkit/promptkit/providertest"
)

// passEngine is an engine on a fresh fake provider whose profile sets
// extra parameters of its own (a self-hosted server's), as a config file
// writes them.
func passEngine(t *testing.T, opts ...providertest.Option) (*providertest.Server, *promptkit.Engine) {
	t.Helper()
	srv := providertest.NewServer(opts...)
	t.Cleanup(srv.Close)
	cfg, err := promptkit.LoadConfig(fstest.MapFS{"promptkit.yaml": {Data: []byte(`
backends:
  - id: local
    base_url: ` + srv.URL + `
profiles:
  - id: default
    backend: local
    model: qwen3
    repair_budget: 1
    extra:
      top_k: 20
      chat_template_kwargs: {enable_thinking: false}
`)}}, "promptkit.yaml")
	if err != nil {
		t.Fatal(err)
	}
	eng, err := promptkit.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return srv, eng
}

// A run's extra parameters reach the backend as given, over the
// profile's by name, beside a response_format as the caller wrote it; they
// are part of the rendered request and so of its hash.
func TestExtraParametersReachTheBackend(t *testing.T) {
	srv, eng := passEngine(t)
	req := promptkit.RunRequest{Text: "hi", JSONObject: true,
		ResponseFormat: json.RawMessage(`{"type":"json_object","schema":{"type":"object","required":["a"]}}`)}
	req.Extra = promptkit.Params{
		"top_k":              json.RawMessage(`40`),
		"reasoning_effort":   json.RawMessage(`"low"`),
		"logit_bias":         json.RawMessage(`{"50256":-100}`),
		"repetition_penalty": json.RawMessage(`1.05`),
	}
	res, err := eng.Run(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	sent := body(t, srv, 0)
	for k, want := range map[string]string{
		"top_k": `40`, "reasoning_effort": `"low"`, "logit_bias": `{"50256":-100}`, "repetition_penalty": `1.05`,
		"chat_template_kwargs": `{"enable_thinking":false}`,
		"response_format":      `{"type":"json_object","schema":{"type":"object","required":["a"]}}`,
	} {
		if string(sent[k]) != want {
			t.Errorf("sent %s = %s, want %s", k, sent[k], want)
		}
	}
	plain := req
	plain.Extra = nil
	prepared, err := eng.Prepare(context.Background(), plain)
	if err != nil {
		t.Fatal(err)
	}
	if prepared.PromptHash == res.PromptHash {
		t.Error("the extra parameters do not count in the prompt hash")
	}
	again, _ := eng.Prepare(context.Background(), req)
	if again.PromptHash != res.PromptHash {
		t.Error("the same request has another hash")
	}
}

// An extra parameter may not take a name promptkit sets itself, in a run
// or in a profile.
func TestExtraParametersMayNotShadowModeledOnes(t *testing.T) {
	_, eng := passEngine(t)
	req := promptkit.RunRequest{Text: "hi"}
	req.Extra = promptkit.Params{"temperature": json.RawMessage(`0.3`)}
	if _, err := eng.Run(context.Background(), req); !errors.Is(err, promptkit.ErrInvalidRequest) || !strings.Contains(err.Error(), "temperature") {
		t.Errorf("extra temperature: %v", err)
	}
	_, err := promptkit.New(promptkit.Config{
		Backends: []promptkit.Backend{{ID: "b", BaseURL: "http://127.0.0.1:1/v1"}},
		Profiles: []promptkit.Profile{{ID: "p", Backend: "b", Model: "m",
			Sampling: promptkit.Sampling{Extra: promptkit.Params{"stream": json.RawMessage(`true`)}}}},
	})
	if !errors.Is(err, promptkit.ErrInvalidConfig) || !strings.Contains(err.Error(), "profiles[0].extra.stream") {
		t.Errorf("a profile's extra stream: %v", err)
	}
}

// A request for several choices (n) has each checked: one that fails is
// repaired, and the repair asks for them all again.
func TestEveryChoiceIsChecked(t *testing.T) {
	srv, eng := passEngine(t)
	srv.Enqueue(providertest.Response{Text: `{"a":1}`, MoreChoices: []providertest.Choice{{Text: "not json"}}})
	srv.Enqueue(providertest.Response{Text: `{"a":2}`, MoreChoices: []providertest.Choice{{Text: `{"a":3}`}}})
	req := promptkit.RunRequest{Text: "hi", JSONObject: true}
	req.Extra = promptkit.Params{"n": json.RawMessage(`2`)}
	res, err := eng.Run(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	if res.Validation.Status != promptkit.ValidationValid || res.RepairCalls != 1 || string(res.Output) != `{"a":2}` {
		t.Errorf("result %+v", res)
	}
	if len(res.Choices) != 2 || res.Choices[1].Text != `{"a":3}` || res.Choices[1].Index != 1 {
		t.Errorf("choices %+v", res.Choices)
	}
	if repair := body(t, srv, 1); string(repair["n"]) != `2` || !strings.Contains(string(repair["messages"]), "not json") {
		t.Errorf("the repair asked %s", srv.Requests()[1].Body)
	}
}

// A reasoning model's reasoning comes back beside the text, with the
// answer as the backend sent it and its reasoning tokens counted. (The
// profile turns Qwen3's thinking off; the run turns it back on.)
func TestReasoningReachesTheResult(t *testing.T) {
	_, eng := passEngine(t, providertest.WithReasoning())
	req := promptkit.RunRequest{Text: "Name a colour"}
	req.Extra = promptkit.Params{"chat_template_kwargs": json.RawMessage(`{"enable_thinking":true}`)}
	for _, stream := range []bool{false, true} {
		var pieces []promptkit.StreamDelta
		if stream {
			req.OnDelta = func(d promptkit.StreamDelta) { pieces = append(pieces, d) }
		}
		res, err := eng.Run(context.Background(), req)
		if err != nil {
			t.Fatal(err)
		}
		if res.Reasoning == "" || !strings.Contains(string(res.Raw), `"reasoning_content"`) || !strings.Contains(string(res.Raw), `"system_fingerprint"`) {
			t.Errorf("stream %v: reasoning %q, raw %s", stream, res.Reasoning, res.Raw)
		}
		if !res.Usage.Known.ReasoningTokens || res.Usage.ReasoningTokens == 0 || !res.Usage.Known.CachedTokens {
			t.Errorf("stream %v: usage %+v", stream, res.Usage)
		}
		var reasoning, text string
		for _, d := range pieces {
			reasoning += d.Reasoning
			text += d.Text
		}
		if stream && (reasoning != res.Reasoning || text != res.Text) {
			t.Errorf("pieces join to %q and %q, the answer is %q and %q", reasoning, text, res.Reasoning, res.Text)
		}
	}
}
