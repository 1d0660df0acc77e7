package openai

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/promptkit/promptkit/internal/llm"
	"github.com/promptkit/promptkit/pktype"
)

// sse renders chunks as a server sends them: "data: " lines and blank
// lines, ending in [DONE].
func sse(chunks ...string) string {
	var b strings.Builder
	for _, c := range chunks {
		b.WriteString("data: " + c + "\n\n")
	}
	b.WriteString("data: [DONE]\n\n")
	return b.String()
}

const (
	chunkRole  = `{"model":"m1","choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}],"usage":null}`
	chunkStop  = `{"model":"m1","choices":[{"index":0,"delta":{},"finish_reason":"stop"}],"usage":null}`
	chunkUsage = `{"model":"m1","choices":[],"usage":{"prompt_tokens":3,"completion_tokens":2,"total_tokens":5}}`
)

func chunkText(s string) string {
	b, _ := json.Marshal(s)
	return `{"model":"m1","choices":[{"index":0,"delta":{"content":` + string(b) + `},"finish_reason":null}],"usage":null}`
}

// streamTransport answers every request with status, header and body;
// the body may end in err instead of io.EOF.
type streamTransport struct {
	status int
	header http.Header
	body   string
	err    error
	req    *http.Request
	sent   []byte
}

type failingReader struct {
	r   io.Reader
	err error
}

func (f *failingReader) Read(p []byte) (int, error) {
	n, err := f.r.Read(p)
	if err == io.EOF && f.err != nil {
		err = f.err
	}
	return n, err
}

func (st *streamTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	st.req = req
	st.sent, _ = io.ReadAll(req.Body)
	h := st.header.Clone()
	if h == nil {
		h = http.Header{"Content-Type": {"text/event-stream"}}
	}
	return &http.Response{
		StatusCode: st.status, Header: h, Body: io.NopCloser(&failingReader{strings.NewReader(st.body), st.err}),
		ContentLength: -1, Request: req, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
	}, nil
}

func streamEndpoint(rt http.RoundTripper) Endpoint {
	return Endpoint{BackendID: "b1", BaseURL: "http://backend.invalid/v1", HTTPClient: &http.Client{Transport: rt}}
}

func mustPrepareStream(t *testing.T, ep Endpoint, req pktype.GenerateRequest) *Frozen {
	t.Helper()
	f, err := PrepareStream(ep, req)
	if err != nil {
		t.Fatalf("PrepareStream: %v", err)
	}
	return f
}

// collect runs one streamed exchange and returns its outcome and pieces.
func collect(t *testing.T, f *Frozen, ctx context.Context) (llm.Outcome, []pktype.StreamDelta) {
	t.Helper()
	var got []pktype.StreamDelta
	out := f.ExecuteStream(ctx, func(d pktype.StreamDelta) { got = append(got, d) })
	return out, got
}

func TestPrepareStreamBody(t *testing.T) {
	st := &streamTransport{status: 200, body: sse(chunkRole, chunkText("hi"), chunkStop)}
	ep := streamEndpoint(st)
	plain, err := encodeRequest(basicRequest(), false)
	if err != nil {
		t.Fatal(err)
	}
	mustPrepareStream(t, ep, basicRequest()).Execute(context.Background())
	want := `{"model":"test-model","messages":[{"role":"user","content":"hi <b>&"}],"stream":true,"stream_options":{"include_usage":true}}`
	if string(st.sent) != want {
		t.Errorf("streaming body = %s\nwant %s", st.sent, want)
	}
	if a := st.req.Header.Get("Accept"); a != "text/event-stream" {
		t.Errorf("Accept = %q", a)
	}
	// A plain request is untouched: no stream keys at all.
	if bytes.Contains(plain, []byte("stream")) {
		t.Errorf("plain body mentions stream: %s", plain)
	}
	mustPrepare(t, ep, basicRequest()).Execute(context.Background())
	if !bytes.Equal(st.sent, plain) {
		t.Errorf("Prepare sent %s, want %s", st.sent, plain)
	}
}

