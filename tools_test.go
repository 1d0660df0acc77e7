package promptkit_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/promptkit/promptkit"
	"github.com/promptkit/promptkit/providertest"
)

var weatherTool = promptkit.Tool{Type: "function", Function: promptkit.ToolFunction{Name: "weather", Description: new("The weather now."),
	Parameters: json.RawMessage(`{"type":"object","required":["city"],"properties":{"city":{"type":"string"}}}`)}}

// A run offering tools sends them as OpenAI's tools, tool_choice and
// parallel_tool_calls; the model's calls come back in RunResult.ToolCalls
// and are not checked against the output schema, since they are not the
// answer; the tools' results go back in a next run's Messages, and that
// answer is checked.
func TestRunTools(t *testing.T) {
	srv, eng := chatEngine(t, 0, nil)
	srv.Enqueue(providertest.CallTool("weather", `{"city":"Paris"}`), providertest.Reply(`{"summary":"sunny"}`))
	no := false
	schema := json.RawMessage(summarySchema)
	use := promptkit.ToolUse{Tools: []promptkit.Tool{weatherTool}, ToolChoice: &promptkit.ToolChoice{Mode: "required"}, ParallelToolCalls: &no}
	ask := promptkit.Message{Role: promptkit.RoleUser, Content: "Weather in Paris?"}
	res, err := eng.Run(context.Background(), promptkit.RunRequest{Messages: []promptkit.Message{ask}, OutputSchema: schema, ToolUse: use})
	if err != nil {
		t.Fatal(err)
	}
	want := []promptkit.ToolCall{{ID: "call_1", Type: "function", Function: promptkit.FunctionCall{Name: "weather", Arguments: `{"city":"Paris"}`}}}
	if !reflect.DeepEqual(res.ToolCalls, want) || res.FinishReason != "tool_calls" || res.Validation.Status != promptkit.ValidationSkipped || res.RepairCalls != 0 {
		t.Fatalf("result %+v", res)
	}
	b := body(t, srv, 0)
	if !strings.Contains(string(b["tools"]), `"name":"weather"`) || string(b["tool_choice"]) != `"required"` || string(b["parallel_tool_calls"]) != "false" {
		t.Errorf("request %s %s %s", b["tools"], b["tool_choice"], b["parallel_tool_calls"])
	}

	res, err = eng.Run(context.Background(), promptkit.RunRequest{OutputSchema: schema, ToolUse: use, Messages: []promptkit.Message{
		ask,
		{Role: promptkit.RoleAssistant, ToolCalls: res.ToolCalls},
		{Role: promptkit.RoleTool, ToolCallID: "call_1", Content: "sunny"},
	}})
	if err != nil {
		t.Fatal(err)
	}
	if res.Validation.Status != promptkit.ValidationValid || string(res.Output) != `{"summary":"sunny"}` || len(res.ToolCalls) != 0 {
		t.Fatalf("answer %+v", res)
	}
	var msgs []map[string]json.RawMessage
	if err := json.Unmarshal(body(t, srv, 1)["messages"], &msgs); err != nil {
		t.Fatal(err)
	}
	// The profile's system text, the question, the call (null content),
	// the result.
	if len(msgs) != 4 || string(msgs[2]["content"]) != "null" || string(msgs[3]["tool_call_id"]) != `"call_1"` {
		t.Errorf("messages %s", body(t, srv, 1)["messages"])
	}
}

