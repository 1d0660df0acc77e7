package server

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/promptkit/promptkit/internal/openaiapi"
	"github.com/promptkit/promptkit/jobs"
	"github.com/promptkit/promptkit/pktype"
)

// asyncResp is an answer received in another goroutine.
type asyncResp struct {
	res  *http.Response
	body []byte
	err  error
}

// request builds a request the way call does.
func (e *env) request(ctx context.Context, method, path, token, body string, headers ...string) (*http.Request, string) {
	e.t.Helper()
	req, err := http.NewRequestWithContext(ctx, method, e.srv.URL()+path, strings.NewReader(body))
	if err != nil {
		e.t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	_, pattern := e.srv.mux.Handler(req)
	return req, pattern
}

// callAsync makes a request in a goroutine (which must not fail the
// test); wait collects and checks its answer. A deadlock guard ends it
// after a minute.
func (e *env) callAsync(method, path, token, body string, headers ...string) func() resp {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	req, pattern := e.request(ctx, method, path, token, body, headers...)
	done := make(chan asyncResp, 1)
	go func() {
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			done <- asyncResp{err: err}
			return
		}
		defer res.Body.Close()
		b, err := io.ReadAll(res.Body)
		done <- asyncResp{res: res, body: b, err: err}
	}()
	return func() resp {
		e.t.Helper()
		defer cancel()
		a := <-done
		if a.err != nil {
			e.t.Fatal(a.err)
		}
		checkResponse(e.t, pattern, a.res.StatusCode, a.res.Header, a.body)
		return resp{code: a.res.StatusCode, header: a.res.Header, body: a.body}
	}
}

// claimNext waits until a job is queued and claims it, as a worker would.
func (e *env) claimNext() jobs.Job {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	note := e.st.Notifier().Notify(ctx)
	for {
		js, err := e.st.Claim(ctx, jobs.ClaimParams{Worker: "test-worker"})
		if err != nil {
			e.t.Fatal(err)
		}
		if len(js) == 1 {
			return js[0]
		}
		select {
		case <-note:
		case <-ctx.Done():
			e.t.Fatal("no job was queued")
		}
	}
}

func (e *env) succeed(j jobs.Job, p jobs.SucceedParams) {
	e.t.Helper()
	p.JobID, p.Worker = j.ID, "test-worker"
	if _, err := e.st.Succeed(context.Background(), p); err != nil {
		e.t.Fatal(err)
	}
}

func (e *env) fail(j jobs.Job, kind jobs.ErrorKind, msg string) {
	e.t.Helper()
	if _, err := e.st.Fail(context.Background(), jobs.FailParams{JobID: j.ID, Worker: "test-worker", Kind: kind, Message: msg}); err != nil {
		e.t.Fatal(err)
	}
}

// oaErr decodes an OpenAI error answer.
func (r resp) oaErr(t testing.TB) openaiapi.Error {
	t.Helper()
	var b openaiapi.ErrorBody
	r.decode(t, &b)
	return b.Error
}

func deref(s *string) string {
	if s == nil {
		return "<null>"
	}
	return *s
}

func usage(prompt, completion, total int) pktype.Usage {
	return pktype.Usage{
		TokenUsage: pktype.TokenUsage{PromptTokens: prompt, CompletionTokens: completion, TotalTokens: total},
		Known:      pktype.TokenUsagePresence{PromptTokens: true, CompletionTokens: true, TotalTokens: true},
	}
}

const chatBody = `{"model":"default","messages":[{"role":"system","content":"Be brief."},{"role":"user","content":"Say hi"}],"max_tokens":20,"temperature":0.2}`

