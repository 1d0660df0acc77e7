package worker_test

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/promptkit/promptkit"
	"github.com/promptkit/promptkit/jobs"
	"github.com/promptkit/promptkit/jobs/worker"
	"github.com/promptkit/promptkit/pktype"
	"github.com/promptkit/promptkit/providertest"
)

// chatWorkerEngine is an engine on the fixture's provider whose profile
// "chat" has a system text and a repair budget of one.
func chatWorkerEngine(t *testing.T, providerURL string) *promptkit.Engine {
	t.Helper()
	zero := 0
	eng, err := promptkit.New(promptkit.Config{
		Backends:         []promptkit.Backend{{ID: "fake", BaseURL: providerURL}},
		Profiles:         []promptkit.Profile{{ID: "chat", Backend: "fake", Model: "m", System: "House rules.", RepairBudget: 1}},
		TransientRetries: &zero,
	})
	if err != nil {
		t.Fatalf("promptkit.New: %v", err)
	}
	return eng
}

const answerSchema = `{"type":"object","properties":{"answer":{"type":"integer"}},"required":["answer"]}`

// Request turns a chat prompt into a Messages request carrying its
// sampling values and response format, with the profile and options.
func TestRequestFromChat(t *testing.T) {
	t.Parallel()
	temp, topP, maxTok, seed := 0.0, 0.5, 9, int64(11)
	msgs := []pktype.Message{{Role: "system", Content: "s"}, {Role: "user", Content: "u"}}
	sampling := pktype.Sampling{Temperature: &temp, TopP: &topP, MaxTokens: &maxTok, Stop: []string{"x"}, Seed: &seed}
	base := jobs.ChatRequest{Messages: msgs, Sampling: sampling}
	opts := jobs.ExecutionOptions{Model: "other", PreferProvider: "fake"}

	text := base
	req, err := worker.Request(jobs.Prompt{Chat: &text, Profile: "chat"}, opts)
	if err != nil {
		t.Fatal(err)
	}
	want := promptkit.RunRequest{Messages: msgs, ProfileID: "chat", Model: "other", Backend: "fake",
		Sampling: sampling}
	if !reflect.DeepEqual(req, want) {
		t.Fatalf("Request =\n%+v\nwant\n%+v", req, want)
	}

	object := base
	object.ResponseFormat = jobs.FormatJSONObject
	req, err = worker.Request(jobs.Prompt{Chat: &object}, jobs.ExecutionOptions{})
	if err != nil || !req.JSONObject || req.OutputSchema != nil {
		t.Fatalf("json_object: Request = %+v, %v", req, err)
	}

	schema := base
	schema.ResponseFormat, schema.Schema, schema.SchemaName = jobs.FormatJSONSchema, json.RawMessage(answerSchema), "answer"
	req, err = worker.Request(jobs.Prompt{Chat: &schema}, jobs.ExecutionOptions{})
	if err != nil || req.JSONObject || string(req.OutputSchema) != answerSchema || req.OutputSchemaName != "answer" {
		t.Fatalf("json_schema: Request = %+v, %v", req, err)
	}
}

