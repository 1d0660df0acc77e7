package openaiapi_test

import (
	"encoding/json"
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/promptkit/promptkit/internal/openaiapi"
	"github.com/promptkit/promptkit/jobs"
	"github.com/promptkit/promptkit/pktype"
)

func TestDecodeChatFull(t *testing.T) {
	t.Parallel()
	body := `{
		"model": "fast",
		"messages": [
			{"role": "developer", "content": "Be brief."},
			{"role": "user", "content": [{"type": "text", "text": "Hello"}, {"type": "text", "text": "there"}], "name": null},
			{"role": "assistant", "content": "Hi.", "tool_calls": null, "refusal": null},
			{"role": "user", "content": "Name a colour."}
		],
		"temperature": 0.5, "top_p": 0.9, "max_completion_tokens": 64, "max_tokens": 64,
		"stop": "END", "seed": 7,
		"response_format": {"type": "json_schema", "json_schema": {"name": "colour", "strict": true, "schema": {"type": "object"}}},
		"user": "u-1", "metadata": {"k": "v"},
		"stream": true, "stream_options": {"include_usage": true},
		"n": 1, "store": false, "logprobs": false, "top_logprobs": 0, "presence_penalty": 0, "frequency_penalty": 0,
		"logit_bias": {}, "modalities": ["text"], "service_tier": "auto", "tools": null,
		"safety_identifier": "s", "prompt_cache_key": "c"
	}`
	got, err := openaiapi.DecodeChat([]byte(body))
	if err != nil {
		t.Fatal(err)
	}
	temp, topP, maxTok, seed := 0.5, 0.9, 64, int64(7)
	// Every parameter promptkit does not model is kept as sent (without
	// insignificant space), to reach the backend unchanged.
	extra := pktype.Params{}
	for k, v := range map[string]string{
		"max_completion_tokens": `64`, "user": `"u-1"`, "metadata": `{"k":"v"}`, "n": `1`, "store": `false`,
		"logprobs": `false`, "top_logprobs": `0`, "presence_penalty": `0`, "frequency_penalty": `0`, "logit_bias": `{}`,
		"modalities": `["text"]`, "service_tier": `"auto"`, "safety_identifier": `"s"`, "prompt_cache_key": `"c"`,
	} {
		extra[k] = json.RawMessage(v)
	}
	want := openaiapi.ChatParams{
		Model: "fast",
		Chat: jobs.ChatRequest{
			Messages: []pktype.Message{
				{Role: "system", Content: "Be brief."},
				{Role: "user", Content: "Hello\nthere", Parts: json.RawMessage(`[{"type":"text","text":"Hello"},{"type":"text","text":"there"}]`)},
				{Role: "assistant", Content: "Hi."},
				{Role: "user", Content: "Name a colour."},
			},
			Sampling: pktype.Sampling{Temperature: &temp, TopP: &topP, MaxTokens: &maxTok, Stop: []string{"END"}, Seed: &seed,
				Extra: extra},
			ResponseFormat: jobs.FormatJSONSchema, SchemaName: "colour", Schema: json.RawMessage(`{"type": "object"}`),
			Format: json.RawMessage(`{"type":"json_schema","json_schema":{"name":"colour","strict":true,"schema":{"type":"object"}}}`),
		},
		Stream: true, IncludeUsage: true,
	}
	want.Chat, _ = want.Chat.Normalize() // a decoded chat comes checked
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got  %+v\nwant %+v", got, want)
	}
}

