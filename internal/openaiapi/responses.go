package openaiapi

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/promptkit/promptkit/jobs"
	"github.com/promptkit/promptkit/pktype"
)

// ResponsesParams is a decoded POST /v1/responses request (OpenAI's
// Responses API). Its conversation is assembled by Conversation, once
// the previous response and the item references it names are read.
type ResponsesParams struct {
	// Model is the request's model, as sent (see jobs.Resolve).
	Model string
	// Instructions, when set, is sent first as a system message.
	Instructions *string
	// Input is the request's input items, in order; an item reference is
	// left for the caller to resolve (Item.Type ItemReference).
	Input []Item
	// Chat is the rest of the request as promptkit runs it: sampling,
	// format, tools and metadata. Conversation fills in its messages.
	Chat jobs.ChatRequest
	// Stream and Background: stream: true, background: true.
	Stream, Background bool
	// PreviousResponseID is the response this one continues, as sent.
	PreviousResponseID string
	// Store is the store flag as sent: promptkit stores every request.
	Store *bool
	User  string
	// Strict is text.format.strict as sent (promptkit validates a
	// json_schema answer whatever it says).
	Strict *bool
}

// Item types of a Responses request's input.
const (
	ItemMessage            = "message"
	ItemFunctionCall       = "function_call"
	ItemFunctionCallOutput = "function_call_output"
	ItemReference          = "item_reference"
	// ItemReasoning is an earlier answer's reasoning, which a client that
	// keeps no state sends back. It is taken and not sent: a chat backend
	// takes no reasoning back (DeepSeek's refuses it), so the model
	// reasons afresh.
	ItemReasoning = "reasoning"
)

// Item is one input item, in promptkit's words: a message (Role, Text),
// a function call the model made (CallID, Name, Arguments), a function's
// result (CallID, Text), or a reference to a stored item (ID).
type Item struct {
	Type                    string
	Role                    string
	Text                    string
	CallID, Name, Arguments string
	ID                      string
	// Param names the item in the request ("input[2]"), for errors.
	Param string
}

// refusedResponsesParams are parameters of OpenAI's Responses API
// promptkit cannot honour, with why.
var refusedResponsesParams = map[string]string{
	"max_tool_calls":       "promptkit makes one model call per response and cannot bound the calls in it",
	"conversation":         "promptkit has no conversations: continue a response with previous_response_id",
	"prompt":               "promptkit has no stored prompt templates here: send the input",
	"context_management":   "promptkit does not compact conversations",
	"prompt_cache_options": "promptkit passes no cache options to its backends",
}

