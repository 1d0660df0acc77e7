package providertest_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/promptkit/promptkit/providertest"
)

const chatBody = `{"model":"gpt-test","messages":[{"role":"system","content":"be brief"},{"role":"user","content":"hello there world"}]}`

type result struct {
	status int
	header http.Header
	body   []byte
}

// decode returns the body as a generic JSON object.
func (r result) decode(t *testing.T) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(r.body, &m); err != nil {
		t.Fatalf("body %q is not a JSON object: %v", r.body, err)
	}
	return m
}

// content returns choices[0].message.content.
func (r result) content(t *testing.T) string {
	t.Helper()
	c, err := contentOf(r.body)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// contentOf is content without a *testing.T, for use in goroutines.
func contentOf(body []byte) (string, error) {
	var env struct {
		Choices []struct {
			Message struct{ Content string }
		}
	}
	if err := json.Unmarshal(body, &env); err != nil || len(env.Choices) != 1 {
		return "", fmt.Errorf("body %q: no single choice (err %v)", body, err)
	}
	return env.Choices[0].Message.Content, nil
}

func do(ctx context.Context, method, url, body string) (result, error) {
	req, err := http.NewRequestWithContext(ctx, method, url, strings.NewReader(body))
	if err != nil {
		return result{}, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return result{}, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return result{}, err
	}
	return result{status: resp.StatusCode, header: resp.Header, body: b}, nil
}

func post(t *testing.T, url, body string) result {
	t.Helper()
	r, err := do(context.Background(), http.MethodPost, url, body)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func newServer(t *testing.T, opts ...providertest.Option) *providertest.Server {
	t.Helper()
	s := providertest.NewServer(opts...)
	t.Cleanup(s.Close)
	return s
}

func TestScriptedOrder(t *testing.T) {
	s := newServer(t)
	s.Enqueue(providertest.Reply("one"), providertest.Status(500))
	s.Enqueue(providertest.Reply("three"))
	if got := s.Pending(); got != 3 {
		t.Fatalf("Pending = %d, want 3", got)
	}
	url := s.URL + "/chat/completions"

	if got := post(t, url, chatBody).content(t); got != "one" {
		t.Errorf("first reply %q, want one", got)
	}
	r := post(t, url, chatBody)
	if r.status != 500 {
		t.Errorf("second status %d, want 500", r.status)
	}
	e, _ := r.decode(t)["error"].(map[string]any)
	if e["type"] != "server_error" || e["message"] == "" {
		t.Errorf("second body %s: want an OpenAI-style server_error", r.body)
	}
	if got := post(t, url, chatBody).content(t); got != "three" {
		t.Errorf("third reply %q, want three", got)
	}
	if got := post(t, url, chatBody).content(t); got != "Fake provider reply: hello there world" {
		t.Errorf("fourth (default) reply %q", got)
	}
	want := providertest.Stats{Requests: 4, Scripted: 3, Defaults: 1}
	if got := s.Stats(); got != want {
		t.Errorf("Stats = %+v, want %+v", got, want)
	}
	if s.Pending() != 0 || s.Count() != 4 {
		t.Errorf("Pending %d Count %d, want 0 and 4", s.Pending(), s.Count())
	}
}

func TestUsageModes(t *testing.T) {
	allFive := []string{"prompt_tokens", "completion_tokens", "total_tokens", "prompt_tokens_details.cached_tokens", "completion_tokens_details.reasoning_tokens"}
	tests := []struct {
		name  string
		usage providertest.Usage
		// want maps each expected field (dotted path) to its value; nil
		// means "usage" must be absent, and null that it must be null.
		want   map[string]float64
		absent bool
		null   bool
	}{
		{name: "full explicit", usage: providertest.Usage{PromptTokens: 10, CompletionTokens: 5, TotalTokens: 15, CachedTokens: 3, ReasoningTokens: 2},
			want: map[string]float64{"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15, "prompt_tokens_details.cached_tokens": 3, "completion_tokens_details.reasoning_tokens": 2}},
		// chatBody has 5 words; the reply "a b c" 3.
		{name: "full computed", usage: providertest.Usage{},
			want: map[string]float64{"prompt_tokens": 5, "completion_tokens": 3, "total_tokens": 8, "prompt_tokens_details.cached_tokens": 0, "completion_tokens_details.reasoning_tokens": 0}},
		{name: "absent", usage: providertest.Usage{Mode: providertest.UsageAbsent}, absent: true},
		{name: "null", usage: providertest.Usage{Mode: providertest.UsageNull}, null: true},
		{name: "partial", usage: providertest.Usage{Mode: providertest.UsagePartial, PromptTokens: 7, CompletionTokens: 4, TotalTokens: 99},
			want: map[string]float64{"prompt_tokens": 7, "completion_tokens": 4}},
		{name: "zero", usage: providertest.Usage{Mode: providertest.UsageZero, PromptTokens: 7},
			want: map[string]float64{"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0, "prompt_tokens_details.cached_tokens": 0, "completion_tokens_details.reasoning_tokens": 0}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newServer(t)
			s.Enqueue(providertest.Response{Text: "a b c", Usage: tt.usage})
			r := post(t, s.URL+"/chat/completions", chatBody)
			m := r.decode(t)
			u, present := m["usage"]
			switch {
			case tt.absent:
				if present {
					t.Fatalf("usage present in %s, want absent", r.body)
				}
				return
			case tt.null:
				if !present || u != nil {
					t.Fatalf("usage in %s, want null", r.body)
				}
				return
			}
			um, ok := u.(map[string]any)
			if !ok {
				t.Fatalf("usage in %s is not an object", r.body)
			}
			for _, path := range allFive {
				got, found := lookup(um, path)
				want, wanted := tt.want[path]
				switch {
				case wanted && (!found || got != want):
					t.Errorf("%s = %v (found %v), want %v", path, got, found, want)
				case !wanted && found:
					t.Errorf("%s present in %s, want absent", path, r.body)
				}
			}
			if tt.usage.Mode == providertest.UsagePartial && len(um) != 2 {
				t.Errorf("partial usage %v has extra keys", um)
			}
		})
	}
}

// lookup follows a dotted path through nested objects.
func lookup(m map[string]any, path string) (any, bool) {
	var cur any = m
	for _, k := range strings.Split(path, ".") {
		obj, ok := cur.(map[string]any)
		if !ok {
			return nil, false
		}
		if cur, ok = obj[k]; !ok {
			return nil, false
		}
	}
	return cur, true
}

func TestRetryAfterHeaders(t *testing.T) {
	s := newServer(t)
	when := time.Date(2030, 1, 2, 3, 4, 5, 0, time.FixedZone("X", 3600))
	s.Enqueue(
		providertest.Status(429).WithRetryAfter("2"),
		providertest.Status(503).WithRetryAfter(providertest.RetryAfterDate(when)),
	)
	url := s.URL + "/chat/completions"

	r := post(t, url, chatBody)
	if r.status != 429 || r.header.Get("Retry-After") != "2" {
		t.Errorf("got %d Retry-After %q, want 429 and 2", r.status, r.header.Get("Retry-After"))
	}
	e, _ := r.decode(t)["error"].(map[string]any)
	if e["type"] != "rate_limit_error" || e["code"] != "rate_limit_exceeded" {
		t.Errorf("429 body %s", r.body)
	}

	r = post(t, url, chatBody)
	got, err := http.ParseTime(r.header.Get("Retry-After"))
	if r.status != 503 || err != nil || !got.Equal(when) {
		t.Errorf("got %d Retry-After %q (%v), want 503 and %v", r.status, r.header.Get("Retry-After"), err, when)
	}
	if want := "Wed, 02 Jan 2030 02:04:05 GMT"; providertest.RetryAfterDate(when) != want {
		t.Errorf("RetryAfterDate = %q, want %q", providertest.RetryAfterDate(when), want)
	}
}

func TestWithRetryAfterDoesNotShareHeader(t *testing.T) {
	base := providertest.Status(503).WithRetryAfter("1")
	other := base.WithRetryAfter("9")
	if base.Header.Get("Retry-After") != "1" || other.Header.Get("Retry-After") != "9" {
		t.Errorf("WithRetryAfter mutated its receiver: %v %v", base.Header, other.Header)
	}
}

func TestMalformedAndMissingChoices(t *testing.T) {
	s := newServer(t)
	s.Enqueue(providertest.Malformed(), providertest.MissingChoices())
	url := s.URL + "/chat/completions"

	r := post(t, url, chatBody)
	if r.status != 200 || json.Valid(r.body) {
		t.Errorf("Malformed: got %d %s, want 200 and invalid JSON", r.status, r.body)
	}

	r = post(t, url, chatBody)
	m := r.decode(t)
	if r.status != 200 {
		t.Errorf("MissingChoices status %d", r.status)
	}
	if _, ok := m["choices"]; ok {
		t.Errorf("MissingChoices body has choices: %s", r.body)
	}
	if m["object"] != "chat.completion" || m["id"] == nil {
		t.Errorf("MissingChoices envelope incomplete: %s", r.body)
	}
	u, _ := m["usage"].(map[string]any)
	if _, ok := lookup(u, "completion_tokens_details.reasoning_tokens"); !ok {
		t.Errorf("MissingChoices usage not full: %s", r.body)
	}
}

func TestRateLimit(t *testing.T) {
	clock := newClock()
	s := newServer(t, providertest.WithRateLimit(3), providertest.WithClock(clock.Now))
	s.Enqueue(providertest.Reply("scripted"))
	url := s.URL + "/chat/completions"

	for i := range 3 {
		if r := post(t, url, chatBody); r.status != 200 {
			t.Fatalf("request %d: status %d, want 200", i+1, r.status)
		}
	}
	r := post(t, url, chatBody)
	if r.status != 429 || r.header.Get("Retry-After") != "1" {
		t.Fatalf("request 4: %d Retry-After %q, want 429 and 1", r.status, r.header.Get("Retry-After"))
	}
	const wantBody = `{"error":{"message":"rate limit exceeded","type":"rate_limit_error","param":null,"code":"rate_limit_exceeded"}}`
	if string(r.body) != wantBody {
		t.Errorf("429 body %s, want %s", r.body, wantBody)
	}
	// The Date header follows the injected clock, so clients can resolve
	// Retry-After dates against it.
	if d, err := http.ParseTime(r.header.Get("Date")); err != nil || !d.Equal(clock.Now()) {
		t.Errorf("Date header %q, want %v", r.header.Get("Date"), clock.Now())
	}

	clock.Advance(999 * time.Millisecond)
	if r := post(t, url, chatBody); r.status != 429 || r.header.Get("Retry-After") != "1" {
		t.Fatalf("within window: %d Retry-After %q, want 429 and 1", r.status, r.header.Get("Retry-After"))
	}
	clock.Advance(time.Millisecond)
	r = post(t, url, chatBody)
	if r.status != 200 {
		t.Fatalf("after window: status %d, want 200", r.status)
	}
	// The rate limiter did not consume the scripted reply: the first
	// request got it, the rest defaults.
	st := s.Stats()
	if st.RateLimited != 2 || st.Scripted != 1 || st.Defaults != 3 || st.Requests != 6 {
		t.Errorf("Stats = %+v", st)
	}
}

func TestRateLimitRetryAfterOverride(t *testing.T) {
	clock := newClock()
	s := newServer(t, providertest.WithRateLimit(1), providertest.WithClock(clock.Now), providertest.WithRetryAfter("7"))
	url := s.URL + "/chat/completions"
	post(t, url, chatBody)
	if r := post(t, url, chatBody); r.status != 429 || r.header.Get("Retry-After") != "7" {
		t.Errorf("got %d Retry-After %q, want 429 and 7", r.status, r.header.Get("Retry-After"))
	}
}

// serveNotifying serves h and reports each ServeHTTP return on done, so a
// test can see the handler finish without sleeping.
func serveNotifying(t *testing.T, h http.Handler) (url string, done <-chan struct{}) {
	t.Helper()
	ch := make(chan struct{}, 16)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.ServeHTTP(w, r)
		ch <- struct{}{}
	}))
	t.Cleanup(srv.Close)
	return srv.URL + "/v1/chat/completions", ch
}

func TestWaitsAreCancellable(t *testing.T) {
	tests := []struct {
		name   string
		opts   []providertest.Option
		script []providertest.Response
		body   string // defaults to chatBody
	}{
		{name: "latency default", opts: []providertest.Option{providertest.WithLatency(time.Hour)}},
		{name: "latency scripted", opts: []providertest.Option{providertest.WithLatency(time.Hour)}, script: []providertest.Response{providertest.Reply("x")}},
		{name: "delay", script: []providertest.Response{{Text: "x", Delay: time.Hour}}},
		{name: "hold", script: []providertest.Response{{Text: "x", Hold: make(chan struct{})}}},
		{name: "hold stream", script: []providertest.Response{{Text: "x", Hold: make(chan struct{})}}, body: streamBody},
		{name: "latency default stream", opts: []providertest.Option{providertest.WithLatency(time.Hour)}, body: streamBody},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := providertest.NewHandler(tt.opts...)
			h.Enqueue(tt.script...)
			url, done := serveNotifying(t, h)

			ctx, cancel := context.WithCancel(context.Background())
			errc := make(chan error, 1)
			body := tt.body
			if body == "" {
				body = chatBody
			}
			go func() {
				_, err := do(ctx, http.MethodPost, url, body)
				errc <- err
			}()
			if err := h.WaitArrivals(context.Background(), 1); err != nil {
				t.Fatal(err)
			}
			cancel()
			if err := <-errc; err == nil {
				t.Fatal("request succeeded after cancellation; want an error")
			}
			<-done // the handler itself returned, not just the client
			if st := h.Stats(); st.Canceled != 1 || h.InFlight() != 0 {
				t.Errorf("Stats %+v InFlight %d, want 1 canceled and none in flight", st, h.InFlight())
			}
		})
	}
}

