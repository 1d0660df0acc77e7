package promptkit_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/promptkit/promptkit"
)

// deepSchema is {"items": … {} …} nested n objects deep.
func deepSchema(n int) string {
	return strings.Repeat(`{"items":`, n-1) + `{}` + strings.Repeat(`}`, n-1)
}

// TestOutputSchemaOverLimits: a request's output schema over a limit of
// pktype.CheckSchemaShape is refused as an invalid request naming the
// limit, before it is compiled (issue 23: 5,000 deep kept a core busy for
// minutes) and without quoting it.
func TestOutputSchemaOverLimits(t *testing.T) {
	t.Parallel()
	eng, err := promptkit.New(promptkit.Config{
		Backends: []promptkit.Backend{{ID: "a", BaseURL: "http://127.0.0.1:1/v1"}},
		Profiles: []promptkit.Profile{{ID: "p", Backend: "a", Model: "m"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ name, schema, words string }{
		{"5,000 deep", deepSchema(5000), "is nested deeper than 64 levels"},
		{"65 deep", deepSchema(65), "is nested deeper than 64 levels"},
		{"1,025 subschemas", `{"anyOf":[` + strings.Repeat(`{"type":"string"},`, 1023) + `{}]}`, "has more than 1024 objects and booleans"},
		{"over 128 KiB", `{"description":"` + strings.Repeat("items", 30000) + `"}`, "is larger than 131072 bytes"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			req := promptkit.RunRequest{Text: "x", OutputSchema: json.RawMessage(c.schema)}
			_, err := eng.Prepare(context.Background(), req)
			if !errors.Is(err, promptkit.ErrInvalidRequest) || !strings.Contains(err.Error(), "OutputSchema "+c.words) || strings.Contains(err.Error(), "items") {
				t.Fatalf("Prepare: %v", err)
			}
			if _, err := eng.Run(context.Background(), req); !errors.Is(err, promptkit.ErrInvalidRequest) {
				t.Fatalf("Run: %v", err)
			}
		})
	}
	// At the limits (64 deep, 1,024 objects) a schema compiles.
	at := `{"anyOf":[` + deepSchema(62) + strings.Repeat(`,{}`, 1024-1-62) + `]}`
	if _, err := eng.Prepare(context.Background(), promptkit.RunRequest{Text: "x", OutputSchema: json.RawMessage(at)}); err != nil {
		t.Fatalf("a schema at the limits: %v", err)
	}
}

// TestPromptSchemaOverLimits: a prompt file's or a Config prompt's schema
// over a limit is refused naming the file (or prompt) and the field.
func TestPromptSchemaOverLimits(t *testing.T) {
	t.Parallel()
	for _, field := range []string{"input_schema", "output_schema"} {
		file := fmt.Sprintf("---\n%s: %s\n---\nHi", field, deepSchema(100))
		_, err := promptkit.ParsePrompt("p/deep.prompt", []byte(file))
		if !errors.Is(err, promptkit.ErrInvalidConfig) || !strings.Contains(err.Error(), "p/deep.prompt: "+field+": is nested deeper than 64 levels") {
			t.Errorf("%s: %v", field, err)
		}
	}
	_, err := promptkit.New(promptkit.Config{
		Backends: []promptkit.Backend{{ID: "a", BaseURL: "http://127.0.0.1:1/v1"}},
		Profiles: []promptkit.Profile{{ID: "p", Backend: "a", Model: "m"}},
		Prompts:  []promptkit.Prompt{{ID: "deep", Template: "t", OutputSchema: json.RawMessage(deepSchema(100))}},
	})
	if !errors.Is(err, promptkit.ErrInvalidConfig) || !strings.Contains(err.Error(), "prompts[0].output_schema") || !strings.Contains(err.Error(), "nested deeper") {
		t.Fatalf("New: %v", err)
	}
}

// TestSchemaPatternBudget: a few kilobytes of pattern can compile to
// millions of instructions, so a schema's patterns share a budget;
// realistic ones fit.
func TestSchemaPatternBudget(t *testing.T) {
	t.Parallel()
	huge := fmt.Sprintf("---\noutput_schema: {type: string, pattern: '%s'}\n---\nHi", strings.Repeat("[a-z]{999}", 200))
	if _, err := promptkit.ParsePrompt("p/re.prompt", []byte(huge)); !errors.Is(err, promptkit.ErrInvalidConfig) ||
		!strings.Contains(err.Error(), "p/re.prompt: output_schema: ") || !strings.Contains(err.Error(), "has patterns too large to compile") {
		t.Fatalf("huge pattern: %.300v", err)
	}
	props := `{"type":"object","patternProperties":{"^x-[a-z]{1,64}$":{}},"properties":{`
	for i := range 40 {
		props += fmt.Sprintf(`"d%d":{"type":"string","pattern":"^\\d{4}-\\d{2}-\\d{2}$"},"n%d":{"type":"string","pattern":"^.{0,1000}$"},`, i, i)
	}
	props += `"e":{"type":"string","format":"email","pattern":"^[A-Za-z0-9._%+-]+@[A-Za-z0-9.-]+\\.[A-Za-z]{2,}$"}}}`
	if _, err := promptkit.ParsePrompt("p/ok.prompt", []byte("---\noutput_schema: "+props+"\n---\nHi")); err != nil {
		t.Fatalf("realistic patterns: %v", err)
	}
}

// TestOutputSchemaCostLimits: within the shape limits, a request's schema
// over what its compile may cost (issue 40: 1,500 patterns took 0.16 s
// per compile) is refused as an invalid request naming the limit,
// without quoting it; one at every limit is run.
func TestOutputSchemaCostLimits(t *testing.T) {
	t.Parallel()
	eng, err := promptkit.New(promptkit.Config{
		Backends: []promptkit.Backend{{ID: "a", BaseURL: "http://127.0.0.1:1/v1"}},
		Profiles: []promptkit.Profile{{ID: "p", Backend: "a", Model: "m"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	anyOf := func(n int, item func(i int) string) string {
		items := make([]string, n)
		for i := range items {
			items[i] = item(i)
		}
		return `{"anyOf":[` + strings.Join(items, ",") + `]}`
	}
	pattern := func(i int) string { return fmt.Sprintf(`{"pattern":"^zqx%d$"}`, i) }
	class := func(i int) string { return fmt.Sprintf(`{"pattern":"[%c-z]{999}"}`, 'a'+i) } // 1,000 instructions
	id := func(i int) string { return fmt.Sprintf(`{"$id":"zqx%d"}`, i) }
	for _, c := range []struct {
		name, schema, words string // words empty: accepted
	}{
		{"257 patterns", anyOf(257, pattern), "has more than 256 distinct patterns"},
		{"256 patterns, repeated", anyOf(800, func(i int) string { return pattern(i % 256) }), ""},
		{"11,000 regexp instructions", anyOf(11, class), "has patterns too large to compile (together over 10000 regexp instructions"},
		{"10,000 regexp instructions", anyOf(10, class), ""},
		{"65 $ids", anyOf(65, id), "has more than 64 $id, $anchor and $dynamicAnchor keywords"},
		{"64 $ids", anyOf(64, id), ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			req := promptkit.RunRequest{Text: "x", OutputSchema: json.RawMessage(c.schema)}
			_, err := eng.Prepare(context.Background(), req)
			if c.words == "" {
				if err != nil {
					t.Fatalf("Prepare: %v", err)
				}
				return
			}
			if !errors.Is(err, promptkit.ErrInvalidRequest) || !strings.Contains(err.Error(), "OutputSchema "+c.words) ||
				strings.Contains(err.Error(), "zqx") || strings.Contains(err.Error(), "{999}") {
				t.Fatalf("Prepare: %v", err)
			}
		})
	}
	// A prompt file's schema is bounded alike, named by file and field.
	file := "---\noutput_schema: " + anyOf(65, id) + "\n---\nHi"
	if _, err := promptkit.ParsePrompt("p/ids.prompt", []byte(file)); !errors.Is(err, promptkit.ErrInvalidConfig) ||
		!strings.Contains(err.Error(), "p/ids.prompt: output_schema: has more than 64 $id") {
		t.Fatalf("prompt file: %v", err)
	}
}
