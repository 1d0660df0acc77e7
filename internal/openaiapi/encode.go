package openaiapi

import (
	"cmp"
	"encoding/json"
	"net/http"
	"time"

	"github.com/promptkit/promptkit/jobs"
	"github.com/promptkit/promptkit/pktype"
)

// OpenAI's error types.
const (
	TypeInvalidRequest = "invalid_request_error"
	TypeRateLimit      = "rate_limit_error"
	// TypeInsufficientQuota is OpenAI's type (and code) for a 429 that
	// waiting a moment does not cure: a spending budget is spent.
	TypeInsufficientQuota = "insufficient_quota"
	TypeServer            = "server_error"
	TypeAPI               = "api_error"
)

// NewError builds an error body; an empty param or code is null.
func NewError(message, typ, param, code string) ErrorBody {
	e := Error{Message: message, Type: typ}
	if param != "" {
		e.Param = &param
	}
	if code != "" {
		e.Code = &code
	}
	return ErrorBody{Error: e}
}

// Body is the 400 body of a refused request.
func (e *RequestError) Body() ErrorBody {
	return NewError(e.Message, TypeInvalidRequest, e.Param, e.Code)
}

// Resolver says what a model name runs with (promptkit.Engine is one).
type Resolver interface {
	ResolveModel(model string) (profile, backendModel string, ok bool)
}

// Resolve maps a request's model to a Target (see Resolver). A model
// naming nothing runs on the fallback profile when one is given (never
// for an empty model). ok is false for an unknown model, or without a
// resolver.
func Resolve(r Resolver, model, fallback string) (Target, bool) {
	if r == nil || model == "" {
		return Target{}, false
	}
	profile, m, ok := r.ResolveModel(model)
	if !ok && fallback != "" {
		profile, m, ok = r.ResolveModel(fallback)
	}
	if !ok {
		return Target{}, false
	}
	return Target{Profile: profile, Options: jobs.ExecutionOptions{Model: m}}, true
}

// Model is OpenAI's model object.
type Model struct {
	ID     string `json:"id"`
	Object string `json:"object"`
	// Created is 0: a profile or a backend's model has no creation time.
	Created int64  `json:"created"`
	OwnedBy string `json:"owned_by"`
}

// NewModel is the model object of a name Models lists.
func NewModel(id string) Model {
	return Model{ID: id, Object: "model", OwnedBy: "promptkit"}
}

// Completion is the chat.completion of a succeeded job: id "chatcmpl-" +
// job id, created = the response's time, model = the model that answered.
// The content is the answer's text (its parsed JSON instead when the text
// itself is not JSON but a checked JSON answer was parsed from it), null
// when the model only called tools; tool_calls are the model's calls;
// finish_reason is the provider's, when it sent none "tool_calls" for an
// answer with calls and "stop" otherwise; usage is present only when the
// provider reported the prompt and completion counts.
func Completion(j jobs.Job, r jobs.Response) ChatCompletion {
	content := r.Output
	if len(r.Parsed) > 0 && !json.Valid([]byte(r.Output)) {
		content = string(r.Parsed)
	}
	msg := Message{Role: pktype.RoleAssistant, Content: &content, ToolCalls: r.ToolCalls}
	finish := cmp.Or(r.FinishReason, "stop")
	if len(r.ToolCalls) > 0 {
		finish = cmp.Or(r.FinishReason, "tool_calls")
		if content == "" {
			msg.Content = nil
		}
	}
	return ChatCompletion{
		ID: "chatcmpl-" + j.ID, Object: "chat.completion", Created: r.CreatedAt.Unix(), Model: r.Model,
		Choices: []Choice{{Message: msg, FinishReason: finish}},
		Usage:   usageOf(r.Usage),
	}
}

// usageOf is OpenAI's usage for what the provider reported, nil unless it
// reported the prompt and completion counts: an unknown count is never
// sent as a number. A missing total is their sum.
func usageOf(u pktype.Usage) *Usage {
	if !u.Known.PromptTokens || !u.Known.CompletionTokens {
		return nil
	}
	total := u.PromptTokens + u.CompletionTokens
	if u.Known.TotalTokens {
		total = u.TotalTokens
	}
	return &Usage{PromptTokens: u.PromptTokens, CompletionTokens: u.CompletionTokens, TotalTokens: total}
}

// ChatCompletionChunk is OpenAI's chat.completion.chunk object.
type ChatCompletionChunk struct {
	ID      string        `json:"id"`
	Object  string        `json:"object"`
	Created int64         `json:"created"`
	Model   string        `json:"model"`
	Choices []ChunkChoice `json:"choices"`
	// Usage is sent only when WithUsage (the request asked for
	// stream_options.include_usage): null on every chunk but the last,
	// as OpenAI does, and on the last too when the provider reported no
	// usage.
	Usage     *Usage `json:"-"`
	WithUsage bool   `json:"-"`
}

