package sdkcompat

// The faithful front door through the official Go SDK: what a program
// sets on its params reaches the backend as the SDK wrote it, what a
// reasoning model answers reaches the program through the SDK's own
// types (plain, and streamed into its ChatCompletionAccumulator), the
// Responses API's reasoning goes both ways, a failed job is one SDK
// attempt, and identical samples stay samples.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/packages/respjson"
	"github.com/openai/openai-go/v3/responses"
	"github.com/openai/openai-go/v3/shared"

	"github.com/promptkit/promptkit/providertest"
)

// backendBody decodes the body of the i-th request srv received, by
// member.
func backendBody(t *testing.T, srv *providertest.Server, i int) map[string]json.RawMessage {
	t.Helper()
	reqs := srv.Requests()
	if len(reqs) <= i {
		t.Fatalf("the backend saw %d requests, want at least %d", len(reqs), i+1)
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(reqs[i].Body, &m); err != nil {
		t.Fatalf("backend request %d: %v: %s", i, err, reqs[i].Body)
	}
	return m
}

// sdkRequests records what the SDK sends, one entry per HTTP attempt:
// a middleware sees every attempt, its own retries included.
type sdkRequests struct {
	mu   sync.Mutex
	sent []*http.Request
	body [][]byte
}

func (r *sdkRequests) middleware(req *http.Request, next option.MiddlewareNext) (*http.Response, error) {
	var body []byte
	if req.Body != nil {
		b, err := io.ReadAll(req.Body)
		if err != nil {
			return nil, err
		}
		body = b
		req.Body = io.NopCloser(bytes.NewReader(b))
	}
	r.mu.Lock()
	r.sent = append(r.sent, req)
	r.body = append(r.body, body)
	r.mu.Unlock()
	return next(req)
}

func (r *sdkRequests) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.sent)
}

// last is the last attempt's headers and body by member.
func (r *sdkRequests) last(t *testing.T) (http.Header, map[string]json.RawMessage) {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.sent) == 0 {
		t.Fatal("the SDK sent nothing")
	}
	var m map[string]json.RawMessage
	if b := r.body[len(r.body)-1]; len(b) > 0 {
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatalf("the SDK's body %s: %v", b, err)
		}
	}
	return r.sent[len(r.sent)-1].Header, m
}

// compactJSON is raw without insignificant space, for comparing values.
func compactJSON(raw json.RawMessage) string {
	var b bytes.Buffer
	if json.Compact(&b, raw) != nil {
		return string(raw)
	}
	return b.String()
}

// faithfulChat is a chat completion for a reasoning model served by vLLM:
// OpenAI's reasoning_effort, n, logprobs, top_logprobs, presence_penalty
// and logit_bias, and vLLM's top_k, min_p and chat_template_kwargs,
// which the SDK has no fields for.
func faithfulChat() openai.ChatCompletionNewParams {
	p := userChat("default", "Name a colour")
	p.ReasoningEffort = shared.ReasoningEffortHigh
	p.N = openai.Int(2)
	p.Logprobs = openai.Bool(true)
	p.TopLogprobs = openai.Int(2)
	p.PresencePenalty = openai.Float(0.5)
	p.LogitBias = map[string]int64{"50256": -100}
	p.SetExtraFields(map[string]any{
		"top_k":                20,
		"min_p":                0.05,
		"chat_template_kwargs": map[string]any{"enable_thinking": true},
	})
	return p
}

// faithfulSent is what faithfulChat's parameters are on the wire.
var faithfulSent = map[string]string{
	"reasoning_effort": `"high"`, "n": `2`, "logprobs": `true`, "top_logprobs": `2`,
	"presence_penalty": `0.5`, "logit_bias": `{"50256":-100}`,
	"top_k": `20`, "min_p": `0.05`, "chat_template_kwargs": `{"enable_thinking":true}`,
}