// DecodeResponses decodes an OpenAI Responses API request body, strictly
// as DecodeChat does: what promptkit cannot honour (built-in tools,
// reasoning, include, images, ...) is a *jobs.RequestError naming the
// parameter, never silently dropped; so is a parameter it does not know;
// a JSON null is an unset parameter. Every error is a *jobs.RequestError.
//
// Accepted and honoured: model, input (a string, or items: messages of
// role user, system, developer — sent as system — or assistant, with a
// string or text parts, function_call and function_call_output items,
// item_reference items), instructions, tools (function tools),
// tool_choice, parallel_tool_calls, text.format (text, json_object,
// json_schema), max_output_tokens, temperature, top_p, stream,
// background, previous_response_id, metadata (stored and echoed).
// Accepted and echoed: store (promptkit stores every request), user.
// Accepted as hints: safety_identifier, prompt_cache_key,
// prompt_cache_retention, stream_options.include_obfuscation. Accepted
// when they ask for what promptkit does anyway: truncation "disabled",
// include [], top_logprobs 0, service_tier auto or default, a reasoning
// object with no value set.
func DecodeResponses(body []byte) (ResponsesParams, error) {
	var out ResponsesParams
	m, err := object(body, "")
	if err != nil {
		return out, err
	}
	var streamOptions json.RawMessage
	hasInput := false
	extra := pktype.Params{}
	for _, key := range slices.Sorted(maps.Keys(m)) {
		raw := m[key]
		if isNull(raw) {
			if key == "model" || key == "input" {
				return out, reqErr(key, CodeMissingParameter, "%s is required.", key)
			}
			continue
		}
		switch key {
		case "model":
			out.Model, err = decodeModel(raw, key)
		case "input":
			hasInput = true
			out.Input, err = decodeInput(raw)
		case "instructions":
			var s string
			if s, err = decodeString(raw, key); err == nil && s != "" {
				out.Instructions = &s
			}
		case "temperature":
			var f float64
			if f, err = decodeNumber(raw, key, 0, 2); err == nil {
				out.Chat.Temperature = &f
			}
		case "top_p":
			var f float64
			if f, err = decodeNumber(raw, key, 0, 1); err == nil {
				out.Chat.TopP = &f
			}
		case "max_output_tokens":
			var n int64
			if n, err = decodeInt(raw, key); err == nil {
				if n < 1 || n > math.MaxInt32 {
					err = reqErr(key, CodeInvalidValue, "max_output_tokens must be at least 1.")
					break
				}
				out.Chat.MaxTokens = new(int(n))
			}
		case "tools":
			out.Chat.Tools, err = decodeTools(raw, key, true, flatTool)
		case "tool_choice":
			out.Chat.ToolChoice, err = decodeToolChoice(raw, key, flatFunction)
		case "parallel_tool_calls":
			var b bool
			if b, err = decodeBool(raw, key); err == nil {
				out.Chat.ParallelToolCalls = &b
			}
		case "text":
			err = decodeTextConfig(raw, key, &out, extra)
		case "stream":
			out.Stream, err = decodeBool(raw, key)
		case "stream_options":
			streamOptions = raw
		case "background":
			out.Background, err = decodeBool(raw, key)
		case "store":
			var b bool
			if b, err = decodeBool(raw, key); err == nil {
				out.Store = &b
			}
		case "previous_response_id":
			if out.PreviousResponseID, err = decodeString(raw, key); err == nil && out.PreviousResponseID == "" {
				err = reqErr(key, CodeInvalidValue, "previous_response_id must not be empty.")
			}
		case "metadata":
			out.Chat.Metadata, err = DecodeMetadata(raw, key)
		case "user":
			// Echoed on the object, and sent as chat's user.
			if out.User, err = decodeString(raw, key); err == nil {
				extra[key] = compact(raw)
			}
		case "truncation":
			var s string
			if s, err = decodeString(raw, key); err == nil && s != "disabled" {
				err = reqErr(key, CodeUnsupportedValue, "truncation must be disabled: promptkit sends the whole conversation and never drops part of it.")
			}
		case "include":
			err = decodeInclude(raw, key, extra)
		case "top_logprobs":
			// Chat's logprobs with as many alternatives.
			var n int64
			if n, err = decodeInt(raw, key); err == nil && n > 0 {
				extra[key], extra["logprobs"] = compact(raw), json.RawMessage("true")
			}
		case "reasoning":
			err = decodeReasoning(raw, key, extra)
		default:
			if why, ok := refusedResponsesParams[key]; ok {
				err = reqErr(key, CodeUnsupportedParameter, "%s is not supported: %s.", key, why)
			} else if pktype.Modeled(key) {
				// Chat's name of what the Responses API names otherwise
				// (max_tokens), or does not have (seed, stop).
				err = unknownKey("", key)
			} else {
				// Sent as given, by the same name in chat (service_tier,
				// prompt_cache_key, a self-hosted server's top_k, ...).
				extra[key] = compact(raw)
			}
		}
		if err != nil {
			return out, err
		}
	}
	switch {
	case out.Model == "":
		return out, reqErr("model", CodeMissingParameter, "model is required.")
	case !hasInput:
		return out, reqErr("input", CodeMissingParameter, "input is required.")
	}
	if len(extra) > 0 {
		out.Chat.Extra = extra
	}
	if streamOptions != nil {
		if !out.Stream {
			return out, reqErr("stream_options", CodeInvalidValue, "stream_options is only allowed when stream is true.")
		}
		if err := decodeResponsesStreamOptions(streamOptions, "stream_options"); err != nil {
			return out, err
		}
	}
	// Without tools, parallel_tool_calls and a choice of none or auto ask
	// for nothing: nothing is sent. A choice that needs a tool stays, for
	// Normalize to refuse.
	if len(out.Chat.Tools) == 0 {
		out.Chat.ParallelToolCalls = nil
		if c := out.Chat.ToolChoice; c != nil && (c.Mode == pktype.ToolChoiceNone || c.Mode == pktype.ToolChoiceAuto) {
			out.Chat.ToolChoice = nil
		}
	}
	if err := out.Chat.ToolUse.Check(); err != nil {
		if fe, ok := errors.AsType[*pktype.FieldError](err); ok {
			p := responsesField(fe.Field)
			return out, reqErr(p, CodeInvalidValue, "%s %s.", p, fe.Reason)
		}
		return out, reqErr("tools", CodeInvalidValue, "tools are not valid.")
	}
	return out, nil
}

