package openai

import (
	"errors"
	"strings"
	"testing"

	"github.com/promptkit/promptkit/internal/llm"
	"github.com/promptkit/promptkit/pktype"
)

const okChoices = `"choices":[{"index":0,"message":{"role":"assistant","content":"hi"},"finish_reason":"stop"}]`

func TestDecode(t *testing.T) {
	all := pktype.TokenUsagePresence{PromptTokens: true, CompletionTokens: true, TotalTokens: true, CachedTokens: true, ReasoningTokens: true}
	tests := []struct {
		name      string
		body      string
		wantErr   bool
		usage     pktype.TokenUsage
		presence  pktype.TokenUsagePresence
		wantText  string
		wantModel string
	}{
		{name: "absent usage", body: `{"model":"m",` + okChoices + `}`, wantText: "hi", wantModel: "m"},
		{name: "null usage", body: `{` + okChoices + `,"usage":null}`, wantText: "hi"},
		{
			name:     "partial nested usage",
			body:     `{` + okChoices + `,"usage":{"prompt_tokens":7,"completion_tokens_details":{"reasoning_tokens":3}}}`,
			usage:    pktype.TokenUsage{PromptTokens: 7, ReasoningTokens: 3},
			presence: pktype.TokenUsagePresence{PromptTokens: true, ReasoningTokens: true},
			wantText: "hi",
		},
		{
			name:     "explicit zeros are known",
			body:     `{` + okChoices + `,"usage":{"prompt_tokens":0,"completion_tokens":0,"total_tokens":0,"prompt_tokens_details":{"cached_tokens":0},"completion_tokens_details":{"reasoning_tokens":0}}}`,
			presence: all,
			wantText: "hi",
		},
		{
			name:     "all five fields",
			body:     `{` + okChoices + `,"usage":{"prompt_tokens":10,"completion_tokens":20,"total_tokens":30,"prompt_tokens_details":{"cached_tokens":4},"completion_tokens_details":{"reasoning_tokens":5}}}`,
			usage:    pktype.TokenUsage{PromptTokens: 10, CompletionTokens: 20, TotalTokens: 30, CachedTokens: 4, ReasoningTokens: 5},
			presence: all,
			wantText: "hi",
		},
		{
			name:     "null individual fields",
			body:     `{` + okChoices + `,"usage":{"prompt_tokens":null,"completion_tokens":2,"total_tokens":null,"prompt_tokens_details":{"cached_tokens":null},"completion_tokens_details":null}}`,
			usage:    pktype.TokenUsage{CompletionTokens: 2},
			presence: pktype.TokenUsagePresence{CompletionTokens: true},
			wantText: "hi",
		},
		{name: "unknown fields allowed", body: `{"id":"x","object":"chat.completion","system_fingerprint":null,` + okChoices + `,"usage":{"prompt_tokens":1,"extra":{"a":[1.5]}}}`,
			usage: pktype.TokenUsage{PromptTokens: 1}, presence: pktype.TokenUsagePresence{PromptTokens: true}, wantText: "hi"},
		{name: "null finish_reason", body: `{"choices":[{"message":{"content":""},"finish_reason":null}]}`, wantText: ""},
		{name: "surrounding whitespace", body: " \n{" + okChoices + "}\n\t ", wantText: "hi"},

		{name: "negative count", body: `{` + okChoices + `,"usage":{"prompt_tokens":-1}}`, wantErr: true},
		{name: "fractional count", body: `{` + okChoices + `,"usage":{"completion_tokens":1.5}}`, wantErr: true},
		{name: "integral float count", body: `{` + okChoices + `,"usage":{"total_tokens":1.0}}`, wantErr: true},
		{name: "exponent count", body: `{` + okChoices + `,"usage":{"total_tokens":1e3}}`, wantErr: true},
		{name: "string count", body: `{` + okChoices + `,"usage":{"prompt_tokens":"5"}}`, wantErr: true},
		{name: "bool count", body: `{` + okChoices + `,"usage":{"prompt_tokens":true}}`, wantErr: true},
		{name: "overflowing count", body: `{` + okChoices + `,"usage":{"prompt_tokens":99999999999999999999}}`, wantErr: true},
		{name: "nested negative count", body: `{` + okChoices + `,"usage":{"prompt_tokens_details":{"cached_tokens":-3}}}`, wantErr: true},
		{name: "usage wrong type", body: `{` + okChoices + `,"usage":[]}`, wantErr: true},
		{name: "details wrong type", body: `{` + okChoices + `,"usage":{"completion_tokens_details":5}}`, wantErr: true},
		{name: "missing choices", body: `{"usage":{"prompt_tokens":3}}`, wantErr: true,
			usage: pktype.TokenUsage{PromptTokens: 3}, presence: pktype.TokenUsagePresence{PromptTokens: true}},
		{name: "null choices", body: `{"choices":null}`, wantErr: true},
		{name: "empty choices", body: `{"choices":[],"usage":{"completion_tokens":0}}`, wantErr: true,
			presence: pktype.TokenUsagePresence{CompletionTokens: true}},
		{name: "choices wrong type", body: `{"choices":{}}`, wantErr: true},
		{name: "missing message", body: `{"choices":[{}]}`, wantErr: true},
		{name: "null content", body: `{"choices":[{"message":{"content":null}}],"usage":{"total_tokens":9}}`, wantErr: true,
			usage: pktype.TokenUsage{TotalTokens: 9}, presence: pktype.TokenUsagePresence{TotalTokens: true}},
		{name: "missing content", body: `{"choices":[{"message":{"role":"assistant"}}]}`, wantErr: true},
		{name: "content wrong type", body: `{"choices":[{"message":{"content":[]}}]}`, wantErr: true},
		{name: "finish_reason wrong type", body: `{"choices":[{"message":{"content":"x"},"finish_reason":1}]}`, wantErr: true},
		{name: "not an object", body: `[` + "{" + okChoices + "}" + `]`, wantErr: true},
		{name: "string document", body: `"hello"`, wantErr: true},
		{name: "empty body", body: ``, wantErr: true},
		{name: "trailing garbage", body: `{` + okChoices + `}x`, wantErr: true},
		{name: "second object", body: `{` + okChoices + `}{}`, wantErr: true},
		{name: "truncated JSON", body: `{` + okChoices[:30], wantErr: true},
		{name: "wrong-typed model", body: `{"model":42,` + okChoices + `}`, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, usage, presence, err := decode([]byte(tt.body))
			if usage != tt.usage || presence != tt.presence {
				t.Errorf("usage/presence = %+v/%+v, want %+v/%+v", usage, presence, tt.usage, tt.presence)
			}
			if tt.wantErr {
				if !errors.Is(err, pktype.ErrMalformedResponse) || !errors.Is(err, pktype.ErrLLMGenerate) {
					t.Fatalf("err = %v, want ErrMalformed", err)
				}
				if resp != nil {
					t.Errorf("resp = %+v, want nil", resp)
				}
				// Exported Decode agrees.
				if r2, err2 := Decode([]byte(tt.body)); r2 != nil || !errors.Is(err2, pktype.ErrMalformedResponse) {
					t.Errorf("Decode = %v, %v", r2, err2)
				}
				return
			}
			if err != nil {
				t.Fatalf("err = %v", err)
			}
			if resp.Text != tt.wantText || resp.Model != tt.wantModel {
				t.Errorf("resp = %+v", resp)
			}
			if resp.Usage != tt.usage || resp.Presence() != tt.presence {
				t.Errorf("resp usage = %+v/%+v", resp.Usage, resp.Presence())
			}
		})
	}
}

func TestDecodeFinishReasonAndModel(t *testing.T) {
	r, err := Decode([]byte(`{"model":"gpt-x",` + okChoices + `}`))
	if err != nil {
		t.Fatal(err)
	}
	if r.FinishReason != "stop" || r.Model != "gpt-x" || r.Text != "hi" {
		t.Fatalf("got %+v", r)
	}
}

func TestDecodeErrorNeverQuotesBody(t *testing.T) {
	const marker = "SECRET-MARKER-123"
	for _, body := range []string{
		marker,
		`{"model":"` + marker + `",` + okChoices + `}` + marker,
		`{"choices":[{"message":{"content":"` + marker + `"}}],"usage":{"prompt_tokens":"` + marker + `"}}`,
		`{"` + marker + `":`,
	} {
		_, err := Decode([]byte(body))
		if err == nil {
			t.Fatalf("no error for %q", body)
		}
		var f *llm.AttemptError
		if !errors.As(err, &f) {
			t.Fatalf("err %T is not *llm.AttemptError", err)
		}
		if strings.Contains(err.Error(), marker) || strings.Contains(f.Cause.Error(), marker) {
			t.Errorf("error text quotes body: %v / %v", err, f.Cause)
		}
	}
}
