package pktype_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/promptkit/promptkit/pktype"
)

func TestUsageJSONUnknownIsNull(t *testing.T) {
	t.Parallel()
	u := pktype.Usage{
		TokenUsage: pktype.TokenUsage{PromptTokens: 12, CompletionTokens: 3, TotalTokens: 15},
		Known:      pktype.TokenUsagePresence{PromptTokens: true, CompletionTokens: true, TotalTokens: true, CachedTokens: true},
	}
	b, err := json.Marshal(u)
	if err != nil {
		t.Fatal(err)
	}
	const want = `{"prompt_tokens":12,"completion_tokens":3,"total_tokens":15,"cached_tokens":0,"reasoning_tokens":null}`
	if string(b) != want {
		t.Fatalf("JSON = %s, want %s", b, want)
	}
	var back pktype.Usage
	if err := json.Unmarshal(b, &back); err != nil || back != u {
		t.Fatalf("round trip = %+v, %v; want %+v", back, err, u)
	}
}

func TestUsageJSONDecoding(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, in string
		want     pktype.Usage
	}{
		{"missing keys are unknown", `{"total_tokens": 4}`,
			pktype.Usage{TokenUsage: pktype.TokenUsage{TotalTokens: 4}, Known: pktype.TokenUsagePresence{TotalTokens: true}}},
		{"empty object", `{}`, pktype.Usage{}},
		// The form stores wrote before unknown counts were null.
		{"older stored form", `{"prompt_tokens":7,"completion_tokens":0,"total_tokens":10,"cached_tokens":0,"reasoning_tokens":0,"known":{"prompt_tokens":true,"total_tokens":true}}`,
			pktype.Usage{TokenUsage: pktype.TokenUsage{PromptTokens: 7, TotalTokens: 10}, Known: pktype.TokenUsagePresence{PromptTokens: true, TotalTokens: true}}},
		{"older form drops values it calls unknown", `{"prompt_tokens":7,"known":{}}`, pktype.Usage{}},
	}
	for _, c := range cases {
		var got pktype.Usage
		if err := json.Unmarshal([]byte(c.in), &got); err != nil || got != c.want {
			t.Errorf("%s: %+v, %v; want %+v", c.name, got, err, c.want)
		}
	}
	for _, bad := range []string{`[]`, `{"prompt_tokens":"7"}`, `{"prompt_tokens":1.5}`, `{"known":3}`} {
		var got pktype.Usage
		if err := json.Unmarshal([]byte(bad), &got); err == nil {
			t.Errorf("%s: decoded as %+v, want an error", bad, got)
		}
	}
}

func TestObservedUsageProjection(t *testing.T) {
	t.Parallel()
	o := pktype.ObservedTokenUsage{
		PromptTokens: pktype.ObservedTokenCount{Value: 5, Known: true, Complete: false},
		CachedTokens: pktype.ObservedTokenCount{Value: 0, Known: true, Complete: true},
	}
	want := pktype.Usage{TokenUsage: pktype.TokenUsage{PromptTokens: 5}, Known: pktype.TokenUsagePresence{PromptTokens: true, CachedTokens: true}}
	if got := o.Usage(); got != want {
		t.Fatalf("Usage() = %+v, want %+v", got, want)
	}
}

func TestGenerateResponsePresence(t *testing.T) {
	t.Parallel()
	legacy := &pktype.GenerateResponse{Usage: pktype.TokenUsage{PromptTokens: 3}}
	if got := legacy.Presence(); got != (pktype.TokenUsagePresence{PromptTokens: true}) {
		t.Errorf("nil presence: %+v, want only the nonzero count known", got)
	}
	explicit := &pktype.GenerateResponse{UsagePresence: &pktype.TokenUsagePresence{CompletionTokens: true}}
	if got := explicit.Presence(); got != (pktype.TokenUsagePresence{CompletionTokens: true}) {
		t.Errorf("explicit presence: %+v", got)
	}
}

func TestRetryableStatus(t *testing.T) {
	t.Parallel()
	for code := 100; code < 600; code++ {
		want := code == 429 || code == 500 || code == 502 || code == 503 || code == 504
		if got := pktype.RetryableStatus(code); got != want {
			t.Errorf("RetryableStatus(%d) = %t", code, got)
		}
	}
}

func TestNarrowSentinels(t *testing.T) {
	t.Parallel()
	for _, s := range []error{pktype.ErrMissingCredential, pktype.ErrPromptRender} {
		err := fmt.Errorf("%w: detail", s)
		if !errors.Is(err, s) || !errors.Is(err, pktype.ErrInvalidRequest) {
			t.Errorf("%v: does not match itself and ErrInvalidRequest", err)
		}
	}
	if errors.Is(pktype.ErrMissingCredential, pktype.ErrPromptRender) || errors.Is(pktype.ErrInvalidRequest, pktype.ErrMissingCredential) {
		t.Error("sentinels match what they should not")
	}
}