func TestStreamDeltasInOrder(t *testing.T) {
	now := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	st := &streamTransport{status: 200, header: http.Header{
		"Content-Type":                   {"text/event-stream; charset=utf-8"},
		"X-Ratelimit-Limit-Requests":     {"60"},
		"X-Ratelimit-Remaining-Requests": {"59"},
		"X-Ratelimit-Reset-Requests":     {"1s"},
	}, body: ": keep-alive\n\n" + sse(chunkRole, chunkText("Hello"), chunkText(", "), chunkText("world"), chunkStop, chunkUsage)}
	ep := streamEndpoint(st)
	ep.Now = func() time.Time { return now }
	out, got := collect(t, mustPrepareStream(t, ep, basicRequest()), context.Background())
	if out.Err != nil {
		t.Fatalf("err = %v", out.Err)
	}
	// Each piece carries its chunk as the backend sent it.
	for i, text := range []string{"Hello", ", ", "world"} {
		if string(got[i].Raw) != chunkText(text) {
			t.Errorf("piece %d raw = %s, want %s", i, got[i].Raw, chunkText(text))
		}
	}
	want := []pktype.StreamDelta{{Index: 0, Text: "Hello"}, {Index: 1, Text: ", "}, {Index: 2, Text: "world"}}
	if got := stripRaw(got); !reflect.DeepEqual(got, want) {
		t.Fatalf("pieces = %+v, want %+v", got, want)
	}
	full := pktype.TokenUsagePresence{PromptTokens: true, CompletionTokens: true, TotalTokens: true}
	wantResp := &pktype.GenerateResponse{Text: "Hello, world", Model: "m1", FinishReason: "stop",
		Usage: pktype.TokenUsage{PromptTokens: 3, CompletionTokens: 2, TotalTokens: 5}, UsagePresence: &full}
	wantRaw := `{"choices":[{"finish_reason":"stop","index":0,"logprobs":null,"message":{"content":"Hello, world","role":"assistant"}}],` +
		`"model":"m1","object":"chat.completion","usage":{"prompt_tokens":3,"completion_tokens":2,"total_tokens":5}}`
	if string(out.Response.Raw) != wantRaw {
		t.Errorf("raw = %s\nwant  %s", out.Response.Raw, wantRaw)
	}
	out.Response.Raw = nil
	if !reflect.DeepEqual(out.Response, wantResp) {
		t.Errorf("response = %+v, want %+v", out.Response, wantResp)
	}
	if out.Usage != wantResp.Usage || out.Presence != full || out.StatusCode != 200 {
		t.Errorf("outcome = %+v", out)
	}
	if !out.FirstDelta.Equal(now) || !out.Received.Equal(now) {
		t.Errorf("FirstDelta = %v, Received = %v", out.FirstDelta, out.Received)
	}
	if !out.Limits.Requests.Known || out.Limits.Requests.Remaining != 59 {
		t.Errorf("limits = %+v", out.Limits)
	}
}

// The same answer, streamed or not, decodes to the same response.
func TestStreamMatchesDecode(t *testing.T) {
	body := `{"model":"m1","choices":[{"index":0,"logprobs":null,"message":{"role":"assistant","content":null,"tool_calls":[` +
		`{"id":"c1","type":"function","function":{"name":"get","arguments":"{\"a\":1}"}},` +
		`{"id":"c2","type":"function","function":{"name":"put","arguments":"{}"}}]},"finish_reason":"tool_calls"}],` +
		`"usage":{"prompt_tokens":4,"completion_tokens":0,"prompt_tokens_details":{"cached_tokens":null}}}`
	want, err := Decode([]byte(body))
	if err != nil {
		t.Fatal(err)
	}
	stream := sse(
		`{"model":"m1","choices":[{"delta":{"role":"assistant","content":null}}]}`,
		`{"model":"m1","choices":[{"delta":{"tool_calls":[{"index":0,"id":"c1","type":"function","function":{"name":"get","arguments":""}}]}}]}`,
		`{"model":"m1","choices":[{"delta":{"tool_calls":[{"index":1,"id":"c2","function":{"name":"put"}}]}}]}`,
		`{"model":"m1","choices":[{"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"a\""}},{"index":1,"function":{"arguments":"{}"}}]}}]}`,
		`{"model":"m1","choices":[{"delta":{"tool_calls":[{"index":0,"id":"c1","function":{"arguments":":1}"}}]}}]}`,
		`{"model":"m1","choices":[{"delta":{},"finish_reason":"tool_calls"}]}`,
		`{"model":"m1","choices":[],"usage":{"prompt_tokens":4,"completion_tokens":0,"prompt_tokens_details":{"cached_tokens":null}}}`,
	)
	var pieces []pktype.StreamDelta
	got, u, p, err := decodeStream(strings.NewReader(stream), 1<<20, func(d pktype.StreamDelta) { pieces = append(pieces, d) })
	if err != nil {
		t.Fatalf("err = %v", err)
	}
	sameJSON(t, "streamed answer's choices", choicesOf(t, got.Raw), choicesOf(t, want.Raw))
	got.Raw, want.Raw = nil, nil
	if !reflect.DeepEqual(got, want) {
		t.Errorf("streamed = %+v\nplain    = %+v", got, want)
	}
	if p != (pktype.TokenUsagePresence{PromptTokens: true, CompletionTokens: true}) || u.PromptTokens != 4 {
		t.Errorf("usage = %+v %+v", u, p)
	}
	wantPieces := []pktype.StreamDelta{
		{Index: 0, ToolCalls: []pktype.ToolCallDelta{{Index: 0, ID: "c1", Name: "get"}}},
		{Index: 1, ToolCalls: []pktype.ToolCallDelta{{Index: 1, ID: "c2", Name: "put"}}},
		{Index: 2, ToolCalls: []pktype.ToolCallDelta{{Index: 0, Arguments: `{"a"`}, {Index: 1, Arguments: "{}"}}},
		{Index: 3, ToolCalls: []pktype.ToolCallDelta{{Index: 0, ID: "c1", Arguments: ":1}"}}},
	}
	if pieces := stripRaw(pieces); !reflect.DeepEqual(pieces, wantPieces) {
		t.Errorf("pieces = %+v\nwant     %+v", pieces, wantPieces)
	}
}