// decodeReasoning reads the reasoning object: its effort is sent as chat's
// reasoning_effort; a summary (or the older generate_summary) is
// accepted, but a chat backend makes none: the answer's reasoning item
// holds the reasoning itself, when the backend sends it.
func decodeReasoning(raw json.RawMessage, p string, extra pktype.Params) error {
	m, err := object(raw, p)
	if err != nil {
		return err
	}
	for _, key := range slices.Sorted(maps.Keys(m)) {
		v, kp := m[key], p+"."+key
		switch {
		case isNull(v):
		case key == "effort":
			if _, err := decodeString(v, kp); err != nil {
				return err
			}
			extra["reasoning_effort"] = compact(v)
		case key == "summary" || key == "generate_summary":
			if _, err := decodeString(v, kp); err != nil {
				return err
			}
		default:
			return unknownKey(p+".", key)
		}
	}
	return nil
}

// includeLogprobs and includeEncryptedReasoning are the include values
// promptkit answers: the first asks chat's logprobs, the second is taken
// (a client that keeps no state asks for it) though there is never any
// encrypted reasoning to return.
const (
	includeLogprobs           = "message.output_text.logprobs"
	includeEncryptedReasoning = "reasoning.encrypted_content"
)

// decodeInclude reads include: the values above; any other asks for the
// output of a built-in tool promptkit does not have.
func decodeInclude(raw json.RawMessage, p string, extra pktype.Params) error {
	var list []string
	if json.Unmarshal(raw, &list) != nil {
		return invalidType(p, "an array of strings")
	}
	for i, v := range list {
		switch v {
		case includeLogprobs:
			extra["logprobs"] = json.RawMessage("true")
		case includeEncryptedReasoning:
		default:
			return reqErr(fmt.Sprintf("%s[%d]", p, i), CodeUnsupportedValue,
				"%s may hold only %s and %s: promptkit has no built-in tools.", p, includeLogprobs, includeEncryptedReasoning)
		}
	}
	return nil
}

func decodeResponsesStreamOptions(raw json.RawMessage, p string) error {
	m, err := object(raw, p)
	if err != nil {
		return err
	}
	for _, key := range slices.Sorted(maps.Keys(m)) {
		v := m[key]
		switch {
		case isNull(v):
		case key == "include_obfuscation":
			// A padding field on deltas against length side channels:
			// promptkit adds none, whatever is asked.
			if _, err := decodeBool(v, p+"."+key); err != nil {
				return err
			}
		default:
			return unknownKey(p+".", key)
		}
	}
	return nil
}

