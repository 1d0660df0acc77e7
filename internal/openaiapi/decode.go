package openaiapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/promptkit/promptkit/jobs"
	"github.com/promptkit/promptkit/pktype"
)

// Error codes of a RequestError, OpenAI's where it has one.
const (
	CodeInvalidJSON          = "invalid_json"
	CodeInvalidType          = "invalid_type"
	CodeInvalidValue         = "invalid_value"
	CodeMissingParameter     = "missing_required_parameter"
	CodeUnknownParameter     = "unknown_parameter"
	CodeUnsupportedParameter = "unsupported_parameter"
	CodeUnsupportedValue     = "unsupported_value"
)

// Limits of a request, OpenAI's.
const (
	maxStop          = 4
	maxMetadata      = 16
	maxMetadataKey   = 64
	maxMetadataValue = 512
)

func reqErr(param, code, format string, args ...any) *RequestError {
	return &RequestError{Param: param, Code: code, Message: fmt.Sprintf(format, args...)}
}

func invalidType(param, want string) *RequestError {
	return reqErr(param, CodeInvalidType, "%s must be %s.", param, want)
}

// paramName matches what may be echoed as a parameter name: a request's
// own key is named only when it looks like one, so an error never carries
// arbitrary request text.
var paramName = regexp.MustCompile(`^[A-Za-z0-9_.\-\[\]]{1,64}$`)

// unknownKey is the error for a key promptkit does not know.
func unknownKey(prefix, key string) *RequestError {
	p := prefix + key
	if !paramName.MatchString(key) {
		return reqErr(prefix+"?", CodeUnknownParameter, "The request has an unrecognized parameter.")
	}
	return reqErr(p, CodeUnknownParameter, "Unrecognized request argument: %s.", p)
}

// isNull reports whether a present value is JSON null (an unset
// parameter, as OpenAI treats it).
func isNull(raw json.RawMessage) bool { return string(bytes.TrimSpace(raw)) == "null" }

// object decodes a JSON object into its raw members; param names it in
// errors ("" for the body).
func object(raw []byte, param string) (map[string]json.RawMessage, error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil || m == nil {
		if param == "" {
			return nil, bodyError(raw)
		}
		return nil, invalidType(param, "an object")
	}
	return m, nil
}

// bodyError says why a body is not a JSON object, without quoting it.
func bodyError(raw []byte) *RequestError {
	var v any
	err := json.Unmarshal(raw, &v)
	var syn *json.SyntaxError
	switch {
	case len(bytes.TrimSpace(raw)) == 0:
		return reqErr("", CodeInvalidJSON, "The body is empty; send a JSON object.")
	case errors.As(err, &syn):
		return reqErr("", CodeInvalidJSON, "The body is not valid JSON (at byte %d).", syn.Offset)
	case err != nil:
		return reqErr("", CodeInvalidJSON, "The body is not valid JSON.")
	}
	return reqErr("", CodeInvalidJSON, "The body must be a JSON object.")
}

func decodeString(raw json.RawMessage, param string) (string, error) {
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return "", invalidType(param, "a string")
	}
	return s, nil
}

// decodeModel reads a request's model: a string, not empty.
func decodeModel(raw json.RawMessage, param string) (string, error) {
	m, err := decodeString(raw, param)
	if err == nil && m == "" {
		err = reqErr(param, CodeInvalidValue, "%s must not be empty.", param)
	}
	return m, err
}

func decodeBool(raw json.RawMessage, param string) (bool, error) {
	var b bool
	if err := json.Unmarshal(raw, &b); err != nil {
		return false, invalidType(param, "a boolean")
	}
	return b, nil
}

func decodeNumber(raw json.RawMessage, param string, lo, hi float64) (float64, error) {
	var f float64
	if err := json.Unmarshal(raw, &f); err != nil {
		return 0, invalidType(param, "a number")
	}
	if f < lo || f > hi || math.IsNaN(f) {
		return 0, reqErr(param, CodeInvalidValue, "%s must be between %s and %s.", param,
			strconv.FormatFloat(lo, 'g', -1, 64), strconv.FormatFloat(hi, 'g', -1, 64))
	}
	return f, nil
}