// stripRaw is pieces without their chunks, for comparing what they say.
func stripRaw(pieces []pktype.StreamDelta) []pktype.StreamDelta {
	out := make([]pktype.StreamDelta, len(pieces))
	for i, d := range pieces {
		d.Raw = nil
		out[i] = d
	}
	return out
}

// choicesOf is the choices of a chat.completion object, decoded.
func choicesOf(t *testing.T, raw []byte) any {
	t.Helper()
	var obj struct {
		Choices any `json:"choices"`
	}
	if err := json.Unmarshal(raw, &obj); err != nil {
		t.Fatalf("answer %s: %v", raw, err)
	}
	return obj.Choices
}

// sameJSON fails unless got and want are the same JSON values.
func sameJSON(t *testing.T, what string, got, want any) {
	t.Helper()
	g, _ := json.Marshal(got)
	w, _ := json.Marshal(want)
	if string(g) != string(w) {
		t.Errorf("%s = %s\nwant %s", what, g, w)
	}
}

func TestStreamUsagePresence(t *testing.T) {
	tests := []struct {
		name   string
		chunks []string
		want   pktype.TokenUsagePresence
		usage  pktype.TokenUsage
	}{
		{"no usage chunk", []string{chunkText("a"), chunkStop}, pktype.TokenUsagePresence{}, pktype.TokenUsage{}},
		{"usage null", []string{chunkText("a"), chunkStop, `{"choices":[],"usage":null}`}, pktype.TokenUsagePresence{}, pktype.TokenUsage{}},
		{"known zero", []string{chunkText("a"), chunkStop, `{"choices":[],"usage":{"completion_tokens":0}}`},
			pktype.TokenUsagePresence{CompletionTokens: true}, pktype.TokenUsage{}},
		{"last report wins", []string{chunkText("a"), `{"choices":[],"usage":{"prompt_tokens":1}}`, `{"choices":[],"usage":{"total_tokens":7,"completion_tokens_details":{"reasoning_tokens":2}}}`},
			pktype.TokenUsagePresence{TotalTokens: true, ReasoningTokens: true}, pktype.TokenUsage{TotalTokens: 7, ReasoningTokens: 2}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, u, p, err := decodeStream(strings.NewReader(sse(tt.chunks...)), 1<<20, nil)
			if err != nil {
				t.Fatal(err)
			}
			if p != tt.want || u != tt.usage || r.Presence() != tt.want || r.Usage != tt.usage {
				t.Errorf("usage %+v %+v, want %+v %+v", u, p, tt.usage, tt.want)
			}
		})
	}
}

