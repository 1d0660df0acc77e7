package promptkit_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/promptkit/promptkit"
	"github.com/promptkit/promptkit/providertest"
)

// chatEngine is an engine on a fresh fake provider whose one profile has
// a system text, sampling values and the given repair budget and
// structured-output switch.
func chatEngine(t *testing.T, repairBudget int, structured *bool) (*providertest.Server, *promptkit.Engine) {
	t.Helper()
	srv := providertest.NewServer()
	t.Cleanup(srv.Close)
	temp, topP, maxTok := 0.5, 0.8, 100
	eng, err := promptkit.New(promptkit.Config{
		Backends: []promptkit.Backend{{ID: "local", BaseURL: srv.URL}},
		Profiles: []promptkit.Profile{{ID: "default", Backend: "local", Model: "m1", System: "You are terse.",
			Sampling:     promptkit.Sampling{Temperature: &temp, TopP: &topP, MaxTokens: &maxTok, Stop: []string{"STOP"}},
			RepairBudget: repairBudget, StructuredOutput: structured}},
		Prompts: []promptkit.Prompt{
			{ID: "summarize", Template: "Summarize: {{.text}}", OutputSchema: json.RawMessage(summarySchema)},
			{ID: "echo", Template: "Say {{.word}}"},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	return srv, eng
}

// body decodes the raw body of the provider's i-th request.
func body(t *testing.T, srv *providertest.Server, i int) map[string]json.RawMessage {
	t.Helper()
	reqs := srv.Requests()
	if len(reqs) <= i {
		t.Fatalf("provider saw %d requests, want at least %d", len(reqs), i+1)
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(reqs[i].Body, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

func conversation(msgs []providertest.Message) string {
	var parts []string
	for _, m := range msgs {
		parts = append(parts, m.Role+":"+m.Content)
	}
	return strings.Join(parts, "|")
}

// A conversation is sent as given, after the profile's system text, and
// hashes like the same conversation made of History and Text.
func TestRunMessagesFollowProfileSystem(t *testing.T) {
	t.Parallel()
	srv, eng := chatEngine(t, 0, nil)
	srv.Enqueue(providertest.Reply("Four."))
	msgs := []promptkit.Message{
		{Role: promptkit.RoleSystem, Content: "Answer in one word."},
		{Role: promptkit.RoleUser, Content: "2+2?"},
		{Role: promptkit.RoleAssistant, Content: "4"},
		{Role: promptkit.RoleUser, Content: "In words?"},
	}
	res, err := eng.Run(context.Background(), promptkit.RunRequest{Messages: msgs})
	if err != nil {
		t.Fatal(err)
	}
	if res.Text != "Four." || res.FinishReason != "stop" || res.Validation.Status != promptkit.ValidationSkipped || res.Output != nil {
		t.Fatalf("result = %+v", res)
	}
	want := "system:You are terse.|system:Answer in one word.|user:2+2?|assistant:4|user:In words?"
	if got := conversation(srv.Requests()[0].Messages); got != want {
		t.Fatalf("provider got %s\nwant %s", got, want)
	}
	if _, ok := body(t, srv, 0)["response_format"]; ok {
		t.Fatal("a plain conversation asked for a response_format")
	}

	asText, err := eng.Prepare(context.Background(), promptkit.RunRequest{History: msgs[:3], Text: msgs[3].Content})
	if err != nil {
		t.Fatal(err)
	}
	if asText.PromptHash != res.PromptHash {
		t.Fatalf("hash %s for messages, %s for the same request as history and text", res.PromptHash, asText.PromptHash)
	}
	// The engine keeps its own copy: changing the caller's slice after the
	// run does not change what was prepared.
	prep, err := eng.Prepare(context.Background(), promptkit.RunRequest{Messages: msgs})
	if err != nil {
		t.Fatal(err)
	}
	msgs[1].Content = "changed"
	if prep.Request.Messages[2].Content != "2+2?" {
		t.Fatalf("prepared request shares the caller's messages: %+v", prep.Request.Messages)
	}
}

// Per-request sampling values replace the profile's, an explicit zero
// included; without them the profile's are sent.
func TestRunSamplingOverrides(t *testing.T) {
	t.Parallel()
	srv, eng := chatEngine(t, 0, nil)
	zero, topP, maxTok, seed := 0.0, 0.25, 7, int64(42)
	_, err := eng.Run(context.Background(), promptkit.RunRequest{Text: "hi",
		Sampling: promptkit.Sampling{Temperature: &zero, TopP: &topP, MaxTokens: &maxTok, Stop: []string{"END", "\n\n"}, Seed: &seed}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := eng.Run(context.Background(), promptkit.RunRequest{Text: "hi"}); err != nil {
		t.Fatal(err)
	}
	for i, want := range []map[string]string{
		{"temperature": "0", "top_p": "0.25", "max_tokens": "7", "stop": `["END","\n\n"]`, "seed": "42"},
		{"temperature": "0.5", "top_p": "0.8", "max_tokens": "100", "stop": `["STOP"]`, "seed": ""},
	} {
		b := body(t, srv, i)
		for k, v := range want {
			if string(b[k]) != v {
				t.Errorf("request %d: %s = %s, want %s", i, k, b[k], v)
			}
		}
	}
}

// JSONObject sends response_format json_object; the answer is parsed.
func TestRunJSONObject(t *testing.T) {
	t.Parallel()
	srv, eng := chatEngine(t, 0, nil)
	res, err := eng.Run(context.Background(), promptkit.RunRequest{Text: "Give me JSON", JSONObject: true})
	if err != nil {
		t.Fatal(err)
	}
	if string(body(t, srv, 0)["response_format"]) != `{"type":"json_object"}` {
		t.Fatalf("response_format = %s", body(t, srv, 0)["response_format"])
	}
	var out map[string]string
	if res.Validation.Status != promptkit.ValidationValid || res.DecodeOutput(&out) != nil || !strings.HasPrefix(out["reply"], "Fake provider reply") {
		t.Fatalf("result = %+v, output %s", res.Validation, res.Output)
	}
	// A named prompt without an output schema may ask for an object too.
	if _, err := eng.Run(context.Background(), promptkit.RunRequest{PromptID: "echo", Inputs: map[string]any{"word": "x"}, JSONObject: true}); err != nil {
		t.Fatal(err)
	}
	if string(body(t, srv, 1)["response_format"]) != `{"type":"json_object"}` {
		t.Fatalf("response_format = %s", body(t, srv, 1)["response_format"])
	}
}

// An answer that is valid JSON but not an object is repaired, and the
// repair asks for an object; one still not an object is invalid.
func TestRunJSONObjectRepair(t *testing.T) {
	t.Parallel()
	srv, eng := chatEngine(t, 1, nil)
	srv.Enqueue(providertest.Reply(`[1, 2]`), providertest.Reply("```json\n{\"n\": 2}\n```"))
	res, err := eng.Run(context.Background(), promptkit.RunRequest{Text: "Count", JSONObject: true})
	if err != nil {
		t.Fatal(err)
	}
	if res.Validation.Status != promptkit.ValidationValid || string(res.Output) != `{"n":2}` || res.RepairCalls != 1 || res.Attempts != 2 {
		t.Fatalf("result = %+v, output %s", res, res.Output)
	}
	repair := srv.Requests()[1].Messages
	last := repair[len(repair)-1].Content
	if repair[len(repair)-2].Content != "[1, 2]" || !strings.Contains(last, "not a JSON object") || !strings.Contains(last, "only a JSON object") {
		t.Fatalf("repair conversation = %s", conversation(repair))
	}
	if string(body(t, srv, 1)["response_format"]) != `{"type":"json_object"}` {
		t.Fatalf("repair response_format = %s", body(t, srv, 1)["response_format"])
	}

	srv.Enqueue(providertest.Reply(`"just a string"`), providertest.Reply(`not json`))
	res, err = eng.Run(context.Background(), promptkit.RunRequest{Text: "Count", JSONObject: true})
	if err != nil {
		t.Fatal(err)
	}
	if res.Validation.Status != promptkit.ValidationInvalid || res.Output != nil || len(res.Validation.Errors) == 0 ||
		res.OutputProblem() != "output does not satisfy the requested output format after 1 repair generation(s)" {
		t.Fatalf("result = %+v, problem %q", res.Validation, res.OutputProblem())
	}
}

const citySchema = `{"type":"object","properties":{"city":{"type":"string","minLength":1}},"required":["city"],"additionalProperties":false}`

// An ad-hoc output schema is sent as response_format, and the answer
// validated and repaired against it like a named prompt's.
func TestRunAdHocSchemaRepair(t *testing.T) {
	t.Parallel()
	srv, eng := chatEngine(t, 1, nil)
	srv.Enqueue(providertest.Reply(`{"city": ""}`), providertest.Reply(`{"city": "Paris"}`))
	res, err := eng.Run(context.Background(), promptkit.RunRequest{
		Messages:     []promptkit.Message{{Role: promptkit.RoleUser, Content: "Capital of France?"}},
		OutputSchema: json.RawMessage(citySchema), OutputSchemaName: "city_answer",
	})
	if err != nil {
		t.Fatal(err)
	}
	if res.Validation.Status != promptkit.ValidationValid || string(res.Output) != `{"city":"Paris"}` || res.RepairCalls != 1 || res.PromptID != "" {
		t.Fatalf("result = %+v, output %s", res, res.Output)
	}
	var rf struct {
		Type       string `json:"type"`
		JSONSchema struct {
			Name   string          `json:"name"`
			Schema json.RawMessage `json:"schema"`
		} `json:"json_schema"`
	}
	if err := json.Unmarshal(body(t, srv, 0)["response_format"], &rf); err != nil || rf.Type != "json_schema" ||
		rf.JSONSchema.Name != "city_answer" || string(rf.JSONSchema.Schema) != citySchema {
		t.Fatalf("response_format = %+v (%v)", rf, err)
	}
	repair := srv.Requests()[1].Messages
	last := repair[len(repair)-1].Content
	if !strings.Contains(last, "at /city") || !strings.HasSuffix(last, citySchema) {
		t.Fatalf("repair message = %q", last)
	}

	// Without a name the schema is called "output"; the default responder
	// answers with a document valid against it.
	res, err = eng.Run(context.Background(), promptkit.RunRequest{Text: "Capital?", OutputSchema: json.RawMessage(citySchema)})
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(body(t, srv, 2)["response_format"], &rf); err != nil || rf.JSONSchema.Name != "output" {
		t.Fatalf("response_format = %+v (%v)", rf, err)
	}
	if res.Validation.Status != promptkit.ValidationValid || res.Output == nil {
		t.Fatalf("result = %+v", res.Validation)
	}
}

// With StructuredOutput off no response_format is sent, but the output
// is still checked: a schema's and a JSON object's alike.
func TestRunAdHocFormatsWithoutStructuredOutput(t *testing.T) {
	t.Parallel()
	off := false
	srv, eng := chatEngine(t, 0, &off)
	srv.Enqueue(providertest.Reply(`{"city": 1}`), providertest.Reply(`[]`))
	for i, req := range []promptkit.RunRequest{
		{Text: "Capital?", OutputSchema: json.RawMessage(citySchema)},
		{Text: "Capital?", JSONObject: true},
	} {
		res, err := eng.Run(context.Background(), req)
		if err != nil {
			t.Fatal(err)
		}
		if res.Validation.Status != promptkit.ValidationInvalid || res.Output != nil {
			t.Fatalf("request %d: validation = %+v", i, res.Validation)
		}
		if _, ok := body(t, srv, i)["response_format"]; ok {
			t.Fatalf("request %d sent a response_format", i)
		}
	}
}

// Seed and JSONObject reach an injected client, and every combination the
// engine refuses is refused before any provider call, with a message that
// quotes nothing from the request.
func TestRunChatInjectedClientAndRefusals(t *testing.T) {
	t.Parallel()
	client := &fakeClient{resp: &promptkit.GenerateResponse{Text: `{"ok":true}`}}
	eng, err := promptkit.New(promptkit.Config{
		Profiles: []promptkit.Profile{{ID: "p", Model: "m"}},
		Prompts: []promptkit.Prompt{
			{ID: "summarize", Template: "Summarize: {{.text}}", OutputSchema: json.RawMessage(summarySchema)},
		},
		LLMClient: client,
	})
	if err != nil {
		t.Fatal(err)
	}
	seed := int64(7)
	res, err := eng.Run(context.Background(), promptkit.RunRequest{Text: "hi", Sampling: promptkit.Sampling{Seed: &seed}, JSONObject: true})
	if err != nil {
		t.Fatal(err)
	}
	got := client.got[0]
	if got.Seed == nil || *got.Seed != 7 || !got.JSONObject || got.OutputSchema != nil || string(res.Output) != `{"ok":true}` {
		t.Fatalf("client got seed %v, json_object %t, schema %s; output %s", got.Seed, got.JSONObject, got.OutputSchema, res.Output)
	}

	nan, hot, wide, none := math.NaN(), 2.5, 1.5, 0
	user := []promptkit.Message{{Role: promptkit.RoleUser, Content: "secret-text"}}
	for name, req := range map[string]promptkit.RunRequest{
		"nothing":                          {},
		"prompt and text":                  {PromptID: "summarize", Text: "secret-text"},
		"text and messages":                {Text: "secret-text", Messages: user},
		"prompt and messages":              {PromptID: "summarize", Messages: user},
		"messages and history":             {Messages: user, History: user},
		"inputs with messages":             {Messages: user, Inputs: map[string]any{"a": "secret-text"}},
		"bad role":                         {Messages: []promptkit.Message{{Role: "tool", Content: "secret-text"}}},
		"schema with prompt":               {PromptID: "summarize", Inputs: map[string]any{"text": "x"}, OutputSchema: json.RawMessage(citySchema)},
		"json_object and schema":           {Text: "secret-text", JSONObject: true, OutputSchema: json.RawMessage(citySchema)},
		"json_object with schema'd prompt": {PromptID: "summarize", Inputs: map[string]any{"text": "x"}, JSONObject: true},
		"schema not JSON":                  {Text: "secret-text", OutputSchema: json.RawMessage(`{"secret-value":`)},
		"schema not an object":             {Text: "secret-text", OutputSchema: json.RawMessage(`["secret-value"]`)},
		"schema does not compile":          {Text: "secret-text", OutputSchema: json.RawMessage(`{"type":"secret-value"}`)},
		"schema refers outside":            {Text: "secret-text", OutputSchema: json.RawMessage(`{"$ref":"https://secret-value.example/s.json"}`)},
		"name without schema":              {Text: "secret-text", OutputSchemaName: "n"},
		"bad schema name":                  {Text: "secret-text", OutputSchema: json.RawMessage(citySchema), OutputSchemaName: "secret value"},
		"temperature NaN":                  {Text: "secret-text", Sampling: promptkit.Sampling{Temperature: &nan}},
		"temperature too high":             {Text: "secret-text", Sampling: promptkit.Sampling{Temperature: &hot}},
		"top_p too high":                   {Text: "secret-text", Sampling: promptkit.Sampling{TopP: &wide}},
		"max_tokens zero":                  {Text: "secret-text", Sampling: promptkit.Sampling{MaxTokens: &none}},
	} {
		for _, run := range []func() error{
			func() error { _, err := eng.Prepare(context.Background(), req); return err },
			func() error { _, err := eng.Run(context.Background(), req); return err },
		} {
			err := run()
			if !errors.Is(err, promptkit.ErrInvalidRequest) {
				t.Errorf("%s: err = %v, want ErrInvalidRequest", name, err)
				continue
			}
			if strings.Contains(err.Error(), "secret") {
				t.Errorf("%s: error quotes the request: %v", name, err)
			}
		}
	}
	if n := client.calls; n != 1 {
		t.Fatalf("client called %d times, want only the first run", n)
	}
}

// Profile returns a copy of a loaded profile.
func TestEngineProfile(t *testing.T) {
	t.Parallel()
	_, eng := chatEngine(t, 0, nil)
	p, ok := eng.Profile("default")
	if !ok || p.ID != "default" || p.Model != "m1" || p.Backend != "local" || *p.Temperature != 0.5 || p.Stop[0] != "STOP" {
		t.Fatalf("Profile = %+v, %t", p, ok)
	}
	*p.Temperature, p.Stop[0] = 2, "changed"
	again, _ := eng.Profile("default")
	if *again.Temperature != 0.5 || again.Stop[0] != "STOP" {
		t.Fatalf("changing a returned profile changed the engine's: %+v", again)
	}
	if _, ok := eng.Profile("missing"); ok {
		t.Fatal("Profile found a profile that does not exist")
	}
}

// The hash's canonical form is unchanged for requests without a seed or
// json_object, so stored hashes stay comparable; each of them changes it.
func TestPromptHashCanonicalForm(t *testing.T) {
	t.Parallel()
	_, eng := chatEngine(t, 0, nil)
	prep := func(req promptkit.RunRequest) string {
		t.Helper()
		p, err := eng.Prepare(context.Background(), req)
		if err != nil {
			t.Fatal(err)
		}
		return p.PromptHash
	}
	canon := `{"model":"m1","messages":[{"Role":"system","Content":"You are terse."},{"Role":"user","Content":"hi"}],` +
		`"temperature":0.5,"top_p":0.8,"max_tokens":100,"stop":["STOP"],"schema":null}`
	sum := sha256.Sum256([]byte(canon))
	if got, want := prep(promptkit.RunRequest{Text: "hi"}), "sha256:"+hex.EncodeToString(sum[:]); got != want {
		t.Fatalf("hash %s, want %s", got, want)
	}
	seed := int64(1)
	hashes := map[string]bool{}
	for _, req := range []promptkit.RunRequest{{Text: "hi"}, {Text: "hi", Sampling: promptkit.Sampling{Seed: &seed}}, {Text: "hi", JSONObject: true}} {
		hashes[prep(req)] = true
	}
	if len(hashes) != 3 {
		t.Fatalf("seed or json_object does not change the hash: %v", hashes)
	}
}
