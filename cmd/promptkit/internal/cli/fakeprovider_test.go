package cli

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
)

// startFakeProvider runs promptkit fake-provider with args on a free port
// and returns its base URL (ending in /v1); the command is stopped, and
// must exit 0, when the test ends.
func startFakeProvider(t *testing.T, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	done := make(chan int, 1)
	go func() {
		done <- Run(ctx, append([]string{"fake-provider", "--addr", "127.0.0.1:0"}, args...), io.Discard, pw)
		pw.Close()
	}()
	t.Cleanup(func() {
		cancel()
		if code := <-done; code != 0 {
			t.Errorf("fake-provider exit %d after shutdown", code)
		}
	})
	line, err := bufio.NewReader(pr).ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	go io.Copy(io.Discard, pr) //nolint:errcheck // drain the rest until the pipe closes
	_, url, ok := strings.Cut(strings.TrimSpace(line), "listening on ")
	if !ok {
		t.Fatalf("no address in %q", line)
	}
	return url
}

// The fake provider streams over real HTTP as OpenAI does: chunk events as
// they are written, a usage chunk when asked for, then [DONE].
func TestFakeProviderStreams(t *testing.T) {
	t.Parallel()
	url := startFakeProvider(t)
	body := `{"model":"m","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"tell me a story"}]}`
	resp, err := http.Post(url+"/chat/completions", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("status %d Content-Type %q, want 200 text/event-stream", resp.StatusCode, resp.Header.Get("Content-Type"))
	}

	type chunk struct {
		Object  string `json:"object"`
		Model   string `json:"model"`
		Choices []struct {
			Delta struct {
				Role    string `json:"role"`
				Content string `json:"content"`
			} `json:"delta"`
			FinishReason *string `json:"finish_reason"`
		} `json:"choices"`
		Usage *struct {
			PromptTokens     int `json:"prompt_tokens"`
			CompletionTokens int `json:"completion_tokens"`
			TotalTokens      int `json:"total_tokens"`
		} `json:"usage"`
	}
	var (
		chunks []chunk
		done   bool
		text   strings.Builder
	)
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		if line == "" {
			continue
		}
		if done {
			t.Fatalf("%q after data: [DONE]", line)
		}
		data, ok := strings.CutPrefix(line, "data: ")
		if !ok {
			t.Fatalf("line %q is not a data line", line)
		}
		if data == "[DONE]" {
			done = true
			continue
		}
		var c chunk
		if err := json.Unmarshal([]byte(data), &c); err != nil {
			t.Fatalf("chunk %q: %v", data, err)
		}
		if c.Object != "chat.completion.chunk" || c.Model != "m" {
			t.Errorf("chunk %s", data)
		}
		for _, ch := range c.Choices {
			text.WriteString(ch.Delta.Content)
		}
		chunks = append(chunks, c)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if !done {
		t.Fatal("stream ended without data: [DONE]")
	}
	// role, 7 words, finish, usage
	if len(chunks) != 10 {
		t.Fatalf("%d chunks, want 10", len(chunks))
	}
	if chunks[0].Choices[0].Delta.Role != "assistant" {
		t.Errorf("first chunk role %q", chunks[0].Choices[0].Delta.Role)
	}
	if fr := chunks[8].Choices[0].FinishReason; fr == nil || *fr != "stop" {
		t.Errorf("finish chunk finish_reason %v", fr)
	}
	u := chunks[9]
	if len(u.Choices) != 0 || u.Usage == nil || u.Usage.PromptTokens != 4 || u.Usage.CompletionTokens != 7 || u.Usage.TotalTokens != 11 {
		t.Errorf("usage chunk %+v", u)
	}
	if got, want := text.String(), "Fake provider reply: tell me a story"; got != want {
		t.Errorf("streamed text %q, want %q", got, want)
	}
}

