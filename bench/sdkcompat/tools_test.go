package sdkcompat

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/shared"
)

// weatherParams offers the SDK's function tool for "weather".
func weatherParams(text string) openai.ChatCompletionNewParams {
	p := userChat("default", text)
	p.Tools = []openai.ChatCompletionToolUnionParam{openai.ChatCompletionFunctionTool(shared.FunctionDefinitionParam{
		Name:        "weather",
		Description: openai.String("The weather in a city now."),
		Parameters: shared.FunctionParameters{
			"type": "object", "required": []string{"city"},
			"properties": map[string]any{"city": map[string]any{"type": "string"}},
		},
	})}
	return p
}

// The tools round trip as an SDK program writes it: the model's call,
// the program's result sent back with the SDK's own ToParam of the
// assistant message, and the answer in words; streamed too, through the
// SDK's accumulator.
func TestFrontDoorTools(t *testing.T) {
	t.Parallel()
	s := startService(t)
	cl := s.client(s.token)
	ctx := t.Context()

	p := weatherParams("What is the weather in Paris?")
	c, err := cl.Chat.Completions.New(ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Choices) != 1 || c.Choices[0].FinishReason != "tool_calls" || len(c.Choices[0].Message.ToolCalls) != 1 {
		t.Fatalf("completion %s", c.RawJSON())
	}
	call := c.Choices[0].Message.ToolCalls[0]
	var args struct {
		City *string `json:"city"`
	}
	if call.Type != "function" || call.Function.Name != "weather" || json.Unmarshal([]byte(call.Function.Arguments), &args) != nil || args.City == nil {
		t.Fatalf("call %s", call.RawJSON())
	}

	p.Messages = append(p.Messages, c.Choices[0].Message.ToParam(), openai.ToolMessage("sunny, 21 degrees", call.ID))
	c, err = cl.Chat.Completions.New(ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	if c.Choices[0].FinishReason != "stop" || !strings.Contains(c.Choices[0].Message.Content, "sunny, 21 degrees") {
		t.Fatalf("after the result: %s", c.RawJSON())
	}
	// The backend saw the tools both times, and the call's result.
	reqs := s.main.Requests()
	if len(reqs) != 2 || len(reqs[0].Tools) != 1 || len(reqs[1].Tools) != 1 {
		t.Fatalf("backend requests %+v", reqs)
	}
	if last := reqs[1].Messages[len(reqs[1].Messages)-1]; last.Role != "tool" || last.ToolCallID != call.ID {
		t.Errorf("backend got %+v last", last)
	}

	// Streamed, with a named tool choice.
	p = weatherParams("And in Lyon?")
	p.ToolChoice = openai.ToolChoiceOptionFunctionToolChoice(openai.ChatCompletionNamedToolChoiceFunctionParam{Name: "weather"})
	stream := cl.Chat.Completions.NewStreaming(ctx, p)
	defer stream.Close()
	var acc openai.ChatCompletionAccumulator
	for stream.Next() {
		if ch := stream.Current(); !acc.AddChunk(ch) {
			t.Fatalf("accumulator refused chunk %s", ch.RawJSON())
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	tc, ok := acc.JustFinishedToolCall()
	if len(acc.Choices) != 1 || acc.Choices[0].FinishReason != "tool_calls" || len(acc.Choices[0].Message.ToolCalls) != 1 {
		t.Fatalf("accumulated %+v", acc.Choices)
	}
	got := acc.Choices[0].Message.ToolCalls[0]
	if got.ID == "" || got.Function.Name != "weather" || json.Unmarshal([]byte(got.Function.Arguments), &args) != nil || args.City == nil {
		t.Errorf("streamed call %+v (just finished: %+v %v)", got, tc, ok)
	}
}