func TestChatCompletion(t *testing.T) {
	t.Parallel()
	e := setup(t)
	wait := e.callAsync("POST", "/v1/chat/completions", "sk-anything", chatBody,
		"Idempotency-Key", "k-1", "X-Promptkit-Priority", "10", "X-Promptkit-Max-Attempts", "2")
	j := e.claimNext()
	p, err := e.st.GetPrompt(context.Background(), "", j.PromptID)
	if err != nil {
		t.Fatal(err)
	}
	if j.Priority != 10 || j.MaxAttempts != 2 || p.Profile != "default" || p.Chat == nil || len(p.Chat.Messages) != 2 ||
		p.Chat.Messages[1].Content != "Say hi" || *p.Chat.MaxTokens != 20 || p.OrgID != LocalOrg || p.CreatedBy != LocalUser {
		t.Fatalf("stored job %+v prompt %+v", j, p)
	}
	e.succeed(j, jobs.SucceedParams{Answer: jobs.Answer{Output: "Hi!", Model: "promptkit-simulated", FinishReason: "stop", Usage: usage(12, 3, 15)}})
	r := wait()
	var c openaiapi.ChatCompletion
	r.decode(t, &c)
	if r.code != 200 || c.ID != "chatcmpl-"+j.ID || c.Object != "chat.completion" || c.Model != "promptkit-simulated" ||
		len(c.Choices) != 1 || deref(c.Choices[0].Message.Content) != "Hi!" || c.Choices[0].Message.Role != "assistant" ||
		c.Choices[0].FinishReason != "stop" || c.Usage == nil || !reflect.DeepEqual(*c.Usage, openaiapi.Usage{PromptTokens: 12, CompletionTokens: 3, TotalTokens: 15}) {
		t.Fatalf("completion: %d %s", r.code, r.body)
	}
	if r.header.Get(headerPromptID) != j.PromptID || r.header.Get(headerJobID) != j.ID {
		t.Errorf("id headers: %v", r.header)
	}

	// A repeat with the same key answers the same completion, storing
	// nothing; the same key with another request is a conflict.
	again := e.call("POST", "/v1/chat/completions", "", chatBody, "Idempotency-Key", "k-1")
	var c2 openaiapi.ChatCompletion
	again.decode(t, &c2)
	if again.code != 200 || c2.ID != c.ID || again.header.Get(headerJobID) != j.ID {
		t.Errorf("repeat: %d %s", again.code, again.body)
	}
	// A streamed repeat finds the same job too.
	stream := e.call("POST", "/v1/chat/completions", "", strings.Replace(chatBody, `{"model"`, `{"stream":true,"model"`, 1), "Idempotency-Key", "k-1")
	if stream.code != 200 || !strings.Contains(string(stream.body), `"id":"`+c.ID+`"`) {
		t.Errorf("streamed repeat: %d %s", stream.code, stream.body)
	}
	conflict := e.call("POST", "/v1/chat/completions", "", strings.Replace(chatBody, "Say hi", "Say bye", 1), "Idempotency-Key", "k-1")
	if conflict.code != 422 || deref(conflict.oaErr(t).Code) != "idempotency_conflict" {
		t.Errorf("conflict: %d %s", conflict.code, conflict.body)
	}
	page, err := e.st.ListJobs(context.Background(), jobs.ListParams{})
	if err != nil || len(page.Jobs) != 1 {
		t.Errorf("jobs stored: %d %v", len(page.Jobs), err)
	}
	// The prompt is also an ordinary prompt.
	var v promptView
	e.call("GET", "/v1/prompts/"+j.PromptID, "", nil).decode(t, &v)
	if v.Answer == nil || v.Answer.Output != "Hi!" {
		t.Errorf("prompt view %+v", v)
	}
}

func TestChatCompletionWithoutUsage(t *testing.T) {
	t.Parallel()
	e := setup(t)
	wait := e.callAsync("POST", "/v1/chat/completions", "", chatBody)
	j := e.claimNext()
	// The provider reported only the prompt count: no usage at all,
	// rather than invented numbers; no finish_reason: "stop".
	u := pktype.Usage{TokenUsage: pktype.TokenUsage{PromptTokens: 4}, Known: pktype.TokenUsagePresence{PromptTokens: true}}
	e.succeed(j, jobs.SucceedParams{Answer: jobs.Answer{Output: "Hi", Model: "m", Usage: u}})
	r := wait()
	var raw map[string]json.RawMessage
	r.decode(t, &raw)
	if r.code != 200 || raw["usage"] != nil || !strings.Contains(string(raw["choices"]), `"finish_reason":"stop"`) {
		t.Fatalf("completion: %d %s", r.code, r.body)
	}
}

