package openaiapi_test

import (
	"errors"
	"testing"

	"github.com/promptkit/promptkit/internal/openaiapi"
	"github.com/promptkit/promptkit/jobs"
	"github.com/promptkit/promptkit/jobs/batch"
)

// TestBatchCodecDecodeLine: a line decodes to promptkit's request (a
// chat or an embedding), and its own fields are refused before its body,
// so a line for another endpoint is a url_mismatch, not that endpoint's
// body errors.
func TestBatchCodecDecodeLine(t *testing.T) {
	t.Parallel()
	var c openaiapi.BatchCodec
	l, err := c.DecodeLine([]byte(`{"custom_id":"a","method":"POST","url":"/v1/chat/completions","body":{"model":"m","messages":[{"role":"user","content":"hi"}]}}`), openaiapi.EndpointChatCompletions)
	if err != nil || l.CustomID != "a" || l.Model != "m" || l.Chat == nil || l.Embedding != nil || len(l.Chat.Messages) != 1 {
		t.Fatalf("chat line: %+v %v", l, err)
	}
	l, err = c.DecodeLine([]byte(`{"custom_id":"e","method":"POST","url":"/v1/embeddings","body":{"model":"em","input":"x"}}`), openaiapi.EndpointEmbeddings)
	if err != nil || l.Model != "em" || l.Embedding == nil || l.Chat != nil {
		t.Fatalf("embeddings line: %+v %v", l, err)
	}
	for _, tc := range []struct {
		name, line, param, code string
	}{
		{"other endpoint, bad body", `{"custom_id":"a","method":"POST","url":"/v1/embeddings","body":{"model":"m","messages":[]}}`, "url", batch.CodeURLMismatch},
		{"no custom_id", `{"method":"POST","url":"/v1/chat/completions","body":{"model":"m","messages":[{"role":"user","content":"hi"}]}}`, "custom_id", batch.CodeInvalid},
		{"GET", `{"custom_id":"a","method":"GET","url":"/v1/chat/completions","body":{"model":"m","messages":[{"role":"user","content":"hi"}]}}`, "method", batch.CodeInvalid},
		{"stream", `{"custom_id":"a","method":"POST","url":"/v1/chat/completions","body":{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}}`, "body.stream", openaiapi.CodeUnsupportedValue},
	} {
		_, err := c.DecodeLine([]byte(tc.line), openaiapi.EndpointChatCompletions)
		re, ok := errors.AsType[*jobs.RequestError](err)
		if !ok || re.Param != tc.param || re.Code != tc.code {
			t.Errorf("%s: %v, want param %s code %s", tc.name, err, tc.param, tc.code)
		}
	}
	id, body := c.Envelope([]byte(`{"custom_id":"a","body":{"x":1}}`))
	if string(id) != `"a"` || string(body) != `{"x":1}` {
		t.Errorf("Envelope: %s %s", id, body)
	}
	if id, body := c.Envelope([]byte(`[1]`)); id != nil || body != nil {
		t.Errorf("Envelope of no object: %s %s", id, body)
	}
}
