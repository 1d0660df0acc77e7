package promptkit_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/promptkit/promptkit"
	"github.com/promptkit/promptkit/providertest"
)

const summarySchema = `{"type":"object","properties":{"summary":{"type":"string","minLength":1}},"required":["summary"],"additionalProperties":false}`

// bundle is a provider and an engine talking to it.
type bundle struct {
	srv *providertest.Server
	eng *promptkit.Engine
}

type setupOpts struct {
	maxActive    int
	repairBudget int
	maxTokens    *int
	validate     *bool
	apiKeyEnv    string
	maxRuns      int
	maxQueued    int
	retries      *int
}

func setup(t *testing.T, o setupOpts, popts ...providertest.Option) bundle {
	t.Helper()
	srv := providertest.NewServer(popts...)
	t.Cleanup(srv.Close)
	eng, err := promptkit.New(promptkit.Config{
		Backends: []promptkit.Backend{{ID: "local", BaseURL: srv.URL, MaxActive: o.maxActive, APIKeyEnv: o.apiKeyEnv}},
		Profiles: []promptkit.Profile{{ID: "default", Backend: "local", Model: "m1", System: "You are terse.", RepairBudget: o.repairBudget, Validate: o.validate, Sampling: promptkit.Sampling{MaxTokens: o.maxTokens}}},
		Prompts: []promptkit.Prompt{
			{ID: "summarize", Version: "3", Template: "Summarize: {{.text}}",
				InputSchema:  json.RawMessage(`{"type":"object","properties":{"text":{"type":"string","maxLength":100}},"required":["text"]}`),
				OutputSchema: json.RawMessage(summarySchema)},
			{ID: "echo", Template: "Say {{.word}}"},
		},
		MaxConcurrentRuns: o.maxRuns,
		MaxQueuedRuns:     o.maxQueued,
		TransientRetries:  o.retries,
	})
	if err != nil {
		t.Fatal(err)
	}
	return bundle{srv: srv, eng: eng}
}

func summarize(text string) promptkit.RunRequest {
	return promptkit.RunRequest{PromptID: "summarize", Inputs: map[string]any{"text": text}}
}

func TestRunValidStructuredOutput(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	res, err := b.eng.Run(context.Background(), summarize("the cat sat on the mat"))
	if err != nil {
		t.Fatal(err)
	}
	if res.Validation.Status != promptkit.ValidationValid {
		t.Fatalf("validation = %+v, want valid", res.Validation)
	}
	var out struct{ Summary string }
	if err := res.DecodeOutput(&out); err != nil || out.Summary == "" {
		t.Fatalf("DecodeOutput = %+v, %v", out, err)
	}
	if res.RunID == "" || res.PromptID != "summarize" || res.PromptVersion != "3" || res.ProfileID != "default" || res.BackendID != "local" {
		t.Fatalf("identities = %+v", res)
	}
	if res.Attempts != 1 || res.RepairCalls != 0 {
		t.Fatalf("attempts = %d, repairs = %d", res.Attempts, res.RepairCalls)
	}
	if res.Usage.PromptTokens == 0 || res.Usage.TotalTokens != res.Usage.PromptTokens+res.Usage.CompletionTokens {
		t.Fatalf("usage = %+v", res.Usage)
	}
	reqs := b.srv.Requests()
	if len(reqs) != 1 {
		t.Fatalf("provider saw %d requests", len(reqs))
	}
	r := reqs[0]
	if r.Model != "m1" || len(r.Messages) != 2 || r.Messages[0].Role != "system" || r.Messages[1].Content != "Summarize: the cat sat on the mat" {
		t.Fatalf("request = %+v", r)
	}
	var rf struct {
		Type       string `json:"type"`
		JSONSchema struct {
			Name   string          `json:"name"`
			Schema json.RawMessage `json:"schema"`
		} `json:"json_schema"`
	}
	if err := json.Unmarshal(r.ResponseFormat, &rf); err != nil || rf.Type != "json_schema" || rf.JSONSchema.Name != "summarize" {
		t.Fatalf("response_format = %s (%v)", r.ResponseFormat, err)
	}
}

func TestRunTextSkipsValidation(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	b.srv.Enqueue(providertest.Reply("hello there"))
	res, err := b.eng.Run(context.Background(), promptkit.RunRequest{Text: "hi", History: []promptkit.Message{{Role: "user", Content: "earlier"}, {Role: "assistant", Content: "reply"}}})
	if err != nil {
		t.Fatal(err)
	}
	if res.Text != "hello there" || res.Validation.Status != promptkit.ValidationSkipped || res.Output != nil {
		t.Fatalf("result = %+v", res)
	}
	msgs := b.srv.Requests()[0].Messages
	var roles []string
	for _, m := range msgs {
		roles = append(roles, m.Role+":"+m.Content)
	}
	if got := strings.Join(roles, "|"); got != "system:You are terse.|user:earlier|assistant:reply|user:hi" {
		t.Fatalf("messages = %s", got)
	}
}