func decodeInt(raw json.RawMessage, param string) (int64, error) {
	var n int64
	if err := json.Unmarshal(raw, &n); err != nil {
		return 0, invalidType(param, "an integer")
	}
	return n, nil
}

// DecodeChat decodes an OpenAI chat completion request body. What
// promptkit cannot honour (n > 1, audio, images, built-in tools, ...) is
// a *RequestError naming the parameter, never silently dropped; so is a
// parameter it does not know. Every error is a *RequestError. The chat
// request comes normalized (jobs.ChatRequest.Normalize).
//
// Accepted and honoured: model, messages (roles system, developer — sent
// as system —, user, assistant — with tool_calls, content then optional
// — and tool, with tool_call_id; content a string or text parts, joined
// with a newline), temperature, top_p, max_tokens and
// max_completion_tokens, stop, seed, response_format (text, json_object,
// json_schema), tools (function tools), tool_choice, parallel_tool_calls,
// stream and stream_options.include_usage. Accepted and
// not stored: user and metadata (returned in ChatParams), safety_identifier
// and prompt_cache_key (hints for OpenAI's own abuse monitoring and
// cache). Accepted when they ask for the default only: n 1, store false,
// logprobs false, top_logprobs 0, presence_penalty and frequency_penalty
// 0, logit_bias {}, modalities ["text"], service_tier auto or default. A
// null value is an unset parameter.
func DecodeChat(body []byte) (ChatParams, error) {
	return decodeChat(body, "")
}

// decodeChat decodes a chat request whose parameters are named with
// prefix ("body." in a batch line).
func decodeChat(body []byte, prefix string) (ChatParams, error) {
	var out ChatParams
	// The body's own name: "" for a request, "body" for a batch line's.
	m, err := object(body, strings.TrimSuffix(prefix, "."))
	if err != nil {
		return out, err
	}
	var maxTokens, maxCompletion *int
	var streamOptions json.RawMessage
	for _, key := range slices.Sorted(maps.Keys(m)) {
		raw := m[key]
		p := prefix + key
		if isNull(raw) {
			if key == "model" || key == "messages" {
				return out, reqErr(p, CodeMissingParameter, "%s is required.", p)
			}
			continue
		}
		switch key {
		case "model":
			out.Model, err = decodeModel(raw, p)
		case "messages":
			out.Chat.Messages, err = decodeMessages(raw, p)
		case "temperature":
			var f float64
			if f, err = decodeNumber(raw, p, 0, 2); err == nil {
				out.Chat.Temperature = &f
			}
		case "top_p":
			var f float64
			if f, err = decodeNumber(raw, p, 0, 1); err == nil {
				out.Chat.TopP = &f
			}
		case "max_tokens", "max_completion_tokens":
			var n int64
			if n, err = decodeInt(raw, p); err == nil {
				if n < 1 || n > math.MaxInt32 {
					err = reqErr(p, CodeInvalidValue, "%s must be at least 1.", p)
					break
				}
				v := int(n)
				if key == "max_tokens" {
					maxTokens = &v
				} else {
					maxCompletion = &v
				}
			}
		case "stop":
			out.Chat.Stop, err = decodeStop(raw, p)
		case "seed":
			var n int64
			if n, err = decodeInt(raw, p); err == nil {
				out.Chat.Seed = &n
			}
		case "response_format":
			err = decodeResponseFormat(raw, p, &out.Chat)
		case "user":
			out.User, err = decodeString(raw, p)
		case "safety_identifier", "prompt_cache_key":
			_, err = decodeString(raw, p)
		case "metadata":
			out.Metadata, err = DecodeMetadata(raw, p)
		case "stream":
			out.Stream, err = decodeBool(raw, p)
		case "stream_options":
			streamOptions = raw
		case "tools":
			out.Chat.Tools, err = decodeTools(raw, p, false, nestedTool)
		case "tool_choice":
			out.Chat.ToolChoice, err = decodeToolChoice(raw, p, nestedFunction)
		case "parallel_tool_calls":
			var b bool
			if b, err = decodeBool(raw, p); err == nil {
				out.Chat.ParallelToolCalls = &b
			}
		default:
			err = refused(key, raw, p)
		}
		if err != nil {
			return out, err
		}
	}
	switch {
	case out.Model == "":
		return out, reqErr(prefix+"model", CodeMissingParameter, "%smodel is required.", prefix)
	case out.Chat.Messages == nil:
		return out, reqErr(prefix+"messages", CodeMissingParameter, "%smessages is required.", prefix)
	}
	if maxTokens != nil && maxCompletion != nil && *maxTokens != *maxCompletion {
		return out, reqErr(prefix+"max_completion_tokens", CodeInvalidValue,
			"max_tokens and max_completion_tokens differ; send one of them.")
	}
	out.Chat.MaxTokens = maxTokens
	if maxCompletion != nil {
		out.Chat.MaxTokens = maxCompletion
	}
	if streamOptions != nil {
		if !out.Stream {
			return out, reqErr(prefix+"stream_options", CodeInvalidValue, "stream_options is only allowed when stream is true.")
		}
		if out.IncludeUsage, err = decodeStreamOptions(streamOptions, prefix+"stream_options"); err != nil {
			return out, err
		}
	}
	// The request is checked here, once: what Normalize returns is marked
	// as checked, so the store does not check it again.
	chat, err := out.Chat.Normalize()
	if err != nil {
		// A rule Normalize names a parameter for (a NUL, a schema over
		// pktype's limits) is reported on that parameter; the checks above
		// leave one it does not name: an empty last message.
		if ie, ok := errors.AsType[*jobs.InvalidError](err); ok && ie.Field != "" {
			return out, reqErr(prefix+ie.Field, CodeInvalidValue, "%s%s %s.", prefix, ie.Field, ie.Reason)
		}
		return out, reqErr(fmt.Sprintf("%smessages[%d].content", prefix, len(out.Chat.Messages)-1), CodeInvalidValue,
			"The last message must not be empty.")
	}
	out.Chat = chat
	return out, nil
}

