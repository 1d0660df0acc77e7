package pktype

import "encoding/json"

// Message is one chat message.
type Message struct {
	Role    string `json:"role"`
	Content string `json:"content"`
	// ToolCalls are the calls an assistant message made (see ToolUse).
	ToolCalls []ToolCall `json:"tool_calls,omitempty"`
	// ToolCallID is the call a tool message answers.
	ToolCallID string `json:"tool_call_id,omitempty"`
}

// Chat roles.
const (
	RoleSystem    = "system"
	RoleUser      = "user"
	RoleAssistant = "assistant"
)

// GenerateRequest is one fully rendered generation: what the built-in
// client sends to an OpenAI-compatible backend, and what an injected
// client receives.
type GenerateRequest struct {
	// BackendID and Model say where the request is meant to go.
	BackendID string    `json:"backend_id"`
	Model     string    `json:"model"`
	Messages  []Message `json:"messages"`
	// Sampling is sent as the request's parameters, each when set.
	Sampling
	// OutputSchema is the prompt's output JSON Schema, when it has one and
	// the profile asks for structured output. OutputSchemaName names it in
	// OpenAI's response_format (letters, digits, '_' and '-', at most 64).
	OutputSchema     json.RawMessage `json:"output_schema,omitempty"`
	OutputSchemaName string          `json:"output_schema_name,omitempty"`
	// JSONObject asks for any JSON object as the answer (OpenAI's
	// response_format type json_object). It excludes OutputSchema.
	JSONObject bool `json:"json_object,omitempty"`
	// ToolUse offers the model tools to call.
	ToolUse
}

// GenerateResponse is one successful generation.
type GenerateResponse struct {
	Text string `json:"text"`
	// ToolCalls are the calls the model asked for instead of (or beside)
	// answering; FinishReason is then usually "tool_calls".
	ToolCalls    []ToolCall `json:"tool_calls,omitempty"`
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

// Presence returns which Usage fields are known, applying the rule for a
// nil UsagePresence.
func (r *GenerateResponse) Presence() TokenUsagePresence {
	if r.UsagePresence != nil {
		return *r.UsagePresence
	}
	u := r.Usage
	return TokenUsagePresence{
		PromptTokens:     u.PromptTokens != 0,
		CompletionTokens: u.CompletionTokens != 0,
		TotalTokens:      u.TotalTokens != 0,
		CachedTokens:     u.CachedTokens != 0,
		ReasoningTokens:  u.ReasoningTokens != 0,
	}
}
