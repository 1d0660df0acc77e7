package openaiapi_test

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/promptkit/promptkit/internal/openaiapi"
	"github.com/promptkit/promptkit/jobs"
	"github.com/promptkit/promptkit/pktype"
)

// What a client sends beside what promptkit models reaches the stored
// request as sent (without insignificant space): a reasoning model's and
// a self-hosted server's parameters, instructor's json_object with a
// schema, a message's name, image parts and earlier reasoning.
func TestDecodeChatKeepsWhatItDoesNotModel(t *testing.T) {
	t.Parallel()
	body := `{"model":"m","messages":[
		{"role":"user","name":"ann","content":[{"type":"text","text":"What is this?"},{"type":"image_url","image_url":{"url":"data:image/png;base64,AAAA","detail":"low"}}]},
		{"role":"assistant","content":"A cat.","reasoning_content":"whiskers"},
		{"role":"user","content":"Sure?"}],
		"reasoning_effort":"high","presence_penalty":0.5,"frequency_penalty":-0.5,"logit_bias":{"50256":-100},
		"logprobs":true,"top_logprobs":3,"seed":7,"top_k":20,"min_p":0.05,"repetition_penalty":1.1,
		"chat_template_kwargs":{ "enable_thinking" : false },"n":2,"service_tier":"flex","prompt_cache_key":"k",
		"response_format":{"type":"json_object","schema":{"type":"object","properties":{"a":{"type":"integer"}}}}}`
	got, err := openaiapi.DecodeChat([]byte(body))
	if err != nil {
		t.Fatal(err)
	}
	c := got.Chat
	for k, want := range map[string]string{
		"reasoning_effort": `"high"`, "presence_penalty": `0.5`, "frequency_penalty": `-0.5`, "logit_bias": `{"50256":-100}`,
		"logprobs": `true`, "top_logprobs": `3`, "top_k": `20`, "min_p": `0.05`, "repetition_penalty": `1.1`,
		"chat_template_kwargs": `{"enable_thinking":false}`, "n": `2`, "service_tier": `"flex"`, "prompt_cache_key": `"k"`,
	} {
		if string(c.Extra[k]) != want {
			t.Errorf("extra %s = %s, want %s", k, c.Extra[k], want)
		}
	}
	if c.Seed == nil || *c.Seed != 7 || c.Extra["seed"] != nil {
		t.Errorf("seed: %v, extra %s: promptkit models it", c.Seed, c.Extra["seed"])
	}
	if c.ResponseFormat != jobs.FormatJSONObject || string(c.Format) != `{"type":"json_object","schema":{"type":"object","properties":{"a":{"type":"integer"}}}}` {
		t.Errorf("response format %q, sent as %s", c.ResponseFormat, c.Format)
	}
	m := c.Messages
	if m[0].Content != "What is this?" || !strings.Contains(string(m[0].Parts), `"image_url"`) || string(m[0].Extra["name"]) != `"ann"` {
		t.Errorf("first message %+v", m[0])
	}
	if string(m[1].Extra["reasoning_content"]) != `"whiskers"` {
		t.Errorf("second message %+v", m[1])
	}
}

// The Responses API's own names for what chat calls otherwise reach the
// chat request by chat's names: reasoning.effort, text.verbosity, the
// logprobs asked with include or top_logprobs; a parameter neither API
// models goes as sent; a reasoning item of the input is taken and not
// sent.
func TestDecodeResponsesMapsReasoning(t *testing.T) {
	t.Parallel()
	p, err := openaiapi.DecodeResponses([]byte(`{"model":"m","input":[
		{"type":"reasoning","id":"rs_1","summary":[],"encrypted_content":"x"},
		{"role":"user","content":"hi"}],
		"reasoning":{"effort":"low","summary":"auto"},"text":{"verbosity":"low","format":{"type":"json_schema","name":"n","description":"d","strict":true,"schema":{"type":"object"}}},
		"include":["message.output_text.logprobs","reasoning.encrypted_content"],"top_logprobs":2,"top_k":5,"user":"u"}`))
	if err != nil {
		t.Fatal(err)
	}
	c, err := p.Conversation(nil, p.Input)
	if err != nil {
		t.Fatal(err)
	}
	want := pktype.Params{"reasoning_effort": json.RawMessage(`"low"`), "verbosity": json.RawMessage(`"low"`), "logprobs": json.RawMessage(`true`),
		"top_logprobs": json.RawMessage(`2`), "top_k": json.RawMessage(`5`), "user": json.RawMessage(`"u"`)}
	if !reflect.DeepEqual(c.Extra, want) {
		t.Errorf("extra %v, want %v", c.Extra, want)
	}
	if string(c.Format) != `{"type":"json_schema","json_schema":{"description":"d","name":"n","schema":{"type":"object"},"strict":true}}` {
		t.Errorf("format sent %s", c.Format)
	}
	if len(c.Messages) != 1 || c.Messages[0].Content != "hi" {
		t.Errorf("messages %+v: the reasoning item is not sent", c.Messages)
	}
}

