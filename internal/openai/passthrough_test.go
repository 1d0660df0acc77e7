package openai

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/promptkit/promptkit/pktype"
)

// What promptkit does not model goes on the wire as the caller gave it:
// extra parameters after the modeled ones, a message's content parts and
// extra fields, a response_format as written.
func TestEncodeCarriesWhatIsNotModeled(t *testing.T) {
	req := pktype.GenerateRequest{Model: "m", Messages: []pktype.Message{
		{Role: "system", Content: "be brief"},
		{Role: "user", Content: "what is this?", Parts: json.RawMessage(`[{"type":"text","text":"what is this?"},{"type":"image_url","image_url":{"url":"data:image/png;base64,AAAA"}}]`),
			Extra: pktype.Params{"name": json.RawMessage(`"ann"`)}},
		{Role: "assistant", Content: "a cat", Extra: pktype.Params{"reasoning_content": json.RawMessage(`"it has whiskers"`)}},
		{Role: "user", Content: "sure?"},
	}}
	req.Temperature = new(0.5)
	req.Extra = pktype.Params{
		"reasoning_effort":     json.RawMessage(`"low"`),
		"top_k":                json.RawMessage(`20`),
		"chat_template_kwargs": json.RawMessage(`{"enable_thinking":false}`),
		"logit_bias":           json.RawMessage(`{"50256":-100}`),
	}
	req.ResponseFormat = json.RawMessage(`{"type":"json_object","schema":{"type":"object"}}`)
	got, err := encodeRequest(req, false)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"model":"m","messages":[{"role":"system","content":"be brief"},` +
		`{"role":"user","content":[{"type":"text","text":"what is this?"},{"type":"image_url","image_url":{"url":"data:image/png;base64,AAAA"}}],"name":"ann"},` +
		`{"role":"assistant","content":"a cat","reasoning_content":"it has whiskers"},{"role":"user","content":"sure?"}],` +
		`"temperature":0.5,"response_format":{"type":"json_object","schema":{"type":"object"}},` +
		`"chat_template_kwargs":{"enable_thinking":false},"logit_bias":{"50256":-100},"reasoning_effort":"low","top_k":20}`
	if string(got) != want {
		t.Errorf("body = %s\nwant   %s", got, want)
	}
	var anyv map[string]any
	if err := json.Unmarshal(got, &anyv); err != nil {
		t.Fatalf("not JSON: %v", err)
	}
}

// An extra parameter may not take the name of one promptkit sets itself:
// two values for one key would leave the backend to choose.
func TestExtraMayNotShadowModeledParameters(t *testing.T) {
	for _, k := range []string{"model", "messages", "stream", "stream_options", "temperature", "max_tokens", "tools", "response_format"} {
		req := basicRequest()
		req.Extra = pktype.Params{k: json.RawMessage(`1`)}
		_, err := encodeRequest(req, false)
		if !errors.Is(err, pktype.ErrInvalidRequest) || !strings.Contains(err.Error(), k) {
			t.Errorf("extra %s: err = %v, want an invalid request naming it", k, err)
		}
	}
	req := basicRequest()
	req.Messages[0].Extra = pktype.Params{"content": json.RawMessage(`"x"`)}
	if _, err := encodeRequest(req, false); !errors.Is(err, pktype.ErrInvalidRequest) {
		t.Errorf("a message's extra content: err = %v", err)
	}
	// max_completion_tokens is OpenAI's other name for max_tokens, sent as named.
	req = basicRequest()
	req.Extra = pktype.Params{"max_completion_tokens": json.RawMessage(`64`)}
	got, err := encodeRequest(req, false)
	if err != nil || !strings.HasSuffix(string(got), `,"max_completion_tokens":64}`) {
		t.Errorf("max_completion_tokens: %s, %v", got, err)
	}
}

// reasoningAnswer is a vLLM reasoning model's answer to n: 2 with
// logprobs: every choice, its reasoning and what promptkit does not model.
const reasoningAnswer = `{"id":"chatcmpl-x","object":"chat.completion","created":1,"model":"qwen3","system_fingerprint":"fp_1",` +
	`"choices":[{"index":0,"message":{"role":"assistant","content":"Paris","reasoning_content":"France's capital"},` +
	`"logprobs":{"content":[{"token":"Paris","logprob":-0.1,"bytes":[80,97,114,105,115],"top_logprobs":[]}]},"finish_reason":"stop","stop_reason":null},` +
	`{"index":1,"message":{"role":"assistant","content":"Paris, France","reasoning_content":"capital"},` +
	`"logprobs":{"content":[{"token":"Paris","logprob":-0.2,"bytes":[80,97,114,105,115],"top_logprobs":[]}]},"finish_reason":"length"}],` +
	`"usage":{"prompt_tokens":9,"completion_tokens":20,"total_tokens":29,"prompt_tokens_details":{"cached_tokens":4},` +
	`"completion_tokens_details":{"reasoning_tokens":12,"accepted_prediction_tokens":0}}}`

func TestDecodeKeepsEveryChoiceAndField(t *testing.T) {
	r, err := Decode([]byte(reasoningAnswer))
	if err != nil {
		t.Fatal(err)
	}
	if r.Text != "Paris" || r.Reasoning != "France's capital" || r.FinishReason != "stop" || r.Model != "qwen3" {
		t.Errorf("first choice = %+v", r)
	}
	want := []pktype.Choice{
		{Index: 0, Text: "Paris", Reasoning: "France's capital", FinishReason: "stop"},
		{Index: 1, Text: "Paris, France", Reasoning: "capital", FinishReason: "length"},
	}
	if !reflect.DeepEqual(r.Choices, want) {
		t.Errorf("choices = %+v", r.Choices)
	}
	if string(r.Raw) != reasoningAnswer {
		t.Errorf("raw = %s", r.Raw)
	}
	u := r.Usage
	if u.CachedTokens != 4 || u.ReasoningTokens != 12 || !r.UsagePresence.CachedTokens || !r.UsagePresence.ReasoningTokens {
		t.Errorf("usage = %+v %+v", u, *r.UsagePresence)
	}
}

// An answer may hold no text: a refusal, or only reasoning cut off at the
// token limit. One that holds nothing at all is malformed.
func TestDecodeAnswersWithoutText(t *testing.T) {
	for body, wantErr := range map[string]bool{
		`{"choices":[{"message":{"role":"assistant","content":null,"refusal":"I can't help with that."},"finish_reason":"stop"}]}`:  false,
		`{"choices":[{"message":{"role":"assistant","content":null,"reasoning_content":"Let me think"},"finish_reason":"length"}]}`: false,
		`{"choices":[{"message":{"role":"assistant","reasoning":"Let me think"},"finish_reason":"length"}]}`:                        false,
		`{"choices":[{"message":{"role":"assistant","content":null},"finish_reason":"stop"}]}`:                                      true,
		`{"choices":[{"message":{"role":"assistant","content":null,"refusal":null},"finish_reason":"stop"}]}`:                       true,
	} {
		r, err := Decode([]byte(body))
		if gotErr := err != nil; gotErr != wantErr {
			t.Errorf("%s: err = %v", body, err)
			continue
		}
		if err != nil && !errors.Is(err, pktype.ErrMalformedResponse) {
			t.Errorf("%s: err = %v, want malformed", body, err)
		}
		if err == nil && r.Text != "" {
			t.Errorf("%s: text = %q", body, r.Text)
		}
	}
}

// The same reasoning answer, streamed as vLLM streams it (reasoning
// deltas before the text, each choice's chunks interleaved, logprobs with
// each piece), makes the same choices, and its pieces say which choice
// and what they carry.
func TestStreamKeepsEveryChoiceAndField(t *testing.T) {
	chunk := func(choice string) string {
		return `{"id":"chatcmpl-x","object":"chat.completion.chunk","created":1,"model":"qwen3","system_fingerprint":"fp_1","choices":[` + choice + `]}`
	}
	lp := func(logprob string) string {
		return `"logprobs":{"content":[{"token":"Paris","logprob":` + logprob + `,"bytes":[80,97,114,105,115],"top_logprobs":[]}]}`
	}
	stream := sse(
		chunk(`{"index":0,"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}`),
		chunk(`{"index":1,"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}`),
		chunk(`{"index":0,"delta":{"reasoning_content":"France's "},"logprobs":null,"finish_reason":null}`),
		chunk(`{"index":1,"delta":{"reasoning_content":"capital"},"logprobs":null,"finish_reason":null}`),
		chunk(`{"index":0,"delta":{"reasoning_content":"capital"},"logprobs":null,"finish_reason":null}`),
		chunk(`{"index":0,"delta":{"content":"Paris"},`+lp("-0.1")+`,"finish_reason":null}`),
		chunk(`{"index":1,"delta":{"content":"Paris"},`+lp("-0.2")+`,"finish_reason":null}`),
		chunk(`{"index":1,"delta":{"content":", France"},"logprobs":{"content":[]},"finish_reason":null}`),
		chunk(`{"index":0,"delta":{},"logprobs":null,"finish_reason":"stop","stop_reason":null}`),
		chunk(`{"index":1,"delta":{},"logprobs":null,"finish_reason":"length"}`),
		`{"id":"chatcmpl-x","object":"chat.completion.chunk","created":1,"model":"qwen3","choices":[],`+
			`"usage":{"prompt_tokens":9,"completion_tokens":20,"total_tokens":29,"prompt_tokens_details":{"cached_tokens":4},`+
			`"completion_tokens_details":{"reasoning_tokens":12,"accepted_prediction_tokens":0}}}`,
	)
	var pieces []pktype.StreamDelta
	got, _, _, err := decodeStream(strings.NewReader(stream), 1<<20, func(d pktype.StreamDelta) { pieces = append(pieces, d) })
	if err != nil {
		t.Fatal(err)
	}
	want, err := Decode([]byte(reasoningAnswer))
	if err != nil {
		t.Fatal(err)
	}
	sameJSON(t, "streamed choices", choicesOf(t, got.Raw), choicesOf(t, want.Raw))
	var top, wantTop map[string]json.RawMessage
	_ = json.Unmarshal(got.Raw, &top)
	_ = json.Unmarshal(want.Raw, &wantTop)
	for _, k := range []string{"id", "object", "created", "model", "system_fingerprint", "usage"} {
		sameJSON(t, k, top[k], wantTop[k])
	}
	got.Raw, want.Raw = nil, nil
	if !reflect.DeepEqual(got, want) {
		t.Errorf("streamed = %+v\nplain    = %+v", got, want)
	}
	wantPieces := []pktype.StreamDelta{
		{Index: 0, Choice: 0, Reasoning: "France's "},
		{Index: 1, Choice: 1, Reasoning: "capital"},
		{Index: 2, Choice: 0, Reasoning: "capital"},
		{Index: 3, Choice: 0, Text: "Paris"},
		{Index: 4, Choice: 1, Text: "Paris"},
		{Index: 5, Choice: 1, Text: ", France"},
	}
	if got := stripRaw(pieces); !reflect.DeepEqual(got, wantPieces) {
		t.Errorf("pieces = %+v\nwant     %+v", got, wantPieces)
	}
	if !strings.Contains(string(pieces[3].Raw), `"logprob":-0.1`) {
		t.Errorf("piece 3 raw = %s, want its chunk with the logprobs", pieces[3].Raw)
	}
}

// A chunk with several choices makes one piece per choice, each with a
// chunk of its own choice alone.
func TestStreamChunkWithSeveralChoices(t *testing.T) {
	stream := sse(`{"model":"m","choices":[{"index":0,"delta":{"content":"a"}},{"index":1,"delta":{"content":"b"}}]}`,
		`{"model":"m","choices":[{"index":0,"delta":{},"finish_reason":"stop"},{"index":1,"delta":{},"finish_reason":"stop"}]}`)
	var pieces []pktype.StreamDelta
	got, _, _, err := decodeStream(strings.NewReader(stream), 1<<20, func(d pktype.StreamDelta) { pieces = append(pieces, d) })
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Choices) != 2 || got.Choices[0].Text != "a" || got.Choices[1].Text != "b" {
		t.Fatalf("choices = %+v", got.Choices)
	}
	if len(pieces) != 2 || pieces[1].Choice != 1 || string(pieces[1].Raw) != `{"choices":[{"delta":{"content":"b"},"index":1}],"model":"m"}` {
		t.Errorf("pieces = %+v", pieces)
	}
}
