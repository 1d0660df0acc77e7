package promptkit_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/promptkit/promptkit"
	"github.com/promptkit/promptkit/providertest"
)

// A prompt with an output schema, run against a fake provider. The output
// is validated and decoded into a struct.
func ExampleEngine_Run() {
	srv := providertest.NewServer()
	defer srv.Close()
	srv.Enqueue(providertest.Reply(`{"city": "Paris"}`))

	eng, err := promptkit.New(promptkit.Config{
		Backends: []promptkit.Backend{{ID: "local", BaseURL: srv.URL, MaxActive: 4}},
		Profiles: []promptkit.Profile{{ID: "default", Backend: "local", Model: "some-model"}},
		Prompts: []promptkit.Prompt{{
			ID:           "capital",
			Template:     "What is the capital of {{.country}}? Answer as JSON.",
			OutputSchema: json.RawMessage(`{"type":"object","required":["city"],"properties":{"city":{"type":"string"}}}`),
		}},
	})
	if err != nil {
		panic(err)
	}
	res, err := eng.Run(context.Background(), promptkit.RunRequest{
		PromptID: "capital",
		Inputs:   map[string]any{"country": "France"},
	})
	if err != nil {
		panic(err)
	}
	var out struct{ City string }
	if err := res.DecodeOutput(&out); err != nil {
		panic(err)
	}
	fmt.Println(res.Validation.Status, out.City, res.Attempts)
	// Output: valid Paris 1
}

// An output that fails its schema is repaired within the profile's budget.
func ExampleEngine_Run_repair() {
	srv := providertest.NewServer()
	defer srv.Close()
	srv.Enqueue(providertest.Reply(`Sure! The answer is 4.`), providertest.Reply(`{"sum": 4}`))

	eng, _ := promptkit.New(promptkit.Config{
		Backends: []promptkit.Backend{{ID: "local", BaseURL: srv.URL}},
		Profiles: []promptkit.Profile{{ID: "default", Backend: "local", Model: "m", RepairBudget: 1}},
		Prompts: []promptkit.Prompt{{
			ID:           "add",
			Template:     "Add {{.a}} and {{.b}}.",
			OutputSchema: json.RawMessage(`{"type":"object","required":["sum"],"properties":{"sum":{"type":"integer"}}}`),
		}},
	})
	res, _ := eng.Run(context.Background(), promptkit.RunRequest{PromptID: "add", Inputs: map[string]any{"a": 2, "b": 2}})
	fmt.Println(res.Validation.Status, string(res.Output), res.RepairCalls)
	// Output: valid {"sum":4} 1
}

// A whole conversation with an ad-hoc output schema and per-request
// sampling values, as an OpenAI chat request carries them: the answer is
// validated, and repaired, like a named prompt's.
func ExampleEngine_Run_conversation() {
	srv := providertest.NewServer()
	defer srv.Close()
	srv.Enqueue(providertest.Reply(`{"city": "Paris"}`))

	eng, _ := promptkit.New(promptkit.Config{
		Backends: []promptkit.Backend{{ID: "local", BaseURL: srv.URL}},
		Profiles: []promptkit.Profile{{ID: "default", Backend: "local", Model: "m", RepairBudget: 1}},
	})
	temperature := 0.0
	res, err := eng.Run(context.Background(), promptkit.RunRequest{
		Messages: []promptkit.Message{
			{Role: promptkit.RoleSystem, Content: "Answer in JSON."},
			{Role: promptkit.RoleUser, Content: "What is the capital of France?"},
		},
		Sampling:         promptkit.Sampling{Temperature: &temperature},
		OutputSchema:     json.RawMessage(`{"type":"object","required":["city"],"properties":{"city":{"type":"string"}}}`),
		OutputSchemaName: "capital",
	})
	if err != nil {
		panic(err)
	}
	fmt.Println(res.Validation.Status, string(res.Output), res.FinishReason)
	// Output: valid {"city":"Paris"} stop
}

// Provider failures are typed: the status is available, provider text is
// only in Detail, never in the error string.
func ExampleGenerationError() {
	srv := providertest.NewServer()
	defer srv.Close()
	srv.Enqueue(providertest.Status(401))

	eng, _ := promptkit.New(promptkit.Config{
		Backends: []promptkit.Backend{{ID: "local", BaseURL: srv.URL}},
		Profiles: []promptkit.Profile{{ID: "default", Backend: "local", Model: "m"}},
	})
	_, err := eng.Run(context.Background(), promptkit.RunRequest{Text: "hello"})
	var ge *promptkit.GenerationError
	if errors.As(err, &ge) {
		fmt.Println(ge.StatusCode(), errors.Is(err, promptkit.ErrLLMGenerate))
	}
	// Output: 401 true
}

