package openaiapi_test

import (
	"encoding/json"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/promptkit/promptkit"
	"github.com/promptkit/promptkit/internal/openaiapi"
	"github.com/promptkit/promptkit/internal/simulate"
	"github.com/promptkit/promptkit/jobs"
	"github.com/promptkit/promptkit/pktype"
)

var t0 = time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)

func known(prompt, completion, total *int) pktype.Usage {
	var u pktype.Usage
	if prompt != nil {
		u.PromptTokens, u.Known.PromptTokens = *prompt, true
	}
	if completion != nil {
		u.CompletionTokens, u.Known.CompletionTokens = *completion, true
	}
	if total != nil {
		u.TotalTokens, u.Known.TotalTokens = *total, true
	}
	return u
}

func TestCompletion(t *testing.T) {
	t.Parallel()
	j := jobs.Job{ID: "j1", State: jobs.Succeeded}
	r := jobs.Response{Answer: jobs.Answer{Output: "Hello", Model: "gpt-x", FinishReason: "length", Usage: known(new(12), new(3), new(15))},
		CreatedAt: t0}
	got := openaiapi.Completion(j, r)
	want := openaiapi.ChatCompletion{
		ID: "chatcmpl-j1", Object: "chat.completion", Created: t0.Unix(), Model: "gpt-x",
		Choices: []openaiapi.Choice{{Message: openaiapi.Message{Role: "assistant", Content: new("Hello")}, FinishReason: "length"}},
		Usage:   &openaiapi.Usage{PromptTokens: 12, CompletionTokens: 3, TotalTokens: 15},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %+v\nwant %+v", got, want)
	}
	b, _ := json.Marshal(got)
	if !strings.Contains(string(b), `"refusal":null`) || !strings.Contains(string(b), `"index":0`) {
		t.Errorf("encoding: %s", b)
	}

	// No finish_reason from the provider: "stop".
	r.FinishReason = ""
	if got := openaiapi.Completion(j, r); got.Choices[0].FinishReason != "stop" {
		t.Errorf("finish_reason %q", got.Choices[0].FinishReason)
	}
	// Usage only when the prompt and completion counts are known; a
	// missing total is their sum, never invented otherwise.
	for _, c := range []struct {
		u    pktype.Usage
		want *openaiapi.Usage
	}{
		{pktype.Usage{}, nil},
		{known(new(5), nil, new(9)), nil},
		{known(nil, new(5), nil), nil},
		{known(new(0), new(0), new(0)), &openaiapi.Usage{}},
		{known(new(5), new(4), nil), &openaiapi.Usage{PromptTokens: 5, CompletionTokens: 4, TotalTokens: 9}},
	} {
		r.Usage = c.u
		got := openaiapi.Completion(j, r)
		if !reflect.DeepEqual(got.Usage, c.want) {
			t.Errorf("usage %+v: got %+v, want %+v", c.u, got.Usage, c.want)
		}
		if b, _ := json.Marshal(got); c.want == nil && strings.Contains(string(b), "usage") {
			t.Errorf("unknown usage is encoded: %s", b)
		}
	}

	// A checked JSON answer parsed from text that is not JSON itself.
	r.Output, r.Parsed = "```json\n{\"a\": 1}\n```", json.RawMessage(`{"a":1}`)
	if got := openaiapi.Completion(j, r); *got.Choices[0].Message.Content != `{"a":1}` {
		t.Errorf("content %q", *got.Choices[0].Message.Content)
	}
	r.Output = `{"a": 1}`
	if got := openaiapi.Completion(j, r); *got.Choices[0].Message.Content != `{"a": 1}` {
		t.Errorf("content %q", *got.Choices[0].Message.Content)
	}
}

