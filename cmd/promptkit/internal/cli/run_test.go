package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/promptkit/promptkit/providertest"
)

// cutOffReply is a 200 reply whose answer max_tokens cut off
// (finish_reason "length"), as an Ollama server sends it.
func cutOffReply(content string) providertest.Response {
	c, _ := json.Marshal(content)
	return providertest.Response{Body: []byte(`{"id":"c1","object":"chat.completion","created":1,"model":"some-model",` +
		`"choices":[{"index":0,"message":{"role":"assistant","content":` + string(c) + `},"finish_reason":"length"}],` +
		`"usage":{"prompt_tokens":30,"completion_tokens":512,"total_tokens":542}}`)}
}

// writeConfig writes dir/promptkit.yaml with one backend at url and the
// given prompts directory, and returns its path.
func writeConfig(t *testing.T, dir, url, apiKeyEnv, prompts string) string {
	t.Helper()
	cfg := "backends:\n  - id: local\n    base_url: " + url + "\n"
	if apiKeyEnv != "" {
		cfg += "    api_key_env: " + apiKeyEnv + "\n"
	}
	cfg += "profiles:\n  - {id: default, backend: local, model: some-model, max_tokens: 100, repair_budget: 1}\n"
	if prompts != "" {
		cfg += "prompts: '" + prompts + "'\n"
	}
	path := filepath.Join(dir, "promptkit.yaml")
	writeTestFile(t, path, cfg)
	return path
}

func writeTestFile(t *testing.T, path, data string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return lines[len(lines)-1]
}

// An answer cut off by max_tokens that fails the schema: run says it was
// cut off, spends no repair on it, still prints what came back, and exits
// 3 so that scripts can tell.
func TestRunTruncatedOutput(t *testing.T) {
	t.Parallel()
	srv := providertest.NewServer()
	t.Cleanup(srv.Close)
	cfg := quickstart(t, srv.URL) // max_tokens 512, repair_budget 1
	srv.Enqueue(cutOffReply(`{"summary": "The cat sat`))
	code, stdout, stderr := run(t, "run", "--config", cfg, "--prompt", "summarize", "--input", "text=The cat sat on the mat.")
	if code != 3 {
		t.Fatalf("exit %d, want 3: %s", code, stderr)
	}
	if srv.Count() != 1 {
		t.Fatalf("provider called %d times: a repair with the same max_tokens must not be sent", srv.Count())
	}
	for _, w := range []string{
		`validation invalid, 1 attempt(s)`, `cut off (finish_reason "length")`,
		`promptkit:   output was cut off at max_tokens 512 (finish_reason "length"); raise the profile's max_tokens`,
		`promptkit:   not repaired: a repair has the same max_tokens and would be cut off too`,
	} {
		if !strings.Contains(stderr, w) {
			t.Errorf("stderr does not say %q:\n%s", w, stderr)
		}
	}
	if got := lastLine(stderr); !strings.HasPrefix(got, "promptkit: run ") || !strings.Contains(got, `output was cut off at the token limit (finish_reason "length") and does not satisfy the prompt's output schema`) {
		t.Errorf("last line = %q", got)
	}
	if !strings.Contains(stdout, `{"summary": "The cat sat`) {
		t.Errorf("stdout must still carry the answer: %q", stdout)
	}

	srv.Enqueue(cutOffReply(`{"summary": "The cat sat`))
	code, stdout, stderr = run(t, "run", "--config", cfg, "--prompt", "summarize", "--input", "text=x", "--json")
	if code != 3 {
		t.Fatalf("--json: exit %d, want 3: %s", code, stderr)
	}
	var res struct {
		Truncated    bool   `json:"truncated"`
		FinishReason string `json:"finish_reason"`
		Validation   struct {
			Status string   `json:"status"`
			Errors []string `json:"errors"`
		} `json:"validation"`
	}
	if err := json.Unmarshal([]byte(stdout), &res); err != nil {
		t.Fatalf("stdout is not JSON: %v\n%s", err, stdout)
	}
	if !res.Truncated || res.FinishReason != "length" || res.Validation.Status != "invalid" || !strings.Contains(res.Validation.Errors[0], "cut off") {
		t.Fatalf("result = %+v", res)
	}
	if strings.Count(stderr, "\n") != 1 || !strings.Contains(stderr, "cut off") {
		t.Fatalf("--json stderr = %q, want the one problem line", stderr)
	}
}

