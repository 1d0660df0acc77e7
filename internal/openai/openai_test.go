package openai

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/promptkit/promptkit/internal/llm"
	"github.com/promptkit/promptkit/pktype"
)

const okBody = `{"model":"m1","choices":[{"message":{"role":"assistant","content":"hello"},"finish_reason":"stop"}],"usage":{"prompt_tokens":3,"completion_tokens":2,"total_tokens":5}}`

func basicRequest() pktype.GenerateRequest {
	return pktype.GenerateRequest{Model: "test-model", Messages: []pktype.Message{{Role: "user", Content: "hi <b>&"}}}
}

func newServer(t *testing.T, h http.HandlerFunc) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv
}

func mustPrepare(t *testing.T, ep Endpoint, req pktype.GenerateRequest) *Frozen {
	t.Helper()
	f, err := Prepare(ep, req)
	if err != nil {
		t.Fatalf("Prepare: %v", err)
	}
	return f
}

// hang blocks until the server notices the client went away. The body is
// drained first: net/http only watches the connection for closure (and so
// cancels r.Context()) once the request body has been consumed.
func hang(r *http.Request) {
	_, _ = io.Copy(io.Discard, r.Body)
	<-r.Context().Done()
}

func replyOK(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	_, _ = io.WriteString(w, okBody)
}

type captured struct {
	path   string
	header http.Header
	body   map[string]any
}

// capture records the last request and answers okBody.
func capture(t *testing.T, got *captured) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		raw, err := io.ReadAll(r.Body)
		if err != nil {
			t.Errorf("read body: %v", err)
		}
		got.path, got.header, got.body = r.URL.Path, r.Header.Clone(), nil
		if err := json.Unmarshal(raw, &got.body); err != nil {
			t.Errorf("request body is not JSON: %v", err)
		}
		replyOK(w, r)
	}
}

func TestRequestEncodingFull(t *testing.T) {
	var got captured
	srv := newServer(t, capture(t, &got))
	temp, topP, maxTok := 0.0, 0.5, 64
	req := pktype.GenerateRequest{
		Model:        "m",
		Messages:     []pktype.Message{{Role: "system", Content: "be brief"}, {Role: "user", Content: "a<b"}},
		Sampling:     pktype.Sampling{Temperature: &temp, TopP: &topP, MaxTokens: &maxTok, Stop: []string{"\n\n", "END"}},
		OutputSchema: []byte(`{"type":"object","properties":{"x":{"type":"integer"}}}`),
	}
	ep := Endpoint{BaseURL: srv.URL + "/v1/", APIKeyEnv: "KEY", Getenv: func(string) string { return "k-123" }}
	out := mustPrepare(t, ep, req).Execute(context.Background())
	if out.Err != nil {
		t.Fatalf("Execute: %v", out.Err)
	}
	if got.path != "/v1/chat/completions" {
		t.Errorf("path = %q", got.path)
	}
	if h := got.header.Get("Authorization"); h != "Bearer k-123" {
		t.Errorf("Authorization = %q", h)
	}
	if h := got.header.Get("Content-Type"); h != "application/json" {
		t.Errorf("Content-Type = %q", h)
	}
	if h := got.header.Get("Accept"); h != "application/json" {
		t.Errorf("Accept = %q", h)
	}
	want := map[string]any{
		"model": "m",
		"messages": []any{
			map[string]any{"role": "system", "content": "be brief"},
			map[string]any{"role": "user", "content": "a<b"},
		},
		"temperature": 0.0, // explicit zero is sent
		"top_p":       0.5,
		"max_tokens":  64.0,
		"stop":        []any{"\n\n", "END"},
		"response_format": map[string]any{
			"type": "json_schema",
			"json_schema": map[string]any{
				"name": "output",
				"schema": map[string]any{
					"type":       "object",
					"properties": map[string]any{"x": map[string]any{"type": "integer"}},
				},
			},
		},
	}
	if g, w := fmt.Sprint(got.body), fmt.Sprint(want); g != w {
		t.Errorf("body =\n%s\nwant\n%s", g, w)
	}
}

