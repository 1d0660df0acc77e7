package jobstest

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/promptkit/promptkit/jobs"
	"github.com/promptkit/promptkit/pktype"
)

// chatRequest is a chat request using every field; its schema's keys are
// out of alphabetical order, which a store must keep (a provider writes
// a structured answer's keys in the schema's order).
func chatRequest(last string) *jobs.ChatRequest {
	return &jobs.ChatRequest{
		Messages: []pktype.Message{
			{Role: pktype.RoleSystem, Content: "be brief"},
			{Role: pktype.RoleUser, Content: "hi", Parts: json.RawMessage(`[{"type":"text","text":"hi"},{"type":"image_url","image_url":{"url":"data:image/png;base64,AAAA"}}]`),
				Extra: pktype.Params{"name": json.RawMessage(`"ann"`)}},
			{Role: pktype.RoleAssistant, ToolCalls: toolCalls()},
			{Role: pktype.RoleTool, ToolCallID: "call_1", Content: `{"temp":21}`},
			{Role: pktype.RoleAssistant, Content: "hello"},
			{Role: pktype.RoleUser, Content: last},
		},
		Sampling: pktype.Sampling{
			Temperature: ptr(0.5),
			TopP:        ptr(0.9),
			MaxTokens:   ptr(64),
			Stop:        []string{"\n\n", "END"},
			Seed:        ptr(int64(7)),
			Extra: pktype.Params{"reasoning_effort": json.RawMessage(`"low"`), "top_k": json.RawMessage(`20`),
				"chat_template_kwargs": json.RawMessage(`{"enable_thinking":false}`)},
		},
		ResponseFormat: jobs.FormatJSONSchema,
		SchemaName:     "answer",
		Schema:         json.RawMessage(`{"type":"object","properties":{"zeta":{"type":"string"},"alpha":{"type":"number"}}}`),
		Format: json.RawMessage(`{"type":"json_schema","json_schema":{"name":"answer","strict":true,"description":"d",` +
			`"schema":{"type":"object","properties":{"zeta":{"type":"string"},"alpha":{"type":"number"}}}}}`),
		ToolUse: pktype.ToolUse{
			Tools: []pktype.Tool{{Type: pktype.ToolTypeFunction, Function: pktype.ToolFunction{
				Name: "weather", Description: ptr("The weather in a city."), Strict: ptr(true),
				Parameters: json.RawMessage(`{"type":"object","properties":{"city":{"type":"string"},"at":{"type":"string"}}}`)}}},
			ToolChoice:        &pktype.ToolChoice{Mode: pktype.ToolChoiceFunction, Function: "weather"},
			ParallelToolCalls: ptr(false),
		},
		Metadata: map[string]string{"b": "2", "a": "1"},
		Responses: &jobs.ResponsesRequest{Model: "gpt-x", Instructions: ptr("be brief"), InputStart: 5,
			PreviousResponseID: "resp_p", Background: true, Store: ptr(false), User: "u", Strict: ptr(true)},
	}
}

// toolCalls are an answer's (and an assistant message's) tool calls.
func toolCalls() []pktype.ToolCall {
	return []pktype.ToolCall{
		{ID: "call_1", Type: pktype.ToolTypeFunction, Function: pktype.FunctionCall{Name: "weather", Arguments: `{"city":"Paris","at":"now"}`}},
		{ID: "call_2", Type: pktype.ToolTypeFunction, Function: pktype.FunctionCall{Name: "weather", Arguments: `{"city":"Lyon"`}},
	}
}

// sameChat compares chat requests by their JSON, byte for byte: the
// schema's key order included.
func sameChat(t *testing.T, what string, got, want *jobs.ChatRequest) {
	t.Helper()
	g, err := json.Marshal(got)
	if err != nil {
		t.Fatal(err)
	}
	w, err := json.Marshal(want)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(g, w) {
		t.Errorf("%s: chat %s, want %s", what, g, w)
	}
}