// A chat prompt runs through the engine on a worker: its conversation
// after the profile's system text, its sampling values on the wire, and
// the answer stored with its finish_reason. A thread parent does not add
// history to it.
func TestChatPromptRuns(t *testing.T) {
	eachStore(t, func(t *testing.T, f *fixture) {
		f.srv.Enqueue(providertest.Reply("first answer"), providertest.Reply("Paris."))
		parent := f.enqueue(jobs.EnqueueParams{Text: "an earlier turn", Profile: "chat"})
		w := f.worker("w1", func(c *worker.Config) { c.Engine = chatWorkerEngine(t, f.srv.URL); c.HistoryDepth = 10 })
		f.runOnce(w, 1)

		seed, maxTok := int64(5), 20
		e := f.enqueue(jobs.EnqueueParams{Profile: "chat", ParentID: parent.PromptID, Chat: &jobs.ChatRequest{
			Messages: []pktype.Message{
				{Role: "system", Content: "Be brief."},
				{Role: "user", Content: "Capital of France?"},
			},
			Sampling: pktype.Sampling{Seed: &seed, MaxTokens: &maxTok},
		}})
		f.runOnce(w, 1)

		j := f.job(e.JobID)
		if j.State != jobs.Succeeded {
			t.Fatalf("job: state=%s kind=%q msg=%q", j.State, j.ErrorKind, j.ErrorMessage)
		}
		r, err := f.store.GetResponse(f.ctx, "", j.ResponseID)
		if err != nil {
			t.Fatal(err)
		}
		if r.Output != "Paris." || r.FinishReason != "stop" || r.Parsed != nil {
			t.Fatalf("response = %+v", r)
		}
		reqs := f.srv.Requests()
		if len(reqs) != 2 {
			t.Fatalf("provider saw %d requests, want 2", len(reqs))
		}
		var got []string
		for _, m := range reqs[1].Messages {
			got = append(got, m.Role+":"+m.Content)
		}
		if s := strings.Join(got, "|"); s != "system:House rules.|system:Be brief.|user:Capital of France?" {
			t.Fatalf("provider got %s", s)
		}
		var body map[string]json.RawMessage
		if err := json.Unmarshal(reqs[1].Body, &body); err != nil {
			t.Fatal(err)
		}
		if string(body["seed"]) != "5" || string(body["max_tokens"]) != "20" {
			t.Fatalf("seed = %s, max_tokens = %s", body["seed"], body["max_tokens"])
		}
	})
}

// A json_schema chat prompt stores the parsed answer; an answer failing
// the schema was repaired first.
func TestChatPromptJSONSchema(t *testing.T) {
	eachStore(t, func(t *testing.T, f *fixture) {
		f.srv.Enqueue(providertest.Reply(`{"answer": "four"}`), providertest.Reply(`{"answer": 4}`))
		e := f.enqueue(jobs.EnqueueParams{Profile: "chat", Chat: &jobs.ChatRequest{
			Messages:       []pktype.Message{{Role: "user", Content: "2+2 as JSON"}},
			ResponseFormat: jobs.FormatJSONSchema, SchemaName: "sum", Schema: json.RawMessage(answerSchema),
		}})
		w := f.worker("w1", func(c *worker.Config) { c.Engine = chatWorkerEngine(t, f.srv.URL) })
		f.runOnce(w, 1)

		j := f.job(e.JobID)
		if j.State != jobs.Succeeded {
			t.Fatalf("job: state=%s kind=%q msg=%q", j.State, j.ErrorKind, j.ErrorMessage)
		}
		r, err := f.store.GetResponse(f.ctx, "", j.ResponseID)
		if err != nil {
			t.Fatal(err)
		}
		if string(r.Parsed) != `{"answer":4}` || r.FinishReason != "stop" {
			t.Fatalf("response = %+v (parsed %s)", r, r.Parsed)
		}
		reqs := f.srv.Requests()
		if len(reqs) != 2 {
			t.Fatalf("provider saw %d requests, want 2 (one repair)", len(reqs))
		}
		var rf struct {
			Type       string `json:"type"`
			JSONSchema struct {
				Name string `json:"name"`
			} `json:"json_schema"`
		}
		if err := json.Unmarshal(reqs[0].ResponseFormat, &rf); err != nil || rf.Type != "json_schema" || rf.JSONSchema.Name != "sum" {
			t.Fatalf("response_format = %s (%v)", reqs[0].ResponseFormat, err)
		}
	})
}

// A json_object chat prompt whose answer stays no JSON object after the
// repair budget fails with error_kind parse, quoting nothing.
func TestChatPromptJSONObjectInvalid(t *testing.T) {
	eachStore(t, func(t *testing.T, f *fixture) {
		f.srv.Enqueue(providertest.Reply("secret words"), providertest.Reply(`["secret"]`))
		e := f.enqueue(jobs.EnqueueParams{Profile: "chat", Chat: &jobs.ChatRequest{
			Messages:       []pktype.Message{{Role: "user", Content: "JSON please"}},
			ResponseFormat: jobs.FormatJSONObject,
		}})
		w := f.worker("w1", func(c *worker.Config) { c.Engine = chatWorkerEngine(t, f.srv.URL) })
		f.runOnce(w, 1)

		j := f.job(e.JobID)
		if j.State != jobs.Failed || j.ErrorKind != jobs.KindParse || strings.Contains(j.ErrorMessage, "secret") {
			t.Fatalf("job: state=%s kind=%q msg=%q; want failed, parse", j.State, j.ErrorKind, j.ErrorMessage)
		}
		if string(f.srv.Requests()[0].ResponseFormat) != `{"type":"json_object"}` {
			t.Fatalf("response_format = %s", f.srv.Requests()[0].ResponseFormat)
		}
	})
}

