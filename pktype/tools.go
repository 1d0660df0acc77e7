package pktype

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"regexp"
	"slices"
)

// RoleTool is the role of a message that carries a tool's result back to
// the model (Message.ToolCallID names the call it answers).
const RoleTool = "tool"

// ToolTypeFunction is the one kind of tool: a function the caller runs.
const ToolTypeFunction = "function"

// Tool limits, OpenAI's.
const (
	// MaxTools is how many tools a request may offer.
	MaxTools = 128
)

// toolNamePattern is what OpenAI accepts as a function name.
var toolNamePattern = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

// Tool is a function the model may ask the caller to run. promptkit never
// runs it: it sends it to the backend and returns the model's calls.
type Tool struct {
	// Type is ToolTypeFunction.
	Type     string       `json:"type"`
	Function ToolFunction `json:"function"`
}

// ToolFunction describes a function tool: its name (letters, digits, '_'
// and '-', at most 64), what it does, and its parameters as a JSON Schema
// object (bounded like an output schema, see CheckSchemaShape).
type ToolFunction struct {
	Name string `json:"name"`
	// Description says what the function does; nil when the caller gave
	// none (an empty one is sent as such).
	Description *string         `json:"description,omitempty"`
	Parameters  json.RawMessage `json:"parameters,omitempty"`
	// Strict asks the provider to follow Parameters exactly.
	Strict *bool `json:"strict,omitempty"`
}

// ToolCall is one call the model asked for: an assistant message's, and
// the answer's when the model calls tools instead of answering.
type ToolCall struct {
	ID string `json:"id"`
	// Type is ToolTypeFunction.
	Type     string       `json:"type"`
	Function FunctionCall `json:"function"`
}

// FunctionCall is a function's name and its arguments, a JSON text as the
// model wrote it (not necessarily valid JSON: the caller checks it).
type FunctionCall struct {
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

// Tool choice modes (ToolChoice.Mode).
const (
	ToolChoiceAuto     = "auto"
	ToolChoiceNone     = "none"
	ToolChoiceRequired = "required"
	// ToolChoiceFunction: the model must call ToolChoice.Function.
	ToolChoiceFunction = "function"
)

// ToolChoice says whether and which tools the model may call. Its JSON is
// OpenAI's: a mode as a string, or {"type":"function","function":{"name":…}}.
type ToolChoice struct {
	Mode     string
	Function string
}

type wireToolChoice struct {
	Type     string `json:"type"`
	Function struct {
		Name string `json:"name"`
	} `json:"function"`
}

// MarshalJSON writes OpenAI's form.
func (c ToolChoice) MarshalJSON() ([]byte, error) {
	if c.Mode == ToolChoiceFunction {
		w := wireToolChoice{Type: ToolTypeFunction}
		w.Function.Name = c.Function
		return json.Marshal(w)
	}
	return json.Marshal(c.Mode)
}

// UnmarshalJSON reads OpenAI's form. It does not check the values (see
// ToolUse.Check).
func (c *ToolChoice) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	if len(b) > 0 && b[0] == '"' {
		*c = ToolChoice{}
		return json.Unmarshal(b, &c.Mode)
	}
	var w wireToolChoice
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	*c = ToolChoice{Mode: w.Type, Function: w.Function.Name}
	return nil
}

// ToolUse is the tools a request offers the model and how it may use
// them: a run's (promptkit.RunRequest), a stored chat request's
// (jobs.ChatRequest) and the rendered request's (GenerateRequest) embed
// it, so the names are the same everywhere, OpenAI's.
type ToolUse struct {
	Tools      []Tool      `json:"tools,omitempty"`
	ToolChoice *ToolChoice `json:"tool_choice,omitempty"`
	// ParallelToolCalls allows (or forbids) several calls in one answer.
	ParallelToolCalls *bool `json:"parallel_tool_calls,omitempty"`
}

// Clone returns a deep copy, so that a holder of u cannot change the
// copy's tools, choice or flag.
func (u ToolUse) Clone() ToolUse {
	out := ToolUse{Tools: slices.Clone(u.Tools), ToolChoice: clonePtr(u.ToolChoice), ParallelToolCalls: clonePtr(u.ParallelToolCalls)}
	for i, t := range out.Tools {
		out.Tools[i].Function.Parameters = bytes.Clone(t.Function.Parameters)
		out.Tools[i].Function.Strict = clonePtr(t.Function.Strict)
		out.Tools[i].Function.Description = clonePtr(t.Function.Description)
	}
	return out
}

// FieldError is a request value that breaks a rule: Field names it as
// the JSON request does ("tools[2].function.name"), Reason says what is
// wrong without quoting the value. It matches ErrInvalidRequest.
type FieldError struct {
	Field  string
	Reason string
}

func (e *FieldError) Error() string { return e.Field + " " + e.Reason }

// Unwrap makes a FieldError an ErrInvalidRequest.
func (e *FieldError) Unwrap() error { return ErrInvalidRequest }

func fieldErr(field, format string, args ...any) *FieldError {
	return &FieldError{Field: field, Reason: fmt.Sprintf(format, args...)}
}