// TestChatCompletionJSONSchema runs a structured-output request through a
// real worker and the simulated backend: the answer is valid JSON for the
// schema.
func TestChatCompletionJSONSchema(t *testing.T) {
	t.Parallel()
	e := setup(t)
	e.runWorker()
	body := `{"model":"promptkit-simulated","messages":[{"role":"user","content":"A number, please."}],
		"response_format":{"type":"json_schema","json_schema":{"name":"answer","strict":true,
			"schema":{"type":"object","properties":{"n":{"type":"integer","minimum":3}},"required":["n"],"additionalProperties":false}}}}`
	r := e.call("POST", "/v1/chat/completions", "", body)
	var c openaiapi.ChatCompletion
	r.decode(t, &c)
	if r.code != 200 || len(c.Choices) != 1 {
		t.Fatalf("completion: %d %s", r.code, r.body)
	}
	var out struct {
		N *int `json:"n"`
	}
	if err := json.Unmarshal([]byte(deref(c.Choices[0].Message.Content)), &out); err != nil || out.N == nil || *out.N < 3 {
		t.Fatalf("content %q is not valid for the schema: %v", deref(c.Choices[0].Message.Content), err)
	}
	// The model named a backend's model: it ran with the profile using it.
	p, err := e.st.GetPrompt(context.Background(), "", r.header.Get(headerPromptID))
	if err != nil || p.Profile != "default" || p.Chat.ResponseFormat != jobs.FormatJSONSchema || p.Chat.SchemaName != "answer" {
		t.Fatalf("prompt %+v %v", p, err)
	}
}

// sseLines reads a streamed answer's lines as they come.
type sseLines struct {
	t   *testing.T
	res *http.Response
	sc  *bufio.Scanner
	raw bytes.Buffer
}

// openChatStream posts a streaming request and returns once the response
// headers have arrived.
func (e *env) openChatStream(body string, headers ...string) *sseLines {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	e.t.Cleanup(cancel)
	req, _ := e.request(ctx, "POST", "/v1/chat/completions", "", body, headers...)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { res.Body.Close() })
	checkResponse(e.t, "POST /v1/chat/completions", res.StatusCode, res.Header, nil)
	s := &sseLines{t: e.t, res: res}
	s.sc = bufio.NewScanner(io.TeeReader(res.Body, &s.raw))
	return s
}

// next returns the next line; ok is false at the end of the body.
func (s *sseLines) next() (string, bool) {
	if !s.sc.Scan() {
		return "", false
	}
	return s.sc.Text(), true
}

// rest returns the data of every remaining event.
func (s *sseLines) rest() []string {
	var data []string
	for {
		line, ok := s.next()
		if !ok {
			return data
		}
		if d, ok := strings.CutPrefix(line, "data: "); ok {
			data = append(data, d)
		}
	}
}

