package promptkit_test

import (
	"errors"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	"github.com/promptkit/promptkit"
)

const goodConfig = `
backends:
  - id: local
    base_url: http://127.0.0.1:8081/v1
    api_key_env: LOCAL_API_KEY
    max_active: 4
    timeout: 60s
profiles:
  - id: default
    backend: local
    model: some-model
    temperature: 0.2
    max_tokens: 512
    system: "You are terse."
    repair_budget: 1
prompts: prompts
`

const goodPrompt = `---
id: summarize
version: 2
description: One-line summary.
input_schema:
  type: object
  required: [text]
  properties:
    text: {type: string}
output_schema: {"type": "object", "required": ["summary"], "properties": {"summary": {"type": "string"}}}
---
Summarize: {{.text}}
`

func TestLoadConfig(t *testing.T) {
	t.Parallel()
	fsys := fstest.MapFS{
		"conf/promptkit.yaml":        {Data: []byte(goodConfig)},
		"conf/prompts/summarize.md":  {Data: []byte(goodPrompt)},
		"conf/prompts/README.md":     {Data: []byte("# not a prompt")},
		"conf/prompts/sub/hi.prompt": {Data: []byte("---\n---\nHi {{.name}}")},
		"conf/prompts/notes.txt":     {Data: []byte("ignored")},
	}
	cfg, err := promptkit.LoadConfig(fsys, "conf/promptkit.yaml")
	if err != nil {
		t.Fatal(err)
	}
	b := cfg.Backends[0]
	if b.ID != "local" || b.BaseURL != "http://127.0.0.1:8081/v1" || b.APIKeyEnv != "LOCAL_API_KEY" || b.MaxActive != 4 || b.Timeout != 60*time.Second {
		t.Fatalf("backend = %+v", b)
	}
	p := cfg.Profiles[0]
	if p.Model != "some-model" || *p.Temperature != 0.2 || *p.MaxTokens != 512 || p.System != "You are terse." || p.RepairBudget != 1 {
		t.Fatalf("profile = %+v", p)
	}
	if len(cfg.Prompts) != 2 || cfg.Prompts[0].ID != "hi" || cfg.Prompts[1].ID != "summarize" {
		t.Fatalf("prompts = %+v", cfg.Prompts)
	}
	s := cfg.Prompts[1]
	if s.Version != "2" || s.Template != "Summarize: {{.text}}\n" || !strings.Contains(string(s.InputSchema), `"required":["text"]`) || len(s.OutputSchema) == 0 {
		t.Fatalf("summarize = %+v", s)
	}
	if _, err := promptkit.New(cfg); err != nil {
		t.Fatalf("loaded config does not build an engine: %v", err)
	}
}