// testFrontDoorFields checks that a prompt's chat request (tools
// included), batch and custom ID, and a response's finish reason and tool
// calls, come back from every read as stored, and are empty for prompts
// and responses without them.
func testFrontDoorFields(t *testing.T, h Harness) {
	f := setup(t, h)
	plain := f.enqueue(jobs.EnqueueParams{OrgID: "org-1"})
	chat := f.enqueue(jobs.EnqueueParams{OrgID: "org-1", Chat: chatRequest("one")})
	lines, err := f.store.EnqueueBatch(f.ctx, []jobs.EnqueueParams{
		{OrgID: "org-1", CreatedBy: "u", Chat: chatRequest("two"), BatchID: "batch_x", CustomID: "line-1"},
		{OrgID: "org-1", CreatedBy: "u", Text: "three", BatchID: "batch_x", CustomID: "line-2"},
	})
	if err != nil {
		t.Fatalf("EnqueueBatch: %v", err)
	}
	want := map[string]jobs.Prompt{
		plain.PromptID:    {},
		chat.PromptID:     {Chat: chatRequest("one")},
		lines[0].PromptID: {Chat: chatRequest("two"), BatchID: "batch_x", CustomID: "line-1"},
		lines[1].PromptID: {BatchID: "batch_x", CustomID: "line-2"},
	}
	var ids []string
	for id := range want {
		ids = append(ids, id)
	}
	many, err := f.store.GetPrompts(f.ctx, "org-1", ids)
	if err != nil {
		t.Fatalf("GetPrompts: %v", err)
	}
	for id, w := range want {
		one, err := f.store.GetPrompt(f.ctx, "org-1", id)
		if err != nil {
			t.Fatalf("GetPrompt: %v", err)
		}
		for what, got := range map[string]jobs.Prompt{"GetPrompt": one, "GetPrompts": many[id]} {
			if got.BatchID != w.BatchID || got.CustomID != w.CustomID || (got.Chat == nil) != (w.Chat == nil) {
				t.Errorf("%s(%s): chat %v, batch %q, custom ID %q; want chat %v, %q, %q", what, id,
					got.Chat != nil, got.BatchID, got.CustomID, w.Chat != nil, w.BatchID, w.CustomID)
			}
			if w.Chat != nil && got.Chat != nil {
				sameChat(t, what, got.Chat, w.Chat)
			}
		}
	}

	// A response with a finish reason, tool calls, the backend that
	// answered and the backend's whole answer, and one without.
	var rids []string
	for _, c := range []struct {
		id, reason, backend string
		calls               []pktype.ToolCall
		body                json.RawMessage
	}{{plain.JobID, "", "", nil, nil}, {chat.JobID, "tool_calls", "backend-b", toolCalls(), answerBody}} {
		f.claimID("w", c.id)
		j, err := f.store.Succeed(f.ctx, jobs.SucceedParams{JobID: c.id, Worker: "w", Answer: jobs.Answer{Output: "out", FinishReason: c.reason,
			ToolCalls: c.calls, Backend: c.backend, Body: c.body}})
		if err != nil {
			t.Fatalf("Succeed: %v", err)
		}
		rids = append(rids, j.ResponseID)
	}
	rs, err := f.store.GetResponses(f.ctx, "org-1", rids)
	if err != nil {
		t.Fatalf("GetResponses: %v", err)
	}
	for i, reason := range []string{"", "tool_calls"} {
		r, err := f.store.GetResponse(f.ctx, "org-1", rids[i])
		if err != nil {
			t.Fatalf("GetResponse: %v", err)
		}
		if r.FinishReason != reason || rs[rids[i]].FinishReason != reason {
			t.Errorf("response %d: finish reason %q (GetResponse), %q (GetResponses), want %q",
				i, r.FinishReason, rs[rids[i]].FinishReason, reason)
		}
		if backend := []string{"", "backend-b"}[i]; r.Backend != backend || rs[rids[i]].Backend != backend {
			t.Errorf("response %d: backend %q (GetResponse), %q (GetResponses), want %q", i, r.Backend, rs[rids[i]].Backend, backend)
		}
		var want []pktype.ToolCall
		if i == 1 {
			want = toolCalls()
		}
		if !reflect.DeepEqual(r.ToolCalls, want) || !reflect.DeepEqual(rs[rids[i]].ToolCalls, want) {
			t.Errorf("response %d: tool calls %+v (GetResponse), %+v (GetResponses), want %+v", i, r.ToolCalls, rs[rids[i]].ToolCalls, want)
		}
		var wantBody json.RawMessage
		if i == 1 {
			wantBody = storedAnswerBody
		}
		if !bytes.Equal(r.Body, wantBody) || !bytes.Equal(rs[rids[i]].Body, wantBody) {
			t.Errorf("response %d: body %s (GetResponse), %s (GetResponses), want %s", i, r.Body, rs[rids[i]].Body, wantBody)
		}
	}
}

// answerBody is a backend's answer with what promptkit does not model:
// a second choice, reasoning, logprobs, a system fingerprint, usage
// details, and a NUL in its reasoning, which no store may keep.
var answerBody = json.RawMessage(`{"id":"x","object":"chat.completion","model":"m","system_fingerprint":"fp",` +
	`"choices":[{"index":0,"message":{"role":"assistant","content":"out","reasoning_content":"why\u0000","tool_calls":[]},` +
	`"logprobs":{"content":[{"token":"out","logprob":-0.5}]},"finish_reason":"tool_calls"},` +
	`{"index":1,"message":{"role":"assistant","content":"other"},"logprobs":null,"finish_reason":"stop"}],` +
	`"usage":{"prompt_tokens":1,"completion_tokens":2,"total_tokens":3,"completion_tokens_details":{"reasoning_tokens":1}}}`)

// storedAnswerBody is answerBody as every store keeps it
// (jobs.AnswerBody): as sent, its NUL replaced.
var storedAnswerBody = json.RawMessage(strings.Replace(string(answerBody), `\u0000`, `\ufffd`, 1))