func TestClassify(t *testing.T) {
	t.Parallel()
	status := pktype.NewGenerationError("b", 503, "secret", time.Time{})
	cases := []struct {
		name string
		err  error
		want pktype.ExecutionFailureKind
	}{
		{"nil", nil, pktype.ExecutionFailureNone},
		{"canceled", context.Canceled, pktype.ExecutionFailureCanceled},
		{"wrapped canceled", fmt.Errorf("x: %w", context.Canceled), pktype.ExecutionFailureCanceled},
		{"deadline", context.DeadlineExceeded, pktype.ExecutionFailureDeadline},
		{"capacity cut short", fmt.Errorf("%w: %w", pktype.ErrCapacity, context.Canceled), pktype.ExecutionFailureCanceled},
		{"capacity", fmt.Errorf("%w: admission queue full", pktype.ErrCapacity), pktype.ExecutionFailureCapacity},
		{"config", fmt.Errorf("%w: x", pktype.ErrInvalidConfig), pktype.ExecutionFailureInvalidConfig},
		{"prompt", fmt.Errorf("%w: x", pktype.ErrPromptNotFound), pktype.ExecutionFailurePromptNotFound},
		{"profile", fmt.Errorf("%w: x", pktype.ErrProfileNotFound), pktype.ExecutionFailureProfileNotFound},
		{"render", fmt.Errorf("%w: x", pktype.ErrPromptRender), pktype.ExecutionFailurePromptRender},
		{"missing credential", fmt.Errorf("%w: x", pktype.ErrMissingCredential), pktype.ExecutionFailureInvalidRequest},
		{"request", fmt.Errorf("%w: x", pktype.ErrInvalidRequest), pktype.ExecutionFailureInvalidRequest},
		{"validation", fmt.Errorf("%w: x", pktype.ErrValidation), pktype.ExecutionFailureValidation},
		{"status", status, pktype.ExecutionFailureProviderStatus},
		{"wrapped status", fmt.Errorf("gen: %w", status), pktype.ExecutionFailureProviderStatus},
		{"exhausted status", pktype.NewRetryExhaustedError(3, status), pktype.ExecutionFailureProviderStatus},
		{"transport", fmt.Errorf("%w: %w", pktype.ErrLLMGenerate, pktype.ErrTransport), pktype.ExecutionFailureTransport},
		{"malformed", fmt.Errorf("%w: %w", pktype.ErrLLMGenerate, pktype.ErrMalformedResponse), pktype.ExecutionFailureMalformed},
		{"generate", fmt.Errorf("%w: injected", pktype.ErrLLMGenerate), pktype.ExecutionFailureGeneration},
		{"other", errors.New("something"), pktype.ExecutionFailureOther},
	}
	for _, c := range cases {
		if got := pktype.Classify(c.err); got != c.want {
			t.Errorf("%s: Classify = %q, want %q", c.name, got, c.want)
		}
	}
}

func TestErrorsCarryNoDetail(t *testing.T) {
	t.Parallel()
	const marker = "PROVIDER-TEXT-MARKER"
	ge := pktype.NewGenerationError("b", 503, marker, time.Time{})
	ex := pktype.NewRetryExhaustedError(3, ge)
	for _, s := range []string{ge.Error(), fmt.Sprintf("%#v", ge), ex.Error(), fmt.Sprintf("%#v", ex), fmt.Sprintf("%v", ex)} {
		if len(s) == 0 || strings.Contains(s, marker) {
			t.Errorf("%q carries provider text", s)
		}
	}
	if ge.Detail() != marker {
		t.Errorf("Detail() = %q", ge.Detail())
	}
	if n := strings.Count(ex.Error(), "promptkit:"); n != 1 {
		t.Errorf("%q says promptkit: %d times", ex.Error(), n)
	}
	var nilGE *pktype.GenerationError
	var nilEx *pktype.RetryExhaustedError
	var zeroEx pktype.RetryExhaustedError
	_ = nilGE.Error() + nilGE.GoString() + nilGE.Detail() + nilGE.BackendID() + nilEx.Error() + nilEx.GoString() + zeroEx.Error() + zeroEx.GoString()
	if nilGE.StatusCode() != 0 || !nilGE.RetryAfter().IsZero() || nilEx.Attempts() != 0 || nilEx.Unwrap() != nil || zeroEx.Unwrap() != nil {
		t.Error("nil or zero errors report values")
	}
}

// Redact removes keys a provider echoes, also masked or cut short ones, as
// OpenAI's 401 message does, and keeps the words around them.
func TestRedactProviderKeyShapes(t *testing.T) {
	cases := []struct{ in, secret, want string }{
		{"Incorrect API key provided: sk-abc123DEF456ghi789. You can find your API key at https://x.", "",
			"Incorrect API key provided: [REDACTED]. You can find your API key at https://x."},
		{"Incorrect API key provided: sk-proj-********************abcd. You can", "", "Incorrect API key provided: [REDACTED]. You can"},
		{"key sk-abc... was rejected", "", "key [REDACTED]... was rejected"},
		{"Incorrect API key provided: my-own-key-42", "my-own-key-42", "Incorrect API key provided: [REDACTED]"},
		{"a risk-free task-list", "", "a risk-free task-list"},
	}
	for _, c := range cases {
		if got := pktype.Redact(c.in, 512, c.secret); got != c.want {
			t.Errorf("Redact(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}