func TestRepairThenValid(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{repairBudget: 2})
	b.srv.Enqueue(
		providertest.Response{Text: `{"summary": 42}`, Usage: providertest.Usage{PromptTokens: 10, CompletionTokens: 3, TotalTokens: 13, CachedTokens: 4}},
		providertest.Response{Text: "```json\n{\"summary\": \"fixed\"}\n```", Usage: providertest.Usage{PromptTokens: 20, CompletionTokens: 5, TotalTokens: 25, ReasoningTokens: 2}},
	)
	res, err := b.eng.Run(context.Background(), summarize("x"))
	if err != nil {
		t.Fatal(err)
	}
	if res.Validation.Status != promptkit.ValidationValid || string(res.Output) != `{"summary":"fixed"}` {
		t.Fatalf("result = %+v output %s", res.Validation, res.Output)
	}
	if res.Attempts != 2 || res.RepairCalls != 1 {
		t.Fatalf("attempts = %d, repairs = %d", res.Attempts, res.RepairCalls)
	}
	reqs := b.srv.Requests()
	repair := reqs[1].Messages
	if len(repair) != 4 || repair[2].Role != "assistant" || repair[2].Content != `{"summary": 42}` {
		t.Fatalf("repair conversation = %+v", repair)
	}
	if !strings.Contains(repair[3].Content, "at /summary") || !strings.Contains(repair[3].Content, `"required":["summary"]`) {
		t.Fatalf("repair instruction lacks diagnostics or schema: %q", repair[3].Content)
	}
	want := promptkit.TokenUsage{PromptTokens: 30, CompletionTokens: 8, TotalTokens: 38, CachedTokens: 4, ReasoningTokens: 2}
	if res.Usage.TokenUsage != want {
		t.Fatalf("usage = %+v, want the sum of both generations %+v", res.Usage, want)
	}
}

func TestRepairBudgetExhaustedIsAResult(t *testing.T) {
	t.Parallel()
	for _, budget := range []int{0, 1, 3} {
		t.Run(fmt.Sprint("budget", budget), func(t *testing.T) {
			t.Parallel()
			b := setup(t, setupOpts{repairBudget: budget})
			for i := 0; i <= budget; i++ {
				b.srv.Enqueue(providertest.Reply("not json at all"))
			}
			res, err := b.eng.Run(context.Background(), summarize("x"))
			if err != nil {
				t.Fatalf("exhausted repair must be a result, got %v", err)
			}
			if res.Validation.Status != promptkit.ValidationInvalid || len(res.Validation.Errors) == 0 || res.Output != nil {
				t.Fatalf("validation = %+v", res.Validation)
			}
			if res.Attempts != budget+1 || res.RepairCalls != budget || b.srv.Count() != budget+1 {
				t.Fatalf("attempts = %d, repairs = %d, provider calls = %d", res.Attempts, res.RepairCalls, b.srv.Count())
			}
		})
	}
}

func TestValidationOff(t *testing.T) {
	t.Parallel()
	off := false
	b := setup(t, setupOpts{validate: &off, repairBudget: 2})
	b.srv.Enqueue(providertest.Reply("not json"))
	res, err := b.eng.Run(context.Background(), summarize("x"))
	if err != nil {
		t.Fatal(err)
	}
	if res.Validation.Status != promptkit.ValidationSkipped || b.srv.Count() != 1 {
		t.Fatalf("validation = %+v, calls = %d", res.Validation, b.srv.Count())
	}
}

func TestRequestErrors(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	const marker = "INPUT-MARKER-77"
	long := strings.Repeat(marker, 20)
	cases := []struct {
		name string
		req  promptkit.RunRequest
		want error
	}{
		{"neither prompt nor text", promptkit.RunRequest{}, promptkit.ErrInvalidRequest},
		{"both prompt and text", promptkit.RunRequest{PromptID: "echo", Text: "x"}, promptkit.ErrInvalidRequest},
		{"inputs with text", promptkit.RunRequest{Text: "x", Inputs: map[string]any{"a": 1}}, promptkit.ErrInvalidRequest},
		{"unknown prompt", promptkit.RunRequest{PromptID: "nope"}, promptkit.ErrPromptNotFound},
		{"unknown profile", promptkit.RunRequest{Text: "x", ProfileID: "nope"}, promptkit.ErrProfileNotFound},
		{"input schema", summarize(long), promptkit.ErrInvalidRequest},
		{"missing template key", promptkit.RunRequest{PromptID: "echo", Inputs: map[string]any{"other": marker}}, promptkit.ErrInvalidRequest},
		{"bad history role", promptkit.RunRequest{Text: "x", History: []promptkit.Message{{Role: "tool", Content: marker}}}, promptkit.ErrInvalidRequest},
	}
	for _, c := range cases {
		_, err := b.eng.Run(context.Background(), c.req)
		if !errors.Is(err, c.want) {
			t.Errorf("%s: err = %v, want %v", c.name, err, c.want)
		}
		if err != nil && strings.Contains(err.Error(), marker) {
			t.Errorf("%s: error quotes input: %v", c.name, err)
		}
		if _, perr := b.eng.Prepare(context.Background(), c.req); !errors.Is(perr, c.want) {
			t.Errorf("%s: Prepare err = %v, want %v", c.name, perr, c.want)
		}
	}
	if b.srv.Count() != 0 {
		t.Fatalf("invalid requests reached the provider %d times", b.srv.Count())
	}
}

