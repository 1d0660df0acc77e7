package server

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net/http"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/promptkit/promptkit/internal/testkit/enginekit"
	"github.com/promptkit/promptkit/jobs"
	"github.com/promptkit/promptkit/providertest"
)

// withFake runs the server's engine on a providertest fake with opts,
// retries transient retries inside a request.
func withFake(t *testing.T, retries int, opts ...providertest.Option) (*providertest.Server, option) {
	srv := providertest.NewServer(opts...)
	t.Cleanup(srv.Close)
	eng := enginekit.Provider(t, srv.URL, enginekit.Retries(retries))
	return srv, func(c *Config) { c.Engine = eng }
}

// sent decodes the fake's i-th request body by member.
func sent(t *testing.T, srv *providertest.Server, i int) map[string]json.RawMessage {
	t.Helper()
	reqs := srv.Requests()
	if len(reqs) <= i {
		t.Fatalf("the backend saw %d requests, want at least %d", len(reqs), i+1)
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(reqs[i].Body, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

// faithfulParams are what a program sends beside the conversation, for a
// reasoning model served by vLLM: each must reach the backend unchanged.
var faithfulParams = map[string]string{
	"reasoning_effort": `"high"`, "presence_penalty": `0.5`, "frequency_penalty": `-0.25`, "logit_bias": `{"50256":-100}`,
	"logprobs": `true`, "top_logprobs": `2`, "seed": `7`, "top_k": `20`, "min_p": `0.05`, "repetition_penalty": `1.1`,
	"chat_template_kwargs": `{"enable_thinking":true}`, "n": `2`,
}

func faithfulBody(stream bool) string {
	var b strings.Builder
	b.WriteString(`{"model":"default","messages":[{"role":"user","content":"Name a colour"}]`)
	for k, v := range faithfulParams {
		fmt.Fprintf(&b, ",%q:%s", k, v)
	}
	if stream {
		b.WriteString(`,"stream":true,"stream_options":{"include_usage":true}`)
	}
	return b.String() + "}"
}

// faithfulAnswer is what a client reads of a chat completion.
type faithfulAnswer struct {
	Model             string `json:"model"`
	SystemFingerprint string `json:"system_fingerprint"`
	Choices           []struct {
		Index   int `json:"index"`
		Message struct {
			Content          string `json:"content"`
			ReasoningContent string `json:"reasoning_content"`
		} `json:"message"`
		Logprobs *struct {
			Content []struct {
				Token   string  `json:"token"`
				Logprob float64 `json:"logprob"`
			} `json:"content"`
		} `json:"logprobs"`
		FinishReason string `json:"finish_reason"`
	} `json:"choices"`
	Usage struct {
		CompletionTokens    int `json:"completion_tokens"`
		PromptTokensDetails struct {
			CachedTokens *int `json:"cached_tokens"`
		} `json:"prompt_tokens_details"`
		CompletionTokensDetails struct {
			ReasoningTokens *int `json:"reasoning_tokens"`
		} `json:"completion_tokens_details"`
	} `json:"usage"`
}

// TestChatCompletionPassThrough: every parameter a program sends reaches
// the backend with its value unchanged, and every field a reasoning model
// answers reaches the program: both choices of n 2, their reasoning,
// logprobs, the system fingerprint, cached and reasoning token counts —
// plain, in the stored answer, and streamed as the backend framed it,
// with the same model named either way.
func TestChatCompletionPassThrough(t *testing.T) {
	t.Parallel()
	srv, opt := withFake(t, 0, providertest.WithModel("qwen3"))
	e := setup(t, opt)
	e.runWorker()

	r := e.call("POST", "/v1/chat/completions", "", faithfulBody(false))
	if r.code != 200 {
		t.Fatalf("%d %s", r.code, r.body)
	}
	got := sent(t, srv, 0)
	for k, want := range faithfulParams {
		if string(got[k]) != want {
			t.Errorf("the backend got %s = %s, want %s", k, got[k], want)
		}
	}
	var a faithfulAnswer
	r.decode(t, &a)
	checkFaithful(t, "plain", a)

	// The stored answer holds the same.
	p := e.call("GET", "/v1/prompts/"+r.header.Get(headerPromptID), "", nil)
	var view struct {
		Answer struct {
			Output string          `json:"output"`
			Body   json.RawMessage `json:"body"`
		} `json:"answer"`
	}
	p.decode(t, &view)
	if view.Answer.Output != a.Choices[0].Message.Content || !strings.Contains(string(view.Answer.Body), `"reasoning_content"`) ||
		!strings.Contains(string(view.Answer.Body), `"system_fingerprint"`) {
		t.Errorf("stored answer %s", p.body)
	}

	// Streamed: the chunks carry the reasoning as reasoning_content
	// deltas, each choice's text and logprobs, and the usage details.
	s := e.openChatStream(faithfulBody(true))
	var streamed faithfulAnswer
	reasoning, text := map[int]string{}, map[int]string{}
	logprobs := map[int]int{}
	models := map[string]bool{}
	for _, d := range s.rest() {
		if d == "[DONE]" {
			continue
		}
		var c struct {
			Model             string `json:"model"`
			SystemFingerprint string `json:"system_fingerprint"`
			Choices           []struct {
				Index int `json:"index"`
				Delta struct {
					Content          string `json:"content"`
					ReasoningContent string `json:"reasoning_content"`
				} `json:"delta"`
				Logprobs *struct {
					Content []json.RawMessage `json:"content"`
				} `json:"logprobs"`
			} `json:"choices"`
			Usage *json.RawMessage `json:"usage"`
		}
		if err := json.Unmarshal([]byte(d), &c); err != nil {
			t.Fatalf("chunk %s: %v", d, err)
		}
		models[c.Model] = true
		if c.SystemFingerprint != "fp_providertest" {
			t.Errorf("chunk without the backend's fingerprint: %s", d)
		}
		for _, ch := range c.Choices {
			reasoning[ch.Index] += ch.Delta.ReasoningContent
			text[ch.Index] += ch.Delta.Content
			if ch.Logprobs != nil {
				logprobs[ch.Index] += len(ch.Logprobs.Content)
			}
		}
		if c.Usage != nil && len(c.Choices) == 0 {
			_ = json.Unmarshal(*c.Usage, &streamed.Usage)
		}
	}
	if len(models) != 1 || !models[a.Model] {
		t.Errorf("chunks name models %v; the plain answer %q", models, a.Model)
	}
	for i := range 2 {
		if reasoning[i] == "" || text[i] == "" || logprobs[i] == 0 {
			t.Errorf("choice %d streamed reasoning %q, text %q, %d logprobs", i, reasoning[i], text[i], logprobs[i])
		}
	}
	if reasoning[0] == reasoning[1] || text[0] == text[1] {
		t.Errorf("the two choices streamed the same: %v, %v", reasoning, text)
	}
	if d := streamed.Usage.CompletionTokensDetails.ReasoningTokens; d == nil || *d == 0 {
		t.Errorf("streamed usage without reasoning tokens: %+v", streamed.Usage)
	}
}

func checkFaithful(t *testing.T, what string, a faithfulAnswer) {
	t.Helper()
	if len(a.Choices) != 2 || a.SystemFingerprint != "fp_providertest" || a.Model != "qwen3" {
		t.Fatalf("%s: %+v", what, a)
	}
	for i, c := range a.Choices {
		if c.Index != i || c.Message.Content == "" || c.Message.ReasoningContent == "" || c.Logprobs == nil || len(c.Logprobs.Content) == 0 {
			t.Errorf("%s: choice %d %+v", what, i, c)
		}
	}
	u := a.Usage
	if u.PromptTokensDetails.CachedTokens == nil || u.CompletionTokensDetails.ReasoningTokens == nil || *u.CompletionTokensDetails.ReasoningTokens == 0 {
		t.Errorf("%s: usage %+v", what, u)
	}
}

// TestResponsesReasoning: the Responses API's reasoning.effort reaches
// a chat backend as reasoning_effort, and the answer has a reasoning item
// before its message and reports the reasoning tokens.
func TestResponsesReasoning(t *testing.T) {
	t.Parallel()
	srv, opt := withFake(t, 0) // it reasons when asked to: reasoning_effort
	e := setup(t, opt)
	e.runWorker()
	r, o := e.createResponse(`{"model":"default","input":"Name a colour","reasoning":{"effort":"low","summary":"auto"},"top_k":5}`)
	if r.code != 200 {
		t.Fatalf("%d %s", r.code, r.body)
	}
	if got := sent(t, srv, 0); string(got["reasoning_effort"]) != `"low"` || string(got["top_k"]) != `5` || got["reasoning"] != nil {
		t.Errorf("the backend got %s", srv.Requests()[0].Body)
	}
	if len(o.Output) != 2 || o.Output[0].Type != "reasoning" || o.Output[1].Type != "message" ||
		o.Output[0].Content == nil || (*o.Output[0].Content)[0].Text == "" {
		t.Fatalf("output %s", r.body)
	}
	if o.Usage == nil || o.Usage.OutputTokensDetails == nil || o.Usage.OutputTokensDetails.ReasoningTokens == 0 {
		t.Errorf("usage %s", r.body)
	}
	// Streamed: the reasoning item's deltas as the backend sends them,
	// then the message's, each item opened and closed in turn.
	s := e.openResponseStream("POST", "/v1/responses", `{"model":"default","stream":true,"input":"Name a colour","reasoning":{"effort":"low"}}`)
	evs := s.restEvents()
	want := "response.created response.in_progress response.output_item.added response.content_part.added response.reasoning_text.delta " +
		"response.reasoning_text.done response.content_part.done response.output_item.done response.output_item.added " +
		"response.content_part.added response.output_text.delta response.output_text.done response.content_part.done " +
		"response.output_item.done response.completed"
	if got := types(evs); got != want {
		t.Errorf("events %s\nwant   %s", got, want)
	}
	var reasoning string
	for _, ev := range evs {
		if ev.ev.Type == "response.reasoning_text.delta" {
			reasoning += *ev.ev.Delta
		}
	}
	if reasoning != (*o.Output[0].Content)[0].Text {
		t.Errorf("streamed reasoning %q, the answer's %q", reasoning, (*o.Output[0].Content)[0].Text)
	}
}

// TestSamplesStaySamples: five identical requests sent at once, at
// temperature 1, are five jobs and five backend calls, each its own
// answer; a request that says it is an SDK's retry joins its running job
// (one job, one call).
func TestSamplesStaySamples(t *testing.T) {
	t.Parallel()
	srv, opt := withFake(t, 0)
	e := setup(t, opt)
	e.runWorker()
	const body = `{"model":"default","temperature":1,"messages":[{"role":"user","content":"Pick a number"}]}`
	var wg sync.WaitGroup
	jobIDs := make([]string, 5)
	for i := range jobIDs {
		wg.Go(func() {
			r := e.call("POST", "/v1/chat/completions", "", body, headerRetryCount, "0")
			if r.code != 200 {
				t.Errorf("sample %d: %d %s", i, r.code, r.body)
			}
			jobIDs[i] = r.header.Get(headerJobID)
		})
	}
	wg.Wait()
	distinct := map[string]bool{}
	for _, id := range jobIDs {
		distinct[id] = true
	}
	if len(distinct) != 5 || srv.Count() != 5 || e.jobCount() != 5 {
		t.Fatalf("%d jobs answered, %d stored, %d backend calls; want 5 of each", len(distinct), e.jobCount(), srv.Count())
	}

	// An SDK's first attempt whose call is held, and its retry.
	hold := make(chan struct{})
	srv.Enqueue(providertest.Response{Text: "42", Hold: hold})
	first := e.start("/v1/chat/completions", "", body, headerRetryCount, "0", headerEarly, "1")
	_, jid := first.ids()
	if err := srv.WaitArrivals(t.Context(), 6); err != nil {
		t.Fatal(err)
	}
	retry := e.start("/v1/chat/completions", "", body, headerRetryCount, "1", headerEarly, "1")
	if _, rj := retry.ids(); rj != jid {
		t.Errorf("the retry made job %s, want its attempt's %s", rj, jid)
	}
	close(hold)
	for _, p := range []*pending{first, retry} {
		if r := p.answer(); r.code != 200 || r.header.Get(headerJobID) != jid {
			t.Errorf("%d %v %s", r.code, r.header, r.body)
		}
	}
	if srv.Count() != 6 || e.jobCount() != 6 {
		t.Errorf("%d backend calls, %d jobs; want 6 of each", srv.Count(), e.jobCount())
	}
}

// TestOneRetryOwner: against a backend that fails every call, a chat
// completion is one job whose attempts (each with its transient retries)
// fit in the time the client says it waits: the job fails rather than
// wait a backoff past it, and the error tells the SDK not to retry.
func TestOneRetryOwner(t *testing.T) {
	t.Parallel()
	srv, opt := withFake(t, 2, providertest.WithStatus(http.StatusServiceUnavailable))
	e := setup(t, opt)
	e.runWorker()
	// The client waits 3 s: the first job attempt's three calls fit, the
	// second attempt's backoff (5 s and more) does not.
	r := e.call("POST", "/v1/chat/completions", "", chatBody, headerRetryCount, "0", "X-Stainless-Timeout", "3")
	if r.code != http.StatusBadGateway || r.header.Get("X-Should-Retry") != "false" {
		t.Fatalf("%d %v %s", r.code, r.header, r.body)
	}
	if deref(r.oaErr(t).Code) != string(jobs.KindProvider5xx) {
		t.Errorf("error %s", r.body)
	}
	j, err := e.st.GetJob(t.Context(), "", r.header.Get(headerJobID))
	if err != nil || j.State != jobs.Failed || j.Attempt != 1 || !strings.Contains(j.ErrorMessage, "not retried") {
		t.Errorf("job %+v, %v", j, err)
	}
	// Three calls: one job attempt, its call and two transient retries.
	if srv.Count() != 3 || e.jobCount() != 1 {
		t.Errorf("%d backend calls and %d jobs, want 3 and 1", srv.Count(), e.jobCount())
	}
}

// TestChatStreamKeepsThePieces: each piece of a streamed answer reaches
// the client in a chunk of its own, as the backend sent it, also when the
// backend sends them back to back and the job ends at once after: the
// pieces already delivered are relayed before the end is, not merged
// into a rest made from the stored answer.
func TestChatStreamKeepsThePieces(t *testing.T) {
	t.Parallel()
	srv, opt := withFake(t, 0)
	e := setup(t, opt)
	e.runWorker()
	const body = `{"model":"default","stream":true,"messages":[{"role":"user","content":"one two three four five six seven eight nine ten eleven twelve"}]}`
	// The backend's own pieces, asked directly.
	res, err := http.Post(srv.URL+"/chat/completions", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	direct := contentPieces(t, (&sseLines{t: t, res: res, sc: bufio.NewScanner(res.Body)}).rest())
	res.Body.Close()
	if len(direct) < 10 {
		t.Fatalf("the backend sent %d pieces", len(direct))
	}
	for i := range 20 {
		got := contentPieces(t, e.openChatStream(body).rest())
		if !reflect.DeepEqual(got, direct) {
			t.Fatalf("stream %d: pieces %q, the backend's %q", i, got, direct)
		}
	}
}

// contentPieces are the non-empty content deltas of a stream's data.
func contentPieces(t *testing.T, data []string) []string {
	t.Helper()
	var out []string
	for _, d := range data {
		if d == "[DONE]" {
			continue
		}
		var c struct {
			Choices []struct {
				Delta struct {
					Content string `json:"content"`
				} `json:"delta"`
			} `json:"choices"`
		}
		if err := json.Unmarshal([]byte(d), &c); err != nil {
			t.Fatalf("chunk %s: %v", d, err)
		}
		for _, ch := range c.Choices {
			if ch.Delta.Content != "" {
				out = append(out, ch.Delta.Content)
			}
		}
	}
	return out
}
