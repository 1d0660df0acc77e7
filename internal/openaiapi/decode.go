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

// Error codes of a jobs.RequestError, OpenAI's where it has one.
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

func reqErr(param, code, format string, args ...any) *jobs.RequestError {
	return &jobs.RequestError{Param: param, Code: code, Message: fmt.Sprintf(format, args...)}
}

func invalidType(param, want string) *jobs.RequestError {
	return reqErr(param, CodeInvalidType, "%s must be %s.", param, want)
}

// paramName matches what may be echoed as a parameter name: a request's
// own key is named only when it looks like one, so an error never carries
// arbitrary request text.
var paramName = regexp.MustCompile(`^[A-Za-z0-9_.\-\[\]]{1,64}$`)

// unknownKey is the error for a key promptkit does not know.
func unknownKey(prefix, key string) *jobs.RequestError {
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
func bodyError(raw []byte) *jobs.RequestError {
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
// promptkit models is checked (model, messages, temperature, top_p,
// max_tokens, stop, seed, response_format, tools, tool_choice,
// parallel_tool_calls, stream, stream_options, and n, which must be a
// whole number from 1 to MaxChoices); every other parameter is kept as
// sent, in the chat request's extra parameters, to reach the backend
// unchanged: n, logprobs, reasoning_effort, presence_penalty, a
// self-hosted server's top_k, and any parameter promptkit does not know.
// response_format is kept as written too (Chat.Format), beside what
// promptkit reads of it to check the answer. A JSON null is an unset
// parameter, not sent. Every error is a *jobs.RequestError naming the
// parameter. The chat request comes normalized
// (jobs.ChatRequest.Normalize).
func DecodeChat(body []byte) (ChatParams, error) {
	return decodeChat(body, "")
}

// MaxChoices bounds a chat request's n, OpenAI's limit.
const MaxChoices = 128

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
	extra := pktype.Params{}
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
					// Sent by this name: some models refuse max_tokens.
					maxCompletion, extra[key] = &v, compact(raw)
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
			if err = decodeResponseFormat(raw, p, &out.Chat); err == nil {
				out.Chat.Format = compact(raw)
			}
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
		case "n":
			var n int64
			if n, err = decodeInt(raw, p); err == nil && (n < 1 || n > MaxChoices) {
				err = reqErr(p, CodeInvalidValue, "%s must be from 1 to %d.", p, MaxChoices)
			}
			extra[key] = compact(raw)
		default:
			extra[key] = compact(raw)
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
	if len(extra) > 0 {
		out.Chat.Extra = extra
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
			field := ie.Field
			if !paramName.MatchString(field) {
				field = "?" // an extra parameter's own name, which may be anything
			}
			return out, reqErr(prefix+field, CodeInvalidValue, "%s%s %s.", prefix, field, ie.Reason)
		}
		return out, reqErr(fmt.Sprintf("%smessages[%d].content", prefix, len(out.Chat.Messages)-1), CodeInvalidValue,
			"The last message must not be empty.")
	}
	out.Chat = chat
	return out, nil
}

// compact is raw without insignificant space: an extra parameter as it
// is stored and sent. raw must be valid JSON (a member of a decoded
// object is).
func compact(raw json.RawMessage) json.RawMessage {
	var b bytes.Buffer
	if json.Compact(&b, raw) != nil {
		return bytes.Clone(raw)
	}
	return b.Bytes()
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
	extra := pktype.Params{}
	for _, key := range slices.Sorted(maps.Keys(m)) {
		raw := m[key]
		p := mp + "." + key
		switch key {
		case "role", "content":
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
		default:
			// A participant's name, an earlier answer's refusal or
			// reasoning_content, ...: sent as given.
			if !isNull(raw) {
				extra[key] = compact(raw)
			}
		}
	}
	if len(extra) > 0 {
		msg.Extra = extra
	}
	if msg.Role == pktype.RoleTool && msg.ToolCallID == "" {
		return msg, reqErr(mp+".tool_call_id", CodeMissingParameter, "%s.tool_call_id is required.", mp)
	}
	if !hasContent || isNull(content) {
		if len(msg.ToolCalls) > 0 || msg.Role == pktype.RoleAssistant && len(extra) > 0 {
			return msg, nil // an assistant message that only calls tools, refuses, ...
		}
		return msg, reqErr(mp+".content", CodeMissingParameter, "%s.content is required.", mp)
	}
	var s string
	if json.Unmarshal(content, &s) == nil {
		msg.Content = s
		return msg, nil
	}
	msg.Content, err = decodeContentParts(content, mp+".content")
	if err == nil {
		msg.Parts = compact(content)
	}
	return msg, err
}