// refused is the error for a parameter promptkit does not honour, or nil
// when its value asks only for what promptkit does anyway.
func refused(key string, raw json.RawMessage, p string) error {
	switch key {
	case "n":
		n, err := decodeInt(raw, p)
		if err != nil || n == 1 {
			return err
		}
		return reqErr(p, CodeUnsupportedValue, "n must be 1: promptkit answers with one choice per request.")
	case "store":
		b, err := decodeBool(raw, p)
		if err != nil || !b {
			return err
		}
		return reqErr(p, CodeUnsupportedValue, "store: true is not supported: promptkit keeps every request as a job, but not for OpenAI's evals or distillation.")
	case "logprobs":
		b, err := decodeBool(raw, p)
		if err != nil || !b {
			return err
		}
		return reqErr(p, CodeUnsupportedValue, "logprobs is not supported by promptkit.")
	case "top_logprobs":
		n, err := decodeInt(raw, p)
		if err != nil || n == 0 {
			return err
		}
		return reqErr(p, CodeUnsupportedParameter, "top_logprobs is not supported by promptkit.")
	case "presence_penalty", "frequency_penalty":
		f, err := decodeNumber(raw, p, -2, 2)
		if err != nil || f == 0 {
			return err
		}
		return reqErr(p, CodeUnsupportedParameter, "%s is not supported by promptkit; leave it unset or 0.", p)
	case "logit_bias":
		m, err := object(raw, p)
		if err != nil || len(m) == 0 {
			return err
		}
		return reqErr(p, CodeUnsupportedParameter, "logit_bias is not supported by promptkit.")
	case "modalities":
		var mods []string
		if err := json.Unmarshal(raw, &mods); err != nil {
			return invalidType(p, "an array of strings")
		}
		for i, m := range mods {
			if m != "text" {
				return reqErr(fmt.Sprintf("%s[%d]", p, i), CodeUnsupportedValue, "promptkit answers with text only; modalities may only hold \"text\".")
			}
		}
		return nil
	case "service_tier":
		s, err := decodeString(raw, p)
		if err != nil || s == "auto" || s == "default" {
			return err
		}
		return reqErr(p, CodeUnsupportedValue, "service_tier may only be auto or default: promptkit sets priority with the X-Promptkit-Priority header.")
	case "functions", "function_call":
		return reqErr(p, CodeUnsupportedParameter, "%s (deprecated by OpenAI) is not supported: send tools and tool_choice instead.", p)
	case "audio":
		return reqErr(p, CodeUnsupportedParameter, "audio is not supported: promptkit answers with text only.")
	case "prediction":
		return reqErr(p, CodeUnsupportedParameter, "prediction (predicted outputs) is not supported by promptkit.")
	case "web_search_options":
		return reqErr(p, CodeUnsupportedParameter, "web_search_options is not supported: promptkit does not search the web.")
	case "reasoning_effort", "verbosity":
		return reqErr(p, CodeUnsupportedParameter, "%s is not supported by promptkit; choose a profile or model instead.", p)
	}
	return unknownKey(p[:len(p)-len(key)], key)
}