func TestStreamFraming(t *testing.T) {
	ok := []struct{ name, body string }{
		{"CRLF", strings.ReplaceAll(sse(chunkText("a"), chunkStop), "\n", "\r\n")},
		{"comments and other fields", ": hi\nevent: message\nid: 1\nretry: 10\n" + sse(chunkText("a"), chunkStop)},
		{"no space after colon", "data:" + chunkText("a") + "\n\n" + "data:[DONE]\n\n"},
		{"multi-line data", "data: {\"choices\":[{\"delta\":\ndata: {\"content\":\"a\"}}]}\n\ndata: [DONE]\n\n"},
		{"done line at the end", "data: " + chunkText("a") + "\n\ndata: [DONE]\n"},
		{"events after done", sse(chunkText("a")) + "data: {bad\n\n"},
		{"long line", "data: " + chunkText("a"+strings.Repeat(" ", 10000)) + "\n\ndata: [DONE]\n\n"},
	}
	for _, tt := range ok {
		t.Run(tt.name, func(t *testing.T) {
			r, _, _, err := decodeStream(strings.NewReader(tt.body), 1<<20, nil)
			if err != nil {
				t.Fatalf("err = %v", err)
			}
			if !strings.HasPrefix(r.Text, "a") {
				t.Errorf("text = %q", r.Text)
			}
		})
	}
	bad := []struct{ name, body string }{
		{"empty", ""},
		{"no done", strings.TrimSuffix(sse(chunkText("a"), chunkStop), "data: [DONE]\n\n")},
		{"unterminated done", strings.TrimSuffix(sse(chunkText("a")), "\n\n")},
		{"done cut short", strings.TrimSuffix(sse(chunkText("a")), "]\n\n")},
		{"event not ended", "data: " + chunkText("a") + "\n"},
		{"invalid JSON", sse(`{"choices":[`)},
		{"not an object", sse(`[1]`)},
		{"trailing data", sse(chunkText("a") + ` {}`)},
		{"content not a string", sse(`{"choices":[{"delta":{"content":1}}]}`)},
		{"choices not an array", sse(`{"choices":{}}`)},
		{"bad count", sse(chunkText("a"), `{"choices":[],"usage":{"prompt_tokens":1.5}}`)},
		{"no choices at all", sse(chunkUsage)},
		{"tool call without id", sse(`{"choices":[{"delta":{"tool_calls":[{"index":0,"function":{"name":"f","arguments":"{}"}}]}}]}`)},
		{"tool call without name", sse(`{"choices":[{"delta":{"tool_calls":[{"index":0,"id":"c","function":{"arguments":"{}"}}]}}]}`)},
		{"conflicting ids", sse(`{"choices":[{"delta":{"tool_calls":[{"index":0,"id":"c","function":{"name":"f"}}]}}]}`,
			`{"choices":[{"delta":{"tool_calls":[{"index":0,"id":"d"}]}}]}`)},
		{"negative index", sse(`{"choices":[{"delta":{"tool_calls":[{"index":-1,"id":"c","function":{"name":"f"}}]}}]}`)},
	}
	for _, tt := range bad {
		t.Run(tt.name, func(t *testing.T) {
			r, _, _, err := decodeStream(strings.NewReader(tt.body), 1<<20, nil)
			if r != nil || !errors.Is(err, pktype.ErrMalformedResponse) {
				t.Fatalf("got %+v, %v; want malformed", r, err)
			}
		})
	}
}

