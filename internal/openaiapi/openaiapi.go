// Package openaiapi is OpenAI's wire format for promptkit's front door:
// decoding chat completion requests, Responses API requests
// (responses.go) and batch input lines into jobs.ChatRequest, and
// encoding chat.completion objects, chunks, response objects and their
// events, error objects, files, batches and batch output lines from
// stored jobs. The
// server (POST /v1/chat/completions, /v1/files, /v1/batches) and the batch
// processor (jobs/batch) share it, so a batch line and a request are one
// format.
package openaiapi

import (
	"encoding/json"

	"github.com/promptkit/promptkit/jobs"
	"github.com/promptkit/promptkit/pktype"
)

// ErrorBody is OpenAI's error answer: {"error": {...}}.
type ErrorBody struct {
	Error Error `json:"error"`
}

// Error is OpenAI's error object. Param and Code are null when unset.
type Error struct {
	Message string  `json:"message"`
	Type    string  `json:"type"`
	Param   *string `json:"param"`
	Code    *string `json:"code"`
}

// ChatParams is a decoded chat completion request.
type ChatParams struct {
	// Model is the request's model, as sent (see jobs.Resolve).
	Model string
	Chat  jobs.ChatRequest
	// Stream and IncludeUsage: stream: true and
	// stream_options.include_usage.
	Stream       bool
	IncludeUsage bool
}

// BatchLine is one line of a batch input file.
type BatchLine struct {
	CustomID string
	Method   string
	URL      string
	// Body is a chat completion's; Embedding is set instead for a line
	// whose url is EndpointEmbeddings.
	Body      ChatParams
	Embedding *EmbeddingParams
}

// Model is the line's model: its chat completion's or its embeddings
// request's.
func (l BatchLine) Model() string {
	if l.Embedding != nil {
		return l.Embedding.Model
	}
	return l.Body.Model
}

// ChatCompletion is OpenAI's chat.completion object. Extra are the
// answer's other members as the backend sent them (system_fingerprint,
// service_tier, ...), written after the others.
type ChatCompletion struct {
	ID      string        `json:"id"`
	Object  string        `json:"object"`
	Created int64         `json:"created"`
	Model   string        `json:"model"`
	Choices []Choice      `json:"choices"`
	Usage   *Usage        `json:"usage,omitempty"`
	Extra   pktype.Params `json:"-"`
}

// MarshalJSON writes c with its extra members.
func (c ChatCompletion) MarshalJSON() ([]byte, error) {
	type plain ChatCompletion
	return withExtra(plain(c), c.Extra)
}

// UnmarshalJSON reads c, its other members into Extra.
func (c *ChatCompletion) UnmarshalJSON(b []byte) error {
	type plain ChatCompletion
	return withoutExtra(b, (*plain)(c), &c.Extra, "id", "object", "created", "model", "choices", "usage")
}

// Choice is one choice of a completion: its logprobs (null when none)
// and other members (Extra) as the backend sent them.
type Choice struct {
	Index        int             `json:"index"`
	Message      Message         `json:"message"`
	Logprobs     json.RawMessage `json:"logprobs"`
	FinishReason string          `json:"finish_reason"`
	Extra        pktype.Params   `json:"-"`
}

// MarshalJSON writes c with its extra members, logprobs null when none.
func (c Choice) MarshalJSON() ([]byte, error) {
	type plain Choice
	if len(c.Logprobs) == 0 {
		c.Logprobs = json.RawMessage("null")
	}
	return withExtra(plain(c), c.Extra)
}

// UnmarshalJSON reads c, its other members into Extra.
func (c *Choice) UnmarshalJSON(b []byte) error {
	type plain Choice
	if err := withoutExtra(b, (*plain)(c), &c.Extra, "index", "message", "logprobs", "finish_reason"); err != nil {
		return err
	}
	if string(c.Logprobs) == "null" {
		c.Logprobs = nil // as written when there are none
	}
	return nil
}

// Message is an answer message: content is null when the model only
// called tools; Extra holds what else the backend sent in it (its
// reasoning_content, refusal, annotations, ...).
type Message struct {
	Role      string            `json:"role"`
	Content   *string           `json:"content"`
	ToolCalls []pktype.ToolCall `json:"tool_calls,omitempty"`
	Extra     pktype.Params     `json:"-"`
}

// MarshalJSON writes m with its extra members; refusal is null when the
// backend sent none, as OpenAI's is.
func (m Message) MarshalJSON() ([]byte, error) {
	type plain Message
	if _, ok := m.Extra["refusal"]; !ok {
		m.Extra = m.Extra.Or(pktype.Params{"refusal": json.RawMessage("null")})
	}
	return withExtra(plain(m), m.Extra)
}

// UnmarshalJSON reads m, its other members into Extra.
func (m *Message) UnmarshalJSON(b []byte) error {
	type plain Message
	if err := withoutExtra(b, (*plain)(m), &m.Extra, "role", "content", "tool_calls"); err != nil {
		return err
	}
	if string(m.Extra["refusal"]) == "null" {
		delete(m.Extra, "refusal") // as written when there is none
	}
	if len(m.Extra) == 0 {
		m.Extra = nil
	}
	return nil
}

// Usage is OpenAI's usage object, present only when the backend
// reported the counts. Extra are its other members (the details of
// prompt and completion tokens, ...).
type Usage struct {
	PromptTokens     int           `json:"prompt_tokens"`
	CompletionTokens int           `json:"completion_tokens"`
	TotalTokens      int           `json:"total_tokens"`
	Extra            pktype.Params `json:"-"`
}

// MarshalJSON writes u with its extra members.
func (u Usage) MarshalJSON() ([]byte, error) {
	type plain Usage
	return withExtra(plain(u), u.Extra)
}

// UnmarshalJSON reads u, its other members into Extra.
func (u *Usage) UnmarshalJSON(b []byte) error {
	type plain Usage
	return withoutExtra(b, (*plain)(u), &u.Extra, "prompt_tokens", "completion_tokens", "total_tokens")
}

// withoutExtra decodes b into v, and its members but known into extra
// (nil when none).
func withoutExtra(b []byte, v any, extra *pktype.Params, known ...string) error {
	if err := json.Unmarshal(b, v); err != nil {
		return err
	}
	*extra = except(members(b), known...)
	return nil
}

// withExtra is v's JSON with extra's members after its own.
func withExtra(v any, extra pktype.Params) ([]byte, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return extra.AppendObject(b), nil
}