func TestRequestEncodingMinimal(t *testing.T) {
	var got captured
	srv := newServer(t, capture(t, &got))
	req := basicRequest()
	req.Stop = []string{}
	req.OutputSchemaName = "custom_name" // ignored without a schema
	out := mustPrepare(t, Endpoint{BaseURL: srv.URL}, req).Execute(context.Background())
	if out.Err != nil {
		t.Fatalf("Execute: %v", out.Err)
	}
	if got.path != "/chat/completions" {
		t.Errorf("path = %q", got.path)
	}
	if _, ok := got.header["Authorization"]; ok {
		t.Errorf("unexpected Authorization header %q", got.header.Get("Authorization"))
	}
	for _, k := range []string{"temperature", "top_p", "max_tokens", "stop", "response_format"} {
		if _, ok := got.body[k]; ok {
			t.Errorf("field %q should be omitted", k)
		}
	}
	if len(got.body) != 2 {
		t.Errorf("body has fields %v, want only model and messages", got.body)
	}
}

func TestRequestSchemaName(t *testing.T) {
	f := mustPrepare(t, Endpoint{BaseURL: "http://x/v1"}, pktype.GenerateRequest{
		Model: "m", Messages: []pktype.Message{{Role: "user"}},
		OutputSchema: []byte(` {"type": "string"} `), OutputSchemaName: "my-schema_1",
	})
	var body struct {
		ResponseFormat struct {
			JSONSchema struct {
				Name   string          `json:"name"`
				Schema json.RawMessage `json:"schema"`
			} `json:"json_schema"`
		} `json:"response_format"`
	}
	if err := json.Unmarshal(f.body, &body); err != nil {
		t.Fatal(err)
	}
	if body.ResponseFormat.JSONSchema.Name != "my-schema_1" || string(body.ResponseFormat.JSONSchema.Schema) != `{"type":"string"}` {
		t.Errorf("response_format = %+v", body.ResponseFormat)
	}
}

// Seed and json_object reach the wire as OpenAI spells them.
func TestRequestSeedAndJSONObject(t *testing.T) {
	seed := int64(-42)
	req := basicRequest()
	req.Seed, req.JSONObject = &seed, true
	f := mustPrepare(t, Endpoint{BaseURL: "http://x/v1"}, req)
	var body map[string]json.RawMessage
	if err := json.Unmarshal(f.body, &body); err != nil {
		t.Fatal(err)
	}
	if string(body["seed"]) != "-42" || string(body["response_format"]) != `{"type":"json_object"}` {
		t.Errorf("seed = %s, response_format = %s", body["seed"], body["response_format"])
	}
	// A zero seed is a seed: it is sent.
	seed = 0
	req.JSONObject = false
	f = mustPrepare(t, Endpoint{BaseURL: "http://x/v1"}, req)
	body = nil
	if err := json.Unmarshal(f.body, &body); err != nil {
		t.Fatal(err)
	}
	if string(body["seed"]) != "0" || body["response_format"] != nil {
		t.Errorf("seed = %s, response_format = %s", body["seed"], body["response_format"])
	}
}

func TestPrepareRejects(t *testing.T) {
	good := basicRequest()
	ep := Endpoint{BaseURL: "https://api.example.com/v1"}
	tests := []struct {
		name string
		ep   Endpoint
		req  pktype.GenerateRequest
	}{
		{"empty model", ep, pktype.GenerateRequest{Messages: good.Messages}},
		{"no messages", ep, pktype.GenerateRequest{Model: "m"}},
		{"empty role", ep, pktype.GenerateRequest{Model: "m", Messages: []pktype.Message{{Content: "x"}}}},
		{"invalid schema", ep, pktype.GenerateRequest{Model: "m", Messages: good.Messages, OutputSchema: []byte(`{"type":`)}},
		{"bad schema name", ep, pktype.GenerateRequest{Model: "m", Messages: good.Messages, OutputSchema: []byte(`{}`), OutputSchemaName: "has space"}},
		{"json_object with a schema", ep, pktype.GenerateRequest{Model: "m", Messages: good.Messages, OutputSchema: []byte(`{}`), JSONObject: true}},
		{"NaN temperature", ep, func() pktype.GenerateRequest { r := good; nan := 0.0; nan /= nan; r.Temperature = &nan; return r }()},
		{"empty base URL", Endpoint{}, good},
		{"relative base URL", Endpoint{BaseURL: "/v1"}, good},
		{"no host", Endpoint{BaseURL: "http:///v1"}, good},
		{"ftp base URL", Endpoint{BaseURL: "ftp://example.com/v1"}, good},
		{"unparsable base URL", Endpoint{BaseURL: "http://[::1"}, good},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, err := Prepare(tt.ep, tt.req)
			if !errors.Is(err, pktype.ErrInvalidRequest) || f != nil {
				t.Fatalf("Prepare = %v, %v; want ErrInvalidRequest", f, err)
			}
		})
	}
}