// checkSentAsWritten fails for each faithfulSent parameter the SDK did
// not send as expected, or the backend got otherwise than the SDK sent.
func checkSentAsWritten(t *testing.T, sdk, backend map[string]json.RawMessage) {
	t.Helper()
	for k, want := range faithfulSent {
		if got := compactJSON(sdk[k]); got != want {
			t.Errorf("the SDK sent %s = %s, want %s (the test's premise)", k, sdk[k], want)
		}
		if got := compactJSON(backend[k]); got != compactJSON(sdk[k]) {
			t.Errorf("the backend got %s = %s; the SDK sent %s", k, backend[k], sdk[k])
		}
	}
}

// extraString is a string field the SDK's type has no field for, as it
// keeps it in JSON.ExtraFields; "" when absent or not a string.
func extraString(fields map[string]respjson.Field, key string) string {
	f, ok := fields[key]
	if !ok {
		return ""
	}
	var s string
	if json.Unmarshal([]byte(f.Raw()), &s) != nil {
		return ""
	}
	return s
}

// TestFrontDoorFaithfulChat: with the SDK's fields and extra JSON fields
// set, the backend (a reasoning model) gets every value as the SDK wrote
// it, and the SDK reads every field it answers: both choices of n 2,
// each with its reasoning_content and log probabilities, the system
// fingerprint, and cached and reasoning token counts. Streamed, the
// SDK's accumulator takes every chunk as relayed, both choices come, the
// reasoning comes in deltas, and the chunks name the plain answer's
// model.
func TestFrontDoorFaithfulChat(t *testing.T) {
	t.Parallel()
	s := startService(t, withMain(providertest.WithReasoning()))
	var sdk sdkRequests
	cl := s.client(s.token)
	ctx := t.Context()

	c, err := cl.Chat.Completions.New(ctx, faithfulChat(), option.WithMiddleware(sdk.middleware))
	if err != nil {
		t.Fatal(err)
	}
	_, sent := sdk.last(t)
	checkSentAsWritten(t, sent, backendBody(t, s.main, 0))

	if len(c.Choices) != 2 {
		t.Fatalf("%d choices, want 2: %s", len(c.Choices), c.RawJSON())
	}
	reasoning := make([]string, 2)
	for i, ch := range c.Choices {
		reasoning[i] = extraString(ch.Message.JSON.ExtraFields, "reasoning_content")
		if ch.Index != int64(i) || ch.Message.Content == "" || !strings.HasPrefix(reasoning[i], "Thinking about: ") {
			t.Errorf("choice %d: index %d, content %q, reasoning_content %q: %s", i, ch.Index, ch.Message.Content, reasoning[i], ch.Message.RawJSON())
		}
		if len(ch.Logprobs.Content) == 0 {
			t.Errorf("choice %d without logprobs content: %s", i, ch.RawJSON())
		}
		for j, lp := range ch.Logprobs.Content {
			if lp.Token == "" || lp.Logprob >= 0 || len(lp.TopLogprobs) != 2 {
				t.Errorf("choice %d logprob %d: %s, want a token with 2 top_logprobs", i, j, lp.RawJSON())
			}
		}
	}
	if c.Choices[0].Message.Content == c.Choices[1].Message.Content || reasoning[0] == reasoning[1] {
		t.Errorf("the two choices are one answer twice: %s", c.RawJSON())
	}
	if c.SystemFingerprint != "fp_providertest" {
		t.Errorf("system_fingerprint %q, want the backend's fp_providertest", c.SystemFingerprint)
	}
	if backendModel := s.main.Requests()[0].Model; c.Model != backendModel {
		t.Errorf("model %q, want the backend's %q", c.Model, backendModel)
	}
	u := c.Usage
	if u.CompletionTokensDetails.ReasoningTokens == 0 || !u.PromptTokensDetails.JSON.CachedTokens.Valid() ||
		u.PromptTokensDetails.CachedTokens != u.PromptTokens/2 {
		t.Errorf("usage %s, want reasoning tokens and the backend's cached tokens (half of %d)", u.RawJSON(), u.PromptTokens)
	}

	// Streamed, the same request.
	p := faithfulChat()
	p.StreamOptions = openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}
	stream := cl.Chat.Completions.NewStreaming(ctx, p, option.WithMiddleware(sdk.middleware))
	defer stream.Close()
	var acc openai.ChatCompletionAccumulator
	streamedReasoning := map[int64]string{}
	models := map[string]int{}
	logprobChunks := map[int64]int{}
	for stream.Next() {
		ch := stream.Current()
		if !acc.AddChunk(ch) {
			t.Fatalf("the accumulator refused chunk %s", ch.RawJSON())
		}
		models[ch.Model]++
		for _, choice := range ch.Choices {
			streamedReasoning[choice.Index] += extraString(choice.Delta.JSON.ExtraFields, "reasoning_content")
			if len(choice.Logprobs.Content) > 0 {
				logprobChunks[choice.Index]++
			}
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	_, sent = sdk.last(t)
	checkSentAsWritten(t, sent, backendBody(t, s.main, 1))
	if len(models) != 1 || models[c.Model] == 0 {
		t.Errorf("chunks name models %v; the plain answer %q", models, c.Model)
	}
	if len(acc.Choices) != 2 {
		t.Fatalf("accumulated %d choices, want 2", len(acc.Choices))
	}
	for i, ch := range acc.Choices {
		// The backend answers the same request the same way: the stream
		// carries what the plain answer did, choice by choice.
		if ch.Message.Content != c.Choices[i].Message.Content || ch.FinishReason != c.Choices[i].FinishReason {
			t.Errorf("streamed choice %d: %q (%s), plain %q (%s)", i, ch.Message.Content, ch.FinishReason,
				c.Choices[i].Message.Content, c.Choices[i].FinishReason)
		}
		if streamedReasoning[int64(i)] != reasoning[i] {
			t.Errorf("choice %d streamed reasoning_content deltas %q, plain %q", i, streamedReasoning[int64(i)], reasoning[i])
		}
		if logprobChunks[int64(i)] == 0 || len(ch.Logprobs.Content) != len(c.Choices[i].Logprobs.Content) {
			t.Errorf("choice %d: %d chunks with logprobs, %d accumulated entries; plain %d", i,
				logprobChunks[int64(i)], len(ch.Logprobs.Content), len(c.Choices[i].Logprobs.Content))
		}
	}
	if acc.SystemFingerprint != "fp_providertest" {
		t.Errorf("streamed system_fingerprint %q", acc.SystemFingerprint)
	}
	if au := acc.Usage; au.CompletionTokensDetails.ReasoningTokens != u.CompletionTokensDetails.ReasoningTokens ||
		au.PromptTokensDetails.CachedTokens != u.PromptTokensDetails.CachedTokens || au.TotalTokens != u.TotalTokens {
		t.Errorf("streamed usage %s, plain %s", au.RawJSON(), u.RawJSON())
	}
}

// TestFrontDoorResponsesReasoning: the Responses API's reasoning.effort
// reaches the chat backend as reasoning_effort (which turns the fake's
// reasoning on), and the reasoning comes back as a reasoning item with
// reasoning_text content and reasoning tokens; streamed, as
// response.reasoning_text.delta events.
func TestFrontDoorResponsesReasoning(t *testing.T) {
	t.Parallel()
	s := startService(t)
	cl := s.client(s.token)
	ctx := t.Context()
	params := responses.ResponseNewParams{
		Model:     "default",
		Input:     responses.ResponseNewParamsInputUnion{OfString: openai.String("Name a colour")},
		Reasoning: shared.ReasoningParam{Effort: shared.ReasoningEffortLow},
	}

	r, err := cl.Responses.New(ctx, params)
	if err != nil {
		t.Fatal(err)
	}
	got := backendBody(t, s.main, 0)
	if compactJSON(got["reasoning_effort"]) != `"low"` || got["reasoning"] != nil {
		t.Errorf("the backend got %s, want reasoning_effort \"low\" and no reasoning", s.main.Requests()[0].Body)
	}
	var reasoning string
	for _, item := range r.Output {
		if item.Type != "reasoning" {
			continue
		}
		ri := item.AsReasoning()
		if len(ri.Content) != 1 || ri.Content[0].Type != "reasoning_text" || ri.Content[0].Text == "" {
			t.Errorf("reasoning item %s", item.RawJSON())
			continue
		}
		reasoning = ri.Content[0].Text
	}
	if reasoning == "" || r.OutputText() == "" {
		t.Fatalf("response without reasoning or text: %s", r.RawJSON())
	}
	if r.Usage.OutputTokensDetails.ReasoningTokens == 0 {
		t.Errorf("usage %s, want reasoning tokens", r.Usage.RawJSON())
	}

	stream := cl.Responses.NewStreaming(ctx, params)
	var deltas strings.Builder
	var completed *responses.Response
	for stream.Next() {
		ev := stream.Current()
		switch ev.Type {
		case "response.reasoning_text.delta":
			deltas.WriteString(ev.Delta)
		case "response.completed":
			done := ev.AsResponseCompleted().Response
			completed = &done
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	if got := backendBody(t, s.main, 1); compactJSON(got["reasoning_effort"]) != `"low"` {
		t.Errorf("the backend got %s for the stream", s.main.Requests()[1].Body)
	}
	if deltas.String() != reasoning {
		t.Errorf("response.reasoning_text.delta events joined %q, the plain response's reasoning %q", deltas.String(), reasoning)
	}
	if completed == nil || completed.Usage.OutputTokensDetails.ReasoningTokens == 0 {
		t.Errorf("streamed response.completed without reasoning tokens: %+v", completed)
	}
}

// TestFrontDoorOneRetryOwner: against a backend that fails every call, an
// SDK client with its default retries (2) makes one attempt: promptkit's
// job retries (each attempt with its transient retries) fit in the time
// the SDK says it waits, and the job's failure says not to retry.
//
// The client's 5 s request timeout is sent as X-Stainless-Timeout: 5, of
// which promptkit gives the job 4.5 s: the first job attempt (a call and
// two transient retries, 0.25–0.5 s and 0.5–1 s apart) fits, the next
// attempt's backoff (5 s and more) does not, so the job fails after one
// attempt, without the test waiting a backoff, and with seconds to spare
// before the SDK's timeout. So the backend sees at most
// (transient_retries 2 + 1) × 1 job attempt = 3 calls.
func TestFrontDoorOneRetryOwner(t *testing.T) {
	t.Parallel()
	const transientRetries = 2
	s := startService(t, withMain(providertest.WithStatus(http.StatusServiceUnavailable)), withTransientRetries(transientRetries))
	var sdk sdkRequests
	cl := openai.NewClient(
		option.WithBaseURL(s.url+"/v1/"),
		option.WithAPIKey(s.token),
		option.WithRequestTimeout(5*time.Second),
		option.WithMiddleware(sdk.middleware),
	)
	_, err := cl.Chat.Completions.New(t.Context(), userChat("default", "fall over"))
	var e *openai.Error
	if !errors.As(err, &e) {
		t.Fatalf("error %v (%T), want *openai.Error", err, err)
	}
	if e.StatusCode != http.StatusBadGateway {
		t.Errorf("status %d (%s), want 502", e.StatusCode, e.RawJSON())
	}
	if v := e.Response.Header.Get("X-Should-Retry"); v != "false" {
		t.Errorf("X-Should-Retry %q, want false", v)
	}
	if n := sdk.count(); n != 1 {
		t.Errorf("the SDK made %d attempts, want 1", n)
	}
	if h, _ := sdk.last(t); h.Get("X-Stainless-Timeout") != "5" {
		t.Errorf("the SDK sent X-Stainless-Timeout %q, want 5 (the test's premise)", h.Get("X-Stainless-Timeout"))
	}

	jobID := e.Response.Header.Get("X-Promptkit-Job-Id")
	list := adminJobs(t, s)
	if len(list) != 1 || list[0].ID != jobID {
		t.Fatalf("jobs %+v, want the one job %s", list, jobID)
	}
	if j := list[0]; j.State != "failed" || j.Attempt != 1 {
		t.Errorf("job %s: state %s after %d attempts, want failed after 1", j.ID, j.State, j.Attempt)
	}
	n, most := s.main.Count(), (transientRetries+1)*list[0].Attempt
	t.Logf("the backend saw %d calls (at most %d)", n, most)
	if n < 1 || n > most {
		t.Errorf("the backend saw %d calls, want 1 to %d: (transient retries %d + 1) × %d job attempts",
			n, most, transientRetries, list[0].Attempt)
	}
}

// jobRow is a job as GET /v1/admin/jobs lists it.
type jobRow struct {
	ID      string `json:"id"`
	State   string `json:"state"`
	Attempt int    `json:"attempt"`
}

// adminJobs lists the service's jobs.
func adminJobs(t *testing.T, s *service) []jobRow {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), "GET", s.url+"/v1/admin/jobs?limit=100", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+s.token)
	r, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Body.Close()
	body, err := io.ReadAll(r.Body)
	if err != nil || r.StatusCode != http.StatusOK {
		t.Fatalf("GET /v1/admin/jobs: %d %v %s", r.StatusCode, err, body)
	}
	var page struct {
		Jobs []struct {
			Job jobRow `json:"job"`
		} `json:"jobs"`
	}
	if err := json.Unmarshal(body, &page); err != nil {
		t.Fatalf("GET /v1/admin/jobs: %v: %s", err, body)
	}
	out := make([]jobRow, len(page.Jobs))
	for i, j := range page.Jobs {
		out[i] = j.Job
	}
	return out
}

// arrivalDeadline bounds waiting for held calls to reach the backend: a
// failure's wait, never a passing test's.
const arrivalDeadline = time.Minute

// TestFrontDoorSamplesStaySamples: five identical calls at temperature 1,
// all in flight at once, are five jobs, five backend calls and five
// answers: a repeat is a new sample, not the running job's answer. The
// backend holds every call until all five have arrived, so the five are
// running together when each is admitted; a server that joined them
// would never bring five to the backend.
func TestFrontDoorSamplesStaySamples(t *testing.T) {
	t.Parallel()
	const samples = 5
	// One worker per sample, so that all five can be running at once.
	s := startService(t, withWorkers(samples))
	hold := make(chan struct{})
	var once sync.Once
	release := func() { once.Do(func() { close(hold) }) }
	defer release()
	texts := map[string]bool{}
	for i := range samples {
		text := "sample " + string(rune('A'+i))
		texts[text] = true
		s.main.Enqueue(providertest.Response{Hold: hold, Text: text})
	}

	cl := s.client(s.token)
	p := userChat("default", "Pick a number")
	p.Temperature = openai.Float(1)
	var wg sync.WaitGroup
	answers := make([]string, samples)
	jobIDs := make([]string, samples)
	var failed atomic.Int32
	for i := range samples {
		wg.Go(func() {
			var res *http.Response
			c, err := cl.Chat.Completions.New(t.Context(), p, option.WithResponseInto(&res))
			if err != nil {
				failed.Add(1)
				t.Errorf("sample %d: %v", i, err)
				return
			}
			answers[i], jobIDs[i] = c.Choices[0].Message.Content, res.Header.Get("X-Promptkit-Job-Id")
		})
	}
	ctx, cancel := context.WithTimeout(t.Context(), arrivalDeadline)
	defer cancel()
	if err := s.main.WaitArrivals(ctx, samples); err != nil {
		t.Errorf("%d of %d identical calls reached the backend while all were held: %v", s.main.Count(), samples, err)
	}
	release()
	wg.Wait()
	if failed.Load() > 0 {
		t.FailNow()
	}
	distinctJobs, distinctAnswers := map[string]bool{}, map[string]bool{}
	for i := range samples {
		if jobIDs[i] != "" {
			distinctJobs[jobIDs[i]] = true
		}
		if texts[answers[i]] {
			distinctAnswers[answers[i]] = true
		}
	}
	if len(distinctJobs) != samples {
		t.Errorf("job ids %q, want %d distinct", jobIDs, samples)
	}
	if len(distinctAnswers) != samples {
		t.Errorf("answers %q, want each of the backend's %d replies once", answers, samples)
	}
	if n := s.main.Count(); n != samples {
		t.Errorf("the backend saw %d calls, want %d", n, samples)
	}
	if list := adminJobs(t, s); len(list) != samples {
		t.Errorf("%d jobs stored, want %d", len(list), samples)
	}
}
