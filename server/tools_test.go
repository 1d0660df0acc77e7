package server

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/promptkit/promptkit/internal/openaiapi"
)

const toolsParam = `"tools":[{"type":"function","function":{"name":"weather","description":"The weather now.",
	"parameters":{"type":"object","required":["city"],"properties":{"city":{"type":"string"}}}}}]`

// A chat completion offering tools runs on a worker and answers with the
// model's call; the tool's result, sent back with the assistant turn that
// made the call, is answered in words; streamed, the call arrives in
// delta.tool_calls. Every answer fits the OpenAPI document (call checks).
func TestChatCompletionTools(t *testing.T) {
	t.Parallel()
	e := setup(t)
	e.runWorker()

	r := e.call("POST", "/v1/chat/completions", "", `{"model":"default",`+toolsParam+`,
		"messages":[{"role":"user","content":"Weather in Paris?"}]}`)
	var c openaiapi.ChatCompletion
	r.decode(t, &c)
	if r.code != 200 || len(c.Choices) != 1 {
		t.Fatalf("answer %d %s", r.code, r.body)
	}
	msg := c.Choices[0].Message
	if c.Choices[0].FinishReason != "tool_calls" || msg.Content != nil || len(msg.ToolCalls) != 1 ||
		msg.ToolCalls[0].Function.Name != "weather" || msg.ToolCalls[0].ID == "" || msg.ToolCalls[0].Type != "function" {
		t.Fatalf("answer %s", r.body)
	}
	var args struct{ City *string }
	if err := json.Unmarshal([]byte(msg.ToolCalls[0].Function.Arguments), &args); err != nil || args.City == nil {
		t.Errorf("arguments %q", msg.ToolCalls[0].Function.Arguments)
	}
	// The prompt's answer, on promptkit's own API, holds the calls too.
	var v promptView
	e.call("GET", "/v1/prompts/"+r.header.Get(headerPromptID), "", nil).decode(t, &v)
	if v.Answer == nil || len(v.Answer.ToolCalls) != 1 || v.Answer.FinishReason != "tool_calls" || len(v.Prompt.Chat.Tools) != 1 {
		t.Errorf("prompt view %+v", v)
	}

	// The round trip: the call, then its result.
	call, _ := json.Marshal(msg.ToolCalls)
	r = e.call("POST", "/v1/chat/completions", "", `{"model":"default",`+toolsParam+`,"messages":[
		{"role":"user","content":"Weather in Paris?"},
		{"role":"assistant","content":null,"tool_calls":`+string(call)+`},
		{"role":"tool","tool_call_id":"`+msg.ToolCalls[0].ID+`","content":"sunny, 21 degrees"}]}`)
	c = openaiapi.ChatCompletion{}
	r.decode(t, &c)
	if r.code != 200 || c.Choices[0].FinishReason != "stop" || !strings.Contains(deref(c.Choices[0].Message.Content), "sunny, 21 degrees") ||
		len(c.Choices[0].Message.ToolCalls) != 0 {
		t.Fatalf("after the result: %d %s", r.code, r.body)
	}

	// Streamed.
	s := e.openChatStream(`{"model":"default","stream":true,` + toolsParam + `,"tool_choice":"required",
		"messages":[{"role":"user","content":"Weather in Lyon?"}]}`)
	data := s.rest()
	if len(data) == 0 || data[len(data)-1] != "[DONE]" {
		t.Fatalf("events %q", data)
	}
	var calls []openaiapi.ToolCallDelta
	finish := ""
	for _, d := range data[:len(data)-1] {
		if err := oasValidate(t, "/components/schemas/ChatCompletionChunk", []byte(d)); err != nil {
			t.Error(err)
		}
		var ch openaiapi.ChatCompletionChunk
		if err := json.Unmarshal([]byte(d), &ch); err != nil {
			t.Fatal(err)
		}
		for _, cc := range ch.Choices {
			calls = append(calls, cc.Delta.ToolCalls...)
			if cc.FinishReason != nil {
				finish = *cc.FinishReason
			}
		}
	}
	// The pieces of call 0, as the backend streamed them: the id, type and
	// name first, then the arguments.
	joined := ""
	for i, c := range calls {
		if c.Index != 0 || (i == 0) != (c.ID != "") || (i == 0) != (c.Function.Name == "weather") {
			t.Errorf("piece %d: %+v", i, c)
		}
		joined += c.Function.Arguments
	}
	var a struct{ City *string }
	if len(calls) == 0 || json.Unmarshal([]byte(joined), &a) != nil || a.City == nil || finish != "tool_calls" {
		t.Errorf("streamed calls %+v, finish %q: %q", calls, finish, data)
	}
}
