package pktype

import (
	"bytes"
	"encoding/json"
	"maps"
	"slices"
	"strings"
)

// Params are request parameters promptkit does not model, by their wire
// names, each value the JSON the caller gave: reasoning_effort, n,
// logprobs, presence_penalty, a self-hosted server's top_k or
// chat_template_kwargs, and any parameter promptkit has never heard of.
// They are sent to the backend as given, beside the parameters promptkit
// models (Sampling's fields, the messages, the tools, the response
// format), whose names they may not take (CheckParams).
//
// In YAML (a profile's extra) they are written as YAML values and kept
// as their JSON.
type Params map[string]json.RawMessage

// Parameter names promptkit models itself: a Params key may not be one.
// max_completion_tokens is not among them: it is OpenAI's newer name for
// max_tokens, and a request that says it is sent it by that name (some
// models refuse max_tokens).
var modeledParams = []string{
	"messages", "model", "parallel_tool_calls", "response_format", "seed", "stop", "stream",
	"stream_options", "temperature", "tool_choice", "tools", "top_p", "max_tokens",
}

// Modeled reports whether key names a parameter promptkit models: one a
// Params may not hold.
func Modeled(key string) bool { return slices.Contains(modeledParams, key) }

// messageFields are the members of a message promptkit writes from a
// Message's own fields (Role, Content or Parts, ToolCalls, ToolCallID).
var messageFields = []string{"role", "content", "tool_calls", "tool_call_id"}

// MessageField reports whether key names a member of a message that
// promptkit writes itself: one a Message's Extra may not hold.
func MessageField(key string) bool { return slices.Contains(messageFields, key) }

// CheckParams reports the first key of p that promptkit models (see
// Params) or whose value is not JSON, as a *FieldError naming
// prefix+key.
func CheckParams(p Params, prefix string) error {
	for _, k := range slices.Sorted(maps.Keys(p)) {
		if Modeled(k) {
			return fieldErr(prefix+k, "is a parameter promptkit sets itself; set it as such, not as an extra parameter")
		}
		if !json.Valid(p[k]) {
			return fieldErr(prefix+k, "is not a JSON value")
		}
	}
	return nil
}

// Clone returns a deep copy.
func (p Params) Clone() Params {
	if p == nil {
		return nil
	}
	out := make(Params, len(p))
	for k, v := range p {
		out[k] = bytes.Clone(v)
	}
	return out
}

// Or returns p's parameters over base's: a run's over a profile's. It is
// nil when both are empty.
func (p Params) Or(base Params) Params {
	if len(p) == 0 {
		return base
	}
	if len(base) == 0 {
		return p
	}
	out := maps.Clone(base)
	maps.Copy(out, p)
	return out
}

// Int returns parameter key as an int, when it is one.
func (p Params) Int(key string) (int, bool) {
	var n int
	if err := json.Unmarshal(p[key], &n); err != nil {
		return 0, false
	}
	return n, true
}

// UnmarshalYAML reads a YAML mapping, each value kept as its JSON (the
// older yaml.Unmarshaler form, so that this package needs no YAML
// library).
func (p *Params) UnmarshalYAML(unmarshal func(any) error) error {
	var m map[string]any
	if err := unmarshal(&m); err != nil {
		return err
	}
	out := make(Params, len(m))
	for k, v := range m {
		b, err := json.Marshal(jsonValue(v))
		if err != nil {
			return fieldErr("extra."+k, "cannot be written as JSON")
		}
		out[k] = b
	}
	*p = out
	return nil
}

// jsonValue turns what a YAML decoder made into what JSON can encode: a
// mapping with non-string keys (map[any]any) becomes one with string
// keys.
func jsonValue(v any) any {
	switch t := v.(type) {
	case map[string]any:
		for k, e := range t {
			t[k] = jsonValue(e)
		}
	case map[any]any:
		out := make(map[string]any, len(t))
		for k, e := range t {
			ks, ok := k.(string)
			if !ok {
				b, _ := json.Marshal(k)
				ks = strings.Trim(string(b), `"`)
			}
			out[ks] = jsonValue(e)
		}
		return out
	case []any:
		for i, e := range t {
			t[i] = jsonValue(e)
		}
	}
	return v
}

// AppendObject appends p's members to obj, a JSON object's encoding, in
// key order. obj must not already hold p's keys.
func (p Params) AppendObject(obj []byte) []byte {
	if len(p) == 0 {
		return obj
	}
	obj = bytes.TrimRight(obj, " \n")
	if len(obj) < 2 || obj[len(obj)-1] != '}' {
		return obj
	}
	out := make([]byte, 0, len(obj)+64*len(p))
	out = append(out, obj[:len(obj)-1]...)
	first := bytes.Equal(bytes.TrimSpace(obj[1:len(obj)-1]), nil)
	for _, k := range slices.Sorted(maps.Keys(p)) {
		if !first {
			out = append(out, ',')
		}
		first = false
		kb, _ := json.Marshal(k) // cannot fail: a string
		out = append(out, kb...)
		out = append(out, ':')
		out = append(out, p[k]...)
	}
	return append(out, '}')
}