// An output that fails the schema after its repair exits 3 too, saying
// how many repairs were spent.
func TestRunInvalidOutputExitCode(t *testing.T) {
	t.Parallel()
	srv := providertest.NewServer()
	t.Cleanup(srv.Close)
	cfg := quickstart(t, srv.URL)
	srv.Enqueue(providertest.Reply("not json"), providertest.Reply("still not json"))
	code, stdout, stderr := run(t, "run", "--config", cfg, "--prompt", "summarize", "--input", "text=x")
	if code != 3 || srv.Count() != 2 {
		t.Fatalf("exit %d after %d calls, want 3 after 2: %s", code, srv.Count(), stderr)
	}
	if !strings.HasSuffix(lastLine(stderr), "output does not satisfy the prompt's output schema after 1 repair generation(s)") ||
		!strings.Contains(stderr, "promptkit:   output is not a single JSON value") || strings.TrimSpace(stdout) != "still not json" {
		t.Fatalf("stdout %q, stderr:\n%s", stdout, stderr)
	}
}

// A plain-text answer cut off by max_tokens is still a result (exit 0),
// with a warning.
func TestRunTruncatedTextWarns(t *testing.T) {
	t.Parallel()
	srv := providertest.NewServer()
	t.Cleanup(srv.Close)
	cfg := quickstart(t, srv.URL)
	srv.Enqueue(cutOffReply("Once upon a time"))
	code, stdout, stderr := run(t, "run", "--config", cfg, "--text", "tell a story")
	if code != 0 || strings.TrimSpace(stdout) != "Once upon a time" {
		t.Fatalf("exit %d, stdout %q: %s", code, stdout, stderr)
	}
	if !strings.Contains(stderr, `promptkit: warning: run `) || !strings.Contains(stderr, `output was cut off at the token limit (finish_reason "length"): raise the profile's max_tokens`) {
		t.Fatalf("stderr = %q", stderr)
	}
}

// run --verbose shows why a provider refused, redacted: the key the
// provider echoes, and anything shaped like a key, never print.
func TestRunVerboseShowsProviderDetail(t *testing.T) {
	const key = "my-Secret-Key-42"
	t.Setenv("PK_RUN_TEST_KEY", key)
	srv := providertest.NewServer()
	t.Cleanup(srv.Close)
	cfg := writeConfig(t, t.TempDir(), srv.URL, "PK_RUN_TEST_KEY", "")
	refusal := func() providertest.Response {
		return providertest.Response{Status: 401, Body: []byte(`{"error":{"message":"Incorrect API key provided: ` + key +
			` (or sk-abc123DEF456ghi789). You can find your API key at https://platform.openai.com/account/api-keys.",` +
			`"type":"invalid_request_error","code":"invalid_api_key"}}`)}
	}

	srv.Enqueue(refusal())
	code, _, stderr := run(t, "run", "--config", cfg, "--text", "hi")
	if code != 1 || !strings.Contains(stderr, "HTTP 401") || strings.Contains(stderr, "Incorrect API key") {
		t.Fatalf("without --verbose: exit %d, stderr %q: the provider's text stays out", code, stderr)
	}

	srv.Enqueue(refusal())
	code, _, stderr = run(t, "run", "--config", cfg, "--text", "hi", "--verbose")
	want := `backend "local" returned HTTP 401; provider said: invalid_request_error: invalid_api_key: Incorrect API key provided: [REDACTED] (or [REDACTED]).`
	if code != 1 || !strings.Contains(stderr, want) {
		t.Fatalf("--verbose: exit %d, stderr %q; want %q", code, stderr, want)
	}
	if strings.Contains(stderr, key) || strings.Contains(stderr, "sk-abc") || strings.Count(stderr, "\n") != 1 {
		t.Fatalf("--verbose leaks a key or is not one line: %q", stderr)
	}

	// After exhausted retries, the last attempt's message is shown.
	srv.Enqueue(providertest.Status(503), providertest.Response{Status: 503, Body: []byte(`{"error":{"message":"model is overloaded"}}`)})
	code, _, stderr = run(t, "run", "--config", cfg, "--text", "hi", "--verbose", "--transient-retries", "1")
	if code != 1 || !strings.Contains(stderr, "transient retries exhausted after 2 attempts") || !strings.Contains(stderr, "provider said: model is overloaded") {
		t.Fatalf("exhausted: exit %d, stderr %q", code, stderr)
	}
}

