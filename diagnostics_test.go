package promptkit_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/promptkit/promptkit"
)

// A schema that breaks the JSON Schema rules is named by file, field and
// keyword, with what is wrong; the compiler's internal URL never shows.
func TestInvalidSchemaNamesFileAndKeyword(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, front string
		want        []string
	}{
		{"misspelt type", "output_schema:\n  type: objectt\n",
			[]string{"p/bad.md", "output_schema", "not a valid JSON Schema", "at /type", `"objectt" is not one of`, `"object"`}},
		{"nested keyword", "input_schema:\n  type: object\n  properties:\n    text: {type: string, minLength: -1}\n",
			[]string{"input_schema", "at /properties/text/minLength", "minimum: -1 is less than 0"}},
		{"required not a list", "output_schema:\n  type: object\n  required: summary\n",
			[]string{"output_schema", "at /required", "type: got string, want array"}},
		{"bad item of a type list", "output_schema:\n  type: [object, strin]\n",
			[]string{"at /type/1", `"strin" is not one of`}},
		{"bad pattern", "output_schema:\n  pattern: '('\n",
			[]string{"at /pattern", "format:", "regex"}},
		{"remote ref", "output_schema:\n  $ref: 'http://example.com/s.json'\n",
			[]string{"output_schema", `$ref "http://example.com/s.json" cannot be resolved`}},
		{"missing local ref", "output_schema:\n  $ref: '#/$defs/nope'\n",
			[]string{"output_schema", "#/$defs/nope", "not found"}},
	}
	for _, c := range cases {
		_, err := promptkit.ParsePrompt("p/bad.md", []byte("---\n"+c.front+"---\nHi"))
		if !errors.Is(err, promptkit.ErrInvalidConfig) {
			t.Errorf("%s: err = %v, want ErrInvalidConfig", c.name, err)
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: %q does not say %q", c.name, err, w)
			}
		}
		if strings.Contains(err.Error(), "promptkit:///") || strings.Contains(err.Error(), "metaschema") {
			t.Errorf("%s: %q shows the compiler's internals", c.name, err)
		}
	}
	// The "misspelt type" case names only the type list, not also "want
	// array" from the other branch of the metaschema's anyOf.
	_, err := promptkit.ParsePrompt("p/bad.md", []byte("---\noutput_schema:\n  type: objectt\n---\nHi"))
	if err == nil || strings.Contains(err.Error(), "want array") {
		t.Fatalf("err = %v", err)
	}

	// New names the prompt too, for prompts built in code.
	_, err = promptkit.New(promptkit.Config{
		Backends: []promptkit.Backend{{ID: "a", BaseURL: "http://127.0.0.1:1/v1"}},
		Profiles: []promptkit.Profile{{ID: "p", Backend: "a", Model: "m"}},
		Prompts:  []promptkit.Prompt{{ID: "x", Template: "t", OutputSchema: json.RawMessage(`{"type":"objectt"}`)}},
	})
	if !errors.Is(err, promptkit.ErrInvalidConfig) || !strings.Contains(err.Error(), `prompts[0].output_schema: prompt "x": not a valid JSON Schema: at /type`) {
		t.Fatalf("New: %v", err)
	}
}