// decodeInput reads input: a string (one user message) or an array of
// items.
func decodeInput(raw json.RawMessage) ([]Item, error) {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return []Item{{Type: ItemMessage, Role: pktype.RoleUser, Text: s, Param: "input"}}, nil
	}
	var list []json.RawMessage
	if err := json.Unmarshal(raw, &list); err != nil {
		return nil, invalidType("input", "a string or an array of input items")
	}
	if len(list) == 0 {
		return nil, reqErr("input", CodeInvalidValue, "input must not be empty.")
	}
	items, err := objects(list, "input", decodeItem)
	if err != nil {
		return nil, err
	}
	return items, checkReferences(items)
}

// MaxItemReferences and MaxReferencedResponses bound a request's
// item_reference items and the responses they name. Each response named
// is read from the store (its prompt, its jobs, its answer): resolved one
// by one, 13,100 references in a 1 MB body took 2.4 s of CPU on SQLite
// and 11.5 s on PostgreSQL (issue 40). A longer conversation continues
// with previous_response_id, which reads one response.
const (
	MaxItemReferences      = 1000
	MaxReferencedResponses = 4
)

// checkReferences refuses more item references than MaxItemReferences,
// or references to items of more than MaxReferencedResponses responses
// (told apart by the prompt their ids name; an id promptkit did not make
// is left for the caller to find nowhere).
func checkReferences(items []Item) error {
	refs := 0
	responses := map[string]bool{}
	for _, it := range items {
		if it.Type != ItemReference {
			continue
		}
		if refs++; refs > MaxItemReferences {
			return reqErr("input", CodeInvalidValue,
				"input holds more than %d item references: send the items themselves, or continue a response with previous_response_id.", MaxItemReferences)
		}
		if p, ok := PromptOfItem(it.ID); ok {
			if responses[p] = true; len(responses) > MaxReferencedResponses {
				return reqErr("input", CodeInvalidValue,
					"input refers to items of more than %d responses: send the items themselves, or continue a response with previous_response_id.", MaxReferencedResponses)
			}
		}
	}
	return nil
}

// itemKeys are the keys each item type takes besides type; id and status
// (what a stored item carries when a client sends it back) are read and
// left: the item is the request's.
var itemKeys = map[string][]string{
	ItemMessage:            {"role", "content", "id", "status", "phase"},
	ItemFunctionCall:       {"call_id", "name", "arguments", "id", "status", "namespace", "async"},
	ItemFunctionCallOutput: {"call_id", "output", "id", "status"},
	ItemReference:          {"id"},
	ItemReasoning:          {"id", "summary", "content", "encrypted_content", "status"},
}

// functionName is OpenAI's rule for a function's name (pktype.ToolUse's).
var functionName = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