// decodeMessages decodes the conversation.
func decodeMessages(raw json.RawMessage, p string) ([]pktype.Message, error) {
	var list []json.RawMessage
	if err := json.Unmarshal(raw, &list); err != nil {
		return nil, invalidType(p, "an array of messages")
	}
	if len(list) == 0 {
		return nil, reqErr(p, CodeInvalidValue, "%s must not be empty.", p)
	}
	return objects(list, p, decodeMessage)
}

// objects decodes the elements of the array at p, each an object, with
// decode, in order: the first error wins.
func objects[T any](list []json.RawMessage, p string, decode func(m map[string]json.RawMessage, ep string) (T, error)) ([]T, error) {
	out := make([]T, 0, len(list))
	for i, r := range list {
		ep := fmt.Sprintf("%s[%d]", p, i)
		m, err := object(r, ep)
		if err != nil {
			return nil, err
		}
		v, err := decode(m, ep)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, nil
}

func decodeMessage(m map[string]json.RawMessage, mp string) (pktype.Message, error) {
	var msg pktype.Message
	roleRaw, ok := m["role"]
	if !ok || isNull(roleRaw) {
		return msg, reqErr(mp+".role", CodeMissingParameter, "%s.role is required.", mp)
	}
	role, err := decodeString(roleRaw, mp+".role")
	if err != nil {
		return msg, err
	}
	switch role {
	case "system", "developer":
		msg.Role = pktype.RoleSystem
	case "user":
		msg.Role = pktype.RoleUser
	case "assistant":
		msg.Role = pktype.RoleAssistant
	case "tool":
		msg.Role = pktype.RoleTool
	case "function":
		return msg, reqErr(mp+".role", CodeUnsupportedValue, "%s.role: function messages (deprecated by OpenAI) are not supported: send tool messages instead.", mp)
	default:
		return msg, reqErr(mp+".role", CodeInvalidValue, "%s.role must be system, developer, user, assistant or tool.", mp)
	}
	content, hasContent := m["content"]
	for _, key := range slices.Sorted(maps.Keys(m)) {
		raw := m[key]
		p := mp + "." + key
		switch key {
		case "role", "content":
		case "name":
			switch {
			case isNull(raw):
			case role == "tool":
				// The called function's name, which some clients
				// (LangChain) send with a result: the call's id already
				// says which call it answers.
				if _, err := decodeString(raw, p); err != nil {
					return msg, err
				}
			default:
				return msg, reqErr(p, CodeUnsupportedParameter, "%s is not supported: promptkit sends messages without participant names.", p)
			}
		case "tool_calls":
			if isNull(raw) {
				break
			}
			if role != "assistant" {
				return msg, reqErr(p, CodeInvalidValue, "%s is allowed on assistant messages only.", p)
			}
			if msg.ToolCalls, err = decodeToolCalls(raw, p); err != nil {
				return msg, err
			}
		case "tool_call_id":
			if isNull(raw) {
				break
			}
			if role != "tool" {
				return msg, reqErr(p, CodeInvalidValue, "%s is allowed on tool messages only.", p)
			}
			if msg.ToolCallID, err = decodeString(raw, p); err != nil {
				return msg, err
			}
		case "function_call":
			if !isNull(raw) {
				return msg, reqErr(p, CodeUnsupportedParameter, "%s (deprecated by OpenAI) is not supported: send tool_calls instead.", p)
			}
		case "refusal", "audio":
			if !isNull(raw) {
				return msg, reqErr(p, CodeUnsupportedParameter, "%s is not supported by promptkit.", p)
			}
		default:
			return msg, unknownKey(mp+".", key)
		}
	}
	if msg.Role == pktype.RoleTool && msg.ToolCallID == "" {
		return msg, reqErr(mp+".tool_call_id", CodeMissingParameter, "%s.tool_call_id is required.", mp)
	}
	if !hasContent || isNull(content) {
		if len(msg.ToolCalls) > 0 {
			return msg, nil // an assistant message that only calls tools
		}
		return msg, reqErr(mp+".content", CodeMissingParameter, "%s.content is required.", mp)
	}
	msg.Content, err = decodeParts(content, mp+".content", "text")
	return msg, err
}

// decodeParts reads content: a string, or an array of text parts of type
// want ("text" in chat, "input_text" or "output_text" in the Responses
// API), joined with a newline. An output_text part may carry the
// annotations it was answered with when it has none.
func decodeParts(raw json.RawMessage, p, want string) (string, error) {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s, nil
	}
	var parts []json.RawMessage
	if err := json.Unmarshal(raw, &parts); err != nil {
		return "", invalidType(p, "a string or an array of content parts")
	}
	var b strings.Builder
	for j, r := range parts {
		pp := fmt.Sprintf("%s[%d]", p, j)
		part, err := object(r, pp)
		if err != nil {
			return "", err
		}
		typ, err := required(part, "type", pp+".type")
		if err != nil {
			return "", err
		}
		t, err := decodeString(typ, pp+".type")
		if err != nil {
			return "", err
		}
		if t != want {
			return "", reqErr(pp+".type", CodeUnsupportedValue,
				"%s.type must be %s: promptkit takes text only (no images, files, audio or refusals).", pp, want)
		}
		for _, key := range slices.Sorted(maps.Keys(part)) {
			v := part[key]
			switch {
			case key == "type" || key == "text":
			case want == "output_text" && (key == "annotations" || key == "logprobs"):
				var list []json.RawMessage
				if !isNull(v) && (json.Unmarshal(v, &list) != nil || len(list) > 0) {
					return "", reqErr(pp+"."+key, CodeUnsupportedValue, "%s.%s must be empty: promptkit sends the text only.", pp, key)
				}
			default:
				return "", unknownKey(pp+".", key)
			}
		}
		textRaw, err := required(part, "text", pp+".text")
		if err != nil {
			return "", err
		}
		text, err := decodeString(textRaw, pp+".text")
		if err != nil {
			return "", err
		}
		if j > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(text)
	}
	return b.String(), nil
}

