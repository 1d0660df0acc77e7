package providertest_test

import (
	"encoding/json"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/promptkit/promptkit/providertest"
)

// withStream turns a request body into its streamed form, with usage.
func withStream(body string) string {
	return strings.Replace(body, "{", `{"stream":true,"stream_options":{"include_usage":true},`, 1)
}

// "n" choices each have their own text and finish_reason; usage counts
// them all; a stream carries every choice, by index, interleaved.
func TestNChoices(t *testing.T) {
	s := newServer(t)
	body := `{"model":"m","n":3,"messages":[{"role":"user","content":"hello there world"}]}`
	a := decodeAnswer(t, post(t, s.URL+"/chat/completions", body))
	want := []string{
		"Fake provider reply: hello there world",
		"Fake provider reply: hello there world (choice 1)",
		"Fake provider reply: hello there world (choice 2)",
	}
	if got := a.texts(t); !reflect.DeepEqual(got, want) {
		t.Fatalf("choices %q, want %q", got, want)
	}
	for _, c := range a.Choices {
		if c.FinishReason != "stop" || c.Message.Role != "assistant" || string(c.Logprobs) != "null" {
			t.Errorf("choice %d: finish %q role %q logprobs %s, want stop, assistant, null", c.Index, c.FinishReason, c.Message.Role, c.Logprobs)
		}
	}
	if u := a.Usage; u == nil || u.PromptTokens != 3 || u.CompletionTokens != 6+8+8 || u.TotalTokens != 3+22 {
		t.Errorf("usage %+v, want 3 prompt and 22 completion tokens", u)
	}
	if a.SystemFingerprint != nil {
		t.Errorf("system_fingerprint %q without reasoning", *a.SystemFingerprint)
	}

	st := assemble(t, post(t, s.URL+"/chat/completions", withStream(body)))
	if got := st.sortedIndexes(); !reflect.DeepEqual(got, []int{0, 1, 2}) {
		t.Fatalf("streamed choices %v, want 0, 1, 2", got)
	}
	for i, w := range want {
		c := st.choices[i]
		if c.role != "assistant" || c.content != w || c.finish != "stop" || c.kinds[len(c.kinds)-1] != "finish" {
			t.Errorf("streamed choice %d: %+v, want %q and finish stop", i, c, w)
		}
	}
	if st.usage == nil || *st.usage != *a.Usage {
		t.Errorf("streamed usage %+v, want %+v", st.usage, a.Usage)
	}
	// Interleaved: the first three chunks are the three role chunks.
	if !reflect.DeepEqual(st.indexes[:3], []int{0, 1, 2}) || slices.IsSorted(st.indexes) {
		t.Errorf("chunk order %v, want the choices interleaved", st.indexes)
	}
}

// With n > 1 every choice calls the tool, each call with its own id.
func TestNChoicesToolCalls(t *testing.T) {
	s := newServer(t)
	body := `{"model":"m","n":2,` + toolsBody + `,"tool_choice":{"type":"function","function":{"name":"weather"}},"messages":[{"role":"user","content":"weather?"}]}`
	a := decodeAnswer(t, post(t, s.URL+"/chat/completions", body))
	if len(a.Choices) != 2 {
		t.Fatalf("%d choices, want 2: %s", len(a.Choices), a.raw)
	}
	for i, c := range a.Choices {
		calls := c.Message.ToolCalls
		if c.FinishReason != "tool_calls" || c.Message.Content != nil || len(calls) != 1 ||
			calls[0].Function.Name != "weather" || calls[0].ID != []string{"call_1", "call_2"}[i] || !json.Valid([]byte(calls[0].Function.Arguments)) {
			t.Errorf("choice %d: %+v", i, c)
		}
	}
	st := assemble(t, post(t, s.URL+"/chat/completions", withStream(body)))
	for i, c := range a.Choices {
		got := st.choices[i]
		if got == nil || !reflect.DeepEqual(got.toolCalls, c.Message.ToolCalls) || got.finish != "tool_calls" || got.content != "" {
			t.Errorf("streamed choice %d: %+v, want calls %+v", i, got, c.Message.ToolCalls)
		}
	}
}

