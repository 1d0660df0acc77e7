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
	// Parts, when set, is the content as the caller sent it, an array of
	// OpenAI's content parts (text, images, audio, files), sent instead of
	// Content; Content then holds the text parts, joined with newlines,
	// for what promptkit itself reads (the page, token estimates).
	Parts json.RawMessage `json:"parts,omitempty"`
	// Extra are the message's other fields as the caller sent them (a
	// participant's name, an earlier answer's reasoning_content or
	// refusal, ...), sent as given.
	Extra Params `json:"extra,omitempty"`
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
	// ResponseFormat, when set, is the response_format sent, as the caller
	// wrote it (a schema's strict and description, a json_object's schema
	// as instructor sends it, ...), instead of the one OutputSchema or
	// JSONObject make; they still say how the answer is checked.
	ResponseFormat json.RawMessage `json:"response_format,omitempty"`
}

// GenerateResponse is one successful generation. Text, Reasoning,
// ToolCalls and FinishReason are its first choice's.
type GenerateResponse struct {
	Text string `json:"text"`
	// Reasoning is the model's reasoning, when the backend sent it apart
	// from the answer (reasoning_content, or reasoning: vLLM's and
	// SGLang's reasoning parsers, DeepSeek, Qwen3).
	Reasoning string `json:"reasoning,omitempty"`
	// ToolCalls are the calls the model asked for instead of (or beside)
	// answering; FinishReason is then usually "tool_calls".
	ToolCalls    []ToolCall `json:"tool_calls,omitempty"`
	Model        string     `json:"model,omitempty"`
	FinishReason string     `json:"finish_reason,omitempty"`
	// Choices holds every choice when the backend answered more than one
	// (the request's n); nil for one, which the fields above are.
	Choices []Choice `json:"choices,omitempty"`
	// Raw is the backend's answer as it sent it: its chat.completion
	// object, or the object a streamed answer's chunks make together. It
	// carries what promptkit does not model (logprobs,
	// system_fingerprint, annotations, usage details, ...) to callers
	// that pass the answer on. Nil from an injected client.
	Raw   json.RawMessage `json:"raw,omitempty"`
	Usage TokenUsage      `json:"usage"`
	// UsagePresence says which Usage fields the provider actually reported.
	// Nil (what clients written before it existed return) means: nonzero
	// fields are known and zero fields are unknown, because such a client
	// cannot tell an omitted count from a measured zero. A non-nil value
	// governs all five fields and allows known zeros. The built-in client
	// always sets it.
	UsagePresence *TokenUsagePresence `json:"usage_presence,omitempty"`
}

// Choice is one of an answer's choices.
type Choice struct {
	Index        int        `json:"index"`
	Text         string     `json:"text"`
	Reasoning    string     `json:"reasoning,omitempty"`
	ToolCalls    []ToolCall `json:"tool_calls,omitempty"`
	FinishReason string     `json:"finish_reason,omitempty"`
}

// AllChoices returns the answer's choices: Choices, or the one the
// response's own fields are.
func (r *GenerateResponse) AllChoices() []Choice {
	if len(r.Choices) > 0 {
		return r.Choices
	}
	return []Choice{{Text: r.Text, Reasoning: r.Reasoning, ToolCalls: r.ToolCalls, FinishReason: r.FinishReason}}
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
