package providertest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"slices"
	"strings"

	"github.com/promptkit/promptkit/pktype"
)

// MaxChoices is the largest "n" the fake answers; larger ones get a 400
// naming "n".
const MaxChoices = 8

// chatRequest is the part of a valid chat-completions body the default
// responder needs.
type chatRequest struct {
	model          string
	messages       []Message
	responseFormat responseFormat
	tools          []tool
	toolChoice     json.RawMessage
	// n is how many choices to answer with, 1 to MaxChoices.
	n int
	// thinking is the request's own reasoning switch (rawRequest.thinking);
	// nil leaves it to WithReasoning.
	thinking *bool
}

// tool is an offered function tool as the default responder reads it.
type tool struct {
	Type     string `json:"type"`
	Function struct {
		Name       string `json:"name"`
		Parameters any    `json:"parameters"`
	} `json:"function"`
}

type responseFormat struct {
	Type       string `json:"type"`
	JSONSchema struct {
		Schema any `json:"schema"`
	} `json:"json_schema"`
	// Schema is a json_object format's schema, as instructor's JSON_SCHEMA
	// mode sends it and vLLM honours it.
	Schema any `json:"schema"`
}

// delivery is how a request wants its reply delivered. It is read
// leniently, also from bodies that are not valid requests, because
// scripted replies answer whatever the body holds.
type delivery struct {
	stream       bool // "stream": true
	includeUsage bool // "stream_options": {"include_usage": true}
	logprobs     bool // "logprobs": true
	topLogprobs  int  // "top_logprobs", 0 to MaxTopLogprobs
}

// requestError is a 400 the default responder sends: OpenAI's message,
// the parameter at fault ("" for none) and an error code.
type requestError struct {
	message, param, code string
}

func (e *requestError) Error() string { return e.message }

func invalidType(param, want string) *requestError {
	return &requestError{message: fmt.Sprintf("Invalid type for '%s': expected %s.", param, want), param: param, code: "invalid_type"}
}

func unsupported(param, code, format string, args ...any) *requestError {
	return &requestError{message: fmt.Sprintf(format, args...), param: param, code: code}
}

// rawRequest holds the body fields the fake reads or refuses.
type rawRequest struct {
	Model          json.RawMessage `json:"model"`
	Messages       json.RawMessage `json:"messages"`
	ResponseFormat json.RawMessage `json:"response_format"`
	Stream         json.RawMessage `json:"stream"`
	StreamOptions  json.RawMessage `json:"stream_options"`
	N              json.RawMessage `json:"n"`
	Tools          json.RawMessage `json:"tools"`
	ToolChoice     json.RawMessage `json:"tool_choice"`
	Functions      json.RawMessage `json:"functions"`
	FunctionCall   json.RawMessage `json:"function_call"`
	Audio          json.RawMessage `json:"audio"`
	Modalities     json.RawMessage `json:"modalities"`
	Logprobs       json.RawMessage `json:"logprobs"`
	TopLogprobs    json.RawMessage `json:"top_logprobs"`
	// The reasoning switches of OpenAI and of vLLM's chat templates.
	ReasoningEffort    json.RawMessage `json:"reasoning_effort"`
	ChatTemplateKwargs json.RawMessage `json:"chat_template_kwargs"`
}

type rawMessage struct {
	Role       string            `json:"role"`
	Content    json.RawMessage   `json:"content"`
	ToolCalls  []pktype.ToolCall `json:"tool_calls"`
	ToolCallID string            `json:"tool_call_id"`
}

type contentPart struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