// With n > 1 a JSON response_format gets a JSON document in every choice.
func TestNChoicesJSON(t *testing.T) {
	s := newServer(t)
	schema := `{"type":"object","properties":{"a":{"type":"integer"}},"required":["a"]}`
	for _, format := range []string{
		`{"type":"json_schema","json_schema":{"name":"x","schema":` + schema + `}}`,
		`{"type":"json_object","schema":` + schema + `}`,
		`{"type":"json_object"}`,
	} {
		body := `{"model":"m","n":2,"response_format":` + format + `,"messages":[{"role":"user","content":"go"}]}`
		texts := decodeAnswer(t, post(t, s.URL+"/chat/completions", body)).texts(t)
		if len(texts) != 2 {
			t.Fatalf("%s: %d choices", format, len(texts))
		}
		for i, text := range texts {
			var doc map[string]any
			if err := json.Unmarshal([]byte(text), &doc); err != nil {
				t.Errorf("%s: choice %d %q is not a JSON object", format, i, text)
			}
		}
		st := assemble(t, post(t, s.URL+"/chat/completions", withStream(body)))
		for i, text := range texts {
			if st.choices[i] == nil || st.choices[i].content != text {
				t.Errorf("%s: streamed choice %d %+v, want %q", format, i, st.choices[i], text)
			}
		}
	}
}

// A scripted answer has one choice, whatever "n" asks, unless it lists
// more.
func TestScriptedMoreChoices(t *testing.T) {
	s := newServer(t)
	call := providertest.CallTool("f", `{"x":1}`).ToolCalls
	more := providertest.Response{Text: "zero", MoreChoices: []providertest.Choice{{Text: "one two"}, {ToolCalls: call}}}
	s.Enqueue(providertest.Reply("only"), more, more)
	body := `{"model":"m","n":3,"messages":[{"role":"user","content":"x"}]}`

	if got := decodeAnswer(t, post(t, s.URL+"/chat/completions", body)).texts(t); !reflect.DeepEqual(got, []string{"only"}) {
		t.Errorf("scripted Reply with n 3: %q, want one choice", got)
	}
	a := decodeAnswer(t, post(t, s.URL+"/chat/completions", body))
	if got := a.texts(t); !reflect.DeepEqual(got, []string{"zero", "one two", ""}) {
		t.Errorf("MoreChoices: %q", got)
	}
	if len(a.Choices) == 3 && (a.Choices[1].FinishReason != "stop" || a.Choices[2].FinishReason != "tool_calls" ||
		a.Choices[2].Message.Content != nil || !reflect.DeepEqual(a.Choices[2].Message.ToolCalls, call)) {
		t.Errorf("MoreChoices answer %s", a.raw)
	}
	if a.Usage.CompletionTokens != 3 {
		t.Errorf("completion_tokens %d, want 3, the words of every choice", a.Usage.CompletionTokens)
	}
	st := assemble(t, post(t, s.URL+"/chat/completions", withStream(body)))
	if c := st.choices[1]; c == nil || c.content != "one two" || c.finish != "stop" {
		t.Errorf("streamed choice 1 %+v", c)
	}
	if c := st.choices[2]; c == nil || !reflect.DeepEqual(c.toolCalls, call) || c.finish != "tool_calls" {
		t.Errorf("streamed choice 2 %+v", c)
	}
}

