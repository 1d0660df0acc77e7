package promptkit

import (
	"context"
	"encoding/json"
)

// LLMClient generates one chat completion. Set Config.LLMClient to replace
// the built-in OpenAI-compatible HTTP client, for example to call an SDK or
// a fake in tests.
//
// The engine calls Generate once per attempt and never retries an injected
// client automatically: its own policy owns retries. Generate may be called
// concurrently from many runs, bounded by the backends' MaxActive permits.
// A nil response with a nil error is treated as a malformed response.
type LLMClient interface {
	Generate(ctx context.Context, req GenerateRequest) (*GenerateResponse, error)
}

// Message is one chat message.
type Message struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

// Chat roles.
const (
	RoleSystem    = "system"
	RoleUser      = "user"
	RoleAssistant = "assistant"
)

// GenerateRequest is one fully rendered generation, as an LLMClient sees it.
type GenerateRequest struct {
	// BackendID and Model say where the request is meant to go.
	BackendID   string    `json:"backend_id"`
	Model       string    `json:"model"`
	Messages    []Message `json:"messages"`
	Temperature *float64  `json:"temperature,omitempty"`
	TopP        *float64  `json:"top_p,omitempty"`
	MaxTokens   *int      `json:"max_tokens,omitempty"`
	Stop        []string  `json:"stop,omitempty"`
	// OutputSchema is the prompt's output JSON Schema, when it has one and
	// the profile asks for structured output.
	OutputSchema json.RawMessage `json:"output_schema,omitempty"`
}

// GenerateResponse is one successful generation.
type GenerateResponse struct {
	Text         string     `json:"text"`
	Model        string     `json:"model,omitempty"`
	FinishReason string     `json:"finish_reason,omitempty"`
	Usage        TokenUsage `json:"usage"`
	// UsagePresence says which Usage fields the provider actually reported.
	// Nil (what clients written before it existed return) means: nonzero
	// fields are known and zero fields are unknown, because such a client
	// cannot tell an omitted count from a measured zero. A non-nil value
	// governs all five fields and allows known zeros. The built-in client
	// always sets it.
	UsagePresence *TokenUsagePresence `json:"usage_presence,omitempty"`
}

// TokenUsage holds the five token counts OpenAI-compatible providers report.
// A count the provider did not report is zero here; see TokenUsagePresence
// to tell unknown from zero.
type TokenUsage struct {
	PromptTokens     int `json:"prompt_tokens"`
	CompletionTokens int `json:"completion_tokens"`
	TotalTokens      int `json:"total_tokens"`
	CachedTokens     int `json:"cached_tokens"`
	ReasoningTokens  int `json:"reasoning_tokens"`
}

// TokenUsagePresence says, per field, whether the provider reported a count.
type TokenUsagePresence struct {
	PromptTokens     bool `json:"prompt_tokens"`
	CompletionTokens bool `json:"completion_tokens"`
	TotalTokens      bool `json:"total_tokens"`
	CachedTokens     bool `json:"cached_tokens"`
	ReasoningTokens  bool `json:"reasoning_tokens"`
}