// parseRequest records r and decodes its body. chat is nil when the body
// is not a valid request the fake supports; err, a *requestError, says
// why, in the words OpenAI would use.
func parseRequest(r *http.Request, body []byte) (rec Request, chat *chatRequest, dl delivery, err error) {
	rec = Request{Method: r.Method, Path: r.URL.Path, Header: r.Header.Clone(), Body: body}

	var raw rawRequest
	if err := json.Unmarshal(body, &raw); err != nil {
		return rec, nil, dl, &requestError{message: "request body is not a valid JSON object", code: "invalid_request"}
	}
	_ = json.Unmarshal(raw.Stream, &dl.stream) // lenient: anything but true is no stream
	rec.Stream = dl.stream
	var opts struct {
		IncludeUsage json.RawMessage `json:"include_usage"`
	}
	if json.Unmarshal(raw.StreamOptions, &opts) == nil {
		_ = json.Unmarshal(opts.IncludeUsage, &dl.includeUsage)
	}
	_ = json.Unmarshal(raw.Logprobs, &dl.logprobs) // lenient, as stream
	if dl.logprobs {
		var top float64
		if json.Unmarshal(raw.TopLogprobs, &top) == nil {
			dl.topLogprobs = int(min(max(top, 0), MaxTopLogprobs))
		}
	}
	if present(raw.ResponseFormat) {
		rec.ResponseFormat = raw.ResponseFormat
	}
	var model string
	modelErr := json.Unmarshal(raw.Model, &model)
	if modelErr == nil {
		rec.Model = model
	}
	var msgs []rawMessage
	msgErr := json.Unmarshal(raw.Messages, &msgs)
	if msgErr == nil && msgs != nil {
		rec.Messages = make([]Message, len(msgs))
		for i, m := range msgs {
			rec.Messages[i] = Message{Role: m.Role, Content: contentText(m.Content), ToolCalls: m.ToolCalls, ToolCallID: m.ToolCallID}
		}
	}

	switch {
	case modelErr != nil || model == "":
		return rec, nil, dl, &requestError{message: "you must provide a model parameter", param: "model", code: "invalid_request"}
	case msgErr != nil || len(msgs) == 0:
		return rec, nil, dl, &requestError{message: "'messages' must be a non-empty array", param: "messages", code: "invalid_request"}
	}
	chat = &chatRequest{model: model, messages: rec.Messages, toolChoice: raw.ToolChoice, n: 1, thinking: raw.thinking()}
	if rec.ResponseFormat != nil {
		if err := json.Unmarshal(rec.ResponseFormat, &chat.responseFormat); err != nil {
			return rec, nil, dl, &requestError{message: "'response_format' is not a valid object", param: "response_format", code: "invalid_request"}
		}
	}
	if err := raw.check(msgs); err != nil {
		return rec, nil, dl, err
	}
	if present(raw.N) {
		var n float64
		_ = json.Unmarshal(raw.N, &n) // check made sure it is an integer
		chat.n = int(max(n, 1))       // OpenAI refuses n < 1; the fake has always answered one choice
	}
	if present(raw.Tools) {
		if json.Unmarshal(raw.Tools, &chat.tools) != nil {
			return rec, nil, dl, invalidType("tools", "an array of tools")
		}
		for i, t := range chat.tools {
			if t.Type != "function" || t.Function.Name == "" {
				return rec, nil, dl, unsupported(fmt.Sprintf("tools[%d]", i), "invalid_value",
					"providertest offers function tools only, each with a name.")
			}
			rec.Tools = append(rec.Tools, t.Function.Name)
		}
	}
	return rec, chat, dl, nil
}