func TestChatCompletionStream(t *testing.T) {
	t.Parallel()
	e := setup(t, func(c *Config) { c.KeepAlive = 5 * time.Millisecond })
	body := strings.Replace(chatBody, `{"model"`, `{"stream":true,"stream_options":{"include_usage":true},"model"`, 1)
	s := e.openChatStream(body)
	// The headers came before the job was even claimed.
	if s.res.StatusCode != 200 || s.res.Header.Get("Content-Type") != "text/event-stream" || s.res.Header.Get(headerPromptID) == "" {
		t.Fatalf("headers: %d %v", s.res.StatusCode, s.res.Header)
	}
	j := e.claimNext()
	if s.res.Header.Get(headerJobID) != j.ID {
		t.Fatalf("job header %q, claimed %s", s.res.Header.Get(headerJobID), j.ID)
	}
	// Keep-alive comments flow while the job runs.
	for {
		line, ok := s.next()
		if !ok {
			t.Fatal("the stream ended early")
		}
		if line == ": keep-alive" {
			break
		}
	}
	e.succeed(j, jobs.SucceedParams{Answer: jobs.Answer{Output: "Hello there", Model: "m", FinishReason: "length", Usage: usage(5, 2, 7)}})
	data := s.rest()
	if len(data) != 5 || data[4] != "[DONE]" {
		t.Fatalf("events: %q", data)
	}
	var chunks []openaiapi.ChatCompletionChunk
	for _, d := range data[:4] {
		if err := oasValidate(t, "/components/schemas/ChatCompletionChunk", []byte(d)); err != nil {
			t.Error(err)
		}
		var c struct {
			openaiapi.ChatCompletionChunk
			Usage *openaiapi.Usage `json:"usage"`
		}
		if err := json.Unmarshal([]byte(d), &c); err != nil {
			t.Fatal(err)
		}
		c.ChatCompletionChunk.Usage = c.Usage
		chunks = append(chunks, c.ChatCompletionChunk)
	}
	for _, c := range chunks {
		if c.ID != "chatcmpl-"+j.ID || c.Object != "chat.completion.chunk" || c.Model != "m" {
			t.Errorf("chunk %+v", c)
		}
	}
	if chunks[0].Choices[0].Delta.Role != "assistant" || *chunks[1].Choices[0].Delta.Content != "Hello there" ||
		*chunks[2].Choices[0].FinishReason != "length" || len(chunks[3].Choices) != 0 ||
		chunks[3].Usage == nil || !reflect.DeepEqual(*chunks[3].Usage, openaiapi.Usage{PromptTokens: 5, CompletionTokens: 2, TotalTokens: 7}) {
		t.Errorf("chunks: %q", data)
	}
}

func TestChatCompletionStreamError(t *testing.T) {
	t.Parallel()
	e := setup(t)
	s := e.openChatStream(strings.Replace(chatBody, `{"model"`, `{"stream":true,"model"`, 1))
	j := e.claimNext()
	e.fail(j, jobs.KindProvider5xx, "HTTP 503 from the provider")
	data := s.rest()
	if len(data) != 1 {
		t.Fatalf("events: %q", data)
	}
	if err := oasValidate(t, "/components/schemas/OpenAIError", []byte(data[0])); err != nil {
		t.Error(err)
	}
	var b openaiapi.ErrorBody
	if err := json.Unmarshal([]byte(data[0]), &b); err != nil || b.Error.Type != openaiapi.TypeServer || deref(b.Error.Code) != "provider_5xx" {
		t.Errorf("error event %s", data[0])
	}
}