func decodeItem(m map[string]json.RawMessage, p string) (Item, error) {
	it := Item{Type: ItemMessage, Param: p}
	if raw, ok := m["type"]; ok && !isNull(raw) {
		t, err := decodeString(raw, p+".type")
		if err != nil {
			return it, err
		}
		it.Type = t
	} else if _, hasRole := m["role"]; !hasRole {
		if _, hasID := m["id"]; hasID {
			it.Type = ItemReference // OpenAI's type is optional on a reference
		}
	}
	keys, ok := itemKeys[it.Type]
	if !ok {
		return it, reqErr(p+".type", CodeUnsupportedValue,
			"%s.type must be message, function_call, function_call_output, reasoning or item_reference: promptkit has no built-in tools.", p)
	}
	for _, key := range slices.Sorted(maps.Keys(m)) {
		if key != "type" && !slices.Contains(keys, key) {
			return it, unknownKey(p+".", key)
		}
	}
	str := func(key string, required bool) (string, error) {
		raw, ok := m[key]
		if !ok || isNull(raw) {
			if required {
				return "", reqErr(p+"."+key, CodeMissingParameter, "%s.%s is required.", p, key)
			}
			return "", nil
		}
		return decodeString(raw, p+"."+key)
	}
	// id and status are the stored item's; any string goes.
	for _, key := range []string{"id", "status"} {
		if it.Type != ItemReference || key != "id" {
			if _, err := str(key, false); err != nil {
				return it, err
			}
		}
	}
	for _, key := range []string{"phase", "namespace", "async"} {
		if raw, ok := m[key]; ok && !isNull(raw) {
			return it, reqErr(p+"."+key, CodeUnsupportedParameter, "%s.%s is not supported by promptkit.", p, key)
		}
	}
	var err error
	switch it.Type {
	case ItemMessage:
		var role string
		if role, err = str("role", true); err != nil {
			return it, err
		}
		switch role {
		case "user", "assistant":
			it.Role = role
		case "system", "developer":
			it.Role = pktype.RoleSystem
		default:
			return it, reqErr(p+".role", CodeInvalidValue, "%s.role must be user, system, developer or assistant.", p)
		}
		raw, ok := m["content"]
		if !ok || isNull(raw) {
			return it, reqErr(p+".content", CodeMissingParameter, "%s.content is required.", p)
		}
		part := "input_text"
		if role == "assistant" {
			part = "output_text"
		}
		it.Text, err = decodeParts(raw, p+".content", part)
	case ItemFunctionCall:
		if it.CallID, err = str("call_id", true); err != nil {
			return it, err
		}
		if it.Name, err = str("name", true); err != nil {
			return it, err
		}
		if it.Arguments, err = str("arguments", true); err != nil {
			return it, err
		}
		switch {
		case it.CallID == "":
			err = reqErr(p+".call_id", CodeInvalidValue, "%s.call_id must not be empty.", p)
		case !functionName.MatchString(it.Name):
			err = reqErr(p+".name", CodeInvalidValue, "%s.name must be 1 to 64 letters, digits, '_' or '-'.", p)
		}
	case ItemFunctionCallOutput:
		if it.CallID, err = str("call_id", true); err != nil {
			return it, err
		}
		if it.CallID == "" {
			return it, reqErr(p+".call_id", CodeInvalidValue, "%s.call_id must not be empty.", p)
		}
		raw, ok := m["output"]
		if !ok || isNull(raw) {
			return it, reqErr(p+".output", CodeMissingParameter, "%s.output is required.", p)
		}
		it.Text, err = decodeParts(raw, p+".output", "input_text")
	case ItemReasoning:
		// Not sent (see ItemReasoning); the members are the client's.
	case ItemReference:
		if it.ID, err = str("id", true); err == nil && it.ID == "" {
			err = reqErr(p+".id", CodeInvalidValue, "%s.id must not be empty.", p)
		}
	}
	return it, err
}

// flatTool reads a Responses tool's function, flat beside its type:
// {type: "function", name, description, parameters, strict}.
func flatTool(m map[string]json.RawMessage, tp string) (pktype.ToolFunction, error) {
	return decodeFunction(m, tp, "type", "defer_loading", "async")
}

// flatFunction reads a Responses tool choice's function name: {type:
// "function", name}, flat, where chat's nests it under function.
func flatFunction(m map[string]json.RawMessage, p string) (string, error) {
	var name string
	for _, key := range slices.Sorted(maps.Keys(m)) {
		switch key {
		case "type":
		case "name":
			var err error
			if name, err = decodeString(m[key], p+".name"); err != nil {
				return "", err
			}
		default:
			return "", unknownKey(p+".", key)
		}
	}
	if name == "" {
		return "", reqErr(p+".name", CodeMissingParameter, "%s.name is required.", p)
	}
	return name, nil
}