func decodeStop(raw json.RawMessage, p string) ([]string, error) {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return []string{s}, nil
	}
	var list []string
	if err := json.Unmarshal(raw, &list); err != nil {
		return nil, invalidType(p, "a string or an array of strings")
	}
	if len(list) > maxStop {
		return nil, reqErr(p, CodeInvalidValue, "%s may hold at most %d sequences.", p, maxStop)
	}
	if len(list) == 0 {
		return nil, nil
	}
	return list, nil
}

// schemaName is OpenAI's rule for a json_schema name.
var schemaName = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

func decodeResponseFormat(raw json.RawMessage, p string, c *jobs.ChatRequest) error {
	m, err := object(raw, p)
	if err != nil {
		return err
	}
	typRaw, ok := m["type"]
	if !ok || isNull(typRaw) {
		return reqErr(p+".type", CodeMissingParameter, "%s.type is required.", p)
	}
	typ, err := decodeString(typRaw, p+".type")
	if err != nil {
		return err
	}
	for _, key := range slices.Sorted(maps.Keys(m)) {
		v := m[key]
		switch {
		case key == "type":
		case key == "json_schema" && typ == "json_schema":
		case isNull(v):
		default:
			return unknownKey(p+".", key)
		}
	}
	switch typ {
	case "text":
		c.ResponseFormat = jobs.FormatText
		return nil
	case "json_object":
		c.ResponseFormat = jobs.FormatJSONObject
		return nil
	case "json_schema":
	default:
		return reqErr(p+".type", CodeInvalidValue, "%s.type must be text, json_object or json_schema.", p)
	}
	sp := p + ".json_schema"
	sraw, ok := m["json_schema"]
	if !ok || isNull(sraw) {
		return reqErr(sp, CodeMissingParameter, "%s is required with type json_schema.", sp)
	}
	s, err := object(sraw, sp)
	if err != nil {
		return err
	}
	_, err = decodeJSONSchema(s, sp, "", c)
	return err
}