// TestChatCompletionRefusals: each parameter promptkit cannot honour is a
// 400 naming it, and nothing is stored.
func TestChatCompletionRefusals(t *testing.T) {
	t.Parallel()
	e := setup(t)
	msgs := `"messages":[{"role":"user","content":"hi"}]`
	for _, c := range []struct{ body, param string }{
		// Parameters promptkit does not model go to the backend
		// (TestChatCompletionPassThrough); these are ones it checks.
		{`"n":0`, "n"},
		{`"tools":[{"type":"web_search"}]`, "tools[0].type"},
		{`"tool_choice":"auto"`, "tool_choice"},
		{`"parallel_tool_calls":true`, "parallel_tool_calls"},
		{`"max_tokens":5,"max_completion_tokens":6`, "max_completion_tokens"},
		{`"temperature":2.5`, "temperature"},
		{`"stream_options":{"include_usage":true}`, "stream_options"},
	} {
		r := e.call("POST", "/v1/chat/completions", "", `{"model":"default",`+msgs+`,`+c.body+`}`)
		if er := r.oaErr(t); r.code != 400 || er.Type != "invalid_request_error" || deref(er.Param) != c.param {
			t.Errorf("%s: %d %s", c.body, r.code, r.body)
		}
	}
	for _, c := range []struct{ messages, param string }{
		{`[{"role":"user","content":[{"image_url":{"url":"https://x"}}]}]`, "messages[0].content[0].type"},
		{`[{"role":"function","content":"x","name":"f"}]`, "messages[0].role"},
		{`[{"role":"tool","content":"x","tool_call_id":"t"}]`, "messages[0].tool_call_id"},
	} {
		r := e.call("POST", "/v1/chat/completions", "", `{"model":"default","messages":`+c.messages+`}`)
		if er := r.oaErr(t); r.code != 400 || deref(er.Param) != c.param {
			t.Errorf("%s: %d %s", c.messages, r.code, r.body)
		}
	}
	for _, c := range []struct {
		body   string
		header []string
		code   int
		param  string
	}{
		{`{"model":"gpt-4o",` + msgs + `}`, nil, 404, "model"},
		{`{` + msgs + `}`, nil, 400, "model"},
		{`{"model":"default",` + msgs, nil, 400, "<null>"},
		{`{"model":"default",` + msgs + `}`, []string{headerPriority, "101"}, 400, headerPriority},
		{`{"model":"default",` + msgs + `}`, []string{headerPriority, "soon"}, 400, headerPriority},
		{`{"model":"default",` + msgs + `}`, []string{headerMaxAttempts, "0"}, 400, headerMaxAttempts},
		{`{"model":"default",` + msgs + `}`, []string{headerMaxAttempts, "26"}, 400, headerMaxAttempts},
		{`{"model":"default",` + msgs + `}`, []string{"Idempotency-Key", strings.Repeat("k", 256)}, 400, "Idempotency-Key"},
	} {
		r := e.call("POST", "/v1/chat/completions", "", c.body, c.header...)
		if er := r.oaErr(t); r.code != c.code || deref(er.Param) != c.param {
			t.Errorf("%s %v: %d %s", c.body, c.header, r.code, r.body)
		}
		if c.code == 404 && deref(r.oaErr(t).Code) != "model_not_found" {
			t.Errorf("unknown model: %s", r.body)
		}
	}
	page, err := e.st.ListJobs(context.Background(), jobs.ListParams{})
	if err != nil || len(page.Jobs) != 0 {
		t.Errorf("refused requests stored %d jobs (%v)", len(page.Jobs), err)
	}
}

// TestChatCompletionJobErrors: a job that failed answers with the status
// an SDK expects for its cause.
func TestChatCompletionJobErrors(t *testing.T) {
	t.Parallel()
	e := setup(t)
	for _, c := range []struct {
		kind   jobs.ErrorKind
		status int
		typ    string
	}{
		{jobs.KindRateLimit, 429, openaiapi.TypeRateLimit},
		{jobs.KindProvider5xx, 502, openaiapi.TypeServer},
		{jobs.KindProvider4xx, 400, openaiapi.TypeInvalidRequest},
		{jobs.KindTimeout, 504, openaiapi.TypeServer},
		{jobs.KindStuck, 500, openaiapi.TypeAPI},
	} {
		// A request of its own each: the same one would find the failed
		// job of the case before (repeat_test.go).
		wait := e.callAsync("POST", "/v1/chat/completions", "", strings.Replace(chatBody, "Say hi", "Say hi, "+string(c.kind), 1))
		j := e.claimNext()
		e.fail(j, c.kind, "HTTP error from the provider")
		r := wait()
		er := r.oaErr(t)
		if r.code != c.status || er.Type != c.typ || !strings.Contains(er.Message, "HTTP error from the provider") {
			t.Errorf("%s: %d %s", c.kind, r.code, r.body)
		}
		if c.kind == jobs.KindRateLimit && (r.header.Get("Retry-After") != "60" || deref(er.Code) != "rate_limit_exceeded") {
			t.Errorf("rate limit: %v %s", r.header, r.body)
		}
		if r.header.Get(headerPromptID) != j.PromptID {
			t.Errorf("%s: no prompt id header", c.kind)
		}
	}

	// A cancelled job is a conflict.
	wait := e.callAsync("POST", "/v1/chat/completions", "", chatBody)
	j := e.claimNext()
	if _, err := e.st.Cancel(context.Background(), jobs.CancelParams{JobID: j.ID}); err != nil {
		t.Fatal(err)
	}
	if r := wait(); r.code != 409 || deref(r.oaErr(t).Code) != "cancelled" {
		t.Errorf("cancelled: %d %s", r.code, r.body)
	}
}

