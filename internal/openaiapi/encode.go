package openaiapi

import (
	"cmp"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/promptkit/promptkit/internal/problem"
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

// RequestErrorBody is the 400 body of a refused request.
func RequestErrorBody(e *jobs.RequestError) ErrorBody {
	return NewError(e.Message, TypeInvalidRequest, e.Param, e.Code)
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

// CompletionJSON is the chat.completion of a succeeded job: id
// "chatcmpl-" + job id, created = the response's time, model = the model
// that answered, and every choice and member the backend sent as it sent
// it (jobs.Response.Body): reasoning_content, logprobs,
// system_fingerprint, more choices for n, ... The first choice's content
// is the answer's text (its parsed JSON instead when the text itself is
// not JSON but a checked JSON answer was parsed from it), null when the
// model only called tools; its tool_calls are the model's calls, each with
// its type; a finish_reason the provider did not send is "tool_calls" for
// an answer with calls and "stop" otherwise. usage is present only when
// the provider reported the prompt and completion counts, and counts
// every generation the answer took (repairs too), with the backend's
// details. An answer kept without its body is made from its columns.
//
// The body is patched, not decoded: its choices are copied as they are
// unless one of them needs what promptkit fills in (see fills).
func CompletionJSON(j jobs.Job, r jobs.Response) json.RawMessage {
	top := members(r.Body)
	if top == nil {
		b, _ := json.Marshal(synthesized(j, r)) // cannot fail: strings, numbers, valid JSON
		return b
	}
	top["id"], top["object"] = mustJSON("chatcmpl-"+j.ID), json.RawMessage(`"chat.completion"`)
	top["created"], top["model"] = mustJSON(r.CreatedAt.Unix()), mustJSON(r.Model)
	u := usageOf(r.Usage, top["usage"])
	delete(top, "usage")
	if u != nil {
		top["usage"], _ = json.Marshal(u) // cannot fail: numbers and raw JSON
	}
	if fills(r) {
		top["choices"] = filled(top["choices"], r)
	}
	b, err := json.Marshal(top)
	if err != nil { // a body that is not what AnswerBody keeps
		b, _ = json.Marshal(synthesized(j, r))
	}
	return b
}

// Completion is CompletionJSON decoded, for the code that reads its
// choices (a stream's end, the Responses API).
func Completion(j jobs.Job, r jobs.Response) ChatCompletion {
	var c ChatCompletion
	_ = json.Unmarshal(CompletionJSON(j, r), &c) // cannot fail: what CompletionJSON writes
	return c
}

// synthesized is the completion of an answer kept without its body: one
// choice, made from the response's columns.
func synthesized(j jobs.Job, r jobs.Response) ChatCompletion {
	content := AnswerText(r)
	msg := Message{Role: pktype.RoleAssistant, Content: &content, ToolCalls: r.ToolCalls}
	if content == "" && len(r.ToolCalls) > 0 {
		msg.Content = nil
	}
	return ChatCompletion{ID: "chatcmpl-" + j.ID, Object: "chat.completion", Created: r.CreatedAt.Unix(), Model: r.Model,
		Choices: []Choice{{Message: msg, FinishReason: finishOf(r)}}, Usage: usageOf(r.Usage, nil)}
}

// finishOf is the first choice's finish_reason: the provider's, else
// "tool_calls" for an answer with calls and "stop" otherwise.
func finishOf(r jobs.Response) string {
	if len(r.ToolCalls) > 0 {
		return cmp.Or(r.FinishReason, "tool_calls")
	}
	return cmp.Or(r.FinishReason, "stop")
}

// fills reports whether the body's choices need what promptkit fills in:
// the parsed JSON for the text, the calls' types (a backend may leave the
// only type out), a finish_reason the provider did not send.
func fills(r jobs.Response) bool {
	return AnswerText(r) != r.Output || len(r.ToolCalls) > 0 || r.FinishReason == ""
}

// filled is a body's choices with what promptkit fills in: on the first,
// the answer's text and calls (see CompletionJSON); on every one, a
// finish_reason when the provider sent none, and each call's type.
func filled(raw json.RawMessage, r jobs.Response) json.RawMessage {
	var choices []map[string]json.RawMessage
	if json.Unmarshal(raw, &choices) != nil {
		return raw
	}
	for _, ch := range choices {
		msg := members(ch["message"])
		if msg == nil {
			msg = map[string]json.RawMessage{}
		}
		var finish string
		_ = json.Unmarshal(ch["finish_reason"], &finish)
		if string(ch["index"]) == "0" || len(choices) == 1 {
			content := AnswerText(r)
			wasNull := string(msg["content"]) == "null"
			msg["content"] = mustJSON(content)
			if content == "" && (len(r.ToolCalls) > 0 || wasNull) {
				msg["content"] = json.RawMessage("null")
			}
			delete(msg, "tool_calls")
			if len(r.ToolCalls) > 0 {
				msg["tool_calls"], _ = json.Marshal(r.ToolCalls) // cannot fail: strings
			}
			finish = cmp.Or(finish, finishOf(r))
		} else {
			var calls []map[string]json.RawMessage
			if json.Unmarshal(msg["tool_calls"], &calls) == nil && len(calls) > 0 {
				for _, c := range calls {
					if _, ok := c["type"]; !ok {
						c["type"] = json.RawMessage(`"function"`)
					}
				}
				msg["tool_calls"], _ = json.Marshal(calls)
				finish = cmp.Or(finish, "tool_calls")
			}
			finish = cmp.Or(finish, "stop")
		}
		ch["message"], _ = json.Marshal(msg)
		ch["finish_reason"] = mustJSON(finish)
	}
	b, err := json.Marshal(choices)
	if err != nil {
		return raw
	}
	return b
}

// members is a JSON object's members; nil for anything else.
func members(raw json.RawMessage) map[string]json.RawMessage {
	var m map[string]json.RawMessage
	if json.Unmarshal(raw, &m) != nil {
		return nil
	}
	return m
}

// except is m without keys, as extra members; nil when none is left.
func except(m map[string]json.RawMessage, keys ...string) pktype.Params {
	out := pktype.Params{}
	for k, v := range m {
		if !slices.Contains(keys, k) {
			out[k] = v
		}
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// usageOf is OpenAI's usage for what the provider reported, nil unless it
// reported the prompt and completion counts: an unknown count is never
// sent as a number. A missing total is their sum. raw is the backend's
// own usage object, whose other members (the counts' details) are kept,
// with the cached and reasoning counts promptkit summed over the
// answer's generations.
func usageOf(u pktype.Usage, raw json.RawMessage) *Usage {
	if !u.Known.PromptTokens || !u.Known.CompletionTokens {
		return nil
	}
	total := u.PromptTokens + u.CompletionTokens
	if u.Known.TotalTokens {
		total = u.TotalTokens
	}
	m := members(raw)
	extra := except(m, "prompt_tokens", "completion_tokens", "total_tokens")
	detail := func(key, count string, n int) {
		d := members(m[key])
		if d == nil {
			d = map[string]json.RawMessage{}
		}
		d[count], _ = json.Marshal(n)
		b, _ := json.Marshal(d) // cannot fail: raw members
		extra = pktype.Params{key: b}.Or(extra)
	}
	if u.Known.CachedTokens {
		detail("prompt_tokens_details", "cached_tokens", u.CachedTokens)
	}
	if u.Known.ReasoningTokens {
		detail("completion_tokens_details", "reasoning_tokens", u.ReasoningTokens)
	}
	return &Usage{PromptTokens: u.PromptTokens, CompletionTokens: u.CompletionTokens, TotalTokens: total, Extra: extra}
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
	// Extra are the answer's other members (system_fingerprint, ...).
	Extra pktype.Params `json:"-"`
}

// MarshalJSON writes usage as Usage and WithUsage say, and the extra
// members.
func (c ChatCompletionChunk) MarshalJSON() ([]byte, error) {
	type plain ChatCompletionChunk
	if !c.WithUsage {
		return withExtra(plain(c), c.Extra)
	}
	return withExtra(struct {
		plain
		Usage *Usage `json:"usage"`
	}{plain(c), c.Usage}, c.Extra)
}

// ChunkChoice is one choice of a chunk.
type ChunkChoice struct {
	Index        int             `json:"index"`
	Delta        Delta           `json:"delta"`
	Logprobs     json.RawMessage `json:"logprobs,omitempty"`
	FinishReason *string         `json:"finish_reason"`
}

// Delta is a chunk's part of the answer message: Extra are its other
// members (a piece of reasoning_content, a refusal, ...).
type Delta struct {
	Role      string          `json:"role,omitempty"`
	Content   *string         `json:"content,omitempty"`
	ToolCalls []ToolCallDelta `json:"tool_calls,omitempty"`
	Extra     pktype.Params   `json:"-"`
}

// MarshalJSON writes d with its extra members.
func (d Delta) MarshalJSON() ([]byte, error) {
	type plain Delta
	return withExtra(plain(d), d.Extra)
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

// Chunks is a finished completion as stream chunks: for each choice, the
// role, the message's other members (its reasoning, a refusal, ...), the
// content (left out when empty) with the choice's logprobs, each tool
// call whole, and the finish reason; then, with includeUsage, a chunk
// with no choices and the usage.
func Chunks(c ChatCompletion, includeUsage bool) []ChatCompletionChunk {
	out, _ := ChunksAfter(c, nil, includeUsage) // nothing sent: always continued
	return out
}

// ChunksAfter are the chunks that end a stream which already sent
// sent[i] of choice i (ChoiceChunks of each choice, then the usage chunk
// as in Chunks); ok is false when what was sent is not where c begins
// (Sent.Continues), or names a choice c lacks.
func ChunksAfter(c ChatCompletion, sent map[int]*Sent, includeUsage bool) (out []ChatCompletionChunk, ok bool) {
	if len(sent) > len(c.Choices) {
		return nil, false
	}
	base := ChatCompletionChunk{ID: c.ID, Object: "chat.completion.chunk", Created: c.Created, Model: c.Model, WithUsage: includeUsage,
		Extra: c.Extra}
	for _, ch := range c.Choices {
		var s Sent
		if p := sent[ch.Index]; p != nil {
			s = *p
		}
		if !s.Continues(ch) {
			return nil, false
		}
		for _, cc := range ChoiceChunks(ch, s) {
			chunk := base
			chunk.Choices = []ChunkChoice{cc}
			out = append(out, chunk)
		}
	}
	if includeUsage {
		last := base
		last.Choices = []ChunkChoice{}
		last.Usage = c.Usage
		out = append(out, last)
	}
	return out, true
}

// Sent is what a stream already sent of one choice: whether it began
// (its role went out), the pieces of each text member of its message
// joined (content, reasoning_content, refusal, ...), and its tool calls
// as far as each went, arguments joined.
type Sent struct {
	Started bool
	Text    map[string]string
	Calls   []pktype.ToolCall
}

// Continues reports whether ch begins with what was sent of it: each
// text member with its pieces, each call with its id, name and the
// arguments sent. A stream that sent something else must not splice the
// stored answer onto it.
func (s Sent) Continues(ch Choice) bool {
	msg := ch.Message
	for k, sent := range s.Text {
		if !strings.HasPrefix(textMember(msg, k), sent) {
			return false
		}
	}
	if len(s.Calls) > len(msg.ToolCalls) {
		return false
	}
	for i, c := range s.Calls {
		m := msg.ToolCalls[i]
		if c.ID != m.ID || c.Function.Name != m.Function.Name || !strings.HasPrefix(m.Function.Arguments, c.Function.Arguments) {
			return false
		}
	}
	return true
}

// textMember is a message's text member k: its content, or an extra
// member that is a string ("" when it is not one).
func textMember(m Message, k string) string {
	if k == "content" {
		if m.Content == nil {
			return ""
		}
		return *m.Content
	}
	var s string
	_ = json.Unmarshal(m.Extra[k], &s)
	return s
}

// ChoiceChunks are the chunk choices that send what is left of ch after
// sent (which must continue it, Sent.Continues): the role and, unless
// text, the message's other members, when the choice has not begun; the
// rest of each text member (the choice's logprobs with the content,
// when nothing of it was sent); the calls' rest; the finish reason.
func ChoiceChunks(ch Choice, sent Sent) []ChunkChoice {
	var out []ChunkChoice
	one := func(d Delta) { out = append(out, ChunkChoice{Index: ch.Index, Delta: d}) }
	msg := ch.Message
	if !sent.Started {
		empty := ""
		one(Delta{Role: pktype.RoleAssistant, Content: &empty})
	}
	extra := pktype.Params{}
	for k, v := range msg.Extra {
		var s string
		switch {
		case json.Unmarshal(v, &s) == nil:
			if rest := s[min(len(sent.Text[k]), len(s)):]; rest != "" {
				extra[k] = mustJSON(rest)
			}
		case !sent.Started:
			extra[k] = v // annotations, audio, ...
		}
	}
	if len(extra) > 0 {
		one(Delta{Extra: extra})
	}
	if content := textMember(msg, "content"); len(content) > len(sent.Text["content"]) {
		rest := content[len(sent.Text["content"]):]
		one(Delta{Content: &rest})
		if sent.Text["content"] == "" {
			out[len(out)-1].Logprobs = ch.Logprobs
		}
	}
	for i, c := range msg.ToolCalls {
		d := ToolCallDelta{Index: i, ID: c.ID, Type: c.Type, Function: FunctionDelta(c.Function)}
		if i < len(sent.Calls) {
			done := sent.Calls[i].Function.Arguments
			if c.Function.Arguments == done {
				continue
			}
			d = ToolCallDelta{Index: i, Function: FunctionDelta{Arguments: c.Function.Arguments[len(done):]}}
		}
		one(Delta{ToolCalls: []ToolCallDelta{d}})
	}
	finish := ch.FinishReason
	out = append(out, ChunkChoice{Index: ch.Index, FinishReason: &finish})
	return out
}

// mustJSON is v's JSON, for values that always have one.
func mustJSON(v any) json.RawMessage {
	b, _ := json.Marshal(v) // cannot fail: a string or a number
	return b
}

// JobError is the HTTP status and error body for a job that ended
// without an answer (failed or cancelled), as problem.OfJob classifies
// it (one table for every dialect), in OpenAI's words (ErrorFor): a
// rate limit is code rate_limit_exceeded, a spent budget type and code
// insufficient_quota, a cancelled job code cancelled; any other code is
// the job's error kind, and the type follows the status.
func JobError(j jobs.Job) (int, ErrorBody) {
	f := problem.OfJob(j)
	return f.Status, ErrorFor(f.Status, f.Kind, f.Code, f.Message, "")
}

// ErrorFor is OpenAI's error object for a failure promptkit classified
// (internal/problem): its type by the status (TypeOf), OpenAI's code for
// the kinds OpenAI names its own way, else code as given; message and
// param as given (an empty param or code is null).
func ErrorFor(status int, kind problem.Kind, code, message, param string) ErrorBody {
	typ := TypeOf(status)
	switch kind {
	case problem.BadValue:
		code = CodeInvalidValue
	case problem.BadBody:
		code = "invalid_body"
	case problem.Unauthenticated:
		code = "invalid_api_key"
	case problem.TooLarge:
		code = "request_too_large"
	case problem.RateLimited:
		code = "rate_limit_exceeded"
	case problem.BudgetSpent:
		code, typ = TypeInsufficientQuota, TypeInsufficientQuota
	case problem.Internal:
		code = "internal_error"
	}
	return NewError(message, typ, param, code)
}

// TypeOf is the type OpenAI's error object gives a status.
func TypeOf(status int) string {
	switch {
	case status == http.StatusTooManyRequests:
		return TypeRateLimit
	case status == http.StatusInternalServerError:
		return TypeAPI
	case status >= 500:
		return TypeServer
	}
	return TypeInvalidRequest
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
		out.Response = &lineResponse{StatusCode: http.StatusOK, RequestID: r.Job.ID, Body: CompletionJSON(r.Job, *r.Response)}
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
