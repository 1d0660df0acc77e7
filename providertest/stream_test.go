package providertest_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/promptkit/promptkit/providertest"
)

const (
	streamBody      = `{"model":"gpt-test","stream":true,"messages":[{"role":"system","content":"be brief"},{"role":"user","content":"hello there world"}]}`
	streamUsageBody = `{"model":"gpt-test","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"system","content":"be brief"},{"role":"user","content":"hello there world"}]}`
)

// streamChunk is one decoded chat.completion.chunk, keeping the raw
// object to check which keys are present.
type streamChunk struct {
	raw     map[string]any
	ID      string `json:"id"`
	Object  string `json:"object"`
	Model   string `json:"model"`
	Choices []struct {
		Index int `json:"index"`
		Delta struct {
			Role    string  `json:"role"`
			Content *string `json:"content"`
		} `json:"delta"`
		FinishReason *string `json:"finish_reason"`
	} `json:"choices"`
	Usage map[string]any `json:"usage"`
}

func (c streamChunk) has(key string) bool {
	_, ok := c.raw[key]
	return ok
}

// events checks that r is a server-sent event stream ending in
// data: [DONE] and returns its chunks, [DONE] excluded.
func events(t *testing.T, r result) []streamChunk {
	t.Helper()
	if r.status != 200 {
		t.Fatalf("status %d, want 200: %s", r.status, r.body)
	}
	if ct := r.header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("Content-Type %q, want text/event-stream", ct)
	}
	body := string(r.body)
	if !strings.HasSuffix(body, "data: [DONE]\n\n") {
		t.Fatalf("stream does not end with data: [DONE]: %q", body)
	}
	var out []streamChunk
	for _, ev := range strings.Split(strings.TrimSuffix(body, "data: [DONE]\n\n"), "\n\n") {
		if ev == "" {
			continue
		}
		data, ok := strings.CutPrefix(ev, "data: ")
		if !ok || strings.Contains(data, "\n") {
			t.Fatalf("event %q is not one data line", ev)
		}
		var c streamChunk
		if err := json.Unmarshal([]byte(data), &c); err != nil {
			t.Fatalf("event %q: %v", data, err)
		}
		if err := json.Unmarshal([]byte(data), &c.raw); err != nil {
			t.Fatal(err)
		}
		out = append(out, c)
	}
	return out
}

// checkSequence checks the chunk sequence OpenAI sends for one choice and
// returns the streamed text: a role chunk, content deltas and a finish
// chunk, all of one id, object and model.
func checkSequence(t *testing.T, chunks []streamChunk, model string) string {
	t.Helper()
	if len(chunks) < 2 {
		t.Fatalf("%d chunks, want at least a role and a finish chunk", len(chunks))
	}
	var text strings.Builder
	for i, c := range chunks {
		if c.ID == "" || c.ID != chunks[0].ID || c.Object != "chat.completion.chunk" || c.Model != model || !c.has("created") {
			t.Errorf("chunk %d envelope %v", i, c.raw)
		}
		if len(c.Choices) != 1 || c.Choices[0].Index != 0 {
			t.Fatalf("chunk %d choices %v, want one with index 0", i, c.raw["choices"])
		}
		ch := c.Choices[0]
		switch {
		case i == 0:
			if ch.Delta.Role != "assistant" || ch.Delta.Content == nil || *ch.Delta.Content != "" || ch.FinishReason != nil {
				t.Errorf("first chunk %v, want delta.role assistant, empty content, finish_reason null", c.raw)
			}
		case i == len(chunks)-1:
			if ch.FinishReason == nil || *ch.FinishReason != "stop" || ch.Delta.Role != "" || ch.Delta.Content != nil {
				t.Errorf("last chunk %v, want an empty delta and finish_reason stop", c.raw)
			}
		default:
			if ch.Delta.Content == nil || ch.Delta.Role != "" || ch.FinishReason != nil {
				t.Errorf("chunk %d %v, want a content delta", i, c.raw)
			} else {
				text.WriteString(*ch.Delta.Content)
			}
		}
		if _, ok := c.raw["choices"].([]any)[0].(map[string]any)["finish_reason"]; !ok {
			t.Errorf("chunk %d has no finish_reason key (want null or a reason)", i)
		}
	}
	return text.String()
}