// checkLogprobs checks a choice's entries against its content: one per
// word piece, joining back to the content, with deterministic numbers and
// top entries.
func checkLogprobs(t *testing.T, entries []logprobEntry, content string, top int) {
	t.Helper()
	var joined strings.Builder
	for k, e := range entries {
		joined.WriteString(e.Token)
		want := -float64(k%10+1) / 10
		if e.Logprob != want || !reflect.DeepEqual(e.Bytes, byteInts(e.Token)) {
			t.Errorf("entry %d %+v, want logprob %v and the token's bytes", k, e, want)
		}
		if len(e.TopLogprobs) != top {
			t.Fatalf("entry %d has %d top_logprobs, want %d", k, len(e.TopLogprobs), top)
		}
		for j, alt := range e.TopLogprobs {
			switch {
			case j == 0 && (alt.Token != e.Token || alt.Logprob != e.Logprob):
				t.Errorf("entry %d top 0 %+v, want the token itself", k, alt)
			case j > 0 && alt.Logprob >= e.TopLogprobs[j-1].Logprob:
				t.Errorf("entry %d top %d %+v is not less likely than the one before", k, j, alt)
			case !reflect.DeepEqual(alt.Bytes, byteInts(alt.Token)):
				t.Errorf("entry %d top %d bytes %v", k, j, alt.Bytes)
			}
		}
	}
	if joined.String() != content || len(entries) != len(strings.Fields(content)) {
		t.Errorf("%d tokens joining to %q, want one per word of %q", len(entries), joined.String(), content)
	}
}

func byteInts(s string) []int {
	var out []int
	for _, b := range []byte(s) {
		out = append(out, int(b))
	}
	return out
}

// "logprobs": true gets an entry per word of each choice's content,
// streamed one per content chunk.
func TestLogprobs(t *testing.T) {
	s := newServer(t)
	for _, tt := range []struct {
		params string
		top, n int
	}{
		{`"logprobs":true`, 0, 1},
		{`"logprobs":true,"top_logprobs":3`, 3, 1},
		{`"logprobs":true,"top_logprobs":2,"n":2`, 2, 2},
	} {
		body := `{"model":"m",` + tt.params + `,"messages":[{"role":"user","content":"one two three four five six seven eight nine ten"}]}`
		a := decodeAnswer(t, post(t, s.URL+"/chat/completions", body))
		texts := a.texts(t)
		if len(texts) != tt.n {
			t.Fatalf("%s: %d choices", tt.params, len(texts))
		}
		for i, c := range a.Choices {
			checkLogprobs(t, c.logprobs(t).Content, texts[i], tt.top)
		}

		st := assemble(t, post(t, s.URL+"/chat/completions", withStream(body)))
		for i, c := range a.Choices {
			got := st.choices[i]
			if got == nil || got.content != texts[i] || !reflect.DeepEqual(got.logprobs, c.logprobs(t).Content) {
				t.Fatalf("%s: streamed choice %d %+v, want the plain answer's logprobs", tt.params, i, got)
			}
			for k, kind := range got.kinds {
				var lp *logprobsObject
				_ = json.Unmarshal([]byte(got.logprobsKeys[k]), &lp)
				switch {
				case kind == "content" && (lp == nil || len(lp.Content) != 1):
					t.Errorf("%s: content chunk %d of choice %d logprobs %s, want one entry", tt.params, k, i, got.logprobsKeys[k])
				case kind != "content" && got.logprobsKeys[k] != "null":
					t.Errorf("%s: %s chunk of choice %d logprobs %s, want null", tt.params, kind, i, got.logprobsKeys[k])
				}
			}
		}
	}
}

// An answer using none of the newer features has no "logprobs" key, as
// it always had; one with several choices says null, as OpenAI does.
func TestLogprobsKey(t *testing.T) {
	s := newServer(t)
	a := decodeAnswer(t, post(t, s.URL+"/chat/completions", chatBody))
	if a.Choices[0].Logprobs != nil {
		t.Errorf("plain answer logprobs %s, want no key", a.Choices[0].Logprobs)
	}
	st := assemble(t, post(t, s.URL+"/chat/completions", `{"model":"m","n":2,"stream":true,"messages":[{"role":"user","content":"x y"}]}`))
	for i, c := range st.choices {
		for k, key := range c.logprobsKeys {
			if key != "null" {
				t.Errorf("choice %d chunk %d logprobs %q, want null", i, k, key)
			}
		}
	}
}