// decodeTextConfig reads text: {format, verbosity}; verbosity is sent
// as chat's.
func decodeTextConfig(raw json.RawMessage, p string, out *ResponsesParams, extra pktype.Params) error {
	m, err := object(raw, p)
	if err != nil {
		return err
	}
	for _, key := range slices.Sorted(maps.Keys(m)) {
		v, kp := m[key], p+"."+key
		switch {
		case isNull(v):
		case key == "format":
			if err := decodeTextFormat(v, kp, out); err != nil {
				return err
			}
		case key == "verbosity":
			if _, err := decodeString(v, kp); err != nil {
				return err
			}
			extra[key] = compact(v)
		default:
			return unknownKey(p+".", key)
		}
	}
	return nil
}

// decodeTextFormat reads text.format: {type: text}, {type: json_object}
// or {type: json_schema, name, schema, strict, description}: Responses'
// flat form of chat's response_format, which is sent (Chat.Format)
// nested as chat nests it, with every member as written.
func decodeTextFormat(raw json.RawMessage, p string, out *ResponsesParams) error {
	m, err := object(raw, p)
	if err != nil {
		return err
	}
	typRaw, err := required(m, "type", p+".type")
	if err != nil {
		return err
	}
	typ, err := decodeString(typRaw, p+".type")
	if err != nil {
		return err
	}
	c := &out.Chat
	switch typ {
	case "text", "json_object":
		for _, key := range slices.Sorted(maps.Keys(m)) {
			if key != "type" && !isNull(m[key]) {
				return unknownKey(p+".", key)
			}
		}
		c.ResponseFormat = jobs.FormatText
		if typ == "json_object" {
			c.ResponseFormat = jobs.FormatJSONObject
		}
		c.Format = compact(raw)
		return nil
	case "json_schema":
	default:
		return reqErr(p+".type", CodeInvalidValue, "%s.type must be text, json_object or json_schema.", p)
	}
	if out.Strict, err = decodeJSONSchema(m, p, c); err != nil { // strict is echoed
		return err
	}
	schema := maps.Clone(m)
	delete(schema, "type")
	c.Format, _ = json.Marshal(struct {
		Type       string                     `json:"type"`
		JSONSchema map[string]json.RawMessage `json:"json_schema"`
	}{typ, schema}) // cannot fail: members of a decoded object
	c.Format = compact(c.Format)
	return nil
}

// responsesField names a chat request's field (as jobs and pktype name
// them) as the Responses request names it.
func responsesField(f string) string {
	switch {
	case strings.HasPrefix(f, "response_format.json_schema."):
		return "text.format." + strings.TrimPrefix(f, "response_format.json_schema.")
	case f == "max_tokens":
		return "max_output_tokens"
	}
	return strings.Replace(f, ".function.", ".", 1)
}

// messageField matches a field of one message of a conversation.
var messageField = regexp.MustCompile(`^messages\[(\d+)\](.*)$`)

