package cli

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/promptkit/promptkit/internal/simulate"
	"github.com/promptkit/promptkit/providertest"
)

func run(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	code = Run(context.Background(), args, &out, &errb)
	return code, out.String(), errb.String()
}

// quickstart copies examples/quickstart into a temp dir with base_url
// pointing at url, and returns the config path.
func quickstart(t *testing.T, url string) string {
	t.Helper()
	src := filepath.Join("..", "..", "..", "..", "examples", "quickstart")
	dst := t.TempDir()
	cfg, err := os.ReadFile(filepath.Join(src, "promptkit.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	cfg = bytes.Replace(cfg, []byte("http://127.0.0.1:8081/v1"), []byte(url), -1)
	prompt, err := os.ReadFile(filepath.Join(src, "prompts", "summarize.md"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(dst, "prompts"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dst, "promptkit.yaml"), cfg, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dst, "prompts", "summarize.md"), prompt, 0o644); err != nil {
		t.Fatal(err)
	}
	return filepath.Join(dst, "promptkit.yaml")
}

func TestRunQuickstartJSON(t *testing.T) {
	t.Parallel()
	srv := providertest.NewServer()
	t.Cleanup(srv.Close)
	cfg := quickstart(t, srv.URL)
	code, stdout, stderr := run(t, "run", "--config", cfg, "--prompt", "summarize", "--input", "text=The cat sat on the mat.", "--json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var res struct {
		RunID      string          `json:"run_id"`
		Output     json.RawMessage `json:"output"`
		Validation struct{ Status string }
		Usage      struct {
			TotalTokens int `json:"total_tokens"`
		}
		Simulated bool `json:"simulated"`
	}
	if err := json.Unmarshal([]byte(stdout), &res); err != nil {
		t.Fatalf("stdout is not JSON: %v\n%s", err, stdout)
	}
	var out struct {
		Summary  string   `json:"summary"`
		Keywords []string `json:"keywords"`
	}
	if err := json.Unmarshal(res.Output, &out); err != nil || out.Summary == "" || len(out.Keywords) == 0 {
		t.Fatalf("output = %s (%v)", res.Output, err)
	}
	if res.RunID == "" || res.Validation.Status != "valid" || res.Usage.TotalTokens == 0 || res.Simulated {
		t.Fatalf("result = %+v", res)
	}
	if got := srv.Requests()[0].Messages; !strings.Contains(got[len(got)-1].Content, "The cat sat on the mat.") {
		t.Fatalf("prompt not rendered: %+v", got)
	}
}

func TestRunSimulatedWithoutConfig(t *testing.T) {
	t.Chdir(t.TempDir()) // no promptkit.yaml here
	code, stdout, stderr := run(t, "run", "--text", "hello there")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if !strings.Contains(stderr, "SIMULATED") || !strings.HasPrefix(stdout, simulate.ReplyPrefix) {
		t.Fatalf("stdout %q stderr %q: the simulation must be labelled", stdout, stderr)
	}
	code, stdout, _ = run(t, "run", "--text", "hello", "--json")
	if code != 0 || !strings.Contains(stdout, `"simulated": true`) || !strings.Contains(stdout, `"backend_id": "simulated"`) {
		t.Fatalf("exit %d, json %s", code, stdout)
	}
}

func TestRunErrors(t *testing.T) {
	t.Parallel()
	srv := providertest.NewServer()
	t.Cleanup(srv.Close)
	cfg := quickstart(t, srv.URL)
	const marker = "PROVIDER-MARKER-cli"
	srv.Enqueue(providertest.Response{Status: 400, Body: []byte(`{"error":{"message":"` + marker + `"}}`)})
	cases := []struct {
		args []string
		code int
		want string
	}{
		{[]string{"run"}, 2, "exactly one of --prompt and --text"},
		{[]string{"run", "--text", "x", "--bogus"}, 2, "unknown flag"},
		{[]string{"run", "--config", cfg, "--prompt", "nope"}, 1, "prompt not found"},
		{[]string{"run", "--config", cfg, "--prompt", "summarize"}, 1, "inputs fail the input schema"},
		{[]string{"run", "--config", cfg, "--text", "x", "--input-json", "a=}"}, 2, "not valid JSON"},
		{[]string{"run", "--config", filepath.Join(t.TempDir(), "missing.yaml"), "--text", "x"}, 1, "missing.yaml"},
		{[]string{"run", "--config", cfg, "--text", "x"}, 1, "HTTP 400"},
		{[]string{"run", "--config", cfg, "--text", "x", "--transient-retries", "-1"}, 1, "TransientRetries must not be negative"},
	}
	for _, c := range cases {
		code, _, stderr := run(t, c.args...)
		if code != c.code || !strings.Contains(stderr, c.want) {
			t.Errorf("%v: exit %d, stderr %q; want exit %d mentioning %q", c.args, code, stderr, c.code, c.want)
		}
		if strings.Count(stderr, "\n") != 1 || strings.Contains(stderr, marker) {
			t.Errorf("%v: stderr must be one line without provider text: %q", c.args, stderr)
		}
		if n := strings.Count(stderr, "promptkit:"); n != 1 {
			t.Errorf("%v: stderr says \"promptkit:\" %d times, want once: %q", c.args, n, stderr)
		}
	}
}

func TestFakeProviderServesAndStops(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	done := make(chan int, 1)
	go func() {
		done <- Run(ctx, []string{"fake-provider", "--addr", "127.0.0.1:0", "--rate", "100"}, io.Discard, pw)
		pw.Close()
	}()
	line, err := bufio.NewReader(pr).ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	go io.Copy(io.Discard, pr) //nolint:errcheck // drain the rest until the pipe closes
	_, url, ok := strings.Cut(strings.TrimSpace(line), "listening on ")
	if !ok {
		t.Fatalf("no address in %q", line)
	}
	body := `{"model":"m","messages":[{"role":"user","content":"hi"}]}`
	resp, err := http.Post(url+"/chat/completions", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("status %d", resp.StatusCode)
	}
	cancel()
	if code := <-done; code != 0 {
		t.Fatalf("exit %d after shutdown", code)
	}
}

// run --json prints a count the provider never sent (as an Ollama server
// does with cached and reasoning tokens) as null, never as 0; the text
// summary does not claim a total it does not have.
func TestRunJSONUnknownUsageIsNull(t *testing.T) {
	t.Parallel()
	srv := providertest.NewServer()
	t.Cleanup(srv.Close)
	cfg := quickstart(t, srv.URL)
	srv.Enqueue(providertest.Response{Text: "hi", Usage: providertest.Usage{Mode: providertest.UsagePartial, PromptTokens: 5, CompletionTokens: 1}})
	code, stdout, stderr := run(t, "run", "--config", cfg, "--text", "hello", "--json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var out struct {
		Usage map[string]*int `json:"usage"`
	}
	if err := json.Unmarshal([]byte(stdout), &out); err != nil {
		t.Fatalf("%v: %s", err, stdout)
	}
	u := out.Usage
	if u["prompt_tokens"] == nil || *u["prompt_tokens"] != 5 || u["completion_tokens"] == nil || *u["completion_tokens"] != 1 {
		t.Fatalf("known counts = %v", stdout)
	}
	for _, k := range []string{"total_tokens", "cached_tokens", "reasoning_tokens"} {
		if v, ok := u[k]; !ok || v != nil {
			t.Errorf("%s = %v (present %t), want null", k, v, ok)
		}
	}
	srv.Enqueue(providertest.Response{Text: "hi", Usage: providertest.Usage{Mode: providertest.UsagePartial, PromptTokens: 5, CompletionTokens: 1}})
	code, _, stderr = run(t, "run", "--config", cfg, "--text", "hello")
	if code != 0 || !strings.Contains(stderr, "completion = unknown") {
		t.Fatalf("exit %d, summary %q; want the unknown total said", code, stderr)
	}
}
