package providertest

import (
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/promptkit/promptkit/pktype"
)

// Response is one scripted reply. The zero value is a 200 chat completion
// with empty content and computed usage.
type Response struct {
	// Status is the HTTP status code. Defaults to 200.
	Status int
	// Header holds extra response headers, for example Retry-After. They are
	// set after Content-Type, so they may override it. Defaults to none.
	Header http.Header
	// Body is the raw response body, sent as is, also to a request that
	// asked for a stream (set Header's Content-Type to text/event-stream to
	// script a stream of your own). When nil, a 2xx reply gets a
	// chat-completion envelope built from Text and Usage (streamed as
	// chat.completion.chunk events when the request has "stream": true),
	// and any other status gets an OpenAI-style JSON error body. A non-nil
	// empty slice sends an empty body. Defaults to nil.
	Body []byte
	// Text is the assistant content of a generated 2xx body. A stream
	// carries it in content deltas of about one word each. Defaults to "".
	Text string
	// ToolCalls are the generated answer's tool calls (see CallTool); its
	// finish_reason is then "tool_calls" and, without Text, its content
	// null. A stream carries each call in delta.tool_calls chunks: the id,
	// type and name first, then the arguments in pieces. Defaults to none.
	ToolCalls []pktype.ToolCall
	// Reasoning is the generated answer's reasoning, sent as vLLM's
	// reasoning parser sends it: message.reasoning_content beside the
	// content, or, streamed, delta.reasoning_content pieces of about one
	// word each before the content deltas. An answer with reasoning also
	// carries "system_fingerprint". Defaults to "" (no reasoning_content).
	Reasoning string
	// MoreChoices are the generated answer's choices after the first
	// (which Text, ToolCalls and Reasoning make), with indexes 1, 2, ...;
	// a stream interleaves their chunks. Defaults to none: one choice.
	MoreChoices []Choice
	// Usage says how the "usage" object of a generated 2xx body is
	// rendered. Defaults to UsageFull with counts computed from word counts.
	// A stream reports usage only when the request sets
	// stream_options.include_usage, in a final chunk with empty "choices"
	// (UsageNull sends that chunk with "usage": null; UsageAbsent sends no
	// such chunk, as a server that ignores include_usage would). Computed
	// counts cover every choice, and reasoning when there is any.
	Usage Usage
	// Delay is waited before replying, after any WithLatency delay. It ends
	// early when the request's context ends. Defaults to 0.
	Delay time.Duration
	// Hold, when non-nil, keeps the request in flight until the channel is
	// closed or the request's context ends, so tests can hold requests
	// deterministically. Defaults to nil.
	Hold <-chan struct{}

	// omitChoices drops "choices" from a generated envelope (MissingChoices).
	omitChoices bool
}

// UsageMode selects how a generated body renders its "usage" object.
type UsageMode int

const (
	// UsageFull renders all five counts: prompt_tokens, completion_tokens,
	// total_tokens, prompt_tokens_details.cached_tokens and
	// completion_tokens_details.reasoning_tokens. When every count is zero,
	// plausible counts are computed from whitespace word counts of the
	// request messages and the reply's choices: completion tokens are the
	// words of every choice's text and reasoning, and with reasoning
	// reasoning_tokens are its words and cached_tokens half the prompt
	// tokens, rounded down. It is the default.
	UsageFull UsageMode = iota
	// UsageAbsent omits the "usage" key.
	UsageAbsent
	// UsageNull renders "usage": null.
	UsageNull
	// UsagePartial renders only prompt_tokens and completion_tokens. When
	// both are zero they are computed as for UsageFull.
	UsagePartial
	// UsageZero renders all five UsageFull fields as 0.
	UsageZero
)

// Usage describes the "usage" object of a generated 2xx body.
type Usage struct {
	// Mode selects which fields are rendered. Defaults to UsageFull.
	Mode UsageMode
	// PromptTokens is rendered as usage.prompt_tokens. Defaults to 0.
	PromptTokens int
	// CompletionTokens is rendered as usage.completion_tokens. Defaults to 0.
	CompletionTokens int
	// TotalTokens is rendered as usage.total_tokens. Defaults to 0.
	TotalTokens int
	// CachedTokens is rendered as
	// usage.prompt_tokens_details.cached_tokens. Defaults to 0.
	CachedTokens int
	// ReasoningTokens is rendered as
	// usage.completion_tokens_details.reasoning_tokens. Defaults to 0.
	ReasoningTokens int
}

// Reply returns a 200 chat completion whose assistant content is text, with
// full usage computed from word counts.
func Reply(text string) Response {
	return Response{Text: text}
}