// What a run's tools must be: the request is refused before any call,
// naming the rule and never a value.
func TestRunToolsRefused(t *testing.T) {
	srv, eng := chatEngine(t, 0, nil)
	user := promptkit.Message{Role: promptkit.RoleUser, Content: "x"}
	call := promptkit.ToolCall{ID: "c", Type: "function", Function: promptkit.FunctionCall{Name: "weather"}}
	bad := weatherTool
	bad.Function.Name = "SECRET name"
	for _, c := range []struct {
		name string
		req  promptkit.RunRequest
		want string
	}{
		{"bad name", promptkit.RunRequest{Text: "x", ToolUse: promptkit.ToolUse{Tools: []promptkit.Tool{bad}}}, "tools[0].function.name"},
		{"two of a name", promptkit.RunRequest{Text: "x", ToolUse: promptkit.ToolUse{Tools: []promptkit.Tool{weatherTool, weatherTool}}}, "tools[1].function.name"},
		{"choice of no tool", promptkit.RunRequest{Text: "x", ToolUse: promptkit.ToolUse{Tools: []promptkit.Tool{weatherTool},
			ToolChoice: &promptkit.ToolChoice{Mode: "function", Function: "other"}}}, "tool_choice.function.name"},
		{"choice without tools", promptkit.RunRequest{Text: "x", ToolUse: promptkit.ToolUse{ToolChoice: &promptkit.ToolChoice{Mode: "auto"}}}, "tool_choice"},
		{"result of no call", promptkit.RunRequest{Messages: []promptkit.Message{user, {Role: promptkit.RoleTool, ToolCallID: "c", Content: "r"}}}, "Messages[1].tool_call_id"},
		{"calls on a user message", promptkit.RunRequest{Messages: []promptkit.Message{{Role: promptkit.RoleUser, Content: "x", ToolCalls: []promptkit.ToolCall{call}}}}, "Messages[0].tool_calls"},
		{"schema too deep", promptkit.RunRequest{Text: "x", ToolUse: promptkit.ToolUse{Tools: []promptkit.Tool{{Type: "function", Function: promptkit.ToolFunction{Name: "deep",
			Parameters: json.RawMessage(strings.Repeat(`{"items":`, 100) + `{}` + strings.Repeat(`}`, 100))}}}}}, "tools[0].function.parameters"},
	} {
		_, err := eng.Run(context.Background(), c.req)
		if !errors.Is(err, promptkit.ErrInvalidRequest) || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "SECRET") {
			t.Errorf("%s: %v, want ErrInvalidRequest naming %s", c.name, err, c.want)
		}
	}
	if n := srv.Count(); n != 0 {
		t.Errorf("refused runs made %d provider calls", n)
	}
}

// A run can offer tools: the model answers with calls, which the caller
// runs, sending their results back in the next run's Messages.
func ExampleEngine_Run_tools() {
	srv := providertest.NewServer() // calls the first tool offered, then answers from the results
	defer srv.Close()
	eng, _ := promptkit.New(promptkit.Config{
		Backends: []promptkit.Backend{{ID: "local", BaseURL: srv.URL}},
		Profiles: []promptkit.Profile{{ID: "default", Backend: "local", Model: "m"}},
	})
	tools := promptkit.ToolUse{Tools: []promptkit.Tool{{Type: "function", Function: promptkit.ToolFunction{
		Name:       "weather",
		Parameters: json.RawMessage(`{"type":"object","required":["city"],"properties":{"city":{"type":"string"}}}`),
	}}}}
	msgs := []promptkit.Message{{Role: promptkit.RoleUser, Content: "What is the weather in Paris?"}}
	for {
		res, err := eng.Run(context.Background(), promptkit.RunRequest{Messages: msgs, ToolUse: tools})
		if err != nil {
			panic(err)
		}
		if len(res.ToolCalls) == 0 {
			fmt.Println(res.Text)
			return
		}
		msgs = append(msgs, promptkit.Message{Role: promptkit.RoleAssistant, Content: res.Text, ToolCalls: res.ToolCalls})
		for _, c := range res.ToolCalls {
			fmt.Println("calling", c.Function.Name)
			msgs = append(msgs, promptkit.Message{Role: promptkit.RoleTool, ToolCallID: c.ID, Content: "sunny, 21 degrees"})
		}
	}
	// Output:
	// calling weather
	// Fake provider reply: sunny, 21 degrees
}