// storedReasoning is a reasoning model's stored answer to n: 2 with
// logprobs, as jobs.AnswerBody keeps it.
func storedReasoning(t *testing.T) jobs.Response {
	t.Helper()
	body, err := jobs.AnswerBody(json.RawMessage(`{"id":"b","object":"chat.completion","created":1,"model":"qwen3","system_fingerprint":"fp",
		"choices":[{"index":0,"message":{"role":"assistant","content":"Paris","reasoning_content":"capital of France"},
			"logprobs":{"content":[{"token":"Paris","logprob":-0.1,"bytes":[80],"top_logprobs":[]}]},"finish_reason":"stop","stop_reason":null},
		{"index":1,"message":{"role":"assistant","content":"Paris!","reasoning_content":"easy"},"logprobs":null,"finish_reason":"length"}],
		"usage":{"prompt_tokens":9,"completion_tokens":20,"total_tokens":29,"prompt_tokens_details":{"cached_tokens":4,"audio_tokens":0},
			"completion_tokens_details":{"reasoning_tokens":12}}}`))
	if err != nil {
		t.Fatal(err)
	}
	u := pktype.Usage{TokenUsage: pktype.TokenUsage{PromptTokens: 18, CompletionTokens: 40, TotalTokens: 58, CachedTokens: 8, ReasoningTokens: 24},
		Known: pktype.TokenUsagePresence{PromptTokens: true, CompletionTokens: true, TotalTokens: true, CachedTokens: true, ReasoningTokens: true}}
	return jobs.Response{Answer: jobs.Answer{Output: "Paris", Model: "qwen3", FinishReason: "stop", Usage: u, Body: body}, CreatedAt: time.Unix(5, 0)}
}

// A stored answer comes back whole: every choice, reasoning, logprobs,
// the backend's other members, and usage with its details, the counts
// promptkit summed over the answer's generations (a repair here).
func TestCompletionCarriesTheWholeAnswer(t *testing.T) {
	t.Parallel()
	b, err := json.Marshal(openaiapi.Completion(jobs.Job{ID: "j"}, storedReasoning(t)))
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"id": "chatcmpl-j", "object": "chat.completion", "created": 5.0, "model": "qwen3", "system_fingerprint": "fp",
		"choices": []any{
			map[string]any{"index": 0.0, "finish_reason": "stop", "stop_reason": nil,
				"message":  map[string]any{"role": "assistant", "content": "Paris", "reasoning_content": "capital of France", "refusal": nil},
				"logprobs": map[string]any{"content": []any{map[string]any{"token": "Paris", "logprob": -0.1, "bytes": []any{80.0}, "top_logprobs": []any{}}}}},
			map[string]any{"index": 1.0, "finish_reason": "length", "logprobs": nil,
				"message": map[string]any{"role": "assistant", "content": "Paris!", "reasoning_content": "easy", "refusal": nil}},
		},
		"usage": map[string]any{"prompt_tokens": 18.0, "completion_tokens": 40.0, "total_tokens": 58.0,
			"prompt_tokens_details":     map[string]any{"cached_tokens": 8.0, "audio_tokens": 0.0},
			"completion_tokens_details": map[string]any{"reasoning_tokens": 24.0}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("completion %s", b)
	}
	// Streamed from the stored answer: each choice's role, reasoning,
	// content (with its logprobs) and finish reason, each chunk with the
	// backend's members.
	var reasoning, text [2]string
	finished := 0
	for _, c := range openaiapi.Chunks(openaiapi.Completion(jobs.Job{ID: "j"}, storedReasoning(t)), false) {
		b, _ := json.Marshal(c)
		if !strings.Contains(string(b), `"system_fingerprint":"fp"`) {
			t.Errorf("chunk %s has not the backend's members", b)
		}
		for _, ch := range c.Choices {
			var r string
			_ = json.Unmarshal(ch.Delta.Extra["reasoning_content"], &r)
			reasoning[ch.Index] += r
			if ch.Delta.Content != nil {
				text[ch.Index] += *ch.Delta.Content
			}
			if ch.FinishReason != nil {
				finished++
			}
		}
	}
	if reasoning != [2]string{"capital of France", "easy"} || text != [2]string{"Paris", "Paris!"} || finished != 2 {
		t.Errorf("chunks say %q, %q, %d finished", reasoning, text, finished)
	}
}

