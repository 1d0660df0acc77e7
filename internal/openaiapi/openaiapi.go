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

// RequestError is a request promptkit refuses: a 400
// invalid_request_error naming the parameter (Param, e.g. "n",
// "messages[2].content"). Message never quotes the request.
type RequestError struct {
	Param   string
	Code    string
	Message string
}

func (e *RequestError) Error() string { return e.Message }

// ChatParams is a decoded chat completion request.
type ChatParams struct {
	// Model is the request's model, as sent (see Resolve).
	Model string
	Chat  jobs.ChatRequest
	// Stream and IncludeUsage: stream: true and
	// stream_options.include_usage.
	Stream       bool
	IncludeUsage bool
	User         string
	Metadata     map[string]string
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

// Target is what a request's model names: a profile, and execution
// options choosing the model (and backend) when the name is a backend's
// model rather than a profile id.
type Target struct {
	Profile string
	Options jobs.ExecutionOptions
}

// ChatCompletion is OpenAI's chat.completion object.
type ChatCompletion struct {
	ID      string   `json:"id"`
	Object  string   `json:"object"`
	Created int64    `json:"created"`
	Model   string   `json:"model"`
	Choices []Choice `json:"choices"`
	Usage   *Usage   `json:"usage,omitempty"`
}

// Choice is one choice of a completion.
type Choice struct {
	Index        int     `json:"index"`
	Message      Message `json:"message"`
	FinishReason string  `json:"finish_reason"`
}

// Message is an answer message: content is null when the model only
// called tools.
type Message struct {
	Role      string            `json:"role"`
	Content   *string           `json:"content"`
	Refusal   *string           `json:"refusal"`
	ToolCalls []pktype.ToolCall `json:"tool_calls,omitempty"`
}

// Usage is OpenAI's usage object, present only when the backend
// reported the counts.
type Usage struct {
	PromptTokens     int `json:"prompt_tokens"`
	CompletionTokens int `json:"completion_tokens"`
	TotalTokens      int `json:"total_tokens"`
}