func TestChunks(t *testing.T) {
	t.Parallel()
	c := openaiapi.Completion(jobs.Job{ID: "j1"}, jobs.Response{
		Answer: jobs.Answer{Output: "Hi there", Model: "m", Usage: known(new(2), new(3), new(5))}, CreatedAt: t0})
	enc := func(chs []openaiapi.ChatCompletionChunk) []string {
		var out []string
		for _, ch := range chs {
			b, err := json.Marshal(ch)
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, string(b))
		}
		return out
	}
	head := `{"id":"chatcmpl-j1","object":"chat.completion.chunk","created":` + jsonInt(t0.Unix()) + `,"model":"m","choices":`
	want := []string{
		head + `[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}],"usage":null}`,
		head + `[{"index":0,"delta":{"content":"Hi there"},"finish_reason":null}],"usage":null}`,
		head + `[{"index":0,"delta":{},"finish_reason":"stop"}],"usage":null}`,
		head + `[],"usage":{"prompt_tokens":2,"completion_tokens":3,"total_tokens":5}}`,
	}
	if got := enc(openaiapi.Chunks(c, true)); !slices.Equal(got, want) {
		t.Errorf("with usage:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	// Without include_usage: no usage key at all, no usage chunk.
	got := enc(openaiapi.Chunks(c, false))
	if len(got) != 3 || strings.Contains(strings.Join(got, ""), "usage") {
		t.Errorf("without usage: %s", got)
	}
	// Unknown usage: the last chunk says null, never numbers.
	c.Usage = nil
	c.Choices[0].Message.Content = new("")
	got = enc(openaiapi.Chunks(c, true))
	if len(got) != 3 || got[2] != head+`[],"usage":null}` {
		t.Errorf("unknown usage, empty answer: %s", strings.Join(got, "\n"))
	}
}

func jsonInt(n int64) string { b, _ := json.Marshal(n); return string(b) }

func TestJobError(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		kind      jobs.ErrorKind
		state     jobs.State
		status    int
		typ, code string
	}{
		{jobs.KindRateLimit, jobs.Failed, 429, openaiapi.TypeRateLimit, "rate_limit_exceeded"},
		{jobs.KindBudgetExceeded, jobs.Failed, 429, openaiapi.TypeInsufficientQuota, "insufficient_quota"},
		{jobs.KindInvalidRequest, jobs.Failed, 400, openaiapi.TypeInvalidRequest, "invalid_request"},
		{jobs.KindProvider4xx, jobs.Failed, 400, openaiapi.TypeInvalidRequest, "provider_4xx"},
		{jobs.KindTimeout, jobs.Failed, 504, openaiapi.TypeServer, "timeout"},
		{jobs.KindProvider5xx, jobs.Failed, 502, openaiapi.TypeServer, "provider_5xx"},
		{jobs.KindTransport, jobs.Failed, 502, openaiapi.TypeServer, "transport"},
		{jobs.KindParse, jobs.Failed, 502, openaiapi.TypeServer, "parse"},
		{jobs.KindAuth, jobs.Failed, 502, openaiapi.TypeServer, "auth"},
		{jobs.KindStuck, jobs.Failed, 500, openaiapi.TypeAPI, "stuck"},
		{jobs.KindWorkerCrash, jobs.Failed, 500, openaiapi.TypeAPI, "worker_crash"},
		{jobs.KindUnknown, jobs.Failed, 500, openaiapi.TypeAPI, "unknown"},
		{jobs.KindNone, jobs.Failed, 500, openaiapi.TypeAPI, "unknown"},
		{jobs.KindNone, jobs.Cancelled, 409, openaiapi.TypeInvalidRequest, "cancelled"},
	} {
		status, body := openaiapi.JobError(jobs.Job{ID: "j", State: c.state, ErrorKind: c.kind, ErrorMessage: "HTTP 5xx from the provider"})
		if status != c.status || body.Error.Type != c.typ || body.Error.Code == nil || *body.Error.Code != c.code || body.Error.Param != nil {
			t.Errorf("%s %s: %d %+v", c.state, c.kind, status, body.Error)
		}
		if body.Error.Message == "" {
			t.Errorf("%s %s: no message", c.state, c.kind)
		}
	}
}