// The Responses API answers with the reasoning as an item of its own
// before the message, the message's logprobs, and the reasoning tokens.
func TestResponseObjectReasoning(t *testing.T) {
	t.Parallel()
	p := jobs.Prompt{ID: "p1", Chat: &jobs.ChatRequest{Messages: []pktype.Message{{Role: "user", Content: "hi"}},
		Responses: &jobs.ResponsesRequest{Model: "m"}}}
	r := storedReasoning(t)
	o := openaiapi.ResponseObject(p, jobs.Job{State: jobs.Succeeded}, &r)
	if len(o.Output) != 2 || o.Output[0].Type != openaiapi.ItemReasoning || o.Output[0].ID != "rs_p1" || o.Output[1].Type != openaiapi.ItemMessage {
		t.Fatalf("output %+v", o.Output)
	}
	if c := *o.Output[0].Content; len(c) != 1 || c[0].Type != "reasoning_text" || c[0].Text != "capital of France" || len(*o.Output[0].Summary) != 0 {
		t.Errorf("reasoning item %+v", o.Output[0])
	}
	if part := (*o.Output[1].Content)[0]; part.Text != "Paris" || !strings.Contains(string(part.Logprobs), `"logprob":-0.1`) {
		t.Errorf("message part %+v", part)
	}
	if o.Usage == nil || o.Usage.OutputTokensDetails == nil || o.Usage.OutputTokensDetails.ReasoningTokens != 24 {
		t.Errorf("usage %+v", o.Usage)
	}
	// Its events: the reasoning's, then the message's, each item at its
	// own output index.
	var types []string
	for _, ev := range openaiapi.ResponseEvents(p, jobs.Job{State: jobs.Succeeded}, &r) {
		types = append(types, ev.Type)
		if ev.Type == "response.reasoning_text.delta" && (*ev.OutputIndex != 0 || ev.ItemID != "rs_p1") ||
			ev.Type == "response.output_text.delta" && *ev.OutputIndex != 1 {
			t.Errorf("event %+v", ev)
		}
	}
	want := []string{"response.created", "response.in_progress",
		"response.output_item.added", "response.content_part.added", "response.reasoning_text.delta", "response.reasoning_text.done",
		"response.content_part.done", "response.output_item.done",
		"response.output_item.added", "response.content_part.added", "response.output_text.delta", "response.output_text.done",
		"response.content_part.done", "response.output_item.done", "response.completed"}
	if !reflect.DeepEqual(types, want) {
		t.Errorf("events %q", types)
	}
}

// A choice whose content is null (a refusal) keeps it null, once.
func TestCompletionNullContent(t *testing.T) {
	t.Parallel()
	body, err := jobs.AnswerBody(json.RawMessage(`{"choices":[{"index":0,"message":{"role":"assistant","content":null,"refusal":"no"}},` +
		`{"index":1,"message":{"role":"assistant","content":null,"refusal":"no either"}}]}`))
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(openaiapi.Completion(jobs.Job{ID: "j"}, jobs.Response{Answer: jobs.Answer{Body: body}}))
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(b), `"content":null`); n != 2 || !strings.Contains(string(b), `"refusal":"no either"`) {
		t.Errorf("completion %s: want each choice's content null, once", b)
	}
}

// A parameter promptkit sends on may be named anything; an error about
// it never repeats a name that is not a parameter's (a NUL in it here).
func TestExtraParameterNamesAreNotQuoted(t *testing.T) {
	t.Parallel()
	const secret = "SECRET-31"
	for _, body := range []string{
		`{"model":"m","messages":[{"role":"user","content":"x"}],"` + secret + ` \u0000":1}`,
		`{"model":"m","input":"x","` + secret + ` \u0000":1}`,
	} {
		var err error
		if strings.Contains(body, `"input"`) {
			var p openaiapi.ResponsesParams
			if p, err = openaiapi.DecodeResponses([]byte(body)); err == nil {
				_, err = p.Conversation(nil, p.Input)
			}
		} else {
			_, err = openaiapi.DecodeChat([]byte(body))
		}
		re, ok := err.(*jobs.RequestError)
		if !ok || strings.Contains(re.Message, secret) || strings.Contains(re.Param, secret) {
			t.Errorf("%s: %#v", body, err)
		}
	}
}