// check refuses, as OpenAI refuses a bad request, what the fake cannot
// honour: rather than answer as if it had (text for "audio"), it says so.
func (raw *rawRequest) check(msgs []rawMessage) error {
	if present(raw.Stream) && !isBool(raw.Stream) {
		return invalidType("stream", "a boolean")
	}
	if present(raw.StreamOptions) {
		var opts map[string]json.RawMessage
		if json.Unmarshal(raw.StreamOptions, &opts) != nil || opts == nil {
			return invalidType("stream_options", "an object")
		}
		if v := opts["include_usage"]; present(v) && !isBool(v) {
			return invalidType("stream_options.include_usage", "a boolean")
		}
	}
	if present(raw.N) {
		var n float64
		if json.Unmarshal(raw.N, &n) != nil || n != math.Trunc(n) {
			return invalidType("n", "an integer")
		}
		if n > MaxChoices {
			return unsupported("n", "integer_above_max_value",
				"Invalid 'n': integer above maximum value. Expected a value <= %d, but got %s instead.", MaxChoices, raw.N)
		}
	}
	for _, p := range []struct {
		name string
		v    json.RawMessage
	}{
		{"functions", raw.Functions}, {"function_call", raw.FunctionCall},
	} {
		if present(p.v) {
			return unsupported(p.name, "unsupported_parameter",
				"providertest takes tools, not the deprecated functions: '%s' is not supported.", p.name)
		}
	}
	if present(raw.ToolChoice) && !present(raw.Tools) {
		return unsupported("tool_choice", "invalid_value", "'tool_choice' is only allowed when 'tools' are specified.")
	}
	if present(raw.Audio) {
		return unsupported("audio", "unsupported_parameter", "providertest answers with text only: 'audio' is not supported.")
	}
	var modalities []string
	if json.Unmarshal(raw.Modalities, &modalities) == nil && slices.Contains(modalities, "audio") {
		return unsupported("modalities", "unsupported_value", "providertest answers with text only: the 'audio' modality is not supported.")
	}
	// top_logprobs without logprobs has always been accepted and ignored.
	var logprobs bool
	if json.Unmarshal(raw.Logprobs, &logprobs) == nil && logprobs && present(raw.TopLogprobs) {
		var top float64
		switch {
		case json.Unmarshal(raw.TopLogprobs, &top) != nil || top != math.Trunc(top):
			return invalidType("top_logprobs", "an integer")
		case top < 0:
			return unsupported("top_logprobs", "integer_below_min_value",
				"Invalid 'top_logprobs': integer below minimum value. Expected a value >= 0, but got %s instead.", raw.TopLogprobs)
		case top > MaxTopLogprobs:
			return unsupported("top_logprobs", "integer_above_max_value",
				"Invalid 'top_logprobs': integer above maximum value. Expected a value <= %d, but got %s instead.", MaxTopLogprobs, raw.TopLogprobs)
		}
	}
	for i, m := range msgs {
		var parts []contentPart
		if json.Unmarshal(m.Content, &parts) != nil {
			continue // a string, null or something contentText ignores
		}
		for j, p := range parts {
			if !textPart(p) {
				return unsupported(fmt.Sprintf("messages[%d].content[%d].type", i, j), "unsupported_value",
					"providertest reads text only: content parts of type '%s' are not supported.", p.Type)
			}
		}
	}
	return nil
}

// thinking is the request's own reasoning switch: off with vLLM's
// chat_template_kwargs {"enable_thinking": false} (Qwen3's switch), on
// with {"enable_thinking": true} or any string reasoning_effort; nil when
// the request says nothing. Other values are ignored, as unknown
// parameters are.
func (raw *rawRequest) thinking() *bool {
	var kwargs struct {
		EnableThinking *bool `json:"enable_thinking"`
	}
	if json.Unmarshal(raw.ChatTemplateKwargs, &kwargs) == nil && kwargs.EnableThinking != nil {
		return kwargs.EnableThinking
	}
	var effort string
	if present(raw.ReasoningEffort) && json.Unmarshal(raw.ReasoningEffort, &effort) == nil {
		on := true
		return &on
	}
	return nil
}

// textPart reports whether the fake can read p: a text part, a refusal
// (an earlier assistant turn), or an untyped part with text.
func textPart(p contentPart) bool {
	return p.Type == "text" || p.Type == "refusal" || (p.Type == "" && p.Text != "")
}

// present reports whether a field is in the body and not null.
func present(v json.RawMessage) bool {
	return len(v) > 0 && !bytes.Equal(v, []byte("null"))
}

func isBool(v json.RawMessage) bool {
	var b bool
	return json.Unmarshal(v, &b) == nil
}

// contentText flattens string or content-part message content.
func contentText(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var parts []contentPart
	if json.Unmarshal(raw, &parts) != nil {
		return ""
	}
	texts := make([]string, 0, len(parts))
	for _, p := range parts {
		if p.Type == "text" || p.Text != "" {
			texts = append(texts, p.Text)
		}
	}
	return strings.Join(texts, "\n")
}