// TestDecodeChatTools: tools, a tool choice, an assistant message that
// only calls tools and the tools' results are decoded into the stored
// request as sent.
func TestDecodeChatTools(t *testing.T) {
	t.Parallel()
	body := `{"model":"m","messages":[
		{"role":"user","content":"Weather in Paris and Lyon?"},
		{"role":"assistant","content":null,"tool_calls":[
			{"id":"call_1","type":"function","function":{"name":"weather","arguments":"{\"city\":\"Paris\"}"}},
			{"id":"call_2","type":"function","function":{"name":"weather","arguments":"{\"city\":\"Lyon\"}"}}]},
		{"role":"tool","tool_call_id":"call_1","content":"21 C","name":"weather"},
		{"role":"tool","tool_call_id":"call_2","content":[{"type":"text","text":"18 C"}]}],
		"tools":[{"type":"function","function":{"name":"weather","description":"Weather now.","strict":true,
			"parameters":{"type":"object","properties":{"city":{"type":"string"}}}}}],
		"tool_choice":{"type":"function","function":{"name":"weather"}},"parallel_tool_calls":true}`
	got, err := openaiapi.DecodeChat([]byte(body))
	if err != nil {
		t.Fatal(err)
	}
	call := func(id, city string) pktype.ToolCall {
		return pktype.ToolCall{ID: id, Type: "function", Function: pktype.FunctionCall{Name: "weather", Arguments: `{"city":"` + city + `"}`}}
	}
	want := jobs.ChatRequest{
		Messages: []pktype.Message{
			{Role: "user", Content: "Weather in Paris and Lyon?"},
			{Role: "assistant", ToolCalls: []pktype.ToolCall{call("call_1", "Paris"), call("call_2", "Lyon")}},
			{Role: "tool", ToolCallID: "call_1", Content: "21 C", Extra: pktype.Params{"name": json.RawMessage(`"weather"`)}},
			{Role: "tool", ToolCallID: "call_2", Content: "18 C", Parts: json.RawMessage(`[{"type":"text","text":"18 C"}]`)},
		},
		ToolUse: pktype.ToolUse{
			Tools: []pktype.Tool{{Type: "function", Function: pktype.ToolFunction{Name: "weather", Description: new("Weather now."), Strict: new(true),
				Parameters: json.RawMessage(`{"type":"object","properties":{"city":{"type":"string"}}}`)}}},
			ToolChoice:        &pktype.ToolChoice{Mode: pktype.ToolChoiceFunction, Function: "weather"},
			ParallelToolCalls: new(true),
		},
	}
	want, _ = want.Normalize()
	if !reflect.DeepEqual(got.Chat, want) {
		t.Errorf("got  %+v\nwant %+v", got.Chat, want)
	}
	// The stored form keeps OpenAI's tool_choice shape.
	b, _ := jobs.EncodeChat(&got.Chat)
	if !strings.Contains(string(b), `"tool_choice":{"type":"function","function":{"name":"weather"}}`) {
		t.Errorf("stored %s", b)
	}
	back, err := jobs.DecodeChat(b)
	if err != nil || !reflect.DeepEqual(back.ToolUse, want.ToolUse) || !reflect.DeepEqual(back.Messages, want.Messages) {
		t.Errorf("decoded back %+v, %v", back, err)
	}
}

func TestDecodeChatMinimal(t *testing.T) {
	t.Parallel()
	got, err := openaiapi.DecodeChat([]byte(`{"model":"m","messages":[{"role":"user","content":"hi"}],"stop":["a","b"],"response_format":{"type":"json_object"}}`))
	if err != nil {
		t.Fatal(err)
	}
	if got.Stream || got.IncludeUsage || got.Chat.MaxTokens != nil || got.Chat.ResponseFormat != jobs.FormatJSONObject ||
		!reflect.DeepEqual(got.Chat.Stop, []string{"a", "b"}) {
		t.Errorf("got %+v", got)
	}
	got, err = openaiapi.DecodeChat([]byte(`{"model":"m","messages":[{"role":"user","content":"hi"}],"max_tokens":5,"response_format":{"type":"text"}}`))
	if err != nil || *got.Chat.MaxTokens != 5 || got.Chat.ResponseFormat != jobs.FormatText {
		t.Errorf("got %+v, %v", got, err)
	}
}