func TestPrepareBaseURLForms(t *testing.T) {
	for base, want := range map[string]string{
		"http://h:1/v1":                    "http://h:1/v1/chat/completions",
		"http://h:1/v1/":                   "http://h:1/v1/chat/completions",
		"HTTPS://h":                        "https://h/chat/completions",
		"https://h/openai?api-version=1#x": "https://h/openai/chat/completions?api-version=1",
	} {
		f, err := Prepare(Endpoint{BaseURL: base}, basicRequest())
		if err != nil {
			t.Fatalf("%s: %v", base, err)
		}
		if f.url != want {
			t.Errorf("%s -> %s, want %s", base, f.url, want)
		}
	}
}

func TestFrozenCredential(t *testing.T) {
	var mu sync.Mutex
	var auths []string
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		auths = append(auths, r.Header.Get("Authorization"))
		mu.Unlock()
		replyOK(w, r)
	})
	var key atomic.Value
	key.Store("k1")
	ep := Endpoint{BaseURL: srv.URL, APIKeyEnv: "PK_KEY", Getenv: func(name string) string {
		if name != "PK_KEY" {
			t.Errorf("Getenv(%q)", name)
		}
		return key.Load().(string)
	}}
	f := mustPrepare(t, ep, basicRequest())
	key.Store("k2")
	for range 2 {
		if out := f.Execute(context.Background()); out.Err != nil {
			t.Fatalf("Execute: %v", out.Err)
		}
	}
	if len(auths) != 2 || auths[0] != "Bearer k1" || auths[1] != "Bearer k1" {
		t.Fatalf("Authorization headers = %q, want Bearer k1 twice", auths)
	}
}

func TestMissingCredential(t *testing.T) {
	for _, val := range []string{"", "  \n"} {
		_, err := Prepare(Endpoint{BaseURL: "http://x", APIKeyEnv: "PK_UNSET_KEY", Getenv: func(string) string { return val }}, basicRequest())
		if !errors.Is(err, pktype.ErrMissingCredential) {
			t.Fatalf("err = %v, want ErrMissingCredential", err)
		}
		if !strings.Contains(err.Error(), "PK_UNSET_KEY") {
			t.Errorf("error %q does not name the variable", err)
		}
	}
	// The real environment is consulted when Getenv is nil.
	t.Setenv("PK_TEST_REAL_ENV_KEY", "")
	if _, err := Prepare(Endpoint{BaseURL: "http://x", APIKeyEnv: "PK_TEST_REAL_ENV_KEY"}, basicRequest()); !errors.Is(err, pktype.ErrMissingCredential) {
		t.Fatalf("err = %v", err)
	}
}

func TestSuccessOutcome(t *testing.T) {
	srv := newServer(t, replyOK)
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	f := mustPrepare(t, Endpoint{BaseURL: srv.URL, Now: func() time.Time { return now }}, basicRequest())
	out := f.Execute(context.Background())
	if out.Err != nil {
		t.Fatal(out.Err)
	}
	want := pktype.TokenUsage{PromptTokens: 3, CompletionTokens: 2, TotalTokens: 5}
	wantP := pktype.TokenUsagePresence{PromptTokens: true, CompletionTokens: true, TotalTokens: true}
	if out.StatusCode != 200 || !out.Received.Equal(now) || !out.NotBefore.IsZero() {
		t.Errorf("outcome = %+v", out)
	}
	if out.Usage != want || out.Presence != wantP || out.Response.Usage != want || out.Response.Presence() != wantP {
		t.Errorf("usage = %+v %+v", out.Usage, out.Presence)
	}
	if out.Response.Text != "hello" || out.Response.Model != "m1" || out.Response.FinishReason != "stop" {
		t.Errorf("response = %+v", out.Response)
	}
}