// Answers to requests that use none of the newer features are what they
// were before those features existed, byte for byte.
func TestAnswersWithoutNewFeaturesUnchanged(t *testing.T) {
	s := newServer(t, providertest.WithClock(newClock().Now))
	msgs := `"messages":[{"role":"system","content":"be brief"},{"role":"user","content":"hello there world and more"}]`
	r := post(t, s.URL+"/chat/completions", `{"model":"m","n":1,"logprobs":false,"top_logprobs":3,"chat_template_kwargs":{"x":1},`+msgs+`}`)
	want := `{"id":"chatcmpl-1","object":"chat.completion","created":1893456000,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"Fake provider reply: hello there world and more"},"finish_reason":"stop"}],"usage":{"prompt_tokens":7,"completion_tokens":8,"total_tokens":15,"prompt_tokens_details":{"cached_tokens":0},"completion_tokens_details":{"reasoning_tokens":0}}}`
	if string(r.body) != want {
		t.Errorf("body\n%s\nwant\n%s", r.body, want)
	}
	r = post(t, s.URL+"/chat/completions", `{"model":"m","stream":true,`+msgs+`}`)
	head := `data: {"id":"chatcmpl-2","object":"chat.completion.chunk","created":1893456000,"model":"m","choices":[{"index":0,"delta":`
	wantStream := head + `{"role":"assistant","content":""},"finish_reason":null}]}` + "\n\n"
	for _, piece := range []string{"Fake ", "provider ", "reply: ", "hello ", "there ", "world ", "and ", "more"} {
		wantStream += head + `{"content":"` + piece + `"},"finish_reason":null}]}` + "\n\n"
	}
	wantStream += head + `{},"finish_reason":"stop"}]}` + "\n\ndata: [DONE]\n\n"
	if string(r.body) != wantStream {
		t.Errorf("stream\n%s\nwant\n%s", r.body, wantStream)
	}
}

// WithReasoning answers as vLLM's reasoning parser does: reasoning_content
// beside the content (streamed first), a system_fingerprint, and usage
// with reasoning and cached tokens.
func TestReasoning(t *testing.T) {
	s := newServer(t, providertest.WithReasoning())
	a := decodeAnswer(t, post(t, s.URL+"/chat/completions", chatBody))
	m := a.Choices[0].Message
	if m.ReasoningContent != "Thinking about: hello there world" || m.Content == nil || *m.Content != "Fake provider reply: hello there world" {
		t.Errorf("message %+v", m)
	}
	if a.SystemFingerprint == nil || *a.SystemFingerprint != "fp_providertest" || string(a.Choices[0].Logprobs) != "null" {
		t.Errorf("answer %s, want system_fingerprint fp_providertest and logprobs null", a.raw)
	}
	// 5 prompt words; 6 content words and 5 reasoning words.
	u := a.Usage
	if u.PromptTokens != 5 || u.CompletionTokens != 11 || u.TotalTokens != 16 ||
		u.CompletionTokensDetails.ReasoningTokens != 5 || u.PromptTokensDetails.CachedTokens != 2 {
		t.Errorf("usage %+v", u)
	}

	st := assemble(t, post(t, s.URL+"/chat/completions", withStream(chatBody)))
	c := st.choices[0]
	if c.reasoning != m.ReasoningContent || c.content != *m.Content || c.finish != "stop" {
		t.Errorf("streamed %+v", c)
	}
	wantKinds := []string{"role", "reasoning", "reasoning", "reasoning", "reasoning", "reasoning",
		"content", "content", "content", "content", "content", "content", "finish"}
	if !reflect.DeepEqual(c.kinds, wantKinds) {
		t.Errorf("chunk kinds %v, want a word of reasoning a chunk, then the content", c.kinds)
	}
	if st.usage == nil || *st.usage != *u {
		t.Errorf("streamed usage %+v, want %+v", st.usage, u)
	}
	for i, fp := range st.fingerprints {
		if fp != "fp_providertest" {
			t.Errorf("chunk %d system_fingerprint %q", i, fp)
		}
	}

	// A tool call and several choices carry reasoning too.
	a = decodeAnswer(t, post(t, s.URL+"/chat/completions", `{"model":"m","n":2,`+toolsBody+`,"messages":[{"role":"user","content":"weather?"}]}`))
	for i, c := range a.Choices {
		want := "Thinking about: weather?" + []string{"", " (choice 1)"}[i]
		if c.Message.ReasoningContent != want || len(c.Message.ToolCalls) != 1 {
			t.Errorf("choice %d %+v, want reasoning %q and a call", i, c.Message, want)
		}
	}
}