// MarshalJSON writes usage as Usage and WithUsage say.
func (c ChatCompletionChunk) MarshalJSON() ([]byte, error) {
	type plain ChatCompletionChunk
	if !c.WithUsage {
		return json.Marshal(plain(c))
	}
	return json.Marshal(struct {
		plain
		Usage *Usage `json:"usage"`
	}{plain(c), c.Usage})
}

// ChunkChoice is one choice of a chunk.
type ChunkChoice struct {
	Index        int     `json:"index"`
	Delta        Delta   `json:"delta"`
	FinishReason *string `json:"finish_reason"`
}

// Delta is a chunk's part of the answer message.
type Delta struct {
	Role      string          `json:"role,omitempty"`
	Content   *string         `json:"content,omitempty"`
	ToolCalls []ToolCallDelta `json:"tool_calls,omitempty"`
}

// ToolCallDelta is a chunk's part of a tool call: the first part of call
// Index carries its id, type and name, later ones more arguments.
type ToolCallDelta struct {
	Index    int           `json:"index"`
	ID       string        `json:"id,omitempty"`
	Type     string        `json:"type,omitempty"`
	Function FunctionDelta `json:"function"`
}

// FunctionDelta is a piece of a call's function: its name in the first
// piece, and a piece of its arguments.
type FunctionDelta struct {
	Name      string `json:"name,omitempty"`
	Arguments string `json:"arguments,omitempty"`
}

// Chunks is a finished completion as stream chunks: the role, the
// content (left out when empty), each tool call whole, the finish reason
// and, with includeUsage, a chunk with no choices and the usage.
func Chunks(c ChatCompletion, includeUsage bool) []ChatCompletionChunk {
	base := ChatCompletionChunk{ID: c.ID, Object: "chat.completion.chunk", Created: c.Created, Model: c.Model, WithUsage: includeUsage}
	with := func(ch ChunkChoice) ChatCompletionChunk {
		out := base
		out.Choices = []ChunkChoice{ch}
		return out
	}
	var msg Message
	finish := "stop"
	if len(c.Choices) > 0 {
		msg, finish = c.Choices[0].Message, c.Choices[0].FinishReason
	}
	empty := ""
	out := []ChatCompletionChunk{with(ChunkChoice{Delta: Delta{Role: pktype.RoleAssistant, Content: &empty}})}
	if msg.Content != nil && *msg.Content != "" {
		out = append(out, with(ChunkChoice{Delta: Delta{Content: msg.Content}}))
	}
	for i, c := range msg.ToolCalls {
		out = append(out, with(ChunkChoice{Delta: Delta{ToolCalls: []ToolCallDelta{{Index: i, ID: c.ID, Type: c.Type, Function: FunctionDelta(c.Function)}}}}))
	}
	out = append(out, with(ChunkChoice{FinishReason: &finish}))
	if includeUsage {
		last := base
		last.Choices = []ChunkChoice{}
		last.Usage = c.Usage
		out = append(out, last)
	}
	return out
}

// JobError is the HTTP status and error body for a job that ended
// without an answer (failed or cancelled), by the job's error kind:
//
//	rate_limit                                429 rate_limit_error, code rate_limit_exceeded
//	budget_exceeded                           429 insufficient_quota, code insufficient_quota
//	invalid_request, provider_4xx             400 invalid_request_error
//	timeout                                   504 server_error
//	provider_5xx, transport, parse, auth      502 server_error (the provider's fault)
//	anything else (worker_crash, stuck, ...)  500 api_error (promptkit's fault)
//	a cancelled job                           409 invalid_request_error, code cancelled
//
// The code is the error kind unless said otherwise. The message is the
// kind's description and the job's stored (redacted) message.
func JobError(j jobs.Job) (int, ErrorBody) {
	switch j.State {
	case jobs.Cancelled:
		return http.StatusConflict, NewError("The request's job was cancelled before it finished.", TypeInvalidRequest, "", "cancelled")
	case jobs.Failed:
	default:
		return http.StatusInternalServerError, NewError("The request's job has no error.", TypeAPI, "", "")
	}
	msg := "The request failed: " + cmp.Or(j.ErrorKind.Description(), jobs.KindUnknown.Description()) + "."
	if j.ErrorMessage != "" {
		msg += " " + j.ErrorMessage
	}
	code := cmp.Or(string(j.ErrorKind), string(jobs.KindUnknown))
	switch j.ErrorKind {
	case jobs.KindRateLimit:
		return http.StatusTooManyRequests, NewError(msg, TypeRateLimit, "", "rate_limit_exceeded")
	case jobs.KindBudgetExceeded:
		return http.StatusTooManyRequests, NewError(msg, TypeInsufficientQuota, "", TypeInsufficientQuota)
	case jobs.KindInvalidRequest, jobs.KindProvider4xx:
		return http.StatusBadRequest, NewError(msg, TypeInvalidRequest, "", code)
	case jobs.KindTimeout:
		return http.StatusGatewayTimeout, NewError(msg, TypeServer, "", code)
	case jobs.KindProvider5xx, jobs.KindTransport, jobs.KindParse, jobs.KindAuth, jobs.KindUnstorable:
		return http.StatusBadGateway, NewError(msg, TypeServer, "", code)
	}
	return http.StatusInternalServerError, NewError(msg, TypeAPI, "", code)
}

