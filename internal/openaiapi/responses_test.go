package openaiapi_test

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/promptkit/promptkit/internal/openaiapi"
	"github.com/promptkit/promptkit/jobs"
	"github.com/promptkit/promptkit/pktype"
)

// decodeResponses decodes body and assembles its conversation (no
// previous response, references left unresolved).
func decodeResponses(t *testing.T, body string) (openaiapi.ResponsesParams, jobs.ChatRequest) {
	t.Helper()
	p, err := openaiapi.DecodeResponses([]byte(body))
	if err != nil {
		t.Fatalf("DecodeResponses(%s): %v", body, err)
	}
	c, err := p.Conversation(nil, p.Input)
	if err != nil {
		t.Fatalf("Conversation(%s): %v", body, err)
	}
	return p, c
}

func TestDecodeResponsesString(t *testing.T) {
	t.Parallel()
	p, c := decodeResponses(t, `{"model":"m","input":"hi","instructions":"Be brief.","max_output_tokens":20,"temperature":0.5,"top_p":0.9,
		"metadata":{"k":"v"},"store":false,"user":"u","truncation":"disabled","include":[],"top_logprobs":0,"service_tier":"auto",
		"reasoning":{"effort":null},"safety_identifier":"s","prompt_cache_key":"k","background":true,"stream":true,
		"stream_options":{"include_obfuscation":false},"text":{"format":{"type":"text"},"verbosity":null},"tools":[],"parallel_tool_calls":true,"tool_choice":"auto"}`)
	want := []pktype.Message{{Role: pktype.RoleSystem, Content: "Be brief."}, {Role: pktype.RoleUser, Content: "hi"}}
	if !reflect.DeepEqual(c.Messages, want) || *c.MaxTokens != 20 || *c.Temperature != 0.5 || *c.TopP != 0.9 ||
		c.Metadata["k"] != "v" || c.ToolChoice != nil || c.ParallelToolCalls != nil || c.ResponseFormat != jobs.FormatText {
		t.Errorf("chat %+v", c)
	}
	r := c.Responses
	if r == nil || r.Model != "m" || *r.Instructions != "Be brief." || r.InputStart != 1 || !r.Background || *r.Store || r.User != "u" ||
		!p.Stream || !p.Background {
		t.Errorf("responses %+v, params %+v", r, p)
	}
}

// Items: developer is system; assistant text and the calls after it are
// one turn; a result names its call; stored items' id and status, and an
// output_text's empty annotations, are accepted.
func TestDecodeResponsesItems(t *testing.T) {
	t.Parallel()
	_, c := decodeResponses(t, `{"model":"m","input":[
		{"role":"developer","content":"d"},
		{"type":"message","role":"user","content":[{"type":"input_text","text":"a"},{"type":"input_text","text":"b"}]},
		{"type":"message","role":"assistant","id":"msg_1","status":"completed","content":[{"type":"output_text","text":"let me look","annotations":[]}]},
		{"type":"function_call","id":"fc_1","call_id":"c1","name":"weather","arguments":"{\"city\":\"Paris\"}","status":"completed"},
		{"type":"function_call","call_id":"c2","name":"weather","arguments":"{}"},
		{"type":"function_call_output","call_id":"c1","output":"sunny"},
		{"type":"function_call_output","call_id":"c2","output":[{"type":"input_text","text":"rain"}]}],
		"tools":[{"type":"function","name":"weather","description":"The weather.","parameters":{"type":"object"},"strict":true}],
		"tool_choice":{"type":"function","name":"weather"},"parallel_tool_calls":false}`)
	calls := []pktype.ToolCall{
		{ID: "c1", Type: "function", Function: pktype.FunctionCall{Name: "weather", Arguments: `{"city":"Paris"}`}},
		{ID: "c2", Type: "function", Function: pktype.FunctionCall{Name: "weather", Arguments: `{}`}},
	}
	want := []pktype.Message{
		{Role: "system", Content: "d"},
		{Role: "user", Content: "a\nb"},
		{Role: "assistant", Content: "let me look", ToolCalls: calls},
		{Role: "tool", ToolCallID: "c1", Content: "sunny"},
		{Role: "tool", ToolCallID: "c2", Content: "rain"},
	}
	if !reflect.DeepEqual(c.Messages, want) {
		t.Errorf("messages %+v", c.Messages)
	}
	if len(c.Tools) != 1 || c.Tools[0].Function.Name != "weather" || !*c.Tools[0].Function.Strict ||
		c.ToolChoice.Mode != pktype.ToolChoiceFunction || *c.ParallelToolCalls {
		t.Errorf("tools %+v", c.ToolUse)
	}
}