func TestStreamToolCallsWithoutIndex(t *testing.T) {
	stream := sse(
		`{"choices":[{"delta":{"tool_calls":[{"id":"c1","function":{"name":"f","arguments":"{\"x\":"}}]}}]}`,
		`{"choices":[{"delta":{"tool_calls":[{"function":{"arguments":"1}"}}]}}]}`,
		`{"choices":[{"delta":{"tool_calls":[{"id":"c2","function":{"name":"g","arguments":"{}"}}]}}]}`,
		`{"choices":[{"delta":{},"finish_reason":"tool_calls"}]}`,
	)
	r, _, _, err := decodeStream(strings.NewReader(stream), 1<<20, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := []pktype.ToolCall{
		{ID: "c1", Type: "function", Function: pktype.FunctionCall{Name: "f", Arguments: `{"x":1}`}},
		{ID: "c2", Type: "function", Function: pktype.FunctionCall{Name: "g", Arguments: "{}"}},
	}
	if !reflect.DeepEqual(r.ToolCalls, want) || r.FinishReason != "tool_calls" {
		t.Errorf("calls = %+v, finish %q", r.ToolCalls, r.FinishReason)
	}
}

func TestStreamErrorEvent(t *testing.T) {
	const secret = "PROVIDER-SAYS-SECRET"
	tests := []struct {
		name  string
		event string
		want  int
	}{
		{"openai shape", `{"error":{"message":"` + secret + `","type":"server_error","code":null}}`, 500},
		{"rate limit code", `{"error":{"message":"` + secret + `","type":"requests","code":"rate_limit_exceeded"}}`, 429},
		{"numeric code", `{"error":{"message":"` + secret + `","code":503}}`, 503},
		{"string error", `{"error":"` + secret + `"}`, 500},
		{"vllm shape", `{"object":"error","message":"` + secret + `","type":"BadRequestError","param":null,"code":400}`, 400},
		{"code out of range", `{"error":{"message":"` + secret + `","code":200}}`, 500},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st := &streamTransport{status: 200, body: sse(chunkText("partial"), tt.event, chunkStop)}
			out, got := collect(t, mustPrepareStream(t, streamEndpoint(st), basicRequest()), context.Background())
			var ge *pktype.GenerationError
			if !errors.As(out.Err, &ge) || ge.StatusCode() != tt.want || out.StatusCode != tt.want {
				t.Fatalf("err = %v, status %d; want GenerationError %d", out.Err, out.StatusCode, tt.want)
			}
			if out.Response != nil || len(got) != 1 {
				t.Errorf("response %+v, pieces %+v", out.Response, got)
			}
			if strings.Contains(out.Err.Error(), secret) || strings.Contains(ge.GoString(), secret) {
				t.Errorf("provider text in the error string: %v", out.Err)
			}
			if !strings.Contains(ge.Detail(), secret) {
				t.Errorf("detail = %q, want the provider's message", ge.Detail())
			}
			if !ge.RetryAfter().IsZero() {
				t.Errorf("RetryAfter = %v", ge.RetryAfter())
			}
		})
	}
}

func TestStreamErrorStatusBeforeStream(t *testing.T) {
	received := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	st := &streamTransport{status: 429, header: http.Header{
		"Content-Type":                   {"application/json"},
		"Retry-After":                    {"7"},
		"X-Ratelimit-Limit-Requests":     {"10"},
		"X-Ratelimit-Remaining-Requests": {"0"},
		"X-Ratelimit-Reset-Requests":     {"7s"},
	}, body: `{"error":{"message":"slow down","type":"requests","code":"rate_limit_exceeded"}}`}
	ep := streamEndpoint(st)
	ep.Now = func() time.Time { return received }
	out, got := collect(t, mustPrepareStream(t, ep, basicRequest()), context.Background())
	var ge *pktype.GenerationError
	if !errors.As(out.Err, &ge) || ge.StatusCode() != 429 || out.StatusCode != 429 {
		t.Fatalf("err = %v", out.Err)
	}
	if !out.NotBefore.Equal(received.Add(7*time.Second)) || !ge.RetryAfter().Equal(out.NotBefore) {
		t.Errorf("NotBefore = %v", out.NotBefore)
	}
	if !out.Limits.Requests.Known || out.Limits.Requests.Remaining != 0 {
		t.Errorf("limits = %+v", out.Limits)
	}
	if !strings.Contains(ge.Detail(), "slow down") || len(got) != 0 || !out.FirstDelta.IsZero() {
		t.Errorf("detail %q, pieces %+v, FirstDelta %v", ge.Detail(), got, out.FirstDelta)
	}
}

func TestStreamEndsEarly(t *testing.T) {
	body := strings.TrimSuffix(sse(chunkText("a"), chunkText("b")), "data: [DONE]\n\n")
	t.Run("clean end without done", func(t *testing.T) {
		st := &streamTransport{status: 200, body: body}
		out, got := collect(t, mustPrepareStream(t, streamEndpoint(st), basicRequest()), context.Background())
		if !errors.Is(out.Err, pktype.ErrMalformedResponse) || out.Response != nil {
			t.Fatalf("outcome = %+v", out)
		}
		if len(got) != 2 {
			t.Errorf("pieces = %+v", got)
		}
	})
	t.Run("connection cut", func(t *testing.T) {
		st := &streamTransport{status: 200, body: body + "data: {\"cho", err: io.ErrUnexpectedEOF}
		out, _ := collect(t, mustPrepareStream(t, streamEndpoint(st), basicRequest()), context.Background())
		if !errors.Is(out.Err, pktype.ErrTransport) || out.Response != nil {
			t.Fatalf("outcome = %+v", out)
		}
		if !strings.Contains(out.Err.Error(), "connection closed") {
			t.Errorf("err = %v", out.Err)
		}
	})
}