// TestDecodeChatRefuses: everything promptkit cannot honour, and every
// malformed parameter, is a *RequestError naming the parameter, and its
// message never quotes the request.
func TestDecodeChatRefuses(t *testing.T) {
	t.Parallel()
	const secret = "SECRET-MARKER"
	msgs := `"messages":[{"role":"user","content":"` + secret + `"}]`
	base := `"model":"m",` + msgs
	for _, c := range []struct {
		body, param, code string
	}{
		// What promptkit cannot send on: a tool that is not a function, a
		// deprecated function message, an n it does not take.
		{`{` + base + `,"n":0}`, "n", openaiapi.CodeInvalidValue},
		{`{` + base + `,"n":129}`, "n", openaiapi.CodeInvalidValue},
		{`{` + base + `,"stream":true,"stream_options":{"include_everything":true}}`, "stream_options.include_everything", openaiapi.CodeUnknownParameter},
		{`{"model":"m","messages":[{"role":"user","content":[{"type":"text","text":1}]}]}`, "messages[0].content[0].text", openaiapi.CodeInvalidType},
		{`{"model":"m","messages":[{"role":"user","content":["` + secret + `"]}]}`, "messages[0].content[0]", openaiapi.CodeInvalidType},
		{`{` + base + `,"tools":[{"type":"web_search","function":{"name":"f"}}]}`, "tools[0].type", openaiapi.CodeUnsupportedValue},
		{`{"model":"m","messages":[{"role":"tool","content":"x","tool_call_id":"c"}]}`, "messages[0].tool_call_id", openaiapi.CodeInvalidValue},
		{`{"model":"m","messages":[{"role":"function","content":"x"}]}`, "messages[0].role", openaiapi.CodeUnsupportedValue},
		{`{"model":"m","messages":[{"role":"assistant","content":null,"tool_calls":[{"id":"c"}]},{"role":"user","content":"x"}]}`, "messages[0].tool_calls[0].type", openaiapi.CodeMissingParameter},

		// Malformed tools and tool messages.
		{`{` + base + `,"tools":[{"type":"function","function":{"name":"` + secret + ` !"}}]}`, "tools[0].function.name", openaiapi.CodeInvalidValue},
		{`{` + base + `,"tools":[{"type":"function"}]}`, "tools[0].function", openaiapi.CodeMissingParameter},
		{`{` + base + `,"tools":[{"type":"function","function":{}}]}`, "tools[0].function.name", openaiapi.CodeMissingParameter},
		{`{` + base + `,"tools":[{"type":"function","function":{"name":"f","parameters":[]}}]}`, "tools[0].function.parameters", openaiapi.CodeInvalidType},
		{`{` + base + `,"tools":[{"type":"function","function":{"name":"f","secret":1}}]}`, "tools[0].function.secret", openaiapi.CodeUnknownParameter},
		{`{` + base + `,"tools":[{"type":"function","function":{"name":"f"}},{"type":"function","function":{"name":"f"}}]}`, "tools[1].function.name", openaiapi.CodeInvalidValue},
		{`{` + base + `,"tools":{}}`, "tools", openaiapi.CodeInvalidType},
		{`{` + base + `,"tool_choice":"auto"}`, "tool_choice", openaiapi.CodeInvalidValue},
		{`{` + base + `,"tool_choice":"always","tools":[{"type":"function","function":{"name":"f"}}]}`, "tool_choice", openaiapi.CodeInvalidValue},
		{`{` + base + `,"tool_choice":{"type":"function","function":{"name":"g"}},"tools":[{"type":"function","function":{"name":"f"}}]}`, "tool_choice.function.name", openaiapi.CodeInvalidValue},
		{`{` + base + `,"tool_choice":{"type":"allowed_tools"},"tools":[{"type":"function","function":{"name":"f"}}]}`, "tool_choice.type", openaiapi.CodeUnsupportedValue},
		{`{` + base + `,"parallel_tool_calls":false}`, "parallel_tool_calls", openaiapi.CodeInvalidValue},
		{`{"model":"m","messages":[{"role":"user","content":"x","tool_calls":[]}]}`, "messages[0].tool_calls", openaiapi.CodeInvalidValue},
		{`{"model":"m","messages":[{"role":"tool","content":"x"}]}`, "messages[0].tool_call_id", openaiapi.CodeMissingParameter},
		{`{"model":"m","messages":[{"role":"user","content":"x","tool_call_id":"c"}]}`, "messages[0].tool_call_id", openaiapi.CodeInvalidValue},
		{`{"model":"m","messages":[{"role":"assistant","tool_calls":[{"id":"c","type":"function","function":{"name":"f","arguments":1}}]}]}`, "messages[0].tool_calls[0].function.arguments", openaiapi.CodeInvalidType},

		// Malformed or missing parameters.
		{`{` + msgs + `}`, "model", openaiapi.CodeMissingParameter},
		{`{"model":null,` + msgs + `}`, "model", openaiapi.CodeMissingParameter},
		{`{"model":"",` + msgs + `}`, "model", openaiapi.CodeInvalidValue},
		{`{"model":3,` + msgs + `}`, "model", openaiapi.CodeInvalidType},
		{`{"model":"m"}`, "messages", openaiapi.CodeMissingParameter},
		{`{"model":"m","messages":[]}`, "messages", openaiapi.CodeInvalidValue},
		{`{"model":"m","messages":{}}`, "messages", openaiapi.CodeInvalidType},
		{`{"model":"m","messages":["hi"]}`, "messages[0]", openaiapi.CodeInvalidType},
		{`{"model":"m","messages":[{"content":"x"}]}`, "messages[0].role", openaiapi.CodeMissingParameter},
		{`{"model":"m","messages":[{"role":"robot","content":"x"}]}`, "messages[0].role", openaiapi.CodeInvalidValue},
		{`{"model":"m","messages":[{"role":"user"}]}`, "messages[0].content", openaiapi.CodeMissingParameter},
		{`{"model":"m","messages":[{"role":"user","content":5}]}`, "messages[0].content", openaiapi.CodeInvalidType},
		{`{"model":"m","messages":[{"role":"user","content":[{"text":"x"}]}]}`, "messages[0].content[0].type", openaiapi.CodeMissingParameter},
		{`{"model":"m","messages":[{"role":"user","content":[{"type":"text"}]}]}`, "messages[0].content[0].text", openaiapi.CodeMissingParameter},
		{`{"model":"m","messages":[{"role":"user","content":"  "}]}`, "messages[0].content", openaiapi.CodeInvalidValue},
		{`{` + base + `,"temperature":3}`, "temperature", openaiapi.CodeInvalidValue},
		{`{` + base + `,"temperature":"hot"}`, "temperature", openaiapi.CodeInvalidType},
		{`{` + base + `,"top_p":1.5}`, "top_p", openaiapi.CodeInvalidValue},
		{`{` + base + `,"max_tokens":0}`, "max_tokens", openaiapi.CodeInvalidValue},
		{`{` + base + `,"max_completion_tokens":1.5}`, "max_completion_tokens", openaiapi.CodeInvalidType},
		{`{` + base + `,"max_tokens":10,"max_completion_tokens":20}`, "max_completion_tokens", openaiapi.CodeInvalidValue},
		{`{` + base + `,"stop":["a","b","c","d","e"]}`, "stop", openaiapi.CodeInvalidValue},
		{`{` + base + `,"stop":7}`, "stop", openaiapi.CodeInvalidType},
		{`{` + base + `,"seed":1.5}`, "seed", openaiapi.CodeInvalidType},
		{`{` + base + `,"n":"two"}`, "n", openaiapi.CodeInvalidType},
		{`{` + base + `,"response_format":{}}`, "response_format.type", openaiapi.CodeMissingParameter},
		{`{` + base + `,"response_format":{"type":"json_schema"}}`, "response_format.json_schema", openaiapi.CodeMissingParameter},
		{`{` + base + `,"response_format":{"type":"json_schema","json_schema":{"schema":{}}}}`, "response_format.json_schema.name", openaiapi.CodeMissingParameter},
		{`{` + base + `,"response_format":{"type":"json_schema","json_schema":{"name":"bad name","schema":{}}}}`, "response_format.json_schema.name", openaiapi.CodeInvalidValue},
		{`{` + base + `,"response_format":{"type":"json_schema","json_schema":{"name":"n"}}}`, "response_format.json_schema.schema", openaiapi.CodeMissingParameter},
		{`{` + base + `,"response_format":{"type":"json_schema","json_schema":{"name":"n","schema":[]}}}`, "response_format.json_schema.schema", openaiapi.CodeInvalidType},
		{`{` + base + `,"stream_options":{"include_usage":true}}`, "stream_options", openaiapi.CodeInvalidValue},
		{`{` + base + `,"stream":"yes"}`, "stream", openaiapi.CodeInvalidType},
		{`{` + base, "", openaiapi.CodeInvalidJSON},
		{`[]`, "", openaiapi.CodeInvalidJSON},
		{``, "", openaiapi.CodeInvalidJSON},
	} {
		_, err := openaiapi.DecodeChat([]byte(c.body))
		var re *jobs.RequestError
		if !errors.As(err, &re) {
			t.Errorf("%s: got %v, want a *RequestError", c.body, err)
			continue
		}
		if re.Param != c.param || re.Code != c.code {
			t.Errorf("%s: param %q code %q, want %q %q (%s)", c.body, re.Param, re.Code, c.param, c.code, re.Message)
		}
		if strings.Contains(re.Message, secret) || strings.Contains(re.Param, secret) || re.Message == "" {
			t.Errorf("%s: message %q quotes the request or is empty", c.body, re.Message)
		}
		b, _ := json.Marshal(openaiapi.RequestErrorBody(re))
		var body openaiapi.ErrorBody
		if err := json.Unmarshal(b, &body); err != nil || body.Error.Type != openaiapi.TypeInvalidRequest {
			t.Errorf("%s: body %s", c.body, b)
		}
	}
}