func TestHoldKeepsRequestsInFlight(t *testing.T) {
	s := newServer(t)
	hold := make(chan struct{})
	for range 3 {
		s.Enqueue(providertest.Response{Text: "held", Hold: hold})
	}
	s.Enqueue(providertest.Reply("free"))

	var wg sync.WaitGroup
	results := make(chan string, 3)
	for range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r, err := do(context.Background(), http.MethodPost, s.URL+"/chat/completions", chatBody)
			if err != nil {
				results <- err.Error()
				return
			}
			c, err := contentOf(r.body)
			if err != nil {
				c = err.Error()
			}
			results <- c
		}()
	}
	if err := s.WaitArrivals(context.Background(), 3); err != nil {
		t.Fatal(err)
	}
	// The three arrivals have taken the three held replies: replies are
	// handed out in the order arrivals are counted, so the next request
	// gets "free" however the handlers are scheduled.
	if p := s.Pending(); p != 1 {
		t.Fatalf("Pending = %d after 3 arrivals, want 1", p)
	}
	if s.InFlight() != 3 || s.MaxInFlight() != 3 {
		t.Fatalf("InFlight %d MaxInFlight %d, want 3 and 3", s.InFlight(), s.MaxInFlight())
	}
	// An unheld request passes the held ones.
	if got := post(t, s.URL+"/chat/completions", chatBody).content(t); got != "free" {
		t.Errorf("unheld reply %q, want free", got)
	}
	if s.MaxInFlight() != 4 {
		t.Errorf("MaxInFlight %d, want 4", s.MaxInFlight())
	}
	close(hold)
	wg.Wait()
	close(results)
	for got := range results {
		if got != "held" {
			t.Errorf("held reply %q", got)
		}
	}
	// Bookkeeping finishes before the reply is written.
	if s.InFlight() != 0 || s.MaxInFlight() != 4 {
		t.Errorf("after release: InFlight %d MaxInFlight %d, want 0 and 4", s.InFlight(), s.MaxInFlight())
	}
}