func TestStreamChunkSequence(t *testing.T) {
	s := newServer(t)
	r := post(t, s.URL+"/chat/completions", streamBody)
	chunks := events(t, r)
	if got, want := checkSequence(t, chunks, "gpt-test"), "Fake provider reply: hello there world"; got != want {
		t.Errorf("streamed text %q, want %q", got, want)
	}
	// The text comes a word at a time: role, six words, finish.
	if len(chunks) != 8 {
		t.Errorf("%d chunks, want 8 (role, 6 content deltas, finish)", len(chunks))
	}
	for i, c := range chunks {
		if c.has("usage") {
			t.Errorf("chunk %d has usage without stream_options.include_usage: %v", i, c.raw)
		}
	}
	if r.header.Get("Cache-Control") != "no-cache" {
		t.Errorf("Cache-Control %q", r.header.Get("Cache-Control"))
	}
	want := providertest.Stats{Requests: 1, Defaults: 1}
	if st := s.Stats(); st != want {
		t.Errorf("Stats %+v, want %+v", st, want)
	}
	if rq := s.Requests()[0]; !rq.Stream {
		t.Error("Request.Stream false for a streamed request")
	}
}

func TestStreamUsageChunk(t *testing.T) {
	s := newServer(t)
	chunks := events(t, post(t, s.URL+"/chat/completions", streamUsageBody))
	last := chunks[len(chunks)-1]
	if choices, ok := last.raw["choices"].([]any); !ok || len(choices) != 0 {
		t.Errorf("usage chunk choices %v, want []", last.raw["choices"])
	}
	// The messages have 5 words; the reply has 6.
	if last.Usage["prompt_tokens"] != 5.0 || last.Usage["completion_tokens"] != 6.0 || last.Usage["total_tokens"] != 11.0 {
		t.Errorf("usage %v", last.Usage)
	}
	if last.ID != chunks[0].ID || last.Object != "chat.completion.chunk" {
		t.Errorf("usage chunk envelope %v", last.raw)
	}
	rest := chunks[:len(chunks)-1]
	if got := checkSequence(t, rest, "gpt-test"); got != "Fake provider reply: hello there world" {
		t.Errorf("streamed text %q", got)
	}
	for i, c := range rest {
		if u, ok := c.raw["usage"]; !ok || u != nil {
			t.Errorf("chunk %d usage %v (present %t), want null", i, u, ok)
		}
	}
}

func TestStreamScripted(t *testing.T) {
	tests := []struct {
		name  string
		resp  providertest.Response
		body  string
		text  string
		usage string // "none": no usage chunk; "null": usage chunk with null; else a key it must hold
	}{
		{name: "reply without include_usage", resp: providertest.Reply("one two  three\n"), body: streamBody, text: "one two  three\n", usage: "none"},
		{name: "reply", resp: providertest.Reply("one two"), body: streamUsageBody, text: "one two", usage: "total_tokens"},
		{name: "empty text", resp: providertest.Reply(""), body: streamUsageBody, text: "", usage: "total_tokens"},
		{name: "usage absent", resp: providertest.Response{Text: "x", Usage: providertest.Usage{Mode: providertest.UsageAbsent}}, body: streamUsageBody, text: "x", usage: "none"},
		{name: "usage null", resp: providertest.Response{Text: "x", Usage: providertest.Usage{Mode: providertest.UsageNull}}, body: streamUsageBody, text: "x", usage: "null"},
		{name: "usage partial", resp: providertest.Response{Text: "x", Usage: providertest.Usage{Mode: providertest.UsagePartial, PromptTokens: 3, CompletionTokens: 1}}, body: streamUsageBody, text: "x", usage: "prompt_tokens"},
		// Scripted replies ignore what the body holds: an invalid request
		// that asks for a stream still gets one.
		{name: "invalid body", resp: providertest.Reply("ok"), body: `{"stream":true,"n":5}`, text: "ok", usage: "none"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newServer(t, providertest.WithModel("fixed"))
			s.Enqueue(tt.resp)
			chunks := events(t, post(t, s.URL+"/chat/completions", tt.body))
			last := chunks[len(chunks)-1]
			seq := chunks
			if tt.usage != "none" {
				seq = chunks[:len(chunks)-1]
				u, ok := last.raw["usage"]
				switch {
				case !ok:
					t.Fatalf("no usage in the last chunk %v", last.raw)
				case tt.usage == "null" && u != nil:
					t.Errorf("usage %v, want null", u)
				case tt.usage != "null" && last.Usage[tt.usage] == nil:
					t.Errorf("usage %v, want %s", u, tt.usage)
				}
			}
			if got := checkSequence(t, seq, "fixed"); got != tt.text {
				t.Errorf("streamed text %q, want %q", got, tt.text)
			}
			if tt.usage == "none" {
				for i, c := range chunks {
					if c.has("usage") {
						t.Errorf("chunk %d has usage: %v", i, c.raw)
					}
				}
			}
		})
	}
}