// TestChatCompletionTimeoutAndRateLimit: past the chat timeout the answer
// is a 504 naming the prompt to fetch; past the submission rate a 429
// with Retry-After.
func TestChatCompletionTimeoutAndRateLimit(t *testing.T) {
	t.Parallel()
	e := setup(t, func(c *Config) {
		c.ChatTimeout = time.Nanosecond
		c.SubmitRate, c.SubmitBurst = 0.001, 1
	})
	r := e.call("POST", "/v1/chat/completions", "", chatBody)
	er := r.oaErr(t)
	id := r.header.Get(headerPromptID)
	if r.code != 504 || deref(er.Code) != "timeout" || id == "" || !strings.Contains(er.Message, "GET /v1/prompts/"+id) {
		t.Fatalf("timeout: %d %v %s", r.code, r.header, r.body)
	}
	r = e.call("POST", "/v1/chat/completions", "", chatBody)
	if r.code != 429 || r.header.Get("Retry-After") == "" || r.oaErr(t).Type != openaiapi.TypeRateLimit {
		t.Fatalf("rate limit: %d %v %s", r.code, r.header, r.body)
	}
}

func TestOpenAIModels(t *testing.T) {
	t.Parallel()
	e := setup(t)
	var l modelList
	r := e.call("GET", "/v1/models", "sk-my-real-openai-key", nil)
	r.decode(t, &l)
	if r.code != 200 || l.Object != "list" || len(l.Data) != 2 || l.Data[0].ID != "default" || l.Data[1].ID != "promptkit-simulated" {
		t.Fatalf("models: %d %s", r.code, r.body)
	}
	if r := e.call("GET", "/v1/models/promptkit-simulated", "", nil); r.code != 200 {
		t.Errorf("model: %d %s", r.code, r.body)
	}
	if r := e.call("GET", "/v1/models/gpt-4o", "", nil); r.code != 404 || deref(r.oaErr(t).Code) != "model_not_found" {
		t.Errorf("unknown model: %d %s", r.code, r.body)
	}
}

// TestOpenAIAuth: in local mode any bearer token is the local identity;
// once a token exists, a missing or unknown one is 401 in OpenAI's shape.
func TestOpenAIAuth(t *testing.T) {
	t.Parallel()
	local := setup(t)
	for _, tok := range []string{"", "sk-proj-abc", "pk_unknown"} {
		if r := local.call("GET", "/v1/models", tok, nil); r.code != 200 {
			t.Errorf("local mode, token %q: %d %s", tok, r.code, r.body)
		}
	}

	e := setup(t)
	tok := e.token("acme", "ann", jobs.RoleMember)
	for _, bad := range []string{"", "sk-proj-abc"} {
		for _, route := range [][2]string{{"GET", "/v1/models"}, {"POST", "/v1/chat/completions"}, {"GET", "/v1/files"}, {"GET", "/v1/batches"}} {
			r := e.call(route[0], route[1], bad, chatBody)
			if er := r.oaErr(t); r.code != 401 || deref(er.Code) != "invalid_api_key" || er.Type != "invalid_request_error" {
				t.Errorf("%v, token %q: %d %s", route, bad, r.code, r.body)
			}
		}
	}
	if r := e.call("GET", "/v1/models", tok, nil); r.code != 200 {
		t.Errorf("valid token: %d %s", r.code, r.body)
	}
	// The other routes keep their own answers.
	if r := e.call("GET", "/v1/prompts", "sk-proj-abc", nil); r.code != 401 || r.errorCode(t) != "unauthorized" {
		t.Errorf("/v1/prompts: %d %s", r.code, r.body)
	}
}