func TestWaitArrivalsHonoursContext(t *testing.T) {
	h := providertest.NewHandler()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := h.WaitArrivals(ctx, 1); err != context.Canceled {
		t.Errorf("WaitArrivals = %v, want context.Canceled", err)
	}
	if err := h.WaitArrivals(ctx, 0); err != nil {
		t.Errorf("WaitArrivals(0) = %v, want nil", err)
	}
}

func TestCloseReleasesHeldRequests(t *testing.T) {
	s := providertest.NewServer()
	s.Enqueue(providertest.Response{Hold: make(chan struct{})})
	errc := make(chan error, 1)
	go func() {
		r, err := do(context.Background(), http.MethodPost, s.URL+"/chat/completions", chatBody)
		if err == nil && r.status != http.StatusServiceUnavailable {
			t.Errorf("released request got %d, want 503", r.status)
		}
		errc <- err
	}()
	if err := s.WaitArrivals(context.Background(), 1); err != nil {
		t.Fatal(err)
	}
	s.Close() // must not block on the never-closed Hold
	<-errc
}

func TestDefaultResponder(t *testing.T) {
	s := newServer(t)
	url := s.URL + "/chat/completions"

	long := `{"model":"m1","messages":[{"role":"user","content":"one two three four five six seven eight nine ten eleven twelve thirteen"},{"role":"assistant","content":"ignored"}]}`
	r := post(t, url, long)
	m := r.decode(t)
	if got, want := r.content(t), "Fake provider reply: one two three four five six seven eight nine ten eleven twelve ..."; got != want {
		t.Errorf("content %q, want %q", got, want)
	}
	if m["id"] != "chatcmpl-1" || m["object"] != "chat.completion" || m["model"] != "m1" {
		t.Errorf("envelope %s", r.body)
	}
	if _, ok := m["created"].(float64); !ok {
		t.Errorf("created missing: %s", r.body)
	}
	ch := m["choices"].([]any)[0].(map[string]any)
	if ch["finish_reason"] != "stop" || ch["index"] != 0.0 || ch["message"].(map[string]any)["role"] != "assistant" {
		t.Errorf("choice %v", ch)
	}
	u := m["usage"].(map[string]any)
	// 13 + 1 prompt words; the reply has 16 words.
	if u["prompt_tokens"] != 14.0 || u["completion_tokens"] != 16.0 || u["total_tokens"] != 30.0 {
		t.Errorf("usage %v", u)
	}

	// Content parts are flattened; json_object asks for a JSON reply.
	r = post(t, url, `{"model":"m","response_format":{"type":"json_object"},"messages":[{"role":"user","content":[{"type":"text","text":"hi"},{"type":"text","text":"you"}]}]}`)
	var obj map[string]string
	if err := json.Unmarshal([]byte(r.content(t)), &obj); err != nil || obj["reply"] != "Fake provider reply: hi you" {
		t.Errorf("json_object content %q (%v)", r.content(t), err)
	}

	r = post(t, url, `{"model":"m","response_format":{"type":"json_schema","json_schema":{"name":"x","strict":true,"schema":{"type":"object","properties":{"n":{"type":"integer","minimum":5}},"required":["n"],"additionalProperties":false}}},"messages":[{"role":"user","content":"hi"}]}`)
	if got := r.content(t); got != `{"n":5}` {
		t.Errorf("json_schema content %q, want {\"n\":5}", got)
	}
}