// Check reports the first rule u breaks, as a *FieldError: at most
// MaxTools function tools with distinct valid names and object parameter
// schemas within CheckSchemaShape's limits; a tool choice that is a known
// mode or names one of the tools; no tool choice or parallel_tool_calls
// without tools.
func (u ToolUse) Check() error {
	if len(u.Tools) > MaxTools {
		return fieldErr("tools", "must hold at most %d tools", MaxTools)
	}
	names := make(map[string]bool, len(u.Tools))
	for i, t := range u.Tools {
		p := fmt.Sprintf("tools[%d]", i)
		if t.Type != ToolTypeFunction {
			return fieldErr(p+".type", "must be function")
		}
		if !toolNamePattern.MatchString(t.Function.Name) {
			return fieldErr(p+".function.name", "must be 1 to 64 letters, digits, '_' or '-'")
		}
		if names[t.Function.Name] {
			return fieldErr(p+".function.name", "repeats an earlier tool's name")
		}
		names[t.Function.Name] = true
		if len(t.Function.Parameters) > 0 {
			if !IsObject(t.Function.Parameters) {
				return fieldErr(p+".function.parameters", "must be a JSON Schema object")
			}
			if err := CheckSchemaShape(t.Function.Parameters); err != nil {
				return fieldErr(p+".function.parameters", "%v", err)
			}
		}
	}
	if c := u.ToolChoice; c != nil {
		switch c.Mode {
		case ToolChoiceAuto, ToolChoiceNone, ToolChoiceRequired:
		case ToolChoiceFunction:
			if !names[c.Function] {
				return fieldErr("tool_choice.function.name", "must name one of the tools")
			}
		default:
			return fieldErr("tool_choice", "must be none, auto, required or a function")
		}
	}
	if len(u.Tools) == 0 && u.ToolChoice != nil {
		return fieldErr("tool_choice", "is only allowed when tools are given")
	}
	if len(u.Tools) == 0 && u.ParallelToolCalls != nil {
		return fieldErr("parallel_tool_calls", "is only allowed when tools are given")
	}
	return nil
}

// CheckMessages reports the first rule a conversation breaks, as a
// *FieldError naming "messages[i]…": roles system, user, assistant and
// tool; tool calls only on assistant messages, each with an id and a
// function name; a tool message names the call of an earlier assistant
// message it answers, and only a tool message names one.
func CheckMessages(msgs []Message) error {
	calls := map[string]bool{} // the calls made so far
	for i, m := range msgs {
		p := fmt.Sprintf("messages[%d]", i)
		switch m.Role {
		case RoleSystem, RoleUser, RoleAssistant, RoleTool:
		default:
			return fieldErr(p+".role", "must be system, user, assistant or tool")
		}
		if len(m.ToolCalls) > 0 && m.Role != RoleAssistant {
			return fieldErr(p+".tool_calls", "belong to assistant messages only")
		}
		if len(m.Parts) > 0 && (len(bytes.TrimSpace(m.Parts)) == 0 || bytes.TrimSpace(m.Parts)[0] != '[' || !json.Valid(m.Parts)) {
			return fieldErr(p+".content", "parts must be a JSON array")
		}
		for _, k := range slices.Sorted(maps.Keys(m.Extra)) {
			if MessageField(k) {
				return fieldErr(p+"."+k, "is a field promptkit sets itself, not an extra one")
			}
			if !json.Valid(m.Extra[k]) {
				return fieldErr(p+"."+k, "is not a JSON value")
			}
		}
		for j, c := range m.ToolCalls {
			cp := fmt.Sprintf("%s.tool_calls[%d]", p, j)
			switch {
			case c.ID == "":
				return fieldErr(cp+".id", "must not be empty")
			case c.Type != ToolTypeFunction:
				return fieldErr(cp+".type", "must be function")
			case !toolNamePattern.MatchString(c.Function.Name):
				return fieldErr(cp+".function.name", "must be 1 to 64 letters, digits, '_' or '-'")
			}
			calls[c.ID] = true
		}
		switch {
		case m.Role == RoleTool && m.ToolCallID == "":
			return fieldErr(p+".tool_call_id", "is required on a tool message")
		case m.Role != RoleTool && m.ToolCallID != "":
			return fieldErr(p+".tool_call_id", "belongs to tool messages only")
		case m.Role == RoleTool && !calls[m.ToolCallID]:
			// Backends refuse a result for a call nobody made, each in
			// its own words; this says it plainly, before a job exists.
			return fieldErr(p+".tool_call_id", "must name a tool call of an earlier assistant message")
		}
	}
	return nil
}

// StreamDelta is a piece of an answer as the backend generates it (see
// promptkit.RunRequest.OnDelta): text, reasoning, or parts of tool calls,
// of one of its choices.
type StreamDelta struct {
	// Generation and Attempt name the backend call the piece belongs to:
	// a repair is a new generation, and a retried call a new attempt that
	// starts its answer again from nothing. Both count from 1, as on the
	// call's attempt ExecutionEvent.
	Generation int `json:"generation"`
	Attempt    int `json:"attempt"`
	// Index counts one call's pieces from 0, so that a reader can tell it
	// missed one.
	Index int `json:"index"`
	// Choice is the choice the piece belongs to, from 0 (a request's n
	// asks for several).
	Choice    int             `json:"choice,omitempty"`
	Text      string          `json:"text,omitempty"`
	Reasoning string          `json:"reasoning,omitempty"`
	ToolCalls []ToolCallDelta `json:"tool_calls,omitempty"`
	// Raw is the backend's chunk the piece came in (a
	// chat.completion.chunk, with this choice alone), for a relay that
	// passes it on as the backend framed it: with what promptkit does not
	// model, such as logprobs. Nil when unknown.
	Raw json.RawMessage `json:"raw,omitempty"`
}

// ToolCallDelta is a piece of tool call Index of an answer: its first
// piece carries the call's ID and function name, later ones more of its
// arguments.
type ToolCallDelta struct {
	Index     int    `json:"index"`
	ID        string `json:"id,omitempty"`
	Name      string `json:"name,omitempty"`
	Arguments string `json:"arguments,omitempty"`
}