// Batch line error codes of requests that never finished.
const (
	CodeBatchExpired   = "batch_expired"
	CodeBatchCancelled = "batch_cancelled"
)

// OutputLine is one line of a batch's output or error file for one of its
// requests (no trailing newline), and whether it belongs in the error
// file: a succeeded job's completion goes in the output file; a failed
// or cancelled job's error response, or (in an expired or cancelled
// batch) a request that never finished (code batch_expired or
// batch_cancelled), in the error file. A job cancelled by its batch's
// cancel counts as never finished. An embeddings line's completion is an
// EmbeddingList of the stored vectors, base64 when the line asked.
func OutputLine(r jobs.BatchResult, status jobs.BatchStatus) ([]byte, bool) {
	out := outputLine{ID: "batch_req_" + cmp.Or(r.Job.ID, r.Prompt.ID), CustomID: r.Prompt.CustomID}
	stopped := status == jobs.BatchCancelled || status == jobs.BatchCancelling
	unfinished := func() {
		out.Error = &lineError{Code: CodeBatchExpired, Message: "This request did not finish before the batch expired."}
		if stopped {
			out.Error = &lineError{Code: CodeBatchCancelled, Message: "This request did not finish before the batch was cancelled."}
		}
	}
	switch {
	case r.Job.State == jobs.Succeeded && r.Response != nil && r.Prompt.Embedding != nil:
		// An embeddings line: the stored vectors as POST /v1/embeddings
		// answers them.
		var vectors [][]float64
		if err := json.Unmarshal(r.Response.Parsed, &vectors); err != nil {
			out.Error = &lineError{Code: "response_unavailable", Message: "This request's embeddings could not be read."}
			break
		}
		out.Response = &lineResponse{StatusCode: http.StatusOK, RequestID: r.Job.ID,
			Body: Embeddings(vectors, r.Response.Model, r.Response.Usage, r.Prompt.Embedding.EncodingFormat == pktype.EncodingBase64)}
	case r.Job.State == jobs.Succeeded && r.Response != nil:
		out.Response = &lineResponse{StatusCode: http.StatusOK, RequestID: r.Job.ID, Body: Completion(r.Job, *r.Response)}
	case r.Job.State == jobs.Succeeded:
		// The answer was archived before the batch was finalized.
		out.Error = &lineError{Code: "response_unavailable", Message: "This request's answer is no longer stored."}
	case r.Job.State == jobs.Failed, r.Job.State == jobs.Cancelled && !stopped && status != jobs.BatchExpired:
		code, body := JobError(r.Job)
		out.Response = &lineResponse{StatusCode: code, RequestID: r.Job.ID, Body: body}
	default:
		unfinished()
	}
	b, _ := json.Marshal(out) // cannot fail: strings, numbers and raw JSON
	return b, out.Response == nil || out.Response.StatusCode != http.StatusOK
}

// RefusedLine is the error-file line (no trailing newline) of a batch
// request that was refused before it ran, so has no job: id is unique in
// the batch, code and message say why.
func RefusedLine(id, customID, code, message string) []byte {
	b, _ := json.Marshal(outputLine{ID: "batch_req_" + id, CustomID: customID, Error: &lineError{Code: code, Message: message}})
	return b
}

// outputLine is OpenAI's batch output line.
type outputLine struct {
	ID       string        `json:"id"`
	CustomID string        `json:"custom_id"`
	Response *lineResponse `json:"response"`
	Error    *lineError    `json:"error"`
}

type lineResponse struct {
	StatusCode int    `json:"status_code"`
	RequestID  string `json:"request_id"`
	Body       any    `json:"body"`
}