// Inputs that fail the input schema are told why, per location and
// keyword, without quoting a single input value.
func TestInputSchemaFailuresSayWhyWithoutValues(t *testing.T) {
	t.Parallel()
	const marker = "SECRET-INPUT-9"
	schema := `{"type":"object","required":["text","lang"],"additionalProperties":false,"properties":{
		"text":{"type":"string","maxLength":5,"pattern":"^[a-z]+$"},
		"lang":{"enum":["en","fr"]},
		"n":{"type":"integer","minimum":1},
		"tags":{"type":"array","items":{"type":"string"}},
		"mail":{"type":"string","format":"email"}}}`
	eng, err := promptkit.New(promptkit.Config{
		Backends: []promptkit.Backend{{ID: "a", BaseURL: "http://127.0.0.1:1/v1"}},
		Profiles: []promptkit.Profile{{ID: "p", Backend: "a", Model: "m"}},
		Prompts:  []promptkit.Prompt{{ID: "s", Template: "{{.text}}", InputSchema: json.RawMessage(schema)}},
	})
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name   string
		inputs map[string]any
		want   []string
	}{
		{"missing", map[string]any{}, []string{`at /: required: missing properties "text", "lang"`}},
		{"too long and bad pattern", map[string]any{"text": marker, "lang": "en"},
			[]string{"at /text: maxLength: longer than 5 characters", `at /text: pattern: value does not match "^[a-z]+$"`}},
		{"not in enum", map[string]any{"text": "ab", "lang": marker}, []string{`at /lang: enum: value is not one of "en", "fr"`}},
		{"wrong type", map[string]any{"text": 42, "lang": "en"}, []string{"at /text: type: got number, want string"}},
		{"below minimum", map[string]any{"text": "ab", "lang": "en", "n": -987654}, []string{"at /n: minimum: value is less than 1"}},
		{"array item", map[string]any{"text": "ab", "lang": "en", "tags": []any{"ok", 7}}, []string{"at /tags/1: type: got number, want string"}},
		{"unknown key", map[string]any{"text": "ab", "lang": "en", "extra": marker}, []string{`at /: additionalProperties: property "extra" not allowed`}},
	}
	for _, c := range cases {
		_, err := eng.Run(context.Background(), promptkit.RunRequest{PromptID: "s", Inputs: c.inputs})
		if !errors.Is(err, promptkit.ErrPromptRender) {
			t.Errorf("%s: err = %v, want ErrPromptRender", c.name, err)
			continue
		}
		msg := err.Error()
		if !strings.Contains(msg, `prompt "s": inputs fail the input schema: `) {
			t.Errorf("%s: %q", c.name, msg)
		}
		for _, w := range c.want {
			if !strings.Contains(msg, w) {
				t.Errorf("%s: %q does not say %q", c.name, msg, w)
			}
		}
		if strings.Contains(msg, marker) || strings.Contains(msg, "987654") {
			t.Errorf("%s: %q quotes an input value", c.name, msg)
		}
	}
}

// A template that does not render says where and, for a missing key,
// which; other execution failures say where without quoting the value
// text/template would print.
func TestTemplateFailuresSayWhereAndWhich(t *testing.T) {
	t.Parallel()
	const marker = "SECRET-INPUT-5"
	eng, err := promptkit.New(promptkit.Config{
		Backends: []promptkit.Backend{{ID: "a", BaseURL: "http://127.0.0.1:1/v1"}},
		Profiles: []promptkit.Profile{{ID: "p", Backend: "a", Model: "m"}},
		Prompts: []promptkit.Prompt{
			{ID: "greet", Template: "Hello {{.name}},\nyou are {{.age}}."},
			{ID: "nested", Template: "{{.user.name}}"},
			{ID: "field", Template: "{{.text.size}}"},
			{ID: "range", Template: "{{range .items}}x{{end}}"},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		id     string
		inputs map[string]any
		want   string
	}{
		{"greet", map[string]any{"name": marker}, `prompt "greet": the template, line 2 column 10, uses the key "age", which the inputs do not have`},
		{"nested", map[string]any{"user": map[string]any{"id": marker}}, `uses the key "name"`},
		{"field", map[string]any{"text": marker}, `the template, line 1 column 7, reads the key "size" from an input value that is not an object`},
		{"nested", map[string]any{"user": nil}, `reads the key "name" from an input value that is null`},
		{"range", map[string]any{"items": marker}, "the template, line 1 column 8, cannot be executed with these inputs"},
	}
	for _, c := range cases {
		_, err := eng.Run(context.Background(), promptkit.RunRequest{PromptID: c.id, Inputs: c.inputs})
		if !errors.Is(err, promptkit.ErrPromptRender) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: err = %v, want %q", c.id, err, c.want)
		}
		if err != nil && strings.Contains(err.Error(), marker) {
			t.Errorf("%s: %q quotes an input value", c.id, err)
		}
	}
}
