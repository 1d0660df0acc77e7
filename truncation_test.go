package promptkit_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/promptkit/promptkit"
	"github.com/promptkit/promptkit/providertest"
)

// cutOff is a 200 reply whose answer the token limit cut off, as an
// Ollama or OpenAI server sends it.
func cutOff(content string) providertest.Response {
	c, _ := json.Marshal(content)
	return providertest.Response{Body: []byte(`{"id":"c1","object":"chat.completion","created":1,"model":"m1",` +
		`"choices":[{"index":0,"message":{"role":"assistant","content":` + string(c) + `},"finish_reason":"length"}],` +
		`"usage":{"prompt_tokens":20,"completion_tokens":64,"total_tokens":84}}`)}
}

func intPtr(n int) *int { return &n }

// An answer cut off by max_tokens that fails the schema says so, and no
// repair is spent on it: the repair has the same budget and would be cut
// off again.
func TestTruncatedInvalidOutputIsNotRepaired(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{repairBudget: 2, maxTokens: intPtr(64)})
	b.srv.Enqueue(cutOff(`{"summary": "The cat sat on`))
	res, err := b.eng.Run(context.Background(), summarize("the cat sat on the mat"))
	if err != nil {
		t.Fatal(err)
	}
	if b.srv.Count() != 1 || res.Attempts != 1 || res.RepairCalls != 0 {
		t.Fatalf("provider calls %d, attempts %d, repairs %d: a truncated answer must not be repaired with the same budget",
			b.srv.Count(), res.Attempts, res.RepairCalls)
	}
	if !res.Truncated || res.FinishReason != "length" || res.Validation.Status != promptkit.ValidationInvalid {
		t.Fatalf("truncated %t, finish %q, validation %+v", res.Truncated, res.FinishReason, res.Validation)
	}
	errs := res.Validation.Errors
	if len(errs) < 3 || !strings.Contains(errs[0], "cut off at max_tokens 64") || !strings.Contains(errs[0], `finish_reason "length"`) ||
		!strings.Contains(errs[1], "not repaired") || !strings.Contains(errs[2], "not a single JSON value") {
		t.Fatalf("diagnostics = %q", errs)
	}
	p := res.OutputProblem()
	if !strings.Contains(p, "cut off") || !strings.Contains(p, "output schema") || !strings.Contains(p, "max_tokens") || strings.Contains(p, "The cat") {
		t.Fatalf("OutputProblem = %q", p)
	}
	js, _ := json.Marshal(res)
	if !strings.Contains(string(js), `"finish_reason":"length"`) || !strings.Contains(string(js), `"truncated":true`) {
		t.Fatalf("JSON = %s", js)
	}
}

// A repair whose answer is cut off ends the repairs too; with no budget
// left there is nothing to skip, so only the cut-off is said.
func TestTruncatedRepairEndsRepairs(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{repairBudget: 3})
	b.srv.Enqueue(providertest.Reply(`{"summary": 42}`), cutOff(`{"summary": "The`))
	res, err := b.eng.Run(context.Background(), summarize("x"))
	if err != nil {
		t.Fatal(err)
	}
	if b.srv.Count() != 2 || res.RepairCalls != 1 || !res.Truncated {
		t.Fatalf("calls %d, repairs %d, truncated %t", b.srv.Count(), res.RepairCalls, res.Truncated)
	}
	if e := res.Validation.Errors; !strings.Contains(e[0], "provider's default token limit") || !strings.Contains(e[1], "not repaired") {
		t.Fatalf("diagnostics = %q", e)
	}

	b = setup(t, setupOpts{repairBudget: 0, maxTokens: intPtr(10)})
	b.srv.Enqueue(cutOff(`{"summ`))
	res, err = b.eng.Run(context.Background(), summarize("x"))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range res.Validation.Errors {
		if strings.Contains(e, "not repaired") {
			t.Fatalf("no repair was due, yet %q", e)
		}
	}
	if !strings.Contains(res.Validation.Errors[0], "max_tokens 10") {
		t.Fatalf("diagnostics = %q", res.Validation.Errors)
	}
}

// An answer cut off without an output schema is still a result, marked
// truncated; an answer that ends normally is not.
func TestTruncatedTextIsMarked(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	b.srv.Enqueue(cutOff("Once upon a time there"), providertest.Reply("Hello."))
	res, err := b.eng.Run(context.Background(), promptkit.RunRequest{Text: "tell a story"})
	if err != nil {
		t.Fatal(err)
	}
	if !res.Truncated || res.Validation.Status != promptkit.ValidationSkipped || !strings.Contains(res.OutputProblem(), "cut off") {
		t.Fatalf("truncated %t, validation %+v, problem %q", res.Truncated, res.Validation, res.OutputProblem())
	}
	res, err = b.eng.Run(context.Background(), promptkit.RunRequest{Text: "hi"})
	if err != nil {
		t.Fatal(err)
	}
	if res.Truncated || res.FinishReason != "stop" || res.OutputProblem() != "" {
		t.Fatalf("truncated %t, finish %q, problem %q", res.Truncated, res.FinishReason, res.OutputProblem())
	}
	js, _ := json.Marshal(res)
	if !strings.Contains(string(js), `"truncated":false`) {
		t.Fatalf("JSON must say truncated false: %s", js)
	}
}

// An invalid answer that was not cut off is repaired as before, and its
// problem names the repairs.
func TestInvalidOutputProblem(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{repairBudget: 1})
	b.srv.Enqueue(providertest.Reply("not json"), providertest.Reply("still not json"))
	res, err := b.eng.Run(context.Background(), summarize("x"))
	if err != nil {
		t.Fatal(err)
	}
	if res.Truncated || res.RepairCalls != 1 || res.OutputProblem() != "output does not satisfy the prompt's output schema after 1 repair generation(s)" {
		t.Fatalf("truncated %t, repairs %d, problem %q", res.Truncated, res.RepairCalls, res.OutputProblem())
	}
	var nilRes *promptkit.RunResult
	if nilRes.OutputProblem() != "" {
		t.Fatal("nil result has a problem")
	}
}