func TestConcurrentExecute(t *testing.T) {
	var n atomic.Int32
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		n.Add(1)
		replyOK(w, r)
	})
	f := mustPrepare(t, Endpoint{BaseURL: srv.URL, Timeout: time.Minute}, basicRequest())
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			if out := f.Execute(context.Background()); out.Err != nil {
				t.Errorf("Execute: %v", out.Err)
			}
		})
	}
	wg.Wait()
	if n.Load() != 8 {
		t.Errorf("server saw %d requests", n.Load())
	}
}

func TestUsagePreservedOnMissingChoices(t *testing.T) {
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, `{"model":"m","choices":[],"usage":{"prompt_tokens":11,"completion_tokens_details":{"reasoning_tokens":4}}}`)
	})
	out := mustPrepare(t, Endpoint{BaseURL: srv.URL}, basicRequest()).Execute(context.Background())
	if !errors.Is(out.Err, pktype.ErrMalformedResponse) || out.Response != nil {
		t.Fatalf("outcome = %+v", out)
	}
	if out.StatusCode != 200 || out.Received.IsZero() {
		t.Errorf("status/received = %d %v", out.StatusCode, out.Received)
	}
	if out.Usage != (pktype.TokenUsage{PromptTokens: 11, ReasoningTokens: 4}) || out.Presence != (pktype.TokenUsagePresence{PromptTokens: true, ReasoningTokens: true}) {
		t.Errorf("usage = %+v %+v", out.Usage, out.Presence)
	}
}

func TestPerAttemptTimeoutIsIndependent(t *testing.T) {
	var calls atomic.Int32
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		if calls.Add(1) == 1 {
			hang(r) // until the client gives up
			return
		}
		replyOK(w, r)
	})
	f := mustPrepare(t, Endpoint{BaseURL: srv.URL, Timeout: 50 * time.Millisecond}, basicRequest())

	out := f.Execute(context.Background())
	if !errors.Is(out.Err, pktype.ErrTransport) || !errors.Is(out.Err, context.DeadlineExceeded) {
		t.Fatalf("first attempt err = %v, want transport + deadline exceeded", out.Err)
	}
	if out.StatusCode != 0 || !out.Received.IsZero() {
		t.Errorf("outcome = %+v", out)
	}

	out = f.Execute(context.Background())
	if out.Err != nil || out.Response == nil || out.Response.Text != "hello" {
		t.Fatalf("second attempt = %+v", out)
	}
}

func TestTimeoutWhileReadingBody(t *testing.T) {
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, `{"choices":[`)
		w.(http.Flusher).Flush()
		hang(r)
	})
	f := mustPrepare(t, Endpoint{BaseURL: srv.URL, Timeout: 50 * time.Millisecond}, basicRequest())
	out := f.Execute(context.Background())
	if !errors.Is(out.Err, pktype.ErrTransport) || !errors.Is(out.Err, context.DeadlineExceeded) {
		t.Fatalf("err = %v, want transport + deadline exceeded", out.Err)
	}
	if out.StatusCode != 200 {
		t.Errorf("status = %d", out.StatusCode)
	}
}

func TestCallerCancel(t *testing.T) {
	started := make(chan struct{})
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		close(started)
		hang(r)
	})
	f := mustPrepare(t, Endpoint{BaseURL: srv.URL, Timeout: time.Hour}, basicRequest())
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		<-started
		cancel()
	}()
	out := f.Execute(ctx)
	if !errors.Is(out.Err, pktype.ErrTransport) || !errors.Is(out.Err, context.Canceled) {
		t.Fatalf("err = %v, want transport + canceled", out.Err)
	}

	// Already canceled before the attempt.
	out = f.Execute(ctx)
	if !errors.Is(out.Err, context.Canceled) {
		t.Fatalf("pre-canceled err = %v", out.Err)
	}
}

// trackBody records whether Close was called.
type trackBody struct {
	io.Reader
	closed atomic.Bool
}

func (b *trackBody) Close() error { b.closed.Store(true); return nil }

type fixedTransport struct {
	status int
	body   string
	header http.Header
	last   *trackBody
}

func (ft *fixedTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	ft.last = &trackBody{Reader: strings.NewReader(ft.body)}
	h := ft.header
	if h == nil {
		h = http.Header{}
	}
	return &http.Response{
		StatusCode: ft.status, Header: h, Body: ft.last,
		ContentLength: -1, Request: req, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
	}, nil
}