func TestStreamMissingChoices(t *testing.T) {
	s := newServer(t)
	s.Enqueue(providertest.MissingChoices(), providertest.MissingChoices())
	for _, tt := range []struct {
		body   string
		chunks int
	}{{streamBody, 1}, {streamUsageBody, 2}} {
		chunks := events(t, post(t, s.URL+"/chat/completions", tt.body))
		if len(chunks) != tt.chunks {
			t.Fatalf("%d chunks, want %d", len(chunks), tt.chunks)
		}
		for i, c := range chunks {
			if c.has("choices") || c.Object != "chat.completion.chunk" {
				t.Errorf("chunk %d %v, want a chunk without choices", i, c.raw)
			}
		}
		if tt.chunks == 2 && chunks[1].Usage["total_tokens"] == nil {
			t.Errorf("usage chunk %v", chunks[1].raw)
		}
	}
}

// Errors, rate limiting and raw bodies are not streams: a client sees the
// same JSON error it would for a plain request.
func TestStreamErrorsAreJSON(t *testing.T) {
	clock := newClock()
	s := newServer(t, providertest.WithRateLimit(3), providertest.WithClock(clock.Now))
	s.Enqueue(providertest.Status(500), providertest.Status(429).WithRetryAfter("2"), providertest.Malformed())
	url := s.URL + "/chat/completions"

	r := post(t, url, streamBody)
	if e, _ := r.decode(t)["error"].(map[string]any); r.status != 500 || e["type"] != "server_error" {
		t.Errorf("scripted 500: %d %s", r.status, r.body)
	}
	r = post(t, url, streamBody)
	if r.status != 429 || r.header.Get("Retry-After") != "2" {
		t.Errorf("scripted 429: %d Retry-After %q", r.status, r.header.Get("Retry-After"))
	}
	r = post(t, url, streamBody)
	if r.status != 200 || r.header.Get("Content-Type") != "application/json" || json.Valid(r.body) {
		t.Errorf("Malformed: %d %q %s, want its raw body as is", r.status, r.header.Get("Content-Type"), r.body)
	}
	r = post(t, url, streamBody)
	if r.status != 429 || r.header.Get("Retry-After") != "1" || r.header.Get("Content-Type") != "application/json" {
		t.Errorf("rate limited: %d Retry-After %q Content-Type %q", r.status, r.header.Get("Retry-After"), r.header.Get("Content-Type"))
	}
	clock.Advance(2 * time.Second)
	r = post(t, url, `{"model":"m","stream":true,"n":9,"messages":[{"role":"user","content":"x"}]}`)
	if r.status != 400 || r.header.Get("Content-Type") != "application/json" {
		t.Errorf("n=9 stream: %d %q, want a 400 JSON error", r.status, r.header.Get("Content-Type"))
	}
}

// recordingWriter reports the first byte or status written.
type recordingWriter struct {
	header  http.Header
	mu      sync.Mutex
	body    strings.Builder
	status  int
	started chan struct{}
	once    sync.Once
}

func (w *recordingWriter) Header() http.Header { return w.header }

func (w *recordingWriter) WriteHeader(code int) {
	w.mu.Lock()
	w.status = code
	w.mu.Unlock()
	w.once.Do(func() { close(w.started) })
}

func (w *recordingWriter) Write(b []byte) (int, error) {
	w.once.Do(func() { close(w.started) })
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.body.Write(b)
}

func TestStreamHoldsBeforeFirstByte(t *testing.T) {
	h := providertest.NewHandler()
	hold := make(chan struct{})
	h.Enqueue(providertest.Response{Text: "held reply", Hold: hold})
	w := &recordingWriter{header: make(http.Header), started: make(chan struct{})}
	req, _ := http.NewRequest(http.MethodPost, "/v1/chat/completions", strings.NewReader(streamBody))
	done := make(chan struct{})
	go func() {
		h.ServeHTTP(w, req)
		close(done)
	}()
	if err := h.WaitArrivals(context.Background(), 1); err != nil {
		t.Fatal(err)
	}
	select {
	case <-w.started:
		t.Fatal("a held stream wrote before its Hold was released")
	default:
	}
	if h.InFlight() != 1 {
		t.Errorf("InFlight %d, want 1", h.InFlight())
	}
	close(hold)
	<-done
	chunks := events(t, result{status: w.status, header: w.header, body: []byte(w.body.String())})
	if got := checkSequence(t, chunks, "gpt-test"); got != "held reply" {
		t.Errorf("streamed text %q", got)
	}
	if h.InFlight() != 0 {
		t.Errorf("InFlight %d after the stream, want 0", h.InFlight())
	}
}