func TestWithModel(t *testing.T) {
	s := newServer(t, providertest.WithModel("fixed"))
	s.Enqueue(providertest.Reply("x"))
	for range 2 {
		if m := post(t, s.URL+"/chat/completions", chatBody).decode(t); m["model"] != "fixed" {
			t.Errorf("model %v, want fixed", m["model"])
		}
	}
}

func TestErrorPaths(t *testing.T) {
	s := newServer(t)
	base := strings.TrimSuffix(s.URL, "/v1")
	tests := []struct {
		name, method, url, body string
		status                  int
		typ                     string
	}{
		{"unknown path", http.MethodPost, s.URL + "/audio/speech", chatBody, 404, "invalid_request_error"},
		{"wrong method", http.MethodGet, s.URL + "/chat/completions", "", 405, "invalid_request_error"},
		{"not json", http.MethodPost, s.URL + "/chat/completions", "{", 400, "invalid_request_error"},
		{"no model", http.MethodPost, s.URL + "/chat/completions", `{"messages":[{"role":"user","content":"x"}]}`, 400, "invalid_request_error"},
		{"no messages", http.MethodPost, s.URL + "/chat/completions", `{"model":"m"}`, 400, "invalid_request_error"},
		{"empty messages", http.MethodPost, s.URL + "/chat/completions", `{"model":"m","messages":[]}`, 400, "invalid_request_error"},
		{"base without v1", http.MethodPost, base + "/chat/completions", chatBody, 200, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := do(context.Background(), tt.method, tt.url, tt.body)
			if err != nil {
				t.Fatal(err)
			}
			if r.status != tt.status {
				t.Fatalf("status %d, want %d (%s)", r.status, tt.status, r.body)
			}
			if r.header.Get("Content-Type") != "application/json" {
				t.Errorf("Content-Type %q", r.header.Get("Content-Type"))
			}
			if tt.typ == "" {
				return
			}
			e, _ := r.decode(t)["error"].(map[string]any)
			if e["type"] != tt.typ || e["message"] == "" {
				t.Errorf("error body %s, want type %s", r.body, tt.typ)
			}
		})
	}
	if st := s.Stats(); st.Rejected != 6 || st.Defaults != 1 || st.Requests != 7 {
		t.Errorf("Stats %+v", st)
	}
}