// CallTool returns a 200 answer that calls the function name with
// arguments (a JSON text), as call "call_1".
func CallTool(name, arguments string) Response {
	return Response{ToolCalls: []pktype.ToolCall{{ID: "call_1", Type: pktype.ToolTypeFunction,
		Function: pktype.FunctionCall{Name: name, Arguments: arguments}}}}
}

// Choice is one choice of a generated answer beyond the first (see
// Response.MoreChoices); its fields mean what Response's of the same name
// do.
type Choice struct {
	// Text is the choice's assistant content. Defaults to "".
	Text string
	// ToolCalls are the choice's tool calls; its finish_reason is then
	// "tool_calls" and, without Text, its content null. Defaults to none.
	ToolCalls []pktype.ToolCall
	// Reasoning is the choice's reasoning_content. Defaults to "".
	Reasoning string
}

// choices lists every choice of a generated answer, the first made of
// Text, ToolCalls and Reasoning.
func (r *Response) choices() []Choice {
	return append([]Choice{{Text: r.Text, ToolCalls: r.ToolCalls, Reasoning: r.Reasoning}}, r.MoreChoices...)
}

// finishReason is a generated choice's finish_reason.
func (c Choice) finishReason() string {
	if len(c.ToolCalls) > 0 {
		return "tool_calls"
	}
	return "stop"
}

// Status returns a reply with the given status code and, for non-2xx
// codes, an OpenAI-style error body such as
// {"error":{"message":"...","type":"server_error","param":null,"code":"server_error"}}.
// The error body is sent as JSON also to requests that asked for a stream.
func Status(code int) Response {
	return Response{Status: code}
}

// WithRetryAfter returns a copy of r whose Retry-After header is v: a
// number of seconds such as "2", or an HTTP date from RetryAfterDate.
func (r Response) WithRetryAfter(v string) Response {
	r.Header = r.Header.Clone()
	if r.Header == nil {
		r.Header = make(http.Header)
	}
	r.Header.Set("Retry-After", v)
	return r
}

// RetryAfterDate formats t as an HTTP date for a Retry-After header.
func RetryAfterDate(t time.Time) string {
	return t.UTC().Format(http.TimeFormat)
}

// Malformed returns a 200 reply whose JSON body is cut off, so it does not
// parse.
func Malformed() Response {
	return Response{
		Header: http.Header{"Content-Type": {"application/json"}},
		Body:   []byte(`{"id":"chatcmpl-malformed","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"trunc`),
	}
}

// MissingChoices returns a 200 reply with a well-formed envelope, including
// full usage, but no "choices" key. Streamed, it is one chunk without
// "choices" (and, with include_usage, a usage chunk without it too).
func MissingChoices() Response {
	return Response{omitChoices: true}
}

// status returns the effective status code.
func (r *Response) status() int {
	if r.Status == 0 {
		return http.StatusOK
	}
	return r.Status
}

// Wire types. Structs rather than maps keep the key order stable, which
// makes bodies readable in test failures.
type (
	envelope struct {
		ID                string          `json:"id"`
		Object            string          `json:"object"`
		Created           int64           `json:"created"`
		Model             string          `json:"model"`
		SystemFingerprint string          `json:"system_fingerprint,omitempty"`
		Choices           []choice        `json:"choices,omitempty"`
		Usage             json.RawMessage `json:"usage,omitempty"`
	}
	choice struct {
		Index   int         `json:"index"`
		Message wireMessage `json:"message"`
		// Logprobs is nil to omit the key, as answers without the newer
		// features always have (see choiceShape).
		Logprobs     json.RawMessage `json:"logprobs,omitempty"`
		FinishReason string          `json:"finish_reason"`
	}
	wireMessage struct {
		Role             string            `json:"role"`
		ReasoningContent string            `json:"reasoning_content,omitempty"`
		Content          *string           `json:"content"`
		ToolCalls        []pktype.ToolCall `json:"tool_calls,omitempty"`
	}
	fullUsage struct {
		PromptTokens            int           `json:"prompt_tokens"`
		CompletionTokens        int           `json:"completion_tokens"`
		TotalTokens             int           `json:"total_tokens"`
		PromptTokensDetails     promptDetails `json:"prompt_tokens_details"`
		CompletionTokensDetails complDetails  `json:"completion_tokens_details"`
	}
	promptDetails struct {
		CachedTokens int `json:"cached_tokens"`
	}
	complDetails struct {
		ReasoningTokens int `json:"reasoning_tokens"`
	}
	partialUsage struct {
		PromptTokens     int `json:"prompt_tokens"`
		CompletionTokens int `json:"completion_tokens"`
	}
	errorEnvelope struct {
		Error errorBody `json:"error"`
	}
	errorBody struct {
		Message string  `json:"message"`
		Type    string  `json:"type"`
		Param   *string `json:"param"` // null when no single parameter is at fault
		Code    *string `json:"code"`  // null for WithStatus answers
	}
)

