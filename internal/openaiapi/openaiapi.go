// Package openaiapi is OpenAI's wire format for promptkit's front door:
// decoding chat completion requests and batch input lines into
// jobs.ChatRequest, and encoding chat.completion objects, chunks, error
// objects, files, batches and batch output lines from stored jobs. The
// server (POST /v1/chat/completions, /v1/files, /v1/batches) and the batch
// processor (jobs/batch) share it, so a batch line and a request are one
// format.
package openaiapi

import (
	"errors"

	"github.com/promptkit/promptkit"
	"github.com/promptkit/promptkit/jobs"
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

// DecodeChat decodes an OpenAI chat completion request body. What
// promptkit cannot honour (n > 1, tools, audio, images, ...) is a
// *RequestError naming the parameter, never silently dropped.
func DecodeChat(body []byte) (ChatParams, error) {
	return ChatParams{}, errors.New("TODO")
}

// BatchLine is one line of a batch input file.
type BatchLine struct {
	CustomID string
	Method   string
	URL      string
	Body     ChatParams
}

// ParseBatchLine decodes one input line ({"custom_id", "method": "POST",
// "url": "/v1/chat/completions", "body": {...}}). Errors are
// *RequestError; a line with stream: true is refused.
func ParseBatchLine(line []byte) (BatchLine, error) {
	return BatchLine{}, errors.New("TODO")
}

// Target is what a request's model names: a profile, and execution
// options choosing the model (and backend) when the name is a backend's
// model rather than a profile id.
type Target struct {
	Profile string
	Options jobs.ExecutionOptions
}

// Resolve maps a request's model to a Target: a profile id names that
// profile; otherwise a model some profile uses runs with that profile
// (the first such profile by id). ok is false for an unknown model.
func Resolve(eng *promptkit.Engine, model string) (Target, bool) {
	return Target{}, false
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

// Message is an answer message.
type Message struct {
	Role    string  `json:"role"`
	Content string  `json:"content"`
	Refusal *string `json:"refusal"`
}

// Usage is OpenAI's usage object, present only when the backend
// reported the counts.
type Usage struct {
	PromptTokens     int `json:"prompt_tokens"`
	CompletionTokens int `json:"completion_tokens"`
	TotalTokens      int `json:"total_tokens"`
}

// Completion is the chat.completion of a succeeded job: id "chatcmpl-" +
// job id, created = the response's time, model = the model that answered.
func Completion(j jobs.Job, r jobs.Response) ChatCompletion {
	return ChatCompletion{}
}

// JobError is the HTTP status and error body for a job that ended
// without an answer (failed or cancelled): 429 for rate_limit, 400 for
// what the request itself caused, 5xx for provider or server faults. The
// message is the job's stored (redacted) message.
func JobError(j jobs.Job) (int, ErrorBody) {
	return 500, ErrorBody{}
}

// OutputLine is one line of a batch's output or error file for one of its
// requests (no trailing newline), and whether it belongs in the error
// file: a succeeded job's completion goes in the output file; a failed
// or cancelled job's error response, or (in an expired or cancelled
// batch) a request that never finished (code batch_expired or
// batch_cancelled), in the error file.
func OutputLine(r jobs.BatchResult, status jobs.BatchStatus) ([]byte, bool) {
	return nil, false
}