func TestBodyAlwaysClosed(t *testing.T) {
	tests := []struct {
		name   string
		status int
		body   string
		check  func(llm.Outcome) bool
	}{
		{"success", 200, okBody, func(o llm.Outcome) bool { return o.Err == nil }},
		{"error status", 500, `{"error":{"message":"boom"}}`, func(o llm.Outcome) bool {
			var se *pktype.GenerationError
			return errors.As(o.Err, &se) && se.StatusCode() == 500
		}},
		{"malformed", 200, `{"choices":`, func(o llm.Outcome) bool { return errors.Is(o.Err, pktype.ErrMalformedResponse) }},
		{"too large", 200, okBody + strings.Repeat(" ", 100), func(o llm.Outcome) bool { return errors.Is(o.Err, pktype.ErrMalformedResponse) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ft := &fixedTransport{status: tt.status, body: tt.body}
			ep := Endpoint{BaseURL: "http://backend.invalid/v1", HTTPClient: &http.Client{Transport: ft}, MaxResponseBytes: int64(len(okBody) + 10)}
			out := mustPrepare(t, ep, basicRequest()).Execute(context.Background())
			if !tt.check(out) {
				t.Fatalf("unexpected outcome %+v", out)
			}
			if ft.last == nil || !ft.last.closed.Load() {
				t.Fatal("response body not closed")
			}
		})
	}
}

func TestErrorRedaction(t *testing.T) {
	const key = "sk-live-KEYVALUE-987654321"
	const marker = "SECRET-MARKER-123"
	for name, body := range map[string]string{
		"openai json": `{"error":{"message":"Bad key ` + key + ` near ` + marker + "\x00\x1b[31m" + `","type":"invalid_request_error","code":"invalid_api_key"}}`,
		"plain text":  "upstream said: " + marker + "\r\nAuthorization: Bearer " + key + "\n",
	} {
		t.Run(name, func(t *testing.T) {
			srv := newServer(t, func(w http.ResponseWriter, r *http.Request) {
				w.WriteHeader(http.StatusUnauthorized)
				_, _ = io.WriteString(w, body)
			})
			ep := Endpoint{BaseURL: srv.URL, APIKeyEnv: "K", Getenv: func(string) string { return key }}
			out := mustPrepare(t, ep, basicRequest()).Execute(context.Background())
			var se *pktype.GenerationError
			if !errors.As(out.Err, &se) || se.StatusCode() != 401 || out.StatusCode != 401 {
				t.Fatalf("err = %v", out.Err)
			}
			if !errors.Is(out.Err, pktype.ErrLLMGenerate) {
				t.Error("StatusError should match ErrGenerate")
			}
			for _, s := range []string{out.Err.Error(), fmt.Sprintf("%#v", out.Err), fmt.Sprintf("%+v", out.Err), fmt.Sprintf("%v", out.Err)} {
				if strings.Contains(s, marker) || strings.Contains(s, key) {
					t.Errorf("error text leaks: %q", s)
				}
			}
			if strings.Contains(se.Detail(), key) || strings.Contains(se.Detail(), "KEYVALUE") {
				t.Errorf("Detail leaks key: %q", se.Detail())
			}
			if !strings.Contains(se.Detail(), "[REDACTED]") || !strings.Contains(se.Detail(), marker) {
				t.Errorf("Detail = %q", se.Detail())
			}
			if strings.ContainsAny(se.Detail(), "\x00\x1b\r\n") {
				t.Errorf("Detail has control characters: %q", se.Detail())
			}
		})
	}
}

func TestErrorDetail(t *testing.T) {
	long := strings.Repeat("é", 400) // 800 bytes
	tests := []struct {
		body, key, want string
	}{
		{`{"error":{"message":"m","type":"t","code":"c"}}`, "", "t: c: m"},
		{`{"error":{"message":"m","type":"t","code":null}}`, "", "t: m"},
		{`{"error":{"message":"m","code":429}}`, "", "429: m"},
		{`{"error":"flat message"}`, "", "flat message"},
		{`{"detail":"not openai"}`, "", `{"detail":"not openai"}`},
		{"line1\n\n\tline2\x7f", "", "line1 line2"},
		{"key=abc key=abc", "abc", "key=[REDACTED] key=[REDACTED]"},
		{"token sk-abcdefghijkl here", "", "token [REDACTED] here"},
		{"hdr: bearer xyz.123", "", "hdr: Bearer [REDACTED]"},
		{"k\x00ey", "key", "[REDACTED]"},
		{"bad \xff byte", "", "bad \uFFFD byte"},
		{"", "", ""},
	}
	for _, tt := range tests {
		if got := errorDetail([]byte(tt.body), tt.key); got != tt.want {
			t.Errorf("errorDetail(%q) = %q, want %q", tt.body, got, tt.want)
		}
	}
	got := errorDetail([]byte(long), "")
	if len(got) != 512 || got != long[:512] {
		t.Errorf("truncation: len %d", len(got))
	}
	got = errorDetail([]byte("x"+long), "")
	if len(got) != 511 || !strings.HasPrefix("x"+long, got) {
		t.Errorf("truncation splits rune: len %d", len(got))
	}
}