func TestOutputLine(t *testing.T) {
	t.Parallel()
	p := jobs.Prompt{ID: "p1", CustomID: "req-1"}
	resp := &jobs.Response{Answer: jobs.Answer{Output: "ok", Model: "m"}, CreatedAt: t0}
	type line struct {
		ID       string `json:"id"`
		CustomID string `json:"custom_id"`
		Response *struct {
			StatusCode int             `json:"status_code"`
			RequestID  string          `json:"request_id"`
			Body       json.RawMessage `json:"body"`
		} `json:"response"`
		Error *struct {
			Code    string `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	for _, c := range []struct {
		name    string
		r       jobs.BatchResult
		status  jobs.BatchStatus
		isErr   bool
		code    int
		errCode string
	}{
		{"succeeded", jobs.BatchResult{Prompt: p, Job: jobs.Job{ID: "j1", State: jobs.Succeeded}, Response: resp}, jobs.BatchFinalizing, false, 200, ""},
		{"succeeded, in a cancelled batch", jobs.BatchResult{Prompt: p, Job: jobs.Job{ID: "j1", State: jobs.Succeeded}, Response: resp}, jobs.BatchCancelling, false, 200, ""},
		{"failed", jobs.BatchResult{Prompt: p, Job: jobs.Job{ID: "j1", State: jobs.Failed, ErrorKind: jobs.KindRateLimit}}, jobs.BatchFinalizing, true, 429, ""},
		{"failed, provider", jobs.BatchResult{Prompt: p, Job: jobs.Job{ID: "j1", State: jobs.Failed, ErrorKind: jobs.KindProvider5xx}}, jobs.BatchExpired, true, 502, ""},
		{"cancelled by itself", jobs.BatchResult{Prompt: p, Job: jobs.Job{ID: "j1", State: jobs.Cancelled}}, jobs.BatchFinalizing, true, 409, ""},
		{"cancelled by the batch", jobs.BatchResult{Prompt: p, Job: jobs.Job{ID: "j1", State: jobs.Cancelled}}, jobs.BatchCancelling, true, 0, openaiapi.CodeBatchCancelled},
		{"queued, batch cancelled", jobs.BatchResult{Prompt: p, Job: jobs.Job{ID: "j1", State: jobs.Queued}}, jobs.BatchCancelled, true, 0, openaiapi.CodeBatchCancelled},
		{"running, batch expired", jobs.BatchResult{Prompt: p, Job: jobs.Job{ID: "j1", State: jobs.Running}}, jobs.BatchExpired, true, 0, openaiapi.CodeBatchExpired},
		{"cancelled on expiry", jobs.BatchResult{Prompt: p, Job: jobs.Job{ID: "j1", State: jobs.Cancelled}}, jobs.BatchExpired, true, 0, openaiapi.CodeBatchExpired},
		{"answer archived", jobs.BatchResult{Prompt: p, Job: jobs.Job{ID: "j1", State: jobs.Succeeded}}, jobs.BatchFinalizing, true, 0, "response_unavailable"},
	} {
		b, isErr := openaiapi.OutputLine(c.r, c.status)
		if isErr != c.isErr || strings.ContainsRune(string(b), '\n') {
			t.Errorf("%s: error file %v, want %v: %s", c.name, isErr, c.isErr, b)
		}
		var l line
		if err := json.Unmarshal(b, &l); err != nil {
			t.Fatalf("%s: %v: %s", c.name, err, b)
		}
		if l.ID != "batch_req_j1" || l.CustomID != "req-1" {
			t.Errorf("%s: %s", c.name, b)
		}
		switch {
		case c.code != 0:
			if l.Response == nil || l.Error != nil || l.Response.StatusCode != c.code || l.Response.RequestID != "j1" {
				t.Errorf("%s: %s", c.name, b)
				continue
			}
			if c.code == 200 {
				var cc openaiapi.ChatCompletion
				if json.Unmarshal(l.Response.Body, &cc) != nil || cc.Object != "chat.completion" || cc.Choices[0].Message.Content == nil || *cc.Choices[0].Message.Content != "ok" {
					t.Errorf("%s: body %s", c.name, l.Response.Body)
				}
			} else {
				var eb openaiapi.ErrorBody
				if json.Unmarshal(l.Response.Body, &eb) != nil || eb.Error.Message == "" {
					t.Errorf("%s: body %s", c.name, l.Response.Body)
				}
			}
		default:
			if l.Response != nil || l.Error == nil || l.Error.Code != c.errCode || l.Error.Message == "" {
				t.Errorf("%s: %s", c.name, b)
			}
		}
	}
}

func TestFileAndBatchObjects(t *testing.T) {
	t.Parallel()
	f := openaiapi.FileObject(jobs.File{ID: "file-1", OrgID: "o", Purpose: "batch", Filename: "in.jsonl", Bytes: 42, CreatedAt: t0})
	b, _ := json.Marshal(f)
	if want := `{"id":"file-1","object":"file","bytes":42,"created_at":` + jsonInt(t0.Unix()) + `,"filename":"in.jsonl","purpose":"batch"}`; string(b) != want {
		t.Errorf("file: %s\nwant %s", b, want)
	}

	batch := jobs.Batch{ID: "batch_1", InputFileID: "file-1", Endpoint: "/v1/chat/completions", CompletionWindow: "24h",
		Status: jobs.BatchFailed, CreatedAt: t0, ExpiresAt: t0.Add(24 * time.Hour), FailedAt: t0.Add(time.Minute),
		Errors: []jobs.BatchError{{Code: "invalid_json_line", Message: "m", Line: 3}, {Code: "empty_file", Message: "m2"}},
		Counts: jobs.BatchCounts{Total: 3}}
	var got map[string]any
	b, _ = json.Marshal(openaiapi.BatchObject(batch))
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"output_file_id", "error_file_id", "in_progress_at", "finalizing_at", "completed_at", "expired_at", "cancelling_at", "cancelled_at", "metadata"} {
		if v, ok := got[k]; !ok || v != nil {
			t.Errorf("%s = %v, want null: %s", k, v, b)
		}
	}
	if got["object"] != "batch" || got["status"] != "failed" || got["failed_at"] != float64(t0.Add(time.Minute).Unix()) ||
		got["expires_at"] != float64(t0.Add(24*time.Hour).Unix()) {
		t.Errorf("batch: %s", b)
	}
	errs, _ := json.Marshal(got["errors"])
	if want := `{"data":[{"code":"invalid_json_line","line":3,"message":"m","param":null},{"code":"empty_file","line":null,"message":"m2","param":null}],"object":"list"}`; string(errs) != want {
		t.Errorf("errors: %s\nwant %s", errs, want)
	}
	counts, _ := json.Marshal(got["request_counts"])
	if string(counts) != `{"completed":0,"failed":0,"total":3}` {
		t.Errorf("request_counts: %s", counts)
	}

	batch.Errors, batch.Metadata = nil, json.RawMessage(`{"k":"v"}`)
	batch.OutputFileID = "file-2"
	b, _ = json.Marshal(openaiapi.BatchObject(batch))
	if !strings.Contains(string(b), `"errors":null`) || !strings.Contains(string(b), `"metadata":{"k":"v"}`) || !strings.Contains(string(b), `"output_file_id":"file-2"`) {
		t.Errorf("batch: %s", b)
	}

	l := openaiapi.NewList([]openaiapi.File{f, {ID: "file-0"}}, func(f openaiapi.File) string { return f.ID }, true)
	b, _ = json.Marshal(l)
	if !strings.Contains(string(b), `"first_id":"file-1","last_id":"file-0","has_more":true`) {
		t.Errorf("list: %s", b)
	}
	b, _ = json.Marshal(openaiapi.NewList[openaiapi.File](nil, func(f openaiapi.File) string { return f.ID }, false))
	if string(b) != `{"object":"list","data":[],"first_id":null,"last_id":null,"has_more":false}` {
		t.Errorf("empty list: %s", b)
	}
}

func TestResolveAndModels(t *testing.T) {
	t.Parallel()
	cfg := simulate.Config()
	cfg.Profiles = append(cfg.Profiles,
		promptkit.Profile{ID: "b-fast", Backend: simulate.BackendID, Model: "small"},
		promptkit.Profile{ID: "a-fast", Backend: simulate.BackendID, Model: "small"})
	eng, err := promptkit.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := eng.Models(), []string{"a-fast", "b-fast", "default", simulate.Model, "small"}; !slices.Equal(got, want) {
		t.Errorf("models %v, want %v", got, want)
	}
	for _, c := range []struct {
		model string
		want  jobs.Target
		ok    bool
	}{
		{"default", jobs.Target{Profile: "default"}, true},
		{"b-fast", jobs.Target{Profile: "b-fast"}, true},
		{"small", jobs.Target{Profile: "a-fast", Options: jobs.ExecutionOptions{Model: "small"}}, true},
		{simulate.Model, jobs.Target{Profile: "default", Options: jobs.ExecutionOptions{Model: simulate.Model}}, true},
		{"gpt-4o", jobs.Target{}, false},
		{"", jobs.Target{}, false},
	} {
		got, ok := jobs.Resolve(eng, c.model, "")
		if ok != c.ok || !reflect.DeepEqual(got, c.want) {
			t.Errorf("%q: %+v %v, want %+v %v", c.model, got, ok, c.want, c.ok)
		}
	}
	// A fallback profile runs what names nothing, but never an empty model.
	if got, ok := jobs.Resolve(eng, "gpt-4o", "b-fast"); !ok || got != (jobs.Target{Profile: "b-fast"}) {
		t.Errorf("fallback: %+v %v", got, ok)
	}
	if _, ok := jobs.Resolve(eng, "", "b-fast"); ok {
		t.Error("an empty model ran on the fallback")
	}
	if _, ok := jobs.Resolve(nil, "default", ""); ok {
		t.Error("Resolve without an engine")
	}
	if m := openaiapi.NewModel("x"); m.Object != "model" || m.OwnedBy != "promptkit" {
		t.Errorf("model %+v", m)
	}
}

// An answer that calls tools: content null, the calls, finish_reason
// tool_calls when the provider sent none; as chunks, one delta per call;
// in a batch, the output line carries them.
func TestCompletionToolCalls(t *testing.T) {
	t.Parallel()
	calls := []pktype.ToolCall{
		{ID: "c1", Type: "function", Function: pktype.FunctionCall{Name: "f", Arguments: `{"a":1}`}},
		{ID: "c2", Type: "function", Function: pktype.FunctionCall{Name: "g", Arguments: `{}`}},
	}
	j := jobs.Job{ID: "j1", State: jobs.Succeeded}
	r := jobs.Response{Answer: jobs.Answer{Model: "m", ToolCalls: calls}, CreatedAt: t0}
	c := openaiapi.Completion(j, r)
	msg := c.Choices[0].Message
	if msg.Content != nil || !reflect.DeepEqual(msg.ToolCalls, calls) || c.Choices[0].FinishReason != "tool_calls" {
		t.Errorf("completion %+v", c)
	}
	b, _ := json.Marshal(c)
	if !strings.Contains(string(b), `"content":null`) || !strings.Contains(string(b), `"tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{\"a\":1}"}}`) {
		t.Errorf("encoding %s", b)
	}
	// Text beside calls stays; the provider's reason is kept.
	r.Output, r.FinishReason = "Let me look.", "stop"
	if c := openaiapi.Completion(j, r); deref(c.Choices[0].Message.Content) != "Let me look." || c.Choices[0].FinishReason != "stop" {
		t.Errorf("with text: %+v", c)
	}

	r.Output, r.FinishReason = "", ""
	chunks := openaiapi.Chunks(openaiapi.Completion(j, r), false)
	var got []openaiapi.ToolCallDelta
	for _, ch := range chunks {
		if d := ch.Choices[0].Delta; d.Content != nil && *d.Content != "" {
			t.Errorf("a content chunk for an answer without text: %+v", ch)
		}
		got = append(got, ch.Choices[0].Delta.ToolCalls...)
	}
	want := []openaiapi.ToolCallDelta{{Index: 0, ID: "c1", Type: "function", Function: openaiapi.FunctionDelta(calls[0].Function)},
		{Index: 1, ID: "c2", Type: "function", Function: openaiapi.FunctionDelta(calls[1].Function)}}
	if !reflect.DeepEqual(got, want) || *chunks[len(chunks)-1].Choices[0].FinishReason != "tool_calls" {
		t.Errorf("chunks %+v", chunks)
	}

	line, isErr := openaiapi.OutputLine(jobs.BatchResult{Job: j, Response: &r, Prompt: jobs.Prompt{CustomID: "x"}}, jobs.BatchCompleted)
	if isErr || !strings.Contains(string(line), `"tool_calls":[{"id":"c1"`) || !strings.Contains(string(line), `"finish_reason":"tool_calls"`) {
		t.Errorf("output line %s (error file: %v)", line, isErr)
	}
}

func deref(s *string) string {
	if s == nil {
		return "<null>"
	}
	return *s
}