// TestChatTextNeverLogged: a chat request's text and its answer appear in
// no log line, through a completion, a repeat, a conflict and refusals.
func TestChatTextNeverLogged(t *testing.T) {
	t.Parallel()
	const marker = "MARKER-9c2e-do-not-log"
	e := setup(t)
	body := `{"model":"default","messages":[{"role":"user","content":"say ` + marker + `"}]}`
	wait := e.callAsync("POST", "/v1/chat/completions", "", body, "Idempotency-Key", marker)
	j := e.claimNext()
	e.succeed(j, jobs.SucceedParams{Answer: jobs.Answer{Output: "you said " + marker, Model: "m"}})
	if r := wait(); r.code != 200 || !strings.Contains(string(r.body), marker) {
		t.Fatalf("completion: %d %s", r.code, r.body)
	}
	e.call("POST", "/v1/chat/completions", "", body, "Idempotency-Key", marker)
	e.call("POST", "/v1/chat/completions", "", strings.Replace(body, "say", "tell", 1), "Idempotency-Key", marker)
	e.call("POST", "/v1/chat/completions", "", `{"model":"`+marker+`","messages":[{"role":"user","content":"`+marker+`"}]}`)
	e.call("POST", "/v1/chat/completions", "", `{"model":"default","messages":[{"role":"user","content":"`+marker+`"}],"n":"`+marker+`"}`)
	e.call("POST", "/v1/chat/completions", "", `{"model":"default","messages":[{"role":"user","content":"`+marker+`"}],"tools":[{"x":"`+marker+`"}]}`)
	logs := e.logs.String()
	if !strings.Contains(logs, j.PromptID) {
		t.Errorf("the logs lack the prompt id; they should carry ids:\n%s", logs)
	}
	if strings.Contains(logs, marker) {
		t.Errorf("the chat's text is in the logs:\n%s", logs)
	}
}