func TestParseBatchLine(t *testing.T) {
	t.Parallel()
	l, err := openaiapi.ParseBatchLine([]byte(`{"custom_id":"r-1","method":"POST","url":"/v1/chat/completions","body":{"model":"m","messages":[{"role":"user","content":"hi"}],"max_tokens":9}}`))
	if err != nil {
		t.Fatal(err)
	}
	if l.CustomID != "r-1" || l.Method != "POST" || l.URL != "/v1/chat/completions" || l.Body.Model != "m" ||
		len(l.Body.Chat.Messages) != 1 || *l.Body.Chat.MaxTokens != 9 {
		t.Errorf("got %+v", l)
	}
	// The caller checks the values against its batch.
	l, err = openaiapi.ParseBatchLine([]byte(`{"custom_id":"","method":"GET","url":"/v1/completions","body":{"model":"m","messages":[{"role":"user","content":"hi"}]}}`))
	if err != nil || l.Method != "GET" || l.URL != "/v1/completions" || l.Embedding != nil {
		t.Errorf("got %+v, %v", l, err)
	}
	// An embeddings line's body is decoded as POST /v1/embeddings decodes
	// one.
	l, err = openaiapi.ParseBatchLine([]byte(`{"custom_id":"e","method":"POST","url":"/v1/embeddings","body":{"model":"em","input":["a","b"],"dimensions":3,"encoding_format":"base64"}}`))
	if err != nil || l.Embedding == nil || l.Model() != "em" || !slices.Equal(l.Embedding.Input, []string{"a", "b"}) ||
		*l.Embedding.Dimensions != 3 || !l.Embedding.Base64 {
		t.Errorf("embeddings line: got %+v, %v", l, err)
	} else if r := l.Embedding.Request(); r.EncodingFormat != "base64" || *r.Dimensions != 3 || len(r.Input) != 2 {
		t.Errorf("embeddings request %+v", r)
	}

	for _, c := range []struct{ line, param, code string }{
		{`{"custom_id":"a","method":"POST","url":"/v1/chat/completions","body":{"model":"m","messages":[{"role":"user","content":"hi"}],"stream":true}}`, "body.stream", openaiapi.CodeUnsupportedValue},
		{`{"custom_id":"a","method":"POST","url":"/v1/chat/completions","body":{"model":"m","messages":[{"role":"user","content":"hi"}],"n":0}}`, "body.n", openaiapi.CodeInvalidValue},
		{`{"custom_id":"a","method":"POST","url":"/v1/chat/completions","body":{"messages":[{"role":"user","content":"hi"}]}}`, "body.model", openaiapi.CodeMissingParameter},
		{`{"custom_id":"a","method":"POST","url":"/v1/chat/completions","body":{"model":"m","messages":[{"role":"user","content":[{"image_url":{}}]}]}}`, "body.messages[0].content[0].type", openaiapi.CodeMissingParameter},
		{`{"custom_id":"a","method":"POST","url":"/v1/chat/completions","body":[]}`, "body", openaiapi.CodeInvalidType},
		{`{"custom_id":"a","method":"POST","url":"/v1/chat/completions"}`, "body", openaiapi.CodeMissingParameter},
		{`{"custom_id":1,"method":"POST","url":"/v1/chat/completions","body":{}}`, "custom_id", openaiapi.CodeInvalidType},
		{`{"custom_id":"a","method":"POST","url":"/v1/chat/completions","body":{},"extra":1}`, "extra", openaiapi.CodeUnknownParameter},
		{`{"custom_id":"a","method":"POST","url":"/v1/embeddings","body":{"model":"m","messages":[{"role":"user","content":"hi"}]}}`, "body.messages", openaiapi.CodeUnknownParameter},
		{`{"custom_id":"a","method":"POST","url":"/v1/embeddings","body":{"model":"m"}}`, "body.input", openaiapi.CodeMissingParameter},
		{`{"custom_id":"a","method":"POST","url":"/v1/embeddings","body":{"model":"m","input":["a",""]}}`, "body.input[1]", openaiapi.CodeInvalidValue},
		{`{"custom_id":"a","method":"POST","url":"/v1/embeddings","body":{"model":"m","input":[1,2]}}`, "body.input", openaiapi.CodeUnsupportedValue},
		{`{"custom_id":"a","method":"POST","url":"/v1/embeddings","body":{"model":"m","input":"a","dimensions":0}}`, "body.dimensions", openaiapi.CodeInvalidValue},
		{`{"custom_id":"a","method":"POST","url":"/v1/embeddings","body":[]}`, "body", openaiapi.CodeInvalidType},
		{`{"custom_id":"a","method":"POST","url":"/v1/embeddings","body":{"model":"m","input":["a","b\u0000"]}}`, "body.input[1]", openaiapi.CodeInvalidValue},
		{`{"custom_id":"a"} {"x":1}`, "", openaiapi.CodeInvalidJSON},
		{`"line"`, "", openaiapi.CodeInvalidJSON},
		{`{"custom_id":`, "", openaiapi.CodeInvalidJSON},
	} {
		_, err := openaiapi.ParseBatchLine([]byte(c.line))
		var re *jobs.RequestError
		if !errors.As(err, &re) || re.Param != c.param || re.Code != c.code {
			t.Errorf("%s: got %#v, want param %q code %q", c.line, err, c.param, c.code)
		}
	}
}

