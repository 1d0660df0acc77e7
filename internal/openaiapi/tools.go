package openaiapi

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"slices"

	"github.com/promptkit/promptkit/pktype"
)

// decodeTools reads a request's function tools, each object's function
// read by function (chat nests it under "function", the Responses API
// does not); an empty list is refused unless emptyOK. The rules a decoded
// list must keep (names, schemas, limits) are pktype.ToolUse's, checked
// by Normalize.
func decodeTools(raw json.RawMessage, p string, emptyOK bool,
	function func(m map[string]json.RawMessage, p string) (pktype.ToolFunction, error)) ([]pktype.Tool, error) {
	var list []json.RawMessage
	if err := json.Unmarshal(raw, &list); err != nil {
		return nil, invalidType(p, "an array of tools")
	}
	if len(list) == 0 && !emptyOK {
		return nil, reqErr(p, CodeInvalidValue, "%s must not be empty; leave it out to offer no tools.", p)
	}
	if len(list) > pktype.MaxTools {
		return nil, reqErr(p, CodeInvalidValue, "%s may hold at most %d tools.", p, pktype.MaxTools)
	}
	var out []pktype.Tool
	for i, r := range list {
		tp := fmt.Sprintf("%s[%d]", p, i)
		m, err := object(r, tp)
		if err != nil {
			return nil, err
		}
		if err := functionType(m, tp); err != nil {
			return nil, err
		}
		f, err := function(m, tp)
		if err != nil {
			return nil, err
		}
		out = append(out, pktype.Tool{Type: pktype.ToolTypeFunction, Function: f})
	}
	return out, nil
}

// nestedTool reads a chat tool's function: {type, function: {…}}.
func nestedTool(m map[string]json.RawMessage, tp string) (pktype.ToolFunction, error) {
	for _, key := range slices.Sorted(maps.Keys(m)) {
		if key != "type" && key != "function" {
			return pktype.ToolFunction{}, unknownKey(tp+".", key)
		}
	}
	fp := tp + ".function"
	f, err := required(m, "function", fp)
	if err != nil {
		return pktype.ToolFunction{}, err
	}
	fm, err := object(f, fp)
	if err != nil {
		return pktype.ToolFunction{}, err
	}
	return decodeFunction(fm, fp, "")
}

// decodeFunction reads a function tool's description from m: name
// (required), description, parameters, strict. skip is a key its caller
// reads (type, in the Responses API's flat form); refused are keys
// promptkit knows and does not honour; any other key is unknown.
func decodeFunction(m map[string]json.RawMessage, p, skip string, refused ...string) (pktype.ToolFunction, error) {
	var f pktype.ToolFunction
	for _, key := range slices.Sorted(maps.Keys(m)) {
		v, kp := m[key], p+"."+key
		if key == skip || isNull(v) {
			continue
		}
		var err error
		switch {
		case key == "name":
			f.Name, err = decodeString(v, kp)
		case key == "description":
			var d string
			if d, err = decodeString(v, kp); err == nil {
				f.Description = &d
			}
		case key == "parameters":
			if _, err = object(v, kp); err == nil {
				f.Parameters = bytes.Clone(v)
			}
		case key == "strict":
			var b bool
			if b, err = decodeBool(v, kp); err == nil {
				f.Strict = &b
			}
		case slices.Contains(refused, key):
			err = reqErr(kp, CodeUnsupportedParameter, "%s is not supported by promptkit.", kp)
		default:
			err = unknownKey(p+".", key)
		}
		if err != nil {
			return f, err
		}
	}
	if f.Name == "" {
		return f, reqErr(p+".name", CodeMissingParameter, "%s.name is required.", p)
	}
	return f, nil
}

// functionType checks that a tool (or a tool call, or a named tool
// choice) is of type function: promptkit offers no built-in tools.
func functionType(m map[string]json.RawMessage, p string) error {
	raw, err := required(m, "type", p+".type")
	if err != nil {
		return err
	}
	typ, err := decodeString(raw, p+".type")
	if err != nil {
		return err
	}
	if typ != pktype.ToolTypeFunction {
		return reqErr(p+".type", CodeUnsupportedValue, "%s.type must be function: promptkit passes function tools to the model and has no built-in tools.", p)
	}
	return nil
}