type lineError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// File is OpenAI's file object.
type File struct {
	ID        string `json:"id"`
	Object    string `json:"object"`
	Bytes     int64  `json:"bytes"`
	CreatedAt int64  `json:"created_at"`
	Filename  string `json:"filename"`
	Purpose   string `json:"purpose"`
}

// FileObject is a stored file's object.
func FileObject(f jobs.File) File {
	return File{ID: f.ID, Object: "file", Bytes: f.Bytes, CreatedAt: f.CreatedAt.Unix(), Filename: f.Filename, Purpose: f.Purpose}
}

// DeletedFile is the answer of DELETE /v1/files/{id}.
type DeletedFile struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	Deleted bool   `json:"deleted"`
}

// Batch is OpenAI's batch object. Times are unix seconds, null when not
// reached.
type Batch struct {
	ID               string           `json:"id"`
	Object           string           `json:"object"`
	Endpoint         string           `json:"endpoint"`
	Errors           *BatchErrors     `json:"errors"`
	InputFileID      string           `json:"input_file_id"`
	CompletionWindow string           `json:"completion_window"`
	Status           string           `json:"status"`
	OutputFileID     *string          `json:"output_file_id"`
	ErrorFileID      *string          `json:"error_file_id"`
	CreatedAt        int64            `json:"created_at"`
	InProgressAt     *int64           `json:"in_progress_at"`
	ExpiresAt        *int64           `json:"expires_at"`
	FinalizingAt     *int64           `json:"finalizing_at"`
	CompletedAt      *int64           `json:"completed_at"`
	FailedAt         *int64           `json:"failed_at"`
	ExpiredAt        *int64           `json:"expired_at"`
	CancellingAt     *int64           `json:"cancelling_at"`
	CancelledAt      *int64           `json:"cancelled_at"`
	RequestCounts    jobs.BatchCounts `json:"request_counts"`
	Metadata         json.RawMessage  `json:"metadata"`
}

// BatchErrors is a batch's validation errors, a list object; a batch
// that did not fail lists the lines it refused without running them.
type BatchErrors struct {
	Object string       `json:"object"`
	Data   []BatchError `json:"data"`
}

// BatchError is one validation error; Param and Line are null when the
// error names none.
type BatchError struct {
	Code    string  `json:"code"`
	Message string  `json:"message"`
	Param   *string `json:"param"`
	Line    *int    `json:"line"`
}

// BatchObject is a stored batch's object.
func BatchObject(b jobs.Batch) Batch {
	out := Batch{
		ID: b.ID, Object: "batch", Endpoint: b.Endpoint, InputFileID: b.InputFileID,
		CompletionWindow: b.CompletionWindow, Status: string(b.Status),
		OutputFileID: optString(b.OutputFileID), ErrorFileID: optString(b.ErrorFileID),
		CreatedAt: b.CreatedAt.Unix(), InProgressAt: unix(b.InProgressAt), ExpiresAt: unix(b.ExpiresAt),
		FinalizingAt: unix(b.FinalizingAt), CompletedAt: unix(b.CompletedAt), FailedAt: unix(b.FailedAt),
		ExpiredAt: unix(b.ExpiredAt), CancellingAt: unix(b.CancellingAt), CancelledAt: unix(b.CancelledAt),
		RequestCounts: b.Counts, Metadata: b.Metadata,
	}
	if len(b.Errors) > 0 {
		out.Errors = &BatchErrors{Object: "list", Data: make([]BatchError, 0, len(b.Errors))}
		for _, e := range b.Errors {
			be := BatchError{Code: e.Code, Message: e.Message, Param: optString(e.Param)}
			if e.Line > 0 {
				be.Line = &e.Line
			}
			out.Errors.Data = append(out.Errors.Data, be)
		}
	}
	return out
}

// List is OpenAI's cursor-paged list object.
type List[T any] struct {
	Object  string  `json:"object"`
	Data    []T     `json:"data"`
	FirstID *string `json:"first_id"`
	LastID  *string `json:"last_id"`
	HasMore bool    `json:"has_more"`
}

// NewList is a page of items, id naming each (first_id, last_id: null
// for an empty page).
func NewList[T any](data []T, id func(T) string, hasMore bool) List[T] {
	l := List[T]{Object: "list", Data: data, HasMore: hasMore}
	if l.Data == nil {
		l.Data = []T{}
	}
	if len(data) > 0 {
		l.FirstID, l.LastID = optString(id(data[0])), optString(id(data[len(data)-1]))
	}
	return l
}

func optString(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

func unix(t time.Time) *int64 {
	if t.IsZero() {
		return nil
	}
	n := t.Unix()
	return &n
}