func TestLoadConfigErrors(t *testing.T) {
	t.Parallel()
	// Two backends, for the model group cases; a profile follows.
	const group = "backends:\n  - {id: a, base_url: 'http://x/v1'}\n  - {id: b, base_url: 'http://y/v1'}\nprofiles:\n"
	cases := []struct {
		name, yaml string
		want       []string // substrings: the file and the field
	}{
		{"unknown top-level key", "backend: []\n", []string{"promptkit.yaml", `unknown field "backend"`, "line 1"}},
		{"unknown backend key", "backends:\n  - id: a\n    base_url: http://x/v1\n    maxactive: 3\n", []string{"promptkit.yaml", `unknown field "maxactive"`, "line 4"}},
		{"missing base_url", "backends:\n  - id: a\n", []string{"promptkit.yaml", "backends[0].base_url", "required"}},
		{"bad base_url", "backends:\n  - id: a\n    base_url: ftp://x\n", []string{"backends[0].base_url"}},
		{"credentials in URL", "backends:\n  - id: a\n    base_url: http://u:p@x/v1\n", []string{"backends[0].base_url", "api_key_env"}},
		{"timeout without unit", "backends:\n  - id: a\n    base_url: http://x/v1\n    timeout: 60\n", []string{"promptkit.yaml", "line 4", "like 60s"}},
		{"bad timeout", "backends:\n  - id: a\n    base_url: http://x/v1\n    timeout: soon\n", []string{"promptkit.yaml", "line 4"}},
		{"negative max_active", "backends:\n  - id: a\n    base_url: http://x/v1\n    max_active: -1\n", []string{"backends[0].max_active"}},
		{"negative max_idle_conns", "backends:\n  - id: a\n    base_url: http://x/v1\n    max_idle_conns: -1\n", []string{"backends[0].max_idle_conns"}},
		{"bad learn_rate", "backends:\n  - id: a\n    base_url: http://x/v1\n    learn_rate: sometimes\n", []string{"promptkit.yaml", "line 4"}},
		{"duplicate backend", "backends:\n  - {id: a, base_url: 'http://x/v1'}\n  - {id: a, base_url: 'http://x/v1'}\n", []string{"backends[1].id", "duplicate"}},
		{"unknown profile backend", "backends:\n  - {id: a, base_url: 'http://x/v1'}\nprofiles:\n  - {id: p, backend: b, model: m}\n", []string{"profiles[0].backend", `"b"`}},
		{"missing model", "backends:\n  - {id: a, base_url: 'http://x/v1'}\nprofiles:\n  - {id: p, backend: a}\n", []string{"profiles[0].model"}},
		{"negative repair budget", "backends:\n  - {id: a, base_url: 'http://x/v1'}\nprofiles:\n  - {id: p, backend: a, model: m, repair_budget: -1}\n", []string{"profiles[0].repair_budget"}},
		{"bad temperature", "backends:\n  - {id: a, base_url: 'http://x/v1'}\nprofiles:\n  - {id: p, backend: a, model: m, temperature: 3}\n", []string{"profiles[0].temperature"}},
		{"unknown default profile", "default_profile: x\n", []string{"default_profile"}},
		{"negative cooldown", "backends:\n  - {id: a, base_url: 'http://x/v1', cooldown: -1s}\n", []string{"backends[0].cooldown"}},
		{"backend and backends", group + "  - {id: p, model: m, backend: a, backends: [{id: a}]}\n", []string{"profiles[0].backends", "not both"}},
		{"neither backend nor backends", group + "  - {id: p, model: m}\n", []string{"profiles[0].backend", "required"}},
		{"group: unknown backend", group + "  - {id: p, model: m, backends: [{id: a}, {id: c}]}\n", []string{"profiles[0].backends[1].id", `"c"`}},
		{"group: no id", group + "  - {id: p, model: m, backends: [{weight: 2}]}\n", []string{"profiles[0].backends[0].id", "required"}},
		{"group: twice", group + "  - {id: p, model: m, backends: [{id: a}, {id: a, model: x}]}\n", []string{"profiles[0].backends[1].id", "twice"}},
		{"group: negative weight", group + "  - {id: p, model: m, backends: [{id: a, weight: -1}]}\n", []string{"profiles[0].backends[0].weight"}},
		{"group: weighted fallback", group + "  - {id: p, model: m, backends: [{id: a}, {id: b, fallback: true, weight: 2}]}\n", []string{"profiles[0].backends[1].weight", "fallback"}},
		{"group: only fallbacks", group + "  - {id: p, model: m, backends: [{id: a, fallback: true}]}\n", []string{"profiles[0].backends", "not a fallback"}},
		{"group: unknown key", group + "  - {id: p, model: m, backends: [{id: a, priority: 1}]}\n", []string{`unknown field "priority"`}},
		{"bad id", "backends:\n  - {id: 'a b', base_url: 'http://x/v1'}\n", []string{"backends[0].id"}},
		{"not yaml", "backends: [\n", []string{"promptkit.yaml"}},
		{"missing prompts dir", "prompts: nowhere\n", []string{"nowhere"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			_, err := promptkit.LoadConfig(fstest.MapFS{"promptkit.yaml": {Data: []byte(c.yaml)}}, "promptkit.yaml")
			if !errors.Is(err, promptkit.ErrInvalidConfig) {
				t.Fatalf("err = %v, want ErrInvalidConfig", err)
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
		})
	}
	if _, err := promptkit.LoadConfig(fstest.MapFS{}, "promptkit.yaml"); !errors.Is(err, promptkit.ErrInvalidConfig) {
		t.Fatalf("missing file: %v", err)
	}
}

func TestParsePromptErrors(t *testing.T) {
	t.Parallel()
	cases := []struct{ name, file, want string }{
		{"no front matter", "Hello {{.x}}", "front matter"},
		{"unclosed front matter", "---\nid: a\nHello", "closing"},
		{"unknown key", "---\nidd: a\n---\nx", `unknown field "idd"`},
		{"schema not a mapping", "---\ninput_schema: [1]\n---\nx", "input_schema"},
		{"bad template", "---\n---\n{{.x", "template"},
		{"bad id", "---\nid: 'has space'\n---\nx", "id"},
	}
	for _, c := range cases {
		_, err := promptkit.ParsePrompt("p/bad.prompt", []byte(c.file))
		if !errors.Is(err, promptkit.ErrInvalidConfig) || !strings.Contains(err.Error(), "p/bad.prompt") || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: err = %v, want file name and %q", c.name, err, c.want)
		}
	}
	p, err := promptkit.ParsePrompt("x/greet.md", []byte("---\r\nversion: v1\r\n---\r\nHi"))
	if err != nil || p.ID != "greet" || p.Version != "v1" || p.Template != "Hi" {
		t.Fatalf("CRLF prompt = %+v, %v", p, err)
	}
}

func TestLoadPromptsDuplicateID(t *testing.T) {
	t.Parallel()
	fsys := fstest.MapFS{
		"a.prompt":   {Data: []byte("---\nid: same\n---\nx")},
		"b/c.prompt": {Data: []byte("---\nid: same\n---\ny")},
	}
	_, err := promptkit.LoadPrompts(fsys, ".")
	if !errors.Is(err, promptkit.ErrInvalidConfig) || !strings.Contains(err.Error(), "b/c.prompt") || !strings.Contains(err.Error(), "a.prompt") {
		t.Fatalf("err = %v", err)
	}
}

func TestNewRejectsBadPrompts(t *testing.T) {
	t.Parallel()
	base := promptkit.Config{
		Backends: []promptkit.Backend{{ID: "a", BaseURL: "http://127.0.0.1:1/v1"}},
		Profiles: []promptkit.Profile{{ID: "p", Backend: "a", Model: "m"}},
	}
	cases := []struct {
		name   string
		prompt promptkit.Prompt
		want   string
	}{
		{"bad output schema JSON", promptkit.Prompt{ID: "x", Template: "t", OutputSchema: []byte(`{`)}, "prompts[0].output_schema"},
		{"bad output schema", promptkit.Prompt{ID: "x", Template: "t", OutputSchema: []byte(`{"type": 5}`)}, "prompts[0].output_schema"},
		{"remote ref", promptkit.Prompt{ID: "x", Template: "t", InputSchema: []byte(`{"$ref": "http://example.com/s.json"}`)}, "prompts[0].input_schema"},
		{"bad template", promptkit.Prompt{ID: "x", Template: "{{"}, "prompts[0].template"},
	}
	for _, c := range cases {
		cfg := base
		cfg.Prompts = []promptkit.Prompt{c.prompt}
		_, err := promptkit.New(cfg)
		if !errors.Is(err, promptkit.ErrInvalidConfig) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: err = %v, want %q", c.name, err, c.want)
		}
	}
}