// Conversation is the request's chat request, checked as every store
// wants it (jobs.ChatRequest.Normalize): the instructions first (a system
// message), then prev (the turns of the response it continues, see
// ContinuedMessages), then items, the request's input with its item
// references resolved (each item's Param still naming where it came
// from). Function calls that follow an assistant message (or another
// call) of the input join it, as one assistant turn. The request's
// Responses fields are set. Errors are *jobs.RequestError naming the request's
// parameters.
func (p ResponsesParams) Conversation(prev []pktype.Message, items []Item) (jobs.ChatRequest, error) {
	c := p.Chat
	var msgs []pktype.Message
	var origin []string // what each message came from, for errors
	if p.Instructions != nil {
		msgs = append(msgs, pktype.Message{Role: pktype.RoleSystem, Content: *p.Instructions})
		origin = append(origin, "instructions")
	}
	for _, m := range prev {
		msgs = append(msgs, m)
		origin = append(origin, "previous_response_id")
	}
	start := len(msgs)
	joinable := false // the last message is the input's assistant turn
	for _, it := range items {
		switch it.Type {
		case ItemMessage:
			msgs = append(msgs, pktype.Message{Role: it.Role, Content: it.Text})
			origin = append(origin, it.Param)
			joinable = it.Role == pktype.RoleAssistant
		case ItemFunctionCall:
			call := pktype.ToolCall{ID: it.CallID, Type: pktype.ToolTypeFunction,
				Function: pktype.FunctionCall{Name: it.Name, Arguments: it.Arguments}}
			if !joinable {
				msgs = append(msgs, pktype.Message{Role: pktype.RoleAssistant})
				origin = append(origin, it.Param)
				joinable = true
			}
			last := &msgs[len(msgs)-1]
			last.ToolCalls = append(last.ToolCalls, call)
		case ItemFunctionCallOutput:
			msgs = append(msgs, pktype.Message{Role: pktype.RoleTool, ToolCallID: it.CallID, Content: it.Text})
			origin = append(origin, it.Param)
			joinable = false
		case ItemReasoning:
			// Not sent (see ItemReasoning).
		default:
			return c, reqErr(it.Param, CodeInvalidValue, "%s could not be resolved.", it.Param)
		}
	}
	c.Messages = msgs
	c.Responses = &jobs.ResponsesRequest{
		Model: p.Model, Instructions: p.Instructions, InputStart: start, PreviousResponseID: p.PreviousResponseID,
		Background: p.Background, Store: p.Store, User: p.User, Strict: p.Strict,
	}
	out, err := c.Normalize()
	if err == nil {
		return out, nil
	}
	ie, ok := errors.AsType[*jobs.InvalidError](err)
	switch {
	case ok && ie.Field != "":
		param := responsesField(ie.Field)
		if mm := messageField.FindStringSubmatch(ie.Field); mm != nil {
			k, _ := strconv.Atoi(mm[1])
			param = "input"
			if k < len(origin) {
				param = origin[k]
				if strings.HasPrefix(param, "input[") {
					param += messageSuffix(mm[2], msgs[k].Role)
				}
			}
		}
		if !paramName.MatchString(param) {
			param = "?" // an extra parameter's own name, which may be anything
		}
		return c, reqErr(param, CodeInvalidValue, "%s %s.", param, ie.Reason)
	case len(msgs) == 0:
		return c, reqErr("input", CodeInvalidValue, "input must not be empty.")
	}
	// What Normalize leaves unnamed here: an empty last message.
	param := origin[len(origin)-1]
	if strings.HasPrefix(param, "input[") {
		param += ".content"
	}
	return c, reqErr(param, CodeInvalidValue, "The last input item must not be empty.")
}

// messageSuffix names the part of an input item a message's field came
// from (".tool_call_id" is a result's call_id, say).
func messageSuffix(field, role string) string {
	switch {
	case field == ".tool_call_id":
		return ".call_id"
	case field == ".content" && role == pktype.RoleTool:
		return ".output"
	case field == ".content":
		return ".content"
	}
	return ""
}

// AnswerText is the text of a stored answer as the client gets it: the
// text the model wrote, or its parsed JSON when the text itself is not
// JSON but a checked JSON answer was parsed from it.
func AnswerText(r jobs.Response) string {
	if len(r.Parsed) > 0 && !json.Valid([]byte(r.Output)) {
		return string(r.Parsed)
	}
	return r.Output
}

// ContinuedMessages are the turns a request continuing a response starts
// with: the response's conversation without its instructions (OpenAI
// does not carry them over), then its answer as an assistant message
// (text and calls).
func ContinuedMessages(p jobs.Prompt, r jobs.Response) []pktype.Message {
	var msgs []pktype.Message
	if p.Chat != nil {
		msgs = p.Chat.Messages
		if rr := p.Chat.Responses; rr != nil && rr.Instructions != nil && len(msgs) > 0 {
			msgs = msgs[1:]
		}
	}
	out := slices.Clone(msgs)
	return append(out, pktype.Message{Role: pktype.RoleAssistant, Content: AnswerText(r), ToolCalls: slices.Clone(r.ToolCalls)})
}