// decodeJSONSchema reads a json_schema format's members (name, schema,
// strict, description; and skip, a key its caller reads) into c, which
// it makes FormatJSONSchema: chat's response_format.json_schema and the
// Responses API's text.format alike. strict is returned as sent: promptkit
// validates (and repairs) the answer against the schema whatever it says.
func decodeJSONSchema(s map[string]json.RawMessage, sp, skip string, c *jobs.ChatRequest) (strict *bool, err error) {
	for _, key := range slices.Sorted(maps.Keys(s)) {
		v := s[key]
		kp := sp + "." + key
		switch key {
		case skip:
		case "name":
			name, err := decodeString(v, kp)
			if err != nil {
				return nil, err
			}
			if !schemaName.MatchString(name) {
				return nil, reqErr(kp, CodeInvalidValue, "%s must be 1–64 letters, digits, '_' or '-'.", kp)
			}
			c.SchemaName = name
		case "schema":
			if _, err := object(v, kp); err != nil {
				return nil, err
			}
			c.Schema = bytes.Clone(v)
		case "strict":
			if !isNull(v) {
				b, err := decodeBool(v, kp)
				if err != nil {
					return nil, err
				}
				strict = &b
			}
		case "description":
			if !isNull(v) {
				return nil, reqErr(kp, CodeUnsupportedParameter, "%s is not supported: promptkit sends the schema and its name only.", kp)
			}
		default:
			return nil, unknownKey(sp+".", key)
		}
	}
	if c.SchemaName == "" {
		return nil, reqErr(sp+".name", CodeMissingParameter, "%s.name is required.", sp)
	}
	if c.Schema == nil {
		return nil, reqErr(sp+".schema", CodeMissingParameter, "%s.schema is required: promptkit validates the answer against it.", sp)
	}
	c.ResponseFormat = jobs.FormatJSONSchema
	return strict, nil
}

// DecodeMetadata decodes OpenAI's metadata: at most 16 string pairs,
// keys up to 64 characters, values up to 512. param names it in errors.
func DecodeMetadata(raw json.RawMessage, param string) (map[string]string, error) {
	if isNull(raw) {
		return nil, nil
	}
	var m map[string]string
	if err := json.Unmarshal(raw, &m); err != nil || m == nil {
		return nil, invalidType(param, "an object of strings")
	}
	if len(m) > maxMetadata {
		return nil, reqErr(param, CodeInvalidValue, "%s may hold at most %d pairs.", param, maxMetadata)
	}
	for _, k := range slices.Sorted(maps.Keys(m)) {
		v := m[k]
		if len([]rune(k)) > maxMetadataKey || len([]rune(v)) > maxMetadataValue {
			return nil, reqErr(param, CodeInvalidValue, "%s keys may have at most %d characters and values %d.", param, maxMetadataKey, maxMetadataValue)
		}
	}
	return m, nil
}

func decodeStreamOptions(raw json.RawMessage, p string) (bool, error) {
	m, err := object(raw, p)
	if err != nil {
		return false, err
	}
	var include bool
	for _, key := range slices.Sorted(maps.Keys(m)) {
		v := m[key]
		switch {
		case isNull(v):
		case key == "include_usage":
			if include, err = decodeBool(v, p+"."+key); err != nil {
				return false, err
			}
		default:
			return false, unknownKey(p+".", key)
		}
	}
	return include, nil
}

