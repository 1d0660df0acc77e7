package promptkit

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// compiledSchema validates JSON instances against one JSON Schema.
type compiledSchema struct {
	schema *jsonschema.Schema
}

// compileSchema compiles raw. References are resolved only within the
// document: no file or network loading.
func compileSchema(url string, raw json.RawMessage) (*compiledSchema, error) {
	if len(raw) == 0 {
		return nil, nil
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return nil, fmt.Errorf("not valid JSON: %w", err)
	}
	c := jsonschema.NewCompiler()
	c.UseLoader(jsonschema.SchemeURLLoader{})
	if err := c.AddResource(url, doc); err != nil {
		return nil, err
	}
	s, err := c.Compile(url)
	if err != nil {
		return nil, err
	}
	return &compiledSchema{schema: s}, nil
}

// validateJSON parses text as one JSON value and validates it. It returns
// the parsed document (re-encoded compactly) and the diagnostics when the
// value is rejected. An error means validation could not run.
func (s *compiledSchema) validateJSON(text string) (json.RawMessage, []string, error) {
	body := stripCodeFence(text)
	inst, err := jsonschema.UnmarshalJSON(strings.NewReader(body))
	if err != nil {
		return nil, []string{"output is not a single JSON value: " + jsonErrorKind(err)}, nil
	}
	if err := s.schema.Validate(inst); err != nil {
		var ve *jsonschema.ValidationError
		if !errors.As(err, &ve) {
			return nil, nil, err
		}
		return nil, diagnostics(ve), nil
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, []byte(body)); err != nil {
		return nil, nil, err
	}
	return buf.Bytes(), nil, nil
}

// validateValue validates an in-memory Go value (run inputs).
func (s *compiledSchema) validateValue(v any) ([]string, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
	if err != nil {
		return nil, err
	}
	if err := s.schema.Validate(inst); err != nil {
		var ve *jsonschema.ValidationError
		if !errors.As(err, &ve) {
			return nil, err
		}
		return diagnostics(ve), nil
	}
	return nil, nil
}

// diagnostics flattens a validation error into "at /path: message" lines,
// leaves only, sorted, for a stable repair prompt.
func diagnostics(ve *jsonschema.ValidationError) []string {
	var out []string
	var walk func(u *jsonschema.OutputUnit)
	walk = func(u *jsonschema.OutputUnit) {
		if u.Error != nil && len(u.Errors) == 0 {
			loc := u.InstanceLocation
			if loc == "" {
				loc = "/"
			}
			out = append(out, fmt.Sprintf("at %s: %s", loc, u.Error.String()))
		}
		for i := range u.Errors {
			walk(&u.Errors[i])
		}
	}
	walk(ve.BasicOutput())
	sort.Strings(out)
	return out
}

// stripCodeFence returns the inside of a reply that is exactly one fenced
// code block (```json ... ```), which models often produce despite
// instructions; anything else is returned trimmed.
func stripCodeFence(text string) string {
	t := strings.TrimSpace(text)
	if !strings.HasPrefix(t, "```") || !strings.HasSuffix(t, "```") || len(t) < 6 {
		return t
	}
	inner := t[3 : len(t)-3]
	nl := strings.IndexByte(inner, '\n')
	if nl < 0 || strings.Contains(inner, "```") {
		return t
	}
	if lang := strings.TrimSpace(inner[:nl]); lang != "" && lang != "json" && lang != "JSON" {
		return t
	}
	return strings.TrimSpace(inner[nl+1:])
}

// jsonErrorKind describes a parse failure without quoting the input.
func jsonErrorKind(err error) string {
	var se *json.SyntaxError
	if errors.As(err, &se) {
		return fmt.Sprintf("syntax error at byte %d", se.Offset)
	}
	return "invalid JSON"
}