func TestDecodeResponsesJSONSchema(t *testing.T) {
	t.Parallel()
	p, c := decodeResponses(t, `{"model":"m","input":"rate","text":{"format":{"type":"json_schema","name":"rating","strict":true,
		"schema":{"type":"object","properties":{"b":{"type":"number"},"a":{"type":"string"}}}}}}`)
	if c.ResponseFormat != jobs.FormatJSONSchema || c.SchemaName != "rating" || string(c.Schema) != `{"type":"object","properties":{"b":{"type":"number"},"a":{"type":"string"}}}` ||
		!*p.Strict || !*c.Responses.Strict {
		t.Errorf("chat %+v", c)
	}
	_, c = decodeResponses(t, `{"model":"m","input":"x","text":{"format":{"type":"json_object"}}}`)
	if c.ResponseFormat != jobs.FormatJSONObject {
		t.Errorf("json_object: %q", c.ResponseFormat)
	}
}

// Refusals name the parameter, with OpenAI's code, and never quote the
// request.
func TestDecodeResponsesRefusals(t *testing.T) {
	t.Parallel()
	const secret = "SECRET-7f3a"
	for _, c := range []struct {
		body, param, code string
	}{
		{`{"input":"x"}`, "model", openaiapi.CodeMissingParameter},
		{`{"model":"m"}`, "input", openaiapi.CodeMissingParameter},
		{`{"model":"m","input":[]}`, "input", openaiapi.CodeInvalidValue},
		{`{"model":"m","input":""}`, "input", openaiapi.CodeInvalidValue},
		{`{"model":"m","input":7}`, "input", openaiapi.CodeInvalidType},
		{`{"model":"m","input":"x","reasoning":{"effort":"high","budget":1}}`, "reasoning.budget", openaiapi.CodeUnknownParameter},
		{`{"model":"m","input":"x","reasoning":{"effort":1}}`, "reasoning.effort", openaiapi.CodeInvalidType},
		{`{"model":"m","input":"x","include":["reasoning.encrypted_content","file_search_call.results"]}`, "include[1]", openaiapi.CodeUnsupportedValue},
		{`{"model":"m","input":"x","tools":[{"type":"web_search"}]}`, "tools[0].type", openaiapi.CodeUnsupportedValue},
		{`{"model":"m","input":"x","tools":[{"type":"function","name":"f","defer_loading":true}]}`, "tools[0].defer_loading", openaiapi.CodeUnsupportedParameter},
		{`{"model":"m","input":"x","tools":[{"type":"function","name":"f","` + secret + `":1}]}`, "tools[0]." + secret, openaiapi.CodeUnknownParameter},
		{`{"model":"m","input":"x","tools":[{"type":"function","name":"f"},{"type":"function","name":"f"}]}`, "tools[1].name", openaiapi.CodeInvalidValue},
		{`{"model":"m","input":"x","tools":[{"type":"function","name":"f"}],"tool_choice":{"type":"function","name":"g"}}`, "tool_choice.name", openaiapi.CodeInvalidValue},
		{`{"model":"m","input":"x","tool_choice":{"type":"allowed_tools","mode":"auto","tools":[]}}`, "tool_choice.type", openaiapi.CodeUnsupportedValue},
		{`{"model":"m","input":"x","tool_choice":"required"}`, "tool_choice", openaiapi.CodeInvalidValue},
		{`{"model":"m","input":[{"role":"user","content":[{"type":"input_image","image_url":"` + secret + `"}]}]}`, "input[0].content[0].type", openaiapi.CodeUnsupportedValue},
		{`{"model":"m","input":[{"type":"reasoning","summary":[]}]}`, "input", openaiapi.CodeInvalidValue},
		{`{"model":"m","input":[{"type":"reasoning","summary":[],"secret":1}]}`, "input[0].secret", openaiapi.CodeUnknownParameter},
		{`{"model":"m","input":[{"role":"tool","content":"x"}]}`, "input[0].role", openaiapi.CodeInvalidValue},
		{`{"model":"m","input":[{"role":"assistant","content":[{"type":"refusal","refusal":"no"}]},{"role":"user","content":"x"}]}`, "input[0].content[0].type", openaiapi.CodeUnsupportedValue},
		{`{"model":"m","input":[{"role":"assistant","content":[{"type":"output_text","text":"a","annotations":[{"type":"url_citation"}]}]},{"role":"user","content":"x"}]}`, "input[0].content[0].annotations", openaiapi.CodeUnsupportedValue},
		{`{"model":"m","input":[{"type":"function_call","call_id":"c","name":"bad name","arguments":"{}"}]}`, "input[0].name", openaiapi.CodeInvalidValue},
		{`{"model":"m","input":[{"type":"function_call_output","call_id":"c","output":"x"}]}`, "input[0].call_id", openaiapi.CodeInvalidValue},
		{`{"model":"m","input":[{"type":"item_reference"}]}`, "input[0].id", openaiapi.CodeMissingParameter},
		{`{"model":"m","input":"x","text":{"format":{"type":"json_schema","name":"n"}}}`, "text.format.schema", openaiapi.CodeMissingParameter},
		{`{"model":"m","input":"x","text":{"verbosity":1}}`, "text.verbosity", openaiapi.CodeInvalidType},
		{`{"model":"m","input":"x","truncation":"auto"}`, "truncation", openaiapi.CodeUnsupportedValue},
		{`{"model":"m","input":"x","max_tool_calls":3}`, "max_tool_calls", openaiapi.CodeUnsupportedParameter},
		{`{"model":"m","input":"x","conversation":"conv_1"}`, "conversation", openaiapi.CodeUnsupportedParameter},
		{`{"model":"m","input":"x","top_logprobs":"2"}`, "top_logprobs", openaiapi.CodeInvalidType},
		{`{"model":"m","input":"x","stream_options":{}}`, "stream_options", openaiapi.CodeInvalidValue},
		{`{"model":"m","input":"x","seed":1}`, "seed", openaiapi.CodeUnknownParameter},
		{`{"model":"m","input":"x","max_output_tokens":0}`, "max_output_tokens", openaiapi.CodeInvalidValue},
		{`{"model":"m","input":"x","temperature":3}`, "temperature", openaiapi.CodeInvalidValue},
		{`{"model":"m","input":"x","metadata":{"k":7}}`, "metadata", openaiapi.CodeInvalidType},
		{`{"model":"m","input":"x","previous_response_id":""}`, "previous_response_id", openaiapi.CodeInvalidValue},
		{`{"model":"m","input":"` + secret + `\u0000"}`, "input", openaiapi.CodeInvalidValue},
		{`{"model":"m","input":"x","instructions":"` + secret + `\u0000"}`, "instructions", openaiapi.CodeInvalidValue},
		{`not json ` + secret, "", openaiapi.CodeInvalidJSON},
	} {
		p, err := openaiapi.DecodeResponses([]byte(c.body))
		if err == nil {
			_, err = p.Conversation(nil, p.Input)
		}
		var re *jobs.RequestError
		if !errors.As(err, &re) {
			t.Errorf("%s: %v, want a RequestError", c.body, err)
			continue
		}
		if re.Param != c.param && !(c.param == "?" && strings.HasSuffix(re.Param, "?")) || re.Code != c.code {
			t.Errorf("%s: param %q code %q (%s), want %q %q", c.body, re.Param, re.Code, re.Message, c.param, c.code)
		}
		if strings.Contains(re.Message, secret) && !strings.Contains(c.param, secret) {
			t.Errorf("%s: the message quotes the request: %s", c.body, re.Message)
		}
	}
}

