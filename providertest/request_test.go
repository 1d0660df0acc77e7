package providertest_test

import (
	"encoding/json"
	"testing"

	"github.com/promptkit/promptkit/providertest"
)

// The default responder refuses what it cannot honour with OpenAI's 400
// error shape, naming the parameter, instead of answering as if it had.
func TestUnsupportedRejected(t *testing.T) {
	const user = `"messages":[{"role":"user","content":"hi"}]`
	tests := []struct {
		name, body string
		param      string // "" means the request is accepted
		code       string
	}{
		{"n 9", `{"model":"m","n":9,` + user + `}`, "n", "integer_above_max_value"},
		{"n 9 streamed", `{"model":"m","n":9,"stream":true,` + user + `}`, "n", "integer_above_max_value"},
		{"n string", `{"model":"m","n":"2",` + user + `}`, "n", "invalid_type"},
		{"n fraction", `{"model":"m","n":1.5,` + user + `}`, "n", "invalid_type"},
		{"tools", `{"model":"m","tools":[{"type":"function","function":{"name":"f"}}],` + user + `}`, "", ""},
		{"built-in tool", `{"model":"m","tools":[{"type":"web_search"}],` + user + `}`, "tools[0]", "invalid_value"},
		{"tools not an array", `{"model":"m","tools":{},` + user + `}`, "tools", "invalid_type"},
		{"tool_choice without tools", `{"model":"m","tool_choice":"auto",` + user + `}`, "tool_choice", "invalid_value"},
		{"functions", `{"model":"m","functions":[{"name":"f"}],` + user + `}`, "functions", "unsupported_parameter"},
		{"function_call", `{"model":"m","function_call":"auto",` + user + `}`, "function_call", "unsupported_parameter"},
		{"audio", `{"model":"m","audio":{"voice":"alloy","format":"wav"},` + user + `}`, "audio", "unsupported_parameter"},
		{"audio modality", `{"model":"m","modalities":["text","audio"],` + user + `}`, "modalities", "unsupported_value"},
		{"top_logprobs above 20", `{"model":"m","logprobs":true,"top_logprobs":21,` + user + `}`, "top_logprobs", "integer_above_max_value"},
		{"top_logprobs negative", `{"model":"m","logprobs":true,"top_logprobs":-1,` + user + `}`, "top_logprobs", "integer_below_min_value"},
		{"top_logprobs string", `{"model":"m","logprobs":true,"top_logprobs":"3",` + user + `}`, "top_logprobs", "invalid_type"},
		{"image part", `{"model":"m","messages":[{"role":"system","content":"s"},{"role":"user","content":[{"type":"text","text":"what is this"},{"type":"image_url","image_url":{"url":"https://x/y.png"}}]}]}`, "messages[1].content[1].type", "unsupported_value"},
		{"audio part", `{"model":"m","messages":[{"role":"user","content":[{"type":"input_audio","input_audio":{"data":"AA==","format":"wav"}}]}]}`, "messages[0].content[0].type", "unsupported_value"},
		{"stream not bool", `{"model":"m","stream":"yes",` + user + `}`, "stream", "invalid_type"},
		{"stream_options not object", `{"model":"m","stream":true,"stream_options":5,` + user + `}`, "stream_options", "invalid_type"},
		{"include_usage not bool", `{"model":"m","stream":true,"stream_options":{"include_usage":"yes"},` + user + `}`, "stream_options.include_usage", "invalid_type"},
		{"no model", `{` + user + `}`, "model", "invalid_request"},
		{"no messages", `{"model":"m"}`, "messages", "invalid_request"},

		// Still accepted.
		{"n 1", `{"model":"m","n":1,` + user + `}`, "", ""},
		{"logprobs", `{"model":"m","logprobs":true,"top_logprobs":20,` + user + `}`, "", ""},
		{"top_logprobs without logprobs", `{"model":"m","top_logprobs":99,` + user + `}`, "", ""},
		{"nulls", `{"model":"m","n":null,"tools":null,"tool_choice":null,"stream":null,"stream_options":null,"logprobs":null,"audio":null,` + user + `}`, "", ""},
		{"sampling options", `{"model":"m","temperature":0.2,"top_p":0.9,"max_tokens":50,"max_completion_tokens":50,"stop":["x"],"seed":1,"user":"u","presence_penalty":0,"frequency_penalty":0,"metadata":{"a":"b"},"store":false,` + user + `}`, "", ""},
		{"logprobs false", `{"model":"m","logprobs":false,` + user + `}`, "", ""},
		{"text modality", `{"model":"m","modalities":["text"],` + user + `}`, "", ""},
		{"text parts", `{"model":"m","messages":[{"role":"assistant","content":[{"type":"refusal","refusal":"no"}]},{"role":"user","content":[{"type":"text","text":"hi"}]}]}`, "", ""},
		{"stream_options without stream", `{"model":"m","stream_options":{"include_usage":true},` + user + `}`, "", ""},
		{"tool message in history", `{"model":"m","messages":[{"role":"tool","tool_call_id":"c","content":"42"},{"role":"user","content":"hi"}]}`, "", ""},
	}
	s := newServer(t)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := post(t, s.URL+"/chat/completions", tt.body)
			if tt.param == "" {
				if r.status != 200 {
					t.Fatalf("status %d, want 200: %s", r.status, r.body)
				}
				r.content(t)
				return
			}
			if r.status != 400 || r.header.Get("Content-Type") != "application/json" {
				t.Fatalf("status %d %q, want a 400 JSON error: %s", r.status, r.header.Get("Content-Type"), r.body)
			}
			var env struct {
				Error map[string]json.RawMessage `json:"error"`
			}
			if err := json.Unmarshal(r.body, &env); err != nil || len(env.Error) != 4 {
				t.Fatalf("body %s, want error with message, type, param and code", r.body)
			}
			var body struct {
				Error struct{ Message, Type, Param, Code string }
			}
			if err := json.Unmarshal(r.body, &body); err != nil {
				t.Fatal(err)
			}
			e := body.Error
			if e.Type != "invalid_request_error" || e.Param != tt.param || e.Code != tt.code || e.Message == "" {
				t.Errorf("error %+v, want param %q code %q", e, tt.param, tt.code)
			}
		})
	}
}

// Scripted replies are sent whatever the body holds, unsupported
// parameters included.
func TestScriptedRepliesIgnoreUnsupported(t *testing.T) {
	s := newServer(t)
	s.Enqueue(providertest.Reply("scripted"))
	r := post(t, s.URL+"/chat/completions", `{"model":"m","n":3,"tools":[],"messages":[{"role":"user","content":"x"}]}`)
	if got := r.content(t); got != "scripted" {
		t.Errorf("content %q", got)
	}
}

func TestErrorsCarryNullParam(t *testing.T) {
	s := newServer(t)
	s.Enqueue(providertest.Status(503))
	r := post(t, s.URL+"/chat/completions", chatBody)
	e, _ := r.decode(t)["error"].(map[string]any)
	if p, ok := e["param"]; !ok || p != nil {
		t.Errorf("error %s, want \"param\": null", r.body)
	}
}
