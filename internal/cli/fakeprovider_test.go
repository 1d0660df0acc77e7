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
		strings.NewReader(`{"model":"gpt-4o-mini","n":2,"messages":[{"role":"user","content":"hi"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var bad struct{ Error struct{ Type, Param string } }
	if err := json.NewDecoder(resp.Body).Decode(&bad); err != nil || resp.StatusCode != 400 ||
		bad.Error.Type != "invalid_request_error" || bad.Error.Param != "n" {
		t.Errorf("n=2: %d %+v (%v)", resp.StatusCode, bad, err)
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