// TestOpenAISchemasFitTheGoTypes: the documented OpenAI shapes accept
// what the encoders write in states the API tests do not reach, and the
// request schema accepts what DecodeChat accepts.
func TestOpenAISchemasFitTheGoTypes(t *testing.T) {
	t.Parallel()
	at := func(d time.Duration) time.Time { return oasT0.Add(d) }
	failed := jobs.Batch{ID: "batch_1", InputFileID: "file-1", Endpoint: "/v1/chat/completions", CompletionWindow: "24h",
		Status: jobs.BatchFailed, CreatedAt: oasT0, ExpiresAt: at(24 * time.Hour), FailedAt: at(time.Second),
		Errors: []jobs.BatchError{{Code: "invalid_json_line", Message: "m", Line: 2}, {Code: "empty_file", Message: "m", Param: "body.model"}}}
	done := jobs.Batch{ID: "batch_2", InputFileID: "file-1", Endpoint: "/v1/chat/completions", CompletionWindow: "24h",
		Status: jobs.BatchCancelled, CreatedAt: oasT0, ExpiresAt: at(24 * time.Hour), InProgressAt: at(time.Second),
		FinalizingAt: at(2 * time.Second), CompletedAt: at(3 * time.Second), ExpiredAt: at(4 * time.Second),
		CancellingAt: at(5 * time.Second), CancelledAt: at(6 * time.Second), OutputFileID: "file-2", ErrorFileID: "file-3",
		Metadata: json.RawMessage(`{"k":"v"}`), Counts: jobs.BatchCounts{Total: 3, Completed: 1, Failed: 2}}
	noUsage := openaiapi.Completion(jobs.Job{ID: "j"}, jobs.Response{Answer: jobs.Answer{Output: "x"}, CreatedAt: oasT0})
	_, jobErr := openaiapi.JobError(jobs.Job{State: jobs.Failed, ErrorKind: jobs.KindProvider5xx})
	for _, c := range []struct {
		name, schema string
		v            any
	}{
		{"failed batch", "Batch", openaiapi.BatchObject(failed)},
		{"cancelled batch", "Batch", openaiapi.BatchObject(done)},
		{"batch list", "BatchList", openaiapi.NewList([]openaiapi.Batch{openaiapi.BatchObject(done)}, batchID, true)},
		{"output file", "File", openaiapi.FileObject(jobs.File{ID: "file-2", Purpose: jobs.PurposeBatchOutput, Filename: "batch_2_output.jsonl", CreatedAt: oasT0})},
		{"completion without usage", "ChatCompletion", noUsage},
		{"job error", "OpenAIError", jobErr},
		{"request", "ChatCompletionRequest", json.RawMessage(`{"model":"fast","messages":[{"role":"developer","content":"d"},
			{"role":"user","content":[{"type":"text","text":"a"}],"name":null},{"role":"assistant","content":"c","tool_calls":null}],
			"temperature":0.5,"top_p":1,"max_tokens":5,"max_completion_tokens":5,"stop":"x","seed":3,
			"response_format":{"type":"json_schema","json_schema":{"name":"n","strict":true,"schema":{"type":"object"}}},
			"stream":true,"stream_options":{"include_usage":true},"user":"u","metadata":{"a":"b"},"safety_identifier":"s",
			"prompt_cache_key":"k","n":1,"store":false,"logprobs":false,"top_logprobs":0,"presence_penalty":0,
			"frequency_penalty":0,"logit_bias":{},"modalities":["text"],"service_tier":"auto"}`)},
		{"batch request", "CreateBatchRequest", json.RawMessage(`{"input_file_id":"f","endpoint":"/v1/chat/completions","completion_window":"24h","metadata":null}`)},
	} {
		b, err := json.Marshal(c.v)
		if err != nil {
			t.Fatal(err)
		}
		if err := oasValidate(t, "/components/schemas/"+c.schema, b); err != nil {
			t.Errorf("%s: %v\n%s", c.name, err, b)
		}
	}
	// The request schema refuses what the decoder refuses.
	for _, body := range []string{
		`{"model":"m","messages":[{"role":"user","content":"x"}],"n":129}`,
		`{"model":"m","messages":[{"role":"user","content":"x"}],"tools":[]}`,
		`{"model":"m","messages":[{"role":"tool","content":"x"}]}`,
	} {
		if oasValidate(t, "/components/schemas/ChatCompletionRequest", []byte(body)) == nil {
			t.Errorf("ChatCompletionRequest accepts %s", body)
		}
		if _, err := openaiapi.DecodeChat([]byte(body)); err == nil {
			t.Errorf("DecodeChat accepts %s", body)
		}
	}
}

// TestOpenAIFallbackProfile: with a fallback profile (serve's simulated
// mode), a model that names nothing runs on it, so an unmodified SDK
// program works; without one (TestOpenAIModels) it is a 404.
func TestOpenAIFallbackProfile(t *testing.T) {
	t.Parallel()
	e := setup(t, func(c *Config) { c.FallbackProfile = "default" })
	wait := e.callAsync("POST", "/v1/chat/completions", "", strings.Replace(chatBody, `"model":"default"`, `"model":"gpt-4o-mini"`, 1))
	j := e.claimNext()
	p, err := e.st.GetPrompt(context.Background(), "", j.PromptID)
	if err != nil {
		t.Fatal(err)
	}
	if p.Profile != "default" {
		t.Fatalf("profile %q, want the fallback", p.Profile)
	}
	e.succeed(j, jobs.SucceedParams{Answer: jobs.Answer{Output: "Hi!", Model: "promptkit-simulated", FinishReason: "stop"}})
	if r := wait(); r.code != 200 {
		t.Fatalf("chat: %d %s", r.code, r.body)
	}
	if r := e.call("GET", "/v1/models/gpt-4o", "", nil); r.code != 200 {
		t.Errorf("model under a fallback: %d %s", r.code, r.body)
	}
	if r := e.call("POST", "/v1/chat/completions", "", strings.Replace(chatBody, `"model":"default"`, `"model":""`, 1)); r.code != 400 && r.code != 404 {
		t.Errorf("empty model: %d %s", r.code, r.body)
	}
}