func TestTransportErrorHidesURL(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(replyOK))
	base := srv.URL + "/SECRET-MARKER-123/v1"
	srv.Close() // connection refused from now on

	out := mustPrepare(t, Endpoint{BaseURL: base}, basicRequest()).Execute(context.Background())
	if !errors.Is(out.Err, pktype.ErrTransport) || !errors.Is(out.Err, pktype.ErrLLMGenerate) {
		t.Fatalf("err = %v, want transport", out.Err)
	}
	if out.StatusCode != 0 || !out.Received.IsZero() {
		t.Errorf("outcome = %+v", out)
	}
	for _, s := range []string{out.Err.Error(), fmt.Sprintf("%#v", out.Err), fmt.Sprintf("%+v", out.Err)} {
		if strings.Contains(s, "SECRET-MARKER-123") || strings.Contains(s, srv.URL) {
			t.Errorf("error text leaks URL: %q", s)
		}
	}
	var f *llm.AttemptError
	if errors.As(out.Err, &f) && strings.Contains(f.Cause.Error(), "SECRET-MARKER-123") {
		t.Errorf("cause leaks URL: %q", f.Cause)
	}
}

func TestSizeLimit(t *testing.T) {
	for _, chunked := range []bool{false, true} {
		srv := newServer(t, func(w http.ResponseWriter, r *http.Request) {
			if chunked {
				w.(http.Flusher).Flush() // no Content-Length
			}
			_, _ = io.WriteString(w, okBody)
		})
		ep := Endpoint{BaseURL: srv.URL, MaxResponseBytes: int64(len(okBody) - 1)}
		out := mustPrepare(t, ep, basicRequest()).Execute(context.Background())
		if !errors.Is(out.Err, pktype.ErrMalformedResponse) || out.Response != nil {
			t.Errorf("chunked=%v: outcome = %+v", chunked, out)
		}
		// Exactly at the limit is fine.
		ep.MaxResponseBytes = int64(len(okBody))
		if out := mustPrepare(t, ep, basicRequest()).Execute(context.Background()); out.Err != nil {
			t.Errorf("chunked=%v at limit: %v", chunked, out.Err)
		}
	}
}

func TestRetryAfterOutcome(t *testing.T) {
	now := time.Date(2030, 6, 1, 10, 0, 0, 0, time.UTC)
	tests := []struct {
		status int
		header string
		want   time.Time
	}{
		{429, "7", now.Add(7 * time.Second)},
		{503, now.Add(time.Minute).Format(http.TimeFormat), now.Add(time.Minute)},
		{503, "soon", time.Time{}},
		{429, "", time.Time{}},
	}
	for _, tt := range tests {
		srv := newServer(t, func(w http.ResponseWriter, r *http.Request) {
			if tt.header != "" {
				w.Header().Set("Retry-After", tt.header)
			}
			w.WriteHeader(tt.status)
		})
		ep := Endpoint{BaseURL: srv.URL, Now: func() time.Time { return now }}
		out := mustPrepare(t, ep, basicRequest()).Execute(context.Background())
		var se *pktype.GenerationError
		if !errors.As(out.Err, &se) || se.StatusCode() != tt.status || out.StatusCode != tt.status {
			t.Fatalf("%d %q: err = %v", tt.status, tt.header, out.Err)
		}
		if !out.NotBefore.Equal(tt.want) || !out.Received.Equal(now) {
			t.Errorf("%d %q: NotBefore = %v Received = %v, want %v", tt.status, tt.header, out.NotBefore, out.Received, tt.want)
		}
	}
}