func TestFakeProviderModels(t *testing.T) {
	t.Parallel()
	url := startFakeProvider(t, "--model", "gpt-4o-mini", "--model", "org/local")

	getJSON := func(path string, v any) int {
		t.Helper()
		resp, err := http.Get(url + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
		return resp.StatusCode
	}
	var list struct {
		Object string `json:"object"`
		Data   []struct {
			ID      string `json:"id"`
			Object  string `json:"object"`
			Created int64  `json:"created"`
			OwnedBy string `json:"owned_by"`
		} `json:"data"`
	}
	if code := getJSON("/models", &list); code != 200 || list.Object != "list" || len(list.Data) != 2 ||
		list.Data[0].ID != "gpt-4o-mini" || list.Data[1].ID != "org/local" || list.Data[0].Object != "model" || list.Data[0].Created == 0 || list.Data[0].OwnedBy == "" {
		t.Errorf("GET /models: %d %+v", code, list)
	}
	var m struct{ ID, Object string }
	if code := getJSON("/models/org/local", &m); code != 200 || m.ID != "org/local" || m.Object != "model" {
		t.Errorf("GET /models/org/local: %d %+v", code, m)
	}
	var e struct{ Error struct{ Code string } }
	if code := getJSON("/models/other", &e); code != 404 || e.Error.Code != "model_not_found" {
		t.Errorf("GET /models/other: %d %+v", code, e)
	}

	// What the fake cannot honour is refused, naming the parameter.
	resp, err := http.Post(url+"/chat/completions", "application/json",
		strings.NewReader(`{"model":"gpt-4o-mini","n":9,"messages":[{"role":"user","content":"hi"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var bad struct{ Error struct{ Type, Param string } }
	if err := json.NewDecoder(resp.Body).Decode(&bad); err != nil || resp.StatusCode != 400 ||
		bad.Error.Type != "invalid_request_error" || bad.Error.Param != "n" {
		t.Errorf("n=9: %d %+v (%v)", resp.StatusCode, bad, err)
	}
}

func TestFakeProviderDefaultModel(t *testing.T) {
	t.Parallel()
	url := startFakeProvider(t)
	resp, err := http.Get(url + "/models")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 || !strings.Contains(string(b), `"id":"providertest"`) {
		t.Errorf("GET /models: %d %s", resp.StatusCode, b)
	}
}

// With --reasoning the fake answers as vLLM's reasoning parser does:
// streamed reasoning_content before the content, and reasoning tokens in
// the usage; a request's enable_thinking false turns it off.
func TestFakeProviderReasoning(t *testing.T) {
	t.Parallel()
	url := startFakeProvider(t, "--reasoning")
	body := `{"model":"m","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"why is the sky blue"}]}`
	resp, err := http.Post(url+"/chat/completions", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var (
		reasoning, content strings.Builder
		fingerprint        string
		usage              struct {
			CompletionTokens        int `json:"completion_tokens"`
			CompletionTokensDetails struct {
				ReasoningTokens int `json:"reasoning_tokens"`
			} `json:"completion_tokens_details"`
		}
	)
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok || data == "[DONE]" {
			continue
		}
		var c struct {
			SystemFingerprint string `json:"system_fingerprint"`
			Choices           []struct {
				Delta struct {
					Content          string `json:"content"`
					ReasoningContent string `json:"reasoning_content"`
				} `json:"delta"`
			} `json:"choices"`
			Usage *json.RawMessage `json:"usage"`
		}
		if err := json.Unmarshal([]byte(data), &c); err != nil {
			t.Fatalf("chunk %q: %v", data, err)
		}
		fingerprint = c.SystemFingerprint
		for _, ch := range c.Choices {
			if ch.Delta.ReasoningContent != "" && content.Len() > 0 {
				t.Errorf("reasoning %q after content %q", ch.Delta.ReasoningContent, content.String())
			}
			reasoning.WriteString(ch.Delta.ReasoningContent)
			content.WriteString(ch.Delta.Content)
		}
		if c.Usage != nil && string(*c.Usage) != "null" {
			if err := json.Unmarshal(*c.Usage, &usage); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if reasoning.String() != "Thinking about: why is the sky blue" || content.String() != "Fake provider reply: why is the sky blue" || fingerprint != "fp_providertest" {
		t.Errorf("reasoning %q content %q system_fingerprint %q", reasoning.String(), content.String(), fingerprint)
	}
	if usage.CompletionTokens != 7+8 || usage.CompletionTokensDetails.ReasoningTokens != 7 {
		t.Errorf("usage %+v, want 15 completion tokens of which 7 reasoning", usage)
	}

	resp, err = http.Post(url+"/chat/completions", "application/json",
		strings.NewReader(`{"model":"m","chat_template_kwargs":{"enable_thinking":false},"messages":[{"role":"user","content":"hi"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 || strings.Contains(string(b), "reasoning_content") {
		t.Errorf("enable_thinking false: %d %s", resp.StatusCode, b)
	}
}

// With --status the fake answers every chat and embeddings request with
// that status, as a backend that is down does; /v1/models still answers.
func TestFakeProviderStatus(t *testing.T) {
	t.Parallel()
	url := startFakeProvider(t, "--status", "503")
	want := `{"error":{"message":"The server is overloaded (providertest --status).","type":"server_error","param":null,"code":null}}`
	for _, path := range []string{"/chat/completions", "/embeddings"} {
		resp, err := http.Post(url+path, "application/json", strings.NewReader(`{"model":"m","input":"x","messages":[{"role":"user","content":"hi"}]}`))
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 503 || string(b) != want {
			t.Errorf("POST %s: %d %s", path, resp.StatusCode, b)
		}
	}
	resp, err := http.Get(url + "/models")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Errorf("GET /models: %d", resp.StatusCode)
	}
}

func TestFakeProviderStatusOutOfRange(t *testing.T) {
	t.Parallel()
	for _, v := range []string{"200", "600", "-1"} {
		if code, _, stderr := run(t, "fake-provider", "--addr", "127.0.0.1:0", "--status", v); code != 2 || !strings.Contains(stderr, "--status") {
			t.Errorf("--status %s: exit %d, stderr %q; want a usage error", v, code, stderr)
		}
	}
}
