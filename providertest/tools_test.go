package providertest_test

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/promptkit/promptkit/pktype"
	"github.com/promptkit/promptkit/providertest"
)

const toolsBody = `"tools":[{"type":"function","function":{"name":"lookup","parameters":{"type":"object"}}},
	{"type":"function","function":{"name":"weather","parameters":{"type":"object","required":["city"],"properties":{"city":{"type":"string"}}}}}]`

// answerMessage decodes a completion's first choice.
func answerMessage(t *testing.T, r result) (msg struct {
	Content   *string           `json:"content"`
	ToolCalls []pktype.ToolCall `json:"tool_calls"`
}, finish string) {
	t.Helper()
	var env struct {
		Choices []struct {
			Message      json.RawMessage `json:"message"`
			FinishReason string          `json:"finish_reason"`
		} `json:"choices"`
	}
	if r.status != 200 || json.Unmarshal(r.body, &env) != nil || len(env.Choices) != 1 {
		t.Fatalf("answer %d %s", r.status, r.body)
	}
	if err := json.Unmarshal(env.Choices[0].Message, &msg); err != nil {
		t.Fatal(err)
	}
	return msg, env.Choices[0].FinishReason
}

// The default responder calls the tool tool_choice names (else the
// first) with arguments valid against its parameters, and answers in
// words once the tool's result is in the conversation.
func TestDefaultToolCalls(t *testing.T) {
	s := newServer(t)
	r := post(t, s.URL+"/chat/completions", `{"model":"m",`+toolsBody+`,"tool_choice":{"type":"function","function":{"name":"weather"}},
		"messages":[{"role":"user","content":"weather in Paris?"}]}`)
	msg, finish := answerMessage(t, r)
	if finish != "tool_calls" || msg.Content != nil || len(msg.ToolCalls) != 1 {
		t.Fatalf("answer %s", r.body)
	}
	c := msg.ToolCalls[0]
	var args map[string]any
	if c.ID == "" || c.Type != "function" || c.Function.Name != "weather" || json.Unmarshal([]byte(c.Function.Arguments), &args) != nil {
		t.Fatalf("call %+v", c)
	}
	if _, ok := args["city"].(string); !ok {
		t.Errorf("arguments %s lack the required city", c.Function.Arguments)
	}
	if got := s.Requests()[0].Tools; !reflect.DeepEqual(got, []string{"lookup", "weather"}) {
		t.Errorf("recorded tools %v", got)
	}

	// Without a choice, the first tool; with none, words.
	msg, _ = answerMessage(t, post(t, s.URL+"/chat/completions", `{"model":"m",`+toolsBody+`,"messages":[{"role":"user","content":"x"}]}`))
	if len(msg.ToolCalls) != 1 || msg.ToolCalls[0].Function.Name != "lookup" {
		t.Errorf("default choice called %+v", msg.ToolCalls)
	}
	msg, finish = answerMessage(t, post(t, s.URL+"/chat/completions", `{"model":"m",`+toolsBody+`,"tool_choice":"none","messages":[{"role":"user","content":"x"}]}`))
	if len(msg.ToolCalls) != 0 || finish != "stop" || msg.Content == nil {
		t.Errorf("tool_choice none answered %+v %s", msg, finish)
	}

	// The tool's result answers the call: the reply is in words, and
	// shows the result.
	msg, finish = answerMessage(t, post(t, s.URL+"/chat/completions", `{"model":"m",`+toolsBody+`,"messages":[
		{"role":"user","content":"weather in Paris?"},
		{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"weather","arguments":"{}"}}]},
		{"role":"tool","tool_call_id":"call_1","content":"sunny and 21 degrees"}]}`))
	if finish != "stop" || msg.Content == nil || !strings.Contains(*msg.Content, "sunny and 21 degrees") || len(msg.ToolCalls) != 0 {
		t.Errorf("after the result: %+v %s", msg, finish)
	}
	got := s.Requests()[3].Messages
	if got[1].ToolCalls[0].ID != "call_1" || got[2].ToolCallID != "call_1" {
		t.Errorf("recorded messages %+v", got)
	}
}

// A scripted tool call streams as OpenAI streams one: the call's id,
// type and name, then its arguments in pieces that join back whole, and
// finish_reason tool_calls.
func TestStreamedToolCall(t *testing.T) {
	s := newServer(t)
	args := `{"city":"Zürich","note":"né"}`
	s.Enqueue(providertest.CallTool("weather", args))
	r := post(t, s.URL+"/chat/completions", `{"model":"m","stream":true,"messages":[{"role":"user","content":"x"}]}`)
	body := string(r.body)
	var joined strings.Builder
	var heads []pktype.ToolCall
	finish := ""
	for _, ev := range strings.Split(strings.TrimSuffix(body, "data: [DONE]\n\n"), "\n\n") {
		var c struct {
			Choices []struct {
				Delta struct {
					ToolCalls []struct {
						Index    int                 `json:"index"`
						ID       string              `json:"id"`
						Type     string              `json:"type"`
						Function pktype.FunctionCall `json:"function"`
					} `json:"tool_calls"`
				} `json:"delta"`
				FinishReason *string `json:"finish_reason"`
			} `json:"choices"`
		}
		if ev == "" {
			continue
		}
		if err := json.Unmarshal([]byte(strings.TrimPrefix(ev, "data: ")), &c); err != nil {
			t.Fatalf("event %q: %v", ev, err)
		}
		for _, ch := range c.Choices {
			for _, d := range ch.Delta.ToolCalls {
				if d.Index != 0 {
					t.Errorf("index %d", d.Index)
				}
				if d.ID != "" {
					heads = append(heads, pktype.ToolCall{ID: d.ID, Type: d.Type, Function: pktype.FunctionCall{Name: d.Function.Name}})
				}
				joined.WriteString(d.Function.Arguments)
			}
			if ch.FinishReason != nil {
				finish = *ch.FinishReason
			}
		}
	}
	if len(heads) != 1 || heads[0].ID != "call_1" || heads[0].Type != "function" || heads[0].Function.Name != "weather" {
		t.Errorf("call heads %+v", heads)
	}
	if joined.String() != args || finish != "tool_calls" {
		t.Errorf("arguments %q, finish %q; want %q, tool_calls", joined.String(), finish, args)
	}
}