// A request's own switch turns reasoning on or off, as on vLLM; off, the
// answer is the one a fake without reasoning gives.
func TestReasoningSwitches(t *testing.T) {
	msgs := `"messages":[{"role":"user","content":"hello there"}]`
	for _, tt := range []struct {
		name   string
		option bool
		params string
		want   bool
	}{
		{"option", true, ``, true},
		{"reasoning_effort", false, `"reasoning_effort":"low",`, true},
		{"enable_thinking", false, `"chat_template_kwargs":{"enable_thinking":true},`, true},
		{"enable_thinking false", true, `"chat_template_kwargs":{"enable_thinking":false},`, false},
		{"enable_thinking false wins", true, `"reasoning_effort":"high","chat_template_kwargs":{"enable_thinking":false},`, false},
		{"reasoning_effort null", false, `"reasoning_effort":null,`, false},
		{"other kwargs", false, `"chat_template_kwargs":{"add_generation_prompt":true},`, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			opts := []providertest.Option{providertest.WithClock(newClock().Now)}
			if tt.option {
				opts = append(opts, providertest.WithReasoning())
			}
			body := `{"model":"m",` + tt.params + msgs + `}`
			for _, b := range []string{body, withStream(body)} {
				r := post(t, newServer(t, opts...).URL+"/chat/completions", b)
				plain := post(t, newServer(t, providertest.WithClock(newClock().Now)).URL+"/chat/completions", `{"model":"m",`+msgs+`}`)
				if strings.Contains(b, `"stream"`) {
					plain = post(t, newServer(t, providertest.WithClock(newClock().Now)).URL+"/chat/completions", withStream(`{"model":"m",`+msgs+`}`))
				}
				has := strings.Contains(string(r.body), `"reasoning_content":"Thinking`)
				switch {
				case has != tt.want:
					t.Errorf("%s: reasoning %t, want %t: %s", b, has, tt.want, r.body)
				case !tt.want && string(r.body) != string(plain.body):
					t.Errorf("%s: answer\n%s\nwant the plain one\n%s", b, r.body, plain.body)
				}
			}
		})
	}
}

// WithStatus answers every chat and embeddings request with the status
// and OpenAI's error body; /models still answers.
func TestWithStatus(t *testing.T) {
	s := newServer(t, providertest.WithStatus(503), providertest.WithRateLimit(1))
	s.Enqueue(providertest.Reply("kept"))
	want := `{"error":{"message":"The server is overloaded (providertest --status).","type":"server_error","param":null,"code":null}}`
	for _, rq := range []struct{ path, body string }{
		{"/chat/completions", chatBody},
		{"/chat/completions", withStream(chatBody)},
		{"/chat/completions", `not json`},
		{"/embeddings", `{"model":"m","input":"x"}`},
		{"/embeddings", `{}`},
	} {
		r := post(t, s.URL+rq.path, rq.body)
		if r.status != 503 || string(r.body) != want || r.header.Get("Content-Type") != "application/json" {
			t.Errorf("POST %s %s: %d %q %s", rq.path, rq.body, r.status, r.header.Get("Content-Type"), r.body)
		}
	}
	if r := get(t, s.URL+"/models"); r.status != 200 {
		t.Errorf("GET /models: %d %s", r.status, r.body)
	}
	if st, want := s.Stats(), (providertest.Stats{Requests: 6, Models: 1}); st != want {
		t.Errorf("Stats %+v, want %+v", st, want)
	}
	if s.Pending() != 1 {
		t.Errorf("Pending %d: the script must stay queued", s.Pending())
	}

	for _, tt := range []struct {
		code      int
		typ, text string
	}{
		{500, "server_error", "Internal Server Error (providertest --status)."},
		{429, "rate_limit_error", "Rate limit reached (providertest --status)."},
		{401, "authentication_error", "Unauthorized (providertest --status)."},
	} {
		r := post(t, newServer(t, providertest.WithStatus(tt.code)).URL+"/chat/completions", chatBody)
		var e struct {
			Error struct {
				Message, Type string
				Code          *string
			}
		}
		if err := json.Unmarshal(r.body, &e); err != nil || r.status != tt.code || e.Error.Type != tt.typ || e.Error.Message != tt.text || e.Error.Code != nil {
			t.Errorf("WithStatus(%d): %d %s", tt.code, r.status, r.body)
		}
	}
	if r := post(t, newServer(t, providertest.WithStatus(200)).URL+"/chat/completions", chatBody); r.status != 200 || r.content(t) == "" {
		t.Errorf("WithStatus(200) is not a failure status and must leave the fake answering: %d %s", r.status, r.body)
	}
}