// The previous response's turns come before the input, without its
// instructions; a result may answer the previous answer's call.
func TestResponsesContinued(t *testing.T) {
	t.Parallel()
	_, first := decodeResponses(t, `{"model":"m","input":"weather?","instructions":"old instructions"}`)
	prev := jobs.Prompt{ID: "p1", Chat: &first}
	answer := jobs.Response{Answer: jobs.Answer{ToolCalls: []pktype.ToolCall{{ID: "c1", Type: "function",
		Function: pktype.FunctionCall{Name: "weather", Arguments: "{}"}}}}}
	turns := openaiapi.ContinuedMessages(prev, answer)
	p, err := openaiapi.DecodeResponses([]byte(`{"model":"m","instructions":"new","previous_response_id":"resp_p1",
		"input":[{"type":"function_call_output","call_id":"c1","output":"sunny"}],"tools":[{"type":"function","name":"weather"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	c, err := p.Conversation(turns, p.Input)
	if err != nil {
		t.Fatal(err)
	}
	want := []pktype.Message{
		{Role: "system", Content: "new"},
		{Role: "user", Content: "weather?"},
		{Role: "assistant", ToolCalls: answer.ToolCalls},
		{Role: "tool", ToolCallID: "c1", Content: "sunny"},
	}
	if !reflect.DeepEqual(c.Messages, want) || c.Responses.InputStart != 3 || c.Responses.PreviousResponseID != "resp_p1" {
		t.Errorf("messages %+v, %+v", c.Messages, c.Responses)
	}
	// Its input items are the request's own.
	items := openaiapi.InputItems(jobs.Prompt{ID: "p2", Chat: &c})
	if len(items) != 1 || items[0].Type != "function_call_output" || items[0].CallID != "c1" || *items[0].Output != "sunny" || items[0].ID != "fco_p2_in0" {
		t.Errorf("input items %+v", items)
	}
}

func storedResponse(t *testing.T, body string) jobs.Prompt {
	t.Helper()
	_, c := decodeResponses(t, body)
	return jobs.Prompt{ID: "0190-p", CreatedAt: time.Unix(1700000000, 0), Chat: &c}
}

func TestResponseObject(t *testing.T) {
	t.Parallel()
	p := storedResponse(t, `{"model":"gpt-x","input":"hi","metadata":{"a":"b"},"max_output_tokens":5,
		"tools":[{"type":"function","name":"weather"}],"tool_choice":"required"}`)
	o := openaiapi.ResponseObject(p, jobs.Job{State: jobs.Queued}, nil)
	if o.ID != "resp_0190-p" || o.Object != "response" || o.Status != "queued" || o.CreatedAt != 1700000000 || o.Model != "gpt-x" ||
		len(o.Output) != 0 || o.Usage != nil || o.Metadata["a"] != "b" || *o.MaxOutputTokens != 5 || string(o.ToolChoice) != `"required"` ||
		len(o.Tools) != 1 || o.Tools[0].Name != "weather" || !o.ParallelToolCalls || !o.Store || o.Truncation != "disabled" {
		t.Errorf("queued %+v", o)
	}
	if o := openaiapi.ResponseObject(p, jobs.Job{State: jobs.Running}, nil); o.Status != "in_progress" {
		t.Errorf("running: %s", o.Status)
	}
	if o := openaiapi.ResponseObject(p, jobs.Job{State: jobs.Cancelled}, nil); o.Status != "cancelled" || o.Error != nil {
		t.Errorf("cancelled: %+v", o)
	}
	o = openaiapi.ResponseObject(p, jobs.Job{State: jobs.Failed, ErrorKind: jobs.KindProvider5xx, ErrorMessage: "HTTP 503"}, nil)
	if o.Status != "failed" || o.Error == nil || o.Error.Code != "provider_5xx" || !strings.Contains(o.Error.Message, "HTTP 503") {
		t.Errorf("failed: %+v", o)
	}

	// Text and calls: the message first; counts only as reported.
	r := jobs.Response{Answer: jobs.Answer{Output: "let me look", Model: "gpt-x-2", FinishReason: "tool_calls",
		ToolCalls: []pktype.ToolCall{{ID: "c1", Type: "function", Function: pktype.FunctionCall{Name: "weather", Arguments: "{}"}}},
		Usage: pktype.Usage{TokenUsage: pktype.TokenUsage{PromptTokens: 3, CompletionTokens: 4, CachedTokens: 1},
			Known: pktype.TokenUsagePresence{PromptTokens: true, CompletionTokens: true, CachedTokens: true}}}}
	o = openaiapi.ResponseObject(p, jobs.Job{State: jobs.Succeeded}, &r)
	b, _ := json.Marshal(o.Output)
	if o.Status != "completed" || o.Model != "gpt-x-2" || string(b) != `[{"id":"msg_0190-p","type":"message","status":"completed","role":"assistant",`+
		`"content":[{"type":"output_text","text":"let me look","annotations":[]}]},`+
		`{"id":"fc_0190-p_0","type":"function_call","status":"completed","call_id":"c1","name":"weather","arguments":"{}"}]` {
		t.Errorf("output %s (%s)", b, o.Status)
	}
	u, _ := json.Marshal(o.Usage)
	if string(u) != `{"input_tokens":3,"input_tokens_details":{"cached_tokens":1},"output_tokens":4,"total_tokens":7}` {
		t.Errorf("usage %s", u)
	}
	// Cut off: incomplete; no usage known: null.
	r = jobs.Response{Answer: jobs.Answer{Output: "Once upon", FinishReason: "length"}}
	o = openaiapi.ResponseObject(p, jobs.Job{State: jobs.Succeeded}, &r)
	if o.Status != "incomplete" || o.IncompleteDetails == nil || o.IncompleteDetails.Reason != "max_output_tokens" || o.Usage != nil ||
		o.Output[0].Status != "incomplete" {
		t.Errorf("incomplete %+v", o)
	}
}

// A response's events are made from what is stored: the same state makes
// the same events, numbered from 0, and a later state extends them.
func TestResponseEvents(t *testing.T) {
	t.Parallel()
	p := storedResponse(t, `{"model":"gpt-x","input":"hi","background":true}`)
	text := strings.Repeat("héllo wörld ", 20) + "€"
	r := jobs.Response{Answer: jobs.Answer{Output: text, Model: "gpt-x", FinishReason: "stop",
		ToolCalls: []pktype.ToolCall{{ID: "c1", Type: "function", Function: pktype.FunctionCall{Name: "f", Arguments: `{"a":1}`}}}}}
	queued := openaiapi.ResponseEvents(p, jobs.Job{State: jobs.Queued}, nil)
	running := openaiapi.ResponseEvents(p, jobs.Job{State: jobs.Running}, nil)
	done := openaiapi.ResponseEvents(p, jobs.Job{State: jobs.Succeeded}, &r)
	if !reflect.DeepEqual(done, openaiapi.ResponseEvents(p, jobs.Job{State: jobs.Succeeded}, &r)) {
		t.Error("the same state made other events")
	}
	for _, evs := range [][]openaiapi.ResponseEvent{queued, running} {
		if !reflect.DeepEqual(evs, done[:len(evs)]) {
			t.Errorf("a later state changed earlier events:\n%+v\n%+v", evs, done[:len(evs)])
		}
	}
	var types []string
	var joined, args string
	for i, ev := range done {
		if ev.SequenceNumber != i {
			t.Errorf("event %d numbered %d", i, ev.SequenceNumber)
		}
		types = append(types, ev.Type)
		if ev.Type == "response.output_text.delta" {
			if len(*ev.Delta) > openaiapi.DeltaBytes || !utf8.ValidString(*ev.Delta) {
				t.Errorf("delta %q", *ev.Delta)
			}
			joined += *ev.Delta
		}
		if ev.Type == "response.function_call_arguments.delta" {
			args += *ev.Delta
		}
	}
	if joined != text || args != `{"a":1}` {
		t.Errorf("deltas %q, arguments %q", joined, args)
	}
	compact := strings.Join(dedupe(types), " ")
	want := "response.created response.in_progress response.output_item.added response.content_part.added response.output_text.delta " +
		"response.output_text.done response.content_part.done response.output_item.done response.output_item.added " +
		"response.function_call_arguments.delta response.function_call_arguments.done response.output_item.done response.completed"
	if compact != want {
		t.Errorf("events %s", compact)
	}
	if done[0].Response.Status != "queued" || done[1].Response.Status != "in_progress" || done[len(done)-1].Response.Status != "completed" {
		t.Error("statuses")
	}
	// A cancelled response ends in response.failed saying cancelled.
	c := openaiapi.ResponseEvents(p, jobs.Job{State: jobs.Cancelled}, nil)
	if len(c) != 3 || c[2].Type != "response.failed" || c[2].Response.Status != "cancelled" {
		t.Errorf("cancelled: %+v", c)
	}
}

// dedupe drops repeats in a row (the deltas).
func dedupe(s []string) []string {
	var out []string
	for _, v := range s {
		if len(out) == 0 || out[len(out)-1] != v {
			out = append(out, v)
		}
	}
	return out
}

func TestResponseIDs(t *testing.T) {
	t.Parallel()
	for id, want := range map[string]string{"resp_abc-1": "abc-1", "resp_": "", "abc": "", "resp_a_b": ""} {
		got, ok := openaiapi.PromptOfResponse(id)
		if got != want && ok || ok != (want != "") {
			t.Errorf("PromptOfResponse(%q) = %q %v", id, got, ok)
		}
	}
	for id, want := range map[string]string{"msg_p1": "p1", "fc_p1_0": "p1", "fco_p1_in3": "p1", "x": ""} {
		if got, _ := openaiapi.PromptOfItem(id); got != want {
			t.Errorf("PromptOfItem(%q) = %q", id, got)
		}
	}
	// A stored item comes back as the item it was.
	o := openaiapi.ResponseObject(storedResponse(t, `{"model":"m","input":"x"}`), jobs.Job{State: jobs.Succeeded}, &jobs.Response{Answer: jobs.Answer{Output: "a"}})
	it := openaiapi.ItemOf(o.Output[0], "input[0]")
	if it.Type != "message" || it.Role != "assistant" || it.Text != "a" || it.Param != "input[0]" {
		t.Errorf("ItemOf %+v", it)
	}
}