func TestStreamTooLarge(t *testing.T) {
	body := sse(chunkText(strings.Repeat("x", 200)), chunkStop)
	for _, limit := range []int{len(body) - 1, 100} {
		st := &streamTransport{status: 200, body: body}
		ep := streamEndpoint(st)
		ep.MaxResponseBytes = int64(limit)
		out, _ := collect(t, mustPrepareStream(t, ep, basicRequest()), context.Background())
		if !errors.Is(out.Err, pktype.ErrMalformedResponse) || !errors.Is(out.Err, errTooLarge) {
			t.Fatalf("limit %d: err = %v", limit, out.Err)
		}
	}
	st := &streamTransport{status: 200, body: body}
	ep := streamEndpoint(st)
	ep.MaxResponseBytes = int64(len(body))
	if out, _ := collect(t, mustPrepareStream(t, ep, basicRequest()), context.Background()); out.Err != nil {
		t.Fatalf("at the limit: %v", out.Err)
	}
}

// A backend that ignores "stream" answers JSON: one piece, same answer.
func TestStreamPlainJSONAnswer(t *testing.T) {
	st := &streamTransport{status: 200, header: http.Header{"Content-Type": {"application/json"}}, body: okBody}
	out, got := collect(t, mustPrepareStream(t, streamEndpoint(st), basicRequest()), context.Background())
	want, _ := Decode([]byte(okBody))
	if out.Err != nil || !reflect.DeepEqual(out.Response, want) {
		t.Fatalf("outcome = %+v", out)
	}
	if !reflect.DeepEqual(got, []pktype.StreamDelta{{Text: "hello"}}) || out.FirstDelta.IsZero() {
		t.Errorf("pieces = %+v", got)
	}
}

// writeThenHold serves the first chunk, flushes, and holds the stream
// open until the client goes away.
func writeThenHold(w http.ResponseWriter, r *http.Request) {
	_, _ = io.Copy(io.Discard, r.Body)
	w.Header().Set("Content-Type", "text/event-stream")
	_, _ = io.WriteString(w, "data: "+chunkText("first")+"\n\n")
	w.(http.Flusher).Flush()
	<-r.Context().Done()
}

func TestStreamCancelMidStream(t *testing.T) {
	srv := newServer(t, writeThenHold)
	f := mustPrepareStream(t, Endpoint{BaseURL: srv.URL, Timeout: time.Hour}, basicRequest())
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var got []pktype.StreamDelta
	out := f.ExecuteStream(ctx, func(d pktype.StreamDelta) {
		got = append(got, d)
		cancel() // the caller gives up once the first piece is in
	})
	if !errors.Is(out.Err, pktype.ErrTransport) || !errors.Is(out.Err, context.Canceled) {
		t.Fatalf("err = %v, want transport + canceled", out.Err)
	}
	if out.Response != nil || len(got) != 1 || got[0].Text != "first" || out.StatusCode != 200 {
		t.Errorf("outcome %+v, pieces %+v", out, got)
	}
}

func TestStreamAttemptTimeout(t *testing.T) {
	srv := newServer(t, writeThenHold)
	f := mustPrepareStream(t, Endpoint{BaseURL: srv.URL, Timeout: 50 * time.Millisecond}, basicRequest())
	out, got := collect(t, f, context.Background())
	if !errors.Is(out.Err, pktype.ErrTransport) || !errors.Is(out.Err, context.DeadlineExceeded) {
		t.Fatalf("err = %v, want transport + deadline exceeded", out.Err)
	}
	if len(got) != 1 {
		t.Errorf("pieces = %+v", got)
	}
}

// Execute on a streaming request reads the stream, passing pieces
// nowhere.
func TestStreamExecuteWithoutEmit(t *testing.T) {
	st := &streamTransport{status: 200, body: sse(chunkText("a"), chunkText("b"), chunkStop)}
	f := mustPrepareStream(t, streamEndpoint(st), basicRequest())
	out := f.Execute(context.Background())
	if out.Err != nil || out.Response.Text != "ab" || out.FirstDelta.IsZero() {
		t.Fatalf("outcome = %+v", out)
	}
}