func TestPrepareRendersWithoutCalling(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	p1, err := b.eng.Prepare(context.Background(), summarize("a"))
	if err != nil {
		t.Fatal(err)
	}
	p2, _ := b.eng.Prepare(context.Background(), summarize("a"))
	p3, _ := b.eng.Prepare(context.Background(), summarize("b"))
	if p1.PromptHash != p2.PromptHash || p1.PromptHash == p3.PromptHash || !strings.HasPrefix(p1.PromptHash, "sha256:") {
		t.Fatalf("hashes %s %s %s", p1.PromptHash, p2.PromptHash, p3.PromptHash)
	}
	if got := p1.Request.Messages[len(p1.Request.Messages)-1].Content; got != "Summarize: a" || p1.Request.Model != "m1" || len(p1.Request.OutputSchema) == 0 {
		t.Fatalf("prepared request = %+v", p1.Request)
	}
	if b.srv.Count() != 0 {
		t.Fatal("Prepare called the provider")
	}
	res, err := b.eng.Run(context.Background(), summarize("a"))
	if err != nil || res.PromptHash != p1.PromptHash {
		t.Fatalf("run hash %v, %v", res, err)
	}
}

func TestPreparedHandleClaimRace(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	h, err := b.eng.PrepareExecution(context.Background(), summarize("race"))
	if err != nil {
		t.Fatal(err)
	}
	if b.srv.Count() != 0 {
		t.Fatal("PrepareExecution called the provider")
	}
	const n = 16
	var wg sync.WaitGroup
	results := make(chan error, n)
	start := make(chan struct{})
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			_, err := b.eng.RunPrepared(context.Background(), h)
			results <- err
		}()
	}
	close(start)
	wg.Wait()
	close(results)
	ok := 0
	for err := range results {
		switch {
		case err == nil:
			ok++
		case !errors.Is(err, promptkit.ErrInvalidRequest):
			t.Errorf("loser err = %v, want ErrInvalidRequest", err)
		}
	}
	if ok != 1 || b.srv.Count() != 1 {
		t.Fatalf("%d runs succeeded, provider called %d times; want exactly 1", ok, b.srv.Count())
	}
}

func TestPreparedHandleMisuse(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	other := setup(t, setupOpts{})
	ctx := context.Background()

	if _, err := b.eng.RunPrepared(ctx, nil); !errors.Is(err, promptkit.ErrInvalidRequest) {
		t.Errorf("nil handle: %v", err)
	}
	foreign, _ := other.eng.PrepareExecution(ctx, summarize("x"))
	if _, err := b.eng.RunPrepared(ctx, foreign); !errors.Is(err, promptkit.ErrInvalidRequest) {
		t.Errorf("foreign handle: %v", err)
	}
	if err := b.eng.Discard(foreign); !errors.Is(err, promptkit.ErrInvalidRequest) {
		t.Errorf("discarding a foreign handle: %v", err)
	}
	// The foreign engine can still run its own handle: misuse did not consume it.
	if _, err := other.eng.RunPrepared(ctx, foreign); err != nil {
		t.Errorf("owner after foreign misuse: %v", err)
	}

	discarded, _ := b.eng.PrepareExecution(ctx, summarize("x"))
	if err := b.eng.Discard(discarded); err != nil {
		t.Fatal(err)
	}
	if _, err := b.eng.RunPrepared(ctx, discarded); !errors.Is(err, promptkit.ErrInvalidRequest) {
		t.Errorf("discarded handle: %v", err)
	}

	used, _ := b.eng.PrepareExecution(ctx, summarize("x"))
	if _, err := b.eng.RunPrepared(ctx, used); err != nil {
		t.Fatal(err)
	}
	if _, err := b.eng.RunPrepared(ctx, used); !errors.Is(err, promptkit.ErrInvalidRequest) {
		t.Errorf("reused handle: %v", err)
	}
	if b.srv.Count() != 1 {
		t.Fatalf("provider called %d times, want 1", b.srv.Count())
	}
	if _, err := b.eng.PrepareExecution(ctx, promptkit.RunRequest{PromptID: "nope"}); !errors.Is(err, promptkit.ErrPromptNotFound) {
		t.Errorf("PrepareExecution of unknown prompt: %v", err)
	}
}