func TestScriptedRepliesIgnoreBody(t *testing.T) {
	s := newServer(t)
	s.Enqueue(providertest.Reply("ok"))
	if got := post(t, s.URL+"/chat/completions", "not json").content(t); got != "ok" {
		t.Errorf("content %q, want ok", got)
	}
}

func TestRequestsRecorded(t *testing.T) {
	s := newServer(t)
	body := `{"model":"gpt-test","response_format":{"type":"json_object"},"messages":[{"role":"user","content":"hi"}]}`
	req, _ := http.NewRequest(http.MethodPost, s.URL+"/chat/completions", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer k")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()

	got := s.Requests()
	if len(got) != 1 {
		t.Fatalf("%d requests recorded", len(got))
	}
	r := got[0]
	if r.Method != "POST" || r.Path != "/v1/chat/completions" || r.Model != "gpt-test" ||
		r.Header.Get("Authorization") != "Bearer k" || !bytes.Equal(r.Body, []byte(body)) ||
		string(r.ResponseFormat) != `{"type":"json_object"}` ||
		!reflect.DeepEqual(r.Messages, []providertest.Message{{Role: "user", Content: "hi"}}) {
		t.Errorf("recorded %+v", r)
	}
	// Requests returns copies.
	r.Body[0] = 'X'
	r.Messages[0].Content = "changed"
	r.Header.Set("Authorization", "changed")
	again := s.Requests()[0]
	if again.Body[0] != '{' || again.Messages[0].Content != "hi" || again.Header.Get("Authorization") != "Bearer k" {
		t.Error("mutating a returned Request changed the recorded one")
	}
}

func TestMaxRecorded(t *testing.T) {
	s := newServer(t, providertest.WithMaxRecorded(2))
	for _, m := range []string{"a", "b", "c"} {
		post(t, s.URL+"/chat/completions", `{"model":"`+m+`","messages":[{"role":"user","content":"x"}]}`)
	}
	got := s.Requests()
	if len(got) != 2 || got[0].Model != "b" || got[1].Model != "c" || s.Count() != 3 {
		t.Errorf("recorded %d (count %d), want the last two of three", len(got), s.Count())
	}
}

func TestZeroHandler(t *testing.T) {
	srv := httptest.NewServer(&providertest.Handler{})
	defer srv.Close()
	if got := post(t, srv.URL+"/v1/chat/completions", chatBody).content(t); !strings.HasPrefix(got, "Fake provider reply:") {
		t.Errorf("content %q", got)
	}
}

func TestReplyPrefix(t *testing.T) {
	srv := httptest.NewServer(providertest.NewHandler(providertest.WithReplyPrefix("Local stand-in: ")))
	defer srv.Close()
	r := post(t, srv.URL+"/v1/chat/completions", chatBody)
	if got := r.content(t); got != "Local stand-in: hello there world" {
		t.Errorf("content %q", got)
	}
	// Usage counts the prefix's words like the rest of the reply.
	if u := r.decode(t)["usage"].(map[string]any); u["completion_tokens"] != 5.0 {
		t.Errorf("usage %v", u)
	}
}

func TestRawBodyAndHeaders(t *testing.T) {
	s := newServer(t)
	s.Enqueue(
		providertest.Response{Status: 201, Body: []byte("raw"), Header: http.Header{"Content-Type": {"text/plain"}, "X-Test": {"1"}}},
		providertest.Response{Status: 502, Body: []byte{}},
	)
	r := post(t, s.URL+"/chat/completions", chatBody)
	if r.status != 201 || string(r.body) != "raw" || r.header.Get("Content-Type") != "text/plain" || r.header.Get("X-Test") != "1" {
		t.Errorf("got %d %q %v", r.status, r.body, r.header)
	}
	r = post(t, s.URL+"/chat/completions", chatBody)
	if r.status != 502 || len(r.body) != 0 {
		t.Errorf("got %d %q, want 502 with empty body", r.status, r.body)
	}
}