// required is m[key], or the missing-parameter error naming p.
func required(m map[string]json.RawMessage, key, p string) (json.RawMessage, error) {
	raw, ok := m[key]
	if !ok || isNull(raw) {
		return nil, reqErr(p, CodeMissingParameter, "%s is required.", p)
	}
	return raw, nil
}

// decodeToolChoice reads none, auto, required or a named function, whose
// name named reads from the choice's object.
func decodeToolChoice(raw json.RawMessage, p string, named func(m map[string]json.RawMessage, p string) (string, error)) (*pktype.ToolChoice, error) {
	var mode string
	if json.Unmarshal(raw, &mode) == nil {
		switch mode {
		case pktype.ToolChoiceNone, pktype.ToolChoiceAuto, pktype.ToolChoiceRequired:
			return &pktype.ToolChoice{Mode: mode}, nil
		}
		return nil, reqErr(p, CodeInvalidValue, "%s must be none, auto, required or a function.", p)
	}
	m, err := object(raw, p)
	if err != nil {
		return nil, invalidType(p, "a string or an object")
	}
	if err := functionType(m, p); err != nil {
		return nil, err
	}
	name, err := named(m, p)
	if err != nil {
		return nil, err
	}
	return &pktype.ToolChoice{Mode: pktype.ToolChoiceFunction, Function: name}, nil
}

// nestedFunction reads a chat tool choice's function name: {type:
// "function", function: {name}}.
func nestedFunction(m map[string]json.RawMessage, p string) (string, error) {
	return namedFunction(m, p, nil, nil)
}

// namedFunction reads m's function object, {"name": …} plus the string
// keys extra names (their values go there), and returns the name. A key
// of m other than type, function and those in top is unknown.
func namedFunction(m map[string]json.RawMessage, p string, top []string, extra map[string]*string) (string, error) {
	for _, key := range slices.Sorted(maps.Keys(m)) {
		if key != "type" && key != "function" && !slices.Contains(top, key) {
			return "", unknownKey(p+".", key)
		}
	}
	fp := p + ".function"
	f, err := required(m, "function", fp)
	if err != nil {
		return "", err
	}
	fm, err := object(f, fp)
	if err != nil {
		return "", err
	}
	var name string
	for _, key := range slices.Sorted(maps.Keys(fm)) {
		v, kp := fm[key], fp+"."+key
		dst, ok := extra[key]
		switch {
		case key == "name":
			name, err = decodeString(v, kp)
		case ok:
			*dst, err = decodeString(v, kp)
		default:
			err = unknownKey(fp+".", key)
		}
		if err != nil {
			return "", err
		}
	}
	if name == "" {
		return "", reqErr(fp+".name", CodeMissingParameter, "%s.name is required.", fp)
	}
	return name, nil
}

// decodeToolCalls reads an assistant message's tool calls.
func decodeToolCalls(raw json.RawMessage, p string) ([]pktype.ToolCall, error) {
	var list []json.RawMessage
	if err := json.Unmarshal(raw, &list); err != nil {
		return nil, invalidType(p, "an array of tool calls")
	}
	out := make([]pktype.ToolCall, 0, len(list))
	for i, r := range list {
		cp := fmt.Sprintf("%s[%d]", p, i)
		m, err := object(r, cp)
		if err != nil {
			return nil, err
		}
		if err := functionType(m, cp); err != nil {
			return nil, err
		}
		idRaw, err := required(m, "id", cp+".id")
		if err != nil {
			return nil, err
		}
		c := pktype.ToolCall{Type: pktype.ToolTypeFunction}
		if c.ID, err = decodeString(idRaw, cp+".id"); err != nil {
			return nil, err
		}
		args := ""
		if c.Function.Name, err = namedFunction(m, cp, []string{"id"}, map[string]*string{"arguments": &args}); err != nil {
			return nil, err
		}
		c.Function.Arguments = args
		out = append(out, c)
	}
	return out, nil
}