// Schema, input and template errors name the file, the field and what is
// wrong, never an input value.
func TestRunNamesWhatIsWrong(t *testing.T) {
	t.Parallel()
	const secret = "SECRET-VALUE-7"
	srv := providertest.NewServer()
	t.Cleanup(srv.Close)
	dir := t.TempDir()
	cfg := writeConfig(t, dir, srv.URL, "", "prompts")
	good := filepath.Join(dir, "prompts", "tag.md")
	writeTestFile(t, good, "---\ninput_schema:\n  type: object\n  required: [text, lang]\n  properties:\n"+
		"    text: {type: string, pattern: '^[a-z ]+$'}\n    lang: {enum: [en, fr]}\n---\nTag {{.text}} in {{.lang}} for {{.audience}}")

	cases := []struct {
		args []string
		want []string
	}{
		{[]string{"--input", "text=abc"}, []string{`prompt "tag": inputs fail the input schema: at /: required: missing property "lang"`}},
		{[]string{"--input", "text=" + secret, "--input", "lang=" + secret}, []string{
			`at /lang: enum: value is not one of "en", "fr"`, `at /text: pattern: value does not match "^[a-z ]+$"`}},
		{[]string{"--input", "text=abc", "--input", "lang=en"}, []string{
			`prompt "tag": the template, line 1 column 33, uses the key "audience", which the inputs do not have`}},
	}
	for _, c := range cases {
		code, _, stderr := run(t, append([]string{"run", "--config", cfg, "--prompt", "tag"}, c.args...)...)
		if code != 1 {
			t.Errorf("%v: exit %d, want 1: %s", c.args, code, stderr)
		}
		for _, w := range c.want {
			if !strings.Contains(stderr, w) {
				t.Errorf("%v: stderr %q does not say %q", c.args, stderr, w)
			}
		}
		if strings.Contains(stderr, secret) {
			t.Errorf("%v: stderr quotes an input value: %q", c.args, stderr)
		}
	}

	bad := filepath.Join(dir, "prompts", "bad.md")
	writeTestFile(t, bad, "---\noutput_schema:\n  type: objectt\n---\nHi")
	code, _, stderr := run(t, "run", "--config", cfg, "--text", "hi")
	want := bad + `: output_schema: not a valid JSON Schema: at /type: enum: "objectt" is not one of "array", "boolean", "integer", "null", "number", "object", "string"`
	if code != 1 || !strings.Contains(stderr, want) {
		t.Fatalf("bad schema: exit %d, stderr %q; want %q", code, stderr, want)
	}
	if srv.Count() != 0 {
		t.Fatalf("the provider was called %d times", srv.Count())
	}
}

// The config's prompts directory resolves against the config file's
// folder, whatever the working directory; ".." and absolute paths work,
// and a missing one is named by its path.
func TestRunPromptsPathsResolveAgainstConfig(t *testing.T) {
	srv := providertest.NewServer()
	t.Cleanup(srv.Close)
	root := t.TempDir()
	writeTestFile(t, filepath.Join(root, "shared", "prompts", "hello.md"), "---\n---\nSay hello to {{.name}}")
	t.Chdir(t.TempDir())
	for _, prompts := range []string{"../shared/prompts", filepath.Join(root, "shared", "prompts")} {
		cfg := writeConfig(t, filepath.Join(root, "app"), srv.URL, "", prompts)
		srv.Enqueue(providertest.Reply("Hello, Ann."))
		code, stdout, stderr := run(t, "run", "--config", cfg, "--prompt", "hello", "--input", "name=Ann")
		if code != 0 || strings.TrimSpace(stdout) != "Hello, Ann." {
			t.Fatalf("prompts: %s: exit %d, stdout %q, stderr %q", prompts, code, stdout, stderr)
		}
	}
	reqs := srv.Requests()
	if got := reqs[len(reqs)-1].Messages; got[len(got)-1].Content != "Say hello to Ann" {
		t.Fatalf("rendered %+v", got)
	}

	// The config in the working directory, prompts relative to it.
	t.Chdir(filepath.Join(root, "app"))
	writeConfig(t, ".", srv.URL, "", "../shared/prompts")
	srv.Enqueue(providertest.Reply("Hi."))
	if code, _, stderr := run(t, "run", "--prompt", "hello", "--input", "name=Bo"); code != 0 {
		t.Fatalf("default config: exit %d: %s", code, stderr)
	}

	cfg := writeConfig(t, filepath.Join(root, "app"), srv.URL, "", "../nowhere")
	code, _, stderr := run(t, "run", "--config", cfg, "--text", "hi")
	want := cfg + ": prompts: directory " + filepath.Join(root, "nowhere") + ": does not exist"
	if code != 1 || !strings.Contains(stderr, want) {
		t.Fatalf("missing prompts: exit %d, stderr %q; want %q", code, stderr, want)
	}
}