// PrepareExecution renders now and runs later, exactly once.
func ExampleEngine_PrepareExecution() {
	srv := providertest.NewServer()
	defer srv.Close()
	srv.Enqueue(providertest.Reply("hi"))

	eng, _ := promptkit.New(promptkit.Config{
		Backends: []promptkit.Backend{{ID: "local", BaseURL: srv.URL}},
		Profiles: []promptkit.Profile{{ID: "default", Backend: "local", Model: "m"}},
	})
	ctx := context.Background()
	h, err := eng.PrepareExecution(ctx, promptkit.RunRequest{Text: "say hi"})
	if err != nil {
		panic(err)
	}
	res, _ := eng.RunPrepared(ctx, h)
	_, again := eng.RunPrepared(ctx, h)
	fmt.Println(res.Text, errors.Is(again, promptkit.ErrInvalidRequest))
	// Output: hi true
}

// The profiles a RunRequest may select, e.g. to offer them in a form.
func ExampleEngine_Profiles() {
	eng, err := promptkit.New(promptkit.Config{
		Backends: []promptkit.Backend{{ID: "local", BaseURL: "http://127.0.0.1:1"}},
		Profiles: []promptkit.Profile{
			{ID: "precise", Backend: "local", Model: "m"},
			{ID: "default", Backend: "local", Model: "m"},
			{ID: "creative", Backend: "local", Model: "m"},
		},
	})
	if err != nil {
		panic(err)
	}
	fmt.Println(eng.Profiles())
	// Output: [creative default precise]
}

// Prices make every run carry its cost. A model without a price, or a call
// whose usage the provider did not report, has an unknown cost, not zero.
func ExampleRunResult_cost() {
	srv := providertest.NewServer()
	defer srv.Close()
	srv.Enqueue(providertest.Response{Text: "Paris", Usage: providertest.Usage{PromptTokens: 1200, CompletionTokens: 300, TotalTokens: 1500}})

	eng, err := promptkit.New(promptkit.Config{
		Backends: []promptkit.Backend{{ID: "local", BaseURL: srv.URL}},
		Profiles: []promptkit.Profile{{ID: "default", Backend: "local", Model: "some-model"}},
		// USD per million tokens.
		Prices: []promptkit.Price{{Model: "some-model", Input: 2.5, Output: 10}},
	})
	if err != nil {
		panic(err)
	}
	res, err := eng.Run(context.Background(), promptkit.RunRequest{Text: "What is the capital of France?"})
	if err != nil {
		panic(err)
	}
	// 1200 × 2.5 + 300 × 10 per million tokens.
	fmt.Printf("known %v, $%.4f\n", res.Cost.Known, res.Cost.USD)
	// Output: known true, $0.0060
}

// Parameters promptkit does not model — a reasoning model's effort, a
// self-hosted server's top_k, several choices — are sent as given, and
// the answer's reasoning and every choice come back.
func ExampleEngine_Run_extraParameters() {
	srv := providertest.NewServer(providertest.WithReasoning())
	defer srv.Close()
	eng, _ := promptkit.New(promptkit.Config{
		Backends: []promptkit.Backend{{ID: "local", BaseURL: srv.URL}},
		Profiles: []promptkit.Profile{{ID: "default", Backend: "local", Model: "qwen3"}},
	})
	req := promptkit.RunRequest{Text: "Name a colour"}
	req.Extra = promptkit.Params{
		"reasoning_effort": json.RawMessage(`"low"`),
		"top_k":            json.RawMessage(`20`),
		"n":                json.RawMessage(`2`),
	}
	res, err := eng.Run(context.Background(), req)
	if err != nil {
		panic(err)
	}
	var sent map[string]json.RawMessage
	_ = json.Unmarshal(srv.Requests()[0].Body, &sent)
	fmt.Println(string(sent["reasoning_effort"]), string(sent["top_k"]), len(res.Choices), res.Reasoning != "", res.Usage.Known.ReasoningTokens)
	// Output: "low" 20 2 true true
}