// renderUsage encodes u; nil means the key is omitted. promptWords is the
// request's word count, used with the choices' words when counts must be
// computed: completion tokens are the words of every choice's text and
// reasoning; with reasoning, the reasoning words are reported as
// reasoning_tokens and half the prompt (rounded down) as cached_tokens, as
// a reasoning model behind a prefix cache would.
func renderUsage(u Usage, promptWords int, choices []Choice) json.RawMessage {
	completion, reasoning := 0, 0
	for _, c := range choices {
		completion += countWords(c.Text) + countWords(c.Reasoning)
		reasoning += countWords(c.Reasoning)
	}
	var v any
	switch u.Mode {
	case UsageAbsent:
		return nil
	case UsageNull:
		return json.RawMessage("null")
	case UsageZero:
		v = fullUsage{}
	case UsagePartial:
		if u.PromptTokens == 0 && u.CompletionTokens == 0 {
			u.PromptTokens, u.CompletionTokens = promptWords, completion
		}
		v = partialUsage{PromptTokens: u.PromptTokens, CompletionTokens: u.CompletionTokens}
	default: // UsageFull and unknown modes
		if u == (Usage{Mode: u.Mode}) {
			u.PromptTokens, u.CompletionTokens = promptWords, completion
			u.TotalTokens = u.PromptTokens + u.CompletionTokens
			if reasoning > 0 {
				u.ReasoningTokens, u.CachedTokens = reasoning, promptWords/2
			}
		}
		v = fullUsage{
			PromptTokens:            u.PromptTokens,
			CompletionTokens:        u.CompletionTokens,
			TotalTokens:             u.TotalTokens,
			PromptTokensDetails:     promptDetails{CachedTokens: u.CachedTokens},
			CompletionTokensDetails: complDetails{ReasoningTokens: u.ReasoningTokens},
		}
	}
	b, _ := json.Marshal(v) // plain structs of ints cannot fail
	return b
}

// errorJSON renders an OpenAI-style error body with "param": null.
func errorJSON(message, typ, code string) []byte {
	return paramErrorJSON(message, typ, "", code)
}

// paramErrorJSON renders an OpenAI-style error body naming the request
// parameter at fault; an empty param or code renders as null.
func paramErrorJSON(message, typ, param, code string) []byte {
	e := errorBody{Message: message, Type: typ}
	if param != "" {
		e.Param = &param
	}
	if code != "" {
		e.Code = &code
	}
	b, _ := json.Marshal(errorEnvelope{Error: e})
	return b
}

// statusError picks the OpenAI error type and code for a status, matching
// what real providers send closely enough for client error handling.
func statusError(code int) []byte {
	msg := strings.ToLower(http.StatusText(code))
	switch {
	case code == http.StatusTooManyRequests:
		msg = "rate limit exceeded"
	case msg == "":
		msg = "error"
	}
	typ, c := errorKind(code)
	return errorJSON(msg, typ, c)
}

// errorKind is the OpenAI error type and code for a status.
func errorKind(code int) (typ, c string) {
	typ, c = "invalid_request_error", "invalid_request"
	switch {
	case code == http.StatusUnauthorized:
		typ, c = "authentication_error", "invalid_api_key"
	case code == http.StatusForbidden:
		typ, c = "permission_error", "permission_denied"
	case code == http.StatusNotFound:
		typ, c = "not_found_error", "not_found"
	case code == http.StatusTooManyRequests:
		typ, c = "rate_limit_error", "rate_limit_exceeded"
	case code >= 500:
		typ, c = "server_error", "server_error"
	}
	return typ, c
}

// forcedError is the body of a WithStatus answer: OpenAI's error with
// "code": null, saying where the failure came from.
func forcedError(code int) []byte {
	msg := http.StatusText(code)
	switch {
	case code == http.StatusServiceUnavailable:
		msg = "The server is overloaded"
	case code == http.StatusTooManyRequests:
		msg = "Rate limit reached"
	case msg == "":
		msg = "Error " + strconv.Itoa(code)
	}
	typ, _ := errorKind(code)
	return errorJSON(msg+" (providertest --status).", typ, "")
}

// countWords counts whitespace-separated words: the fake's token estimate.
func countWords(s string) int {
	return len(strings.Fields(s))
}