func TestDecodeBatchRequest(t *testing.T) {
	t.Parallel()
	got, err := openaiapi.DecodeBatchRequest([]byte(`{"input_file_id":"file-1","endpoint":"/v1/chat/completions","completion_window":"24h","metadata":{"a":"b"}}`))
	if err != nil || got.InputFileID != "file-1" || got.Metadata["a"] != "b" {
		t.Fatalf("got %+v, %v", got, err)
	}
	if got, err := openaiapi.DecodeBatchRequest([]byte(`{"input_file_id":"f","endpoint":"/v1/embeddings","completion_window":"24h"}`)); err != nil || got.Endpoint != "/v1/embeddings" {
		t.Fatalf("embeddings: got %+v, %v", got, err)
	}
	many := map[string]string{}
	for i := range 17 {
		many[string(rune('a'+i))] = "v"
	}
	tooMany, _ := json.Marshal(map[string]any{"input_file_id": "f", "endpoint": "/v1/chat/completions", "completion_window": "24h", "metadata": many})
	for _, c := range []struct{ body, param string }{
		{`{"endpoint":"/v1/chat/completions","completion_window":"24h"}`, "input_file_id"},
		{`{"input_file_id":"f","completion_window":"24h"}`, "endpoint"},
		{`{"input_file_id":"f","endpoint":"/v1/completions","completion_window":"24h"}`, "endpoint"},
		{`{"input_file_id":"f","endpoint":"/v1/chat/completions"}`, "completion_window"},
		{`{"input_file_id":"f","endpoint":"/v1/chat/completions","completion_window":"48h"}`, "completion_window"},
		{string(tooMany), "metadata"},
		{`{"input_file_id":"f","endpoint":"/v1/chat/completions","completion_window":"24h","output_expires_after":{}}`, "output_expires_after"},
	} {
		_, err := openaiapi.DecodeBatchRequest([]byte(c.body))
		var re *jobs.RequestError
		if !errors.As(err, &re) || re.Param != c.param {
			t.Errorf("%s: got %v, want param %q", c.body, err, c.param)
		}
	}
}

// A batch line takes tools as a request does; its errors name the body's
// parameter.
func TestBatchLineTools(t *testing.T) {
	t.Parallel()
	l, err := openaiapi.ParseBatchLine([]byte(`{"custom_id":"a","method":"POST","url":"/v1/chat/completions","body":{"model":"m",
		"messages":[{"role":"user","content":"x"}],"tools":[{"type":"function","function":{"name":"f"}}],"tool_choice":"required"}}`))
	if err != nil || len(l.Body.Chat.Tools) != 1 || l.Body.Chat.ToolChoice == nil || l.Body.Chat.ToolChoice.Mode != "required" {
		t.Fatalf("line %+v, %v", l, err)
	}
	_, err = openaiapi.ParseBatchLine([]byte(`{"custom_id":"a","method":"POST","url":"/v1/chat/completions","body":{"model":"m",
		"messages":[{"role":"user","content":"x"}],"tools":[{"type":"function","function":{"name":"f"}}],"tool_choice":{"type":"function","function":{"name":"g"}}}}`))
	var re *jobs.RequestError
	if !errors.As(err, &re) || re.Param != "body.tool_choice.function.name" {
		t.Errorf("bad choice: %v", err)
	}
}