// Parameters the fake does not know, from vLLM's sampling extensions to
// OpenAI's newer options, are accepted and change nothing.
func TestUnknownParametersIgnored(t *testing.T) {
	msgs := `"messages":[{"role":"user","content":"hello there"}]`
	for _, p := range []string{
		`"top_k":20`, `"min_p":0.05`, `"repetition_penalty":1.1`, `"length_penalty":1`,
		`"chat_template_kwargs":{"add_generation_prompt":true}`, `"chat_template":"{{x}}"`,
		`"guided_json":{"type":"object"}`, `"guided_choice":["a","b"]`, `"guided_regex":"a+"`,
		`"structured_outputs":{"json":{"type":"object"}}`, `"skip_special_tokens":false`,
		`"include_stop_str_in_output":true`, `"best_of":1`, `"use_beam_search":false`, `"ignore_eos":false`,
		`"presence_penalty":0.5`, `"frequency_penalty":0.5`, `"logit_bias":{"50256":-100}`,
		`"service_tier":"auto"`, `"prompt_cache_key":"k"`, `"safety_identifier":"u"`, `"verbosity":"low"`,
		`"prediction":{"type":"content","content":"x"}`, `"store":true`, `"metadata":{"a":"b"}`,
		`"parallel_tool_calls":false`, `"user":"u"`, `"seed":7`, `"x_vendor_extension":{"anything":[1,null]}`,
	} {
		for _, stream := range []bool{false, true} {
			body, plainBody := `{"model":"m",`+p+`,`+msgs+`}`, `{"model":"m",`+msgs+`}`
			if stream {
				body, plainBody = withStream(body), withStream(plainBody)
			}
			r := post(t, newServer(t, providertest.WithClock(newClock().Now)).URL+"/chat/completions", body)
			plain := post(t, newServer(t, providertest.WithClock(newClock().Now)).URL+"/chat/completions", plainBody)
			if r.status != 200 || string(r.body) != string(plain.body) {
				t.Errorf("%s: %d %s\nwant the answer without it:\n%s", body, r.status, r.body, plain.body)
			}
		}
	}
	// reasoning_effort is accepted too; it turns reasoning on (TestReasoningSwitches).
	if r := post(t, newServer(t).URL+"/chat/completions", `{"model":"m","reasoning_effort":"minimal",`+msgs+`}`); r.status != 200 {
		t.Errorf("reasoning_effort: %d %s", r.status, r.body)
	}
}

// Message fields the fake does not read (a name, an earlier turn's
// reasoning_content) are accepted.
func TestUnknownMessageFieldsAccepted(t *testing.T) {
	s := newServer(t)
	r := post(t, s.URL+"/chat/completions", `{"model":"m","messages":[
		{"role":"developer","content":"be brief","name":"policy"},
		{"role":"user","content":"first","name":"ann"},
		{"role":"assistant","content":"answer","reasoning_content":"I thought","refusal":null,"annotations":[]},
		{"role":"user","content":"second question","name":"ann","x_extra":1}]}`)
	if got := r.content(t); got != "Fake provider reply: second question" {
		t.Errorf("content %q (%d %s)", got, r.status, r.body)
	}
	if m := s.Requests()[0].Messages; len(m) != 4 || m[2].Content != "answer" || m[2].Role != "assistant" {
		t.Errorf("recorded messages %+v", m)
	}
}
