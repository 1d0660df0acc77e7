package openaiapi_test

import (
	"encoding/json"
	"errors"
	"reflect"
	"testing"

	"github.com/promptkit/promptkit/internal/openaiapi"
	"github.com/promptkit/promptkit/jobs"
	"github.com/promptkit/promptkit/pktype"
)

// FuzzDecodeChat: any body either decodes to a chat request every store
// accepts, or is refused with a *RequestError that has a message; the
// same body always gets the same answer.
func FuzzDecodeChat(f *testing.F) {
	f.Add([]byte(`{"model":"m","messages":[{"role":"user","content":"hi"}]}`))
	f.Add([]byte(`{"model":"m","messages":[{"role":"developer","content":[{"type":"text","text":"a"}]},{"role":"user","content":"b"}],"max_tokens":3,"stop":["x"],"seed":1}`))
	f.Add([]byte(`{"model":"m","messages":[{"role":"user","content":"hi"}],"response_format":{"type":"json_schema","json_schema":{"name":"n","schema":{"type":"object"}}}}`))
	f.Add([]byte(`{"model":"m","messages":[{"role":"user","content":"hi"}],"n":2,"tools":[]}`))
	f.Add([]byte(`{"model":"m","messages":[{"role":"user","content":"w?"},{"role":"assistant","content":null,"tool_calls":[{"id":"c","type":"function","function":{"name":"f","arguments":"{}"}}]},{"role":"tool","tool_call_id":"c","name":"f","content":"r"}],"tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object"}}}],"tool_choice":{"type":"function","function":{"name":"f"}},"parallel_tool_calls":false}`))
	f.Add([]byte(`{"model":"m","messages":[{"role":"user","name":"a","content":[{"type":"image_url","image_url":{"url":"x"}}]}],"n":2,"logprobs":true,"top_k":20,"chat_template_kwargs":{"enable_thinking":false},"response_format":{"type":"json_object","schema":{}}}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		got, err := openaiapi.DecodeChat(body)
		again, err2 := openaiapi.DecodeChat(body)
		if (err == nil) != (err2 == nil) || err == nil && !reflect.DeepEqual(got, again) {
			t.Fatalf("not deterministic: %v / %v", err, err2)
		}
		if err != nil {
			var re, re2 *jobs.RequestError
			if !errors.As(err, &re) || !errors.As(err2, &re2) || re.Message == "" || *re != *re2 {
				t.Fatalf("error %#v / %#v", err, err2)
			}
			return
		}
		if got.Model == "" {
			t.Fatal("decoded without a model")
		}
		if _, err := (jobs.EnqueueParams{OrgID: "o", Chat: &got.Chat}).Normalize(); err != nil {
			t.Fatalf("decoded a chat the store refuses: %v", err)
		}
		if got.IncludeUsage && !got.Stream {
			t.Fatal("include_usage without stream")
		}
		// Every parameter promptkit does not model is kept, as sent.
		var members map[string]json.RawMessage
		if err := json.Unmarshal(body, &members); err != nil {
			t.Fatalf("decoded a body that is not an object: %v", err)
		}
		for k, v := range members {
			var null any
			if pktype.Modeled(k) || k == "stream_options" || json.Unmarshal(v, &null) == nil && null == nil {
				continue
			}
			var want, have any
			_ = json.Unmarshal(v, &want)
			if err := json.Unmarshal(got.Chat.Extra[k], &have); err != nil || !reflect.DeepEqual(want, have) {
				t.Fatalf("parameter %q: kept %s, sent %s", k, got.Chat.Extra[k], v)
			}
		}
	})
}

// FuzzParseBatchLine: any line either parses to a request that is not a
// stream and that every store accepts, or is refused with a
// *RequestError.
func FuzzParseBatchLine(f *testing.F) {
	f.Add([]byte(`{"custom_id":"a","method":"POST","url":"/v1/chat/completions","body":{"model":"m","messages":[{"role":"user","content":"hi"}]}}`))
	f.Add([]byte(`{"custom_id":"a","method":"POST","url":"/v1/chat/completions","body":{"model":"m","messages":[{"role":"user","content":"hi"}],"stream":true}}`))
	f.Add([]byte(`{"custom_id":"a"}`))
	f.Add([]byte(`{"custom_id":"a","method":"POST","url":"/v1/embeddings","body":{"model":"m","input":["x","y"],"dimensions":2}}`))
	f.Fuzz(func(t *testing.T, line []byte) {
		l, err := openaiapi.ParseBatchLine(line)
		if err != nil {
			var re *jobs.RequestError
			if !errors.As(err, &re) || re.Message == "" {
				t.Fatalf("error %#v", err)
			}
			return
		}
		if l.Body.Stream || l.Model() == "" {
			t.Fatalf("parsed %+v", l)
		}
		if l.Embedding != nil {
			e := l.Embedding.Request()
			if _, err := (jobs.EnqueueParams{OrgID: "o", Embedding: &e, BatchID: "b", CustomID: "c"}).Normalize(); err != nil {
				t.Fatalf("parsed an embeddings request the store refuses: %v", err)
			}
			return
		}
		if _, err := (jobs.EnqueueParams{OrgID: "o", Chat: &l.Body.Chat, BatchID: "b", CustomID: "c"}).Normalize(); err != nil {
			t.Fatalf("parsed a chat the store refuses: %v", err)
		}
	})
}

// FuzzDecodeResponses: any body either decodes to a Responses request
// whose conversation (references unresolved: a refusal) every store
// accepts, or is refused with a *RequestError that has a message; the
// same body always gets the same answer.
func FuzzDecodeResponses(f *testing.F) {
	f.Add([]byte(`{"model":"m","input":"hi"}`))
	f.Add([]byte(`{"model":"m","input":[{"role":"developer","content":"d"},{"type":"function_call","call_id":"c","name":"f","arguments":"{}"},{"type":"function_call_output","call_id":"c","output":"x"}],"tools":[{"type":"function","name":"f"}]}`))
	f.Add([]byte(`{"model":"m","input":"x","text":{"format":{"type":"json_schema","name":"n","schema":{"type":"object"}}},"instructions":"i"}`))
	f.Add([]byte(`{"model":"m","input":[{"type":"item_reference","id":"msg_p"}],"reasoning":{"effort":"low"}}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		decode := func() (jobs.ChatRequest, error) {
			p, err := openaiapi.DecodeResponses(body)
			if err != nil {
				return jobs.ChatRequest{}, err
			}
			if p.Model == "" || len(p.Input) == 0 {
				t.Fatalf("decoded without a model or input: %+v", p)
			}
			return p.Conversation(nil, p.Input)
		}
		got, err := decode()
		again, err2 := decode()
		if (err == nil) != (err2 == nil) || err == nil && !reflect.DeepEqual(got, again) {
			t.Fatalf("not deterministic: %v / %v", err, err2)
		}
		if err != nil {
			var re, re2 *jobs.RequestError
			if !errors.As(err, &re) || !errors.As(err2, &re2) || re.Message == "" || *re != *re2 {
				t.Fatalf("error %#v / %#v", err, err2)
			}
			return
		}
		if got.Responses == nil {
			t.Fatal("a conversation without its Responses fields")
		}
		if _, err := (jobs.EnqueueParams{OrgID: "o", Chat: &got}).Normalize(); err != nil {
			t.Fatalf("decoded a chat the store refuses: %v", err)
		}
		if _, err := jobs.EncodeChat(&got); err != nil {
			t.Fatalf("decoded a chat the store cannot encode: %v", err)
		}
	})
}