// decodeContentParts checks a chat message's content parts (an array of
// objects, each with a type; a text part's text a string) and returns
// their text, the text parts' joined with a newline. Parts of other types
// (images, audio, files, ...) are the backend's to read.
func decodeContentParts(raw json.RawMessage, p string) (string, error) {
	return eachPart(raw, p, func(pp, typ string, part map[string]json.RawMessage) (bool, error) {
		return typ == "text", nil
	})
}

// decodeParts reads content: a string, or an array of text parts of type
// want ("input_text" or "output_text" in the Responses API), joined with
// a newline. An output_text part may carry the annotations it was
// answered with when it has none.
func decodeParts(raw json.RawMessage, p, want string) (string, error) {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s, nil
	}
	return eachPart(raw, p, func(pp, typ string, part map[string]json.RawMessage) (bool, error) {
		if typ != want {
			return false, reqErr(pp+".type", CodeUnsupportedValue,
				"%s.type must be %s: promptkit takes text only (no images, files, audio or refusals).", pp, want)
		}
		for _, key := range slices.Sorted(maps.Keys(part)) {
			v := part[key]
			switch {
			case key == "type" || key == "text":
			case want == "output_text" && (key == "annotations" || key == "logprobs"):
				var list []json.RawMessage
				if !isNull(v) && (json.Unmarshal(v, &list) != nil || len(list) > 0) {
					return false, reqErr(pp+"."+key, CodeUnsupportedValue, "%s.%s must be empty: promptkit sends the text only.", pp, key)
				}
			default:
				return false, unknownKey(pp+".", key)
			}
		}
		return true, nil
	})
}

// eachPart reads an array of content parts at p, each an object with a
// type, and returns the text of those take says are text (each must then
// have its text, a string), joined with a newline; take's error ends it.
func eachPart(raw json.RawMessage, p string, take func(pp, typ string, part map[string]json.RawMessage) (bool, error)) (string, error) {
	var parts []json.RawMessage
	if err := json.Unmarshal(raw, &parts); err != nil {
		return "", invalidType(p, "a string or an array of content parts")
	}
	var texts []string
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
		if ok, err := take(pp, t, part); !ok || err != nil {
			if err != nil {
				return "", err
			}
			continue
		}
		textRaw, err := required(part, "text", pp+".text")
		if err != nil {
			return "", err
		}
		text, err := decodeString(textRaw, pp+".text")
		if err != nil {
			return "", err
		}
		texts = append(texts, text)
	}
	return strings.Join(texts, "\n"), nil
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

// decodeResponseFormat reads what promptkit checks of a response_format
// into c: text; json_object (the answer must be a JSON object; a schema
// beside it, as instructor's JSON_SCHEMA mode sends it, goes to the
// backend only); json_schema with a name and a schema (the answer is
// validated and repaired against it). Any other member, and any other
// type (a self-hosted server's own), is the backend's to read: the
// format is sent as written.
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
	switch typ {
	case "json_object":
		c.ResponseFormat = jobs.FormatJSONObject
		return nil
	case "json_schema":
	default:
		c.ResponseFormat = jobs.FormatText
		return nil
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
	_, err = decodeJSONSchema(s, sp, c)
	return err
}

// decodeJSONSchema reads a json_schema format's name, schema and strict
// into c, which it makes FormatJSONSchema: chat's
// response_format.json_schema and the Responses API's text.format alike.
// strict is returned as sent: promptkit validates (and repairs) the
// answer against the schema whatever it says. Other members
// (description, ...) are the backend's.
func decodeJSONSchema(s map[string]json.RawMessage, sp string, c *jobs.ChatRequest) (strict *bool, err error) {
	for _, key := range slices.Sorted(maps.Keys(s)) {
		v := s[key]
		kp := sp + "." + key
		switch key {
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
		case key == "include_obfuscation":
			// Padding against length side channels: promptkit adds none.
			if _, err := decodeBool(v, p+"."+key); err != nil {
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
// Embedding). Errors are *jobs.RequestError; a body with stream: true is
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
// metadata. Errors are *jobs.RequestError.
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