// A chat prompt with tools is stored with them: a job attempt that fails
// and the next one send byte-identical requests, tools and tool history
// included, and the answer's tool calls are stored with the response.
func TestChatToolsDurable(t *testing.T) {
	eachStore(t, func(t *testing.T, f *fixture) {
		f.srv.Enqueue(providertest.Status(503), providertest.CallTool("weather", `{"city":"Paris"}`))
		chat := &jobs.ChatRequest{
			Messages: []pktype.Message{
				{Role: "user", Content: "Weather in Paris, then Lyon?"},
				{Role: "assistant", ToolCalls: []pktype.ToolCall{{ID: "c0", Type: "function", Function: pktype.FunctionCall{Name: "weather", Arguments: `{"city":"Lyon"}`}}}},
				{Role: "tool", ToolCallID: "c0", Content: "18 C"},
			},
			ToolUse: pktype.ToolUse{
				Tools: []pktype.Tool{{Type: "function", Function: pktype.ToolFunction{Name: "weather",
					Parameters: json.RawMessage(`{"type":"object","properties":{"city":{"type":"string"}}}`)}}},
				ToolChoice: &pktype.ToolChoice{Mode: pktype.ToolChoiceRequired},
			},
		}
		e := f.enqueue(jobs.EnqueueParams{Profile: "chat", Chat: chat})
		w := f.worker("w1", func(c *worker.Config) { c.Engine = chatWorkerEngine(t, f.srv.URL) })
		f.runOnce(w, 1)
		if j := f.job(e.JobID); j.State != jobs.Queued {
			t.Fatalf("after the 503: state=%s", j.State)
		}
		f.clock.Advance(time.Hour) // past the backoff
		f.runOnce(w, 1)

		j := f.job(e.JobID)
		if j.State != jobs.Succeeded {
			t.Fatalf("job: state=%s kind=%q msg=%q", j.State, j.ErrorKind, j.ErrorMessage)
		}
		reqs := f.srv.Requests()
		if len(reqs) != 2 || !bytes.Equal(reqs[0].Body, reqs[1].Body) {
			t.Fatalf("the job attempts sent different requests:\n%s\n%s", reqs[0].Body, reqs[1].Body)
		}
		var body struct {
			Tools      []pktype.Tool     `json:"tools"`
			ToolChoice json.RawMessage   `json:"tool_choice"`
			Messages   []json.RawMessage `json:"messages"`
		}
		if err := json.Unmarshal(reqs[1].Body, &body); err != nil {
			t.Fatal(err)
		}
		if len(body.Tools) != 1 || body.Tools[0].Function.Name != "weather" || string(body.ToolChoice) != `"required"` || len(body.Messages) != 4 {
			t.Fatalf("request %s", reqs[1].Body)
		}
		// The assistant turn that only called tools goes out with null
		// content; the tool result names its call.
		if !strings.Contains(string(body.Messages[2]), `"content":null`) || !strings.Contains(string(body.Messages[3]), `"tool_call_id":"c0"`) {
			t.Errorf("history %s", reqs[1].Body)
		}
		r, err := f.store.GetResponse(f.ctx, "", j.ResponseID)
		if err != nil {
			t.Fatal(err)
		}
		want := []pktype.ToolCall{{ID: "call_1", Type: "function", Function: pktype.FunctionCall{Name: "weather", Arguments: `{"city":"Paris"}`}}}
		if r.FinishReason != "tool_calls" || r.Output != "" || !reflect.DeepEqual(r.ToolCalls, want) {
			t.Fatalf("response = %+v", r)
		}
	})
}