// ParseBatchLine decodes one input line ({"custom_id", "method": "POST",
// "url": "/v1/chat/completions", "body": {...}}): the line's keys, their
// types, and its body as DecodeChat does (parameters named "body.…"), or
// as DecodeEmbeddings does when the url is EndpointEmbeddings (into
// Embedding). Errors are *RequestError; a body with stream: true is
// refused. The
// values of custom_id, method and url are the caller's to check against
// its batch.
func ParseBatchLine(line []byte) (BatchLine, error) {
	var out BatchLine
	dec := json.NewDecoder(bytes.NewReader(line))
	var raw json.RawMessage
	if err := dec.Decode(&raw); err != nil {
		return out, bodyError(line)
	}
	if _, err := dec.Token(); err != io.EOF {
		return out, reqErr("", CodeInvalidJSON, "The line holds more than one JSON value.")
	}
	m, err := object(raw, "")
	if err != nil {
		return out, reqErr("", CodeInvalidJSON, "The line must be a JSON object.")
	}
	var body json.RawMessage
	for _, key := range slices.Sorted(maps.Keys(m)) {
		v := m[key]
		switch key {
		case "custom_id":
			out.CustomID, err = decodeString(v, key)
		case "method":
			out.Method, err = decodeString(v, key)
		case "url":
			out.URL, err = decodeString(v, key)
		case "body":
			body = v
		default:
			err = unknownKey("", key)
		}
		if err != nil {
			return out, err
		}
	}
	if body == nil || isNull(body) {
		return out, reqErr("body", CodeMissingParameter, "body is required.")
	}
	if out.URL == EndpointEmbeddings {
		e, err := decodeEmbeddings(body, "body.")
		if err != nil {
			return out, err
		}
		out.Embedding = &e
		return out, nil
	}
	if out.Body, err = decodeChat(body, "body."); err != nil {
		return out, err
	}
	if out.Body.Stream {
		return out, reqErr("body.stream", CodeUnsupportedValue, "stream is not supported in a batch.")
	}
	return out, nil
}

// BatchRequest is a decoded POST /v1/batches body.
type BatchRequest struct {
	InputFileID      string
	Endpoint         string
	CompletionWindow string
	Metadata         map[string]string
}

// Batch endpoints and windows promptkit offers.
const (
	EndpointChatCompletions = "/v1/chat/completions"
	EndpointEmbeddings      = "/v1/embeddings"
	CompletionWindow24h     = "24h"
)

// DecodeBatchRequest decodes a POST /v1/batches body: input_file_id,
// endpoint (/v1/chat/completions or /v1/embeddings), completion_window
// (only 24h) and
// metadata. Errors are *RequestError.
func DecodeBatchRequest(body []byte) (BatchRequest, error) {
	var out BatchRequest
	m, err := object(body, "")
	if err != nil {
		return out, err
	}
	for _, key := range slices.Sorted(maps.Keys(m)) {
		v := m[key]
		if isNull(v) {
			continue
		}
		switch key {
		case "input_file_id":
			out.InputFileID, err = decodeString(v, key)
		case "endpoint":
			out.Endpoint, err = decodeString(v, key)
		case "completion_window":
			out.CompletionWindow, err = decodeString(v, key)
		case "metadata":
			out.Metadata, err = DecodeMetadata(v, key)
		default:
			err = unknownKey("", key)
		}
		if err != nil {
			return out, err
		}
	}
	switch {
	case out.InputFileID == "":
		return out, reqErr("input_file_id", CodeMissingParameter, "input_file_id is required.")
	case out.Endpoint == "":
		return out, reqErr("endpoint", CodeMissingParameter, "endpoint is required.")
	case out.Endpoint != EndpointChatCompletions && out.Endpoint != EndpointEmbeddings:
		return out, reqErr("endpoint", CodeUnsupportedValue, "endpoint must be %s or %s: promptkit batches chat completions and embeddings only.",
			EndpointChatCompletions, EndpointEmbeddings)
	case out.CompletionWindow == "":
		return out, reqErr("completion_window", CodeMissingParameter, "completion_window is required.")
	case out.CompletionWindow != CompletionWindow24h:
		return out, reqErr("completion_window", CodeUnsupportedValue, "completion_window must be 24h.")
	}
	return out, nil
}
