package server

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/promptkit/promptkit/internal/openaiapi"
	"github.com/promptkit/promptkit/jobs"
	"github.com/promptkit/promptkit/pktype"
)

// respEvent is one event of a response's stream: its event: name, its
// data as sent, and the data decoded.
type respEvent struct {
	name, data string
	ev         openaiapi.ResponseEvent
}

// openResponseStream makes a streamed request of the Responses API (POST
// /v1/responses, GET /v1/responses/{id}?stream=true) and returns once the
// headers have arrived, checked against the document.
func (e *env) openResponseStream(method, path, body string) *sseLines {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	e.t.Cleanup(cancel)
	req, pattern := e.request(ctx, method, path, "", body)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { res.Body.Close() })
	checkResponse(e.t, pattern, res.StatusCode, res.Header, nil)
	if res.StatusCode != http.StatusOK || res.Header.Get("Content-Type") != "text/event-stream" {
		b, _ := io.ReadAll(res.Body)
		e.t.Fatalf("%s %s: %d %s", method, path, res.StatusCode, b)
	}
	s := &sseLines{t: e.t, res: res}
	s.sc = bufio.NewScanner(io.TeeReader(res.Body, &s.raw))
	return s
}

// nextEvent reads the next event (keep-alive comments skipped), checking
// that its name is its type and its data fits the document; ok is false
// at the end of the stream.
func (s *sseLines) nextEvent() (respEvent, bool) {
	s.t.Helper()
	var ev respEvent
	for {
		line, ok := s.next()
		if !ok {
			return ev, false
		}
		switch {
		case line == "" && ev.data != "":
			if err := oasValidate(s.t, "/components/schemas/ResponseStreamEvent", []byte(ev.data)); err != nil {
				s.t.Errorf("event data: %v\n%s", err, ev.data)
			}
			if err := json.Unmarshal([]byte(ev.data), &ev.ev); err != nil {
				s.t.Fatalf("event %s: %v", ev.data, err)
			}
			if ev.ev.Type != ev.name {
				s.t.Errorf("event: %s, data type %s", ev.name, ev.ev.Type)
			}
			return ev, true
		case strings.HasPrefix(line, "event: "):
			ev.name = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			ev.data = strings.TrimPrefix(line, "data: ")
		}
	}
}

// restEvents reads every remaining event.
func (s *sseLines) restEvents() []respEvent {
	s.t.Helper()
	var out []respEvent
	for {
		ev, ok := s.nextEvent()
		if !ok {
			return out
		}
		out = append(out, ev)
	}
}

// types lists the events' types, a run of deltas as one.
func types(evs []respEvent) string {
	var out []string
	for _, ev := range evs {
		if len(out) == 0 || out[len(out)-1] != ev.ev.Type || !strings.HasSuffix(ev.ev.Type, ".delta") {
			out = append(out, ev.ev.Type)
		}
	}
	return strings.Join(out, " ")
}

// numbered fails t unless the events are numbered from first, one by one.
func numbered(t *testing.T, evs []respEvent, first int) {
	t.Helper()
	for i, ev := range evs {
		if ev.ev.SequenceNumber != first+i {
			t.Fatalf("event %d (%s) numbered %d, want %d", i, ev.ev.Type, ev.ev.SequenceNumber, first+i)
		}
	}
}

// text joins the text deltas.
func text(evs []respEvent) string {
	var b strings.Builder
	for _, ev := range evs {
		if ev.ev.Type == "response.output_text.delta" {
			b.WriteString(*ev.ev.Delta)
		}
	}
	return b.String()
}

// createResponse posts a request and decodes the object.
func (e *env) createResponse(body string) (resp, openaiapi.Response) {
	e.t.Helper()
	r := e.call("POST", "/v1/responses", "", body)
	var o openaiapi.Response
	if r.code == http.StatusOK {
		r.decode(e.t, &o)
	}
	return r, o
}

func (e *env) getResponse(id string) openaiapi.Response {
	e.t.Helper()
	r := e.call("GET", "/v1/responses/"+id, "", nil)
	if r.code != http.StatusOK {
		e.t.Fatalf("GET %s: %d %s", id, r.code, r.body)
	}
	var o openaiapi.Response
	r.decode(e.t, &o)
	return o
}

func outputText(o openaiapi.Response) string {
	for _, it := range o.Output {
		if it.Type == "message" && it.Content != nil && len(*it.Content) > 0 {
			return (*it.Content)[0].Text
		}
	}
	return ""
}

// A plain request waits for its job and answers the object; the request
// is stored whole (metadata included), readable again, and listed as its
// input items.
func TestResponsesPlain(t *testing.T) {
	t.Parallel()
	e := setup(t)
	e.runWorker()
	r, o := e.createResponse(`{"model":"default","input":"Say hi","instructions":"Be brief.","metadata":{"topic":"greeting"},
		"store":false,"user":"u-1","max_output_tokens":50,"temperature":0.3,"truncation":"disabled"}`)
	promptID := r.header.Get(headerPromptID)
	if r.code != 200 || o.ID != "resp_"+promptID || o.Status != "completed" || len(o.Output) != 1 || o.Output[0].ID != "msg_"+promptID ||
		!strings.Contains(outputText(o), "Say hi") || o.Usage == nil || o.Usage.TotalTokens != o.Usage.InputTokens+o.Usage.OutputTokens ||
		deref(o.Instructions) != "Be brief." || o.Metadata["topic"] != "greeting" || o.Store || deref(o.User) != "u-1" ||
		*o.MaxOutputTokens != 50 || *o.Temperature != 0.3 || o.Background || o.Error != nil {
		t.Fatalf("response %d %s", r.code, r.body)
	}
	if got := e.getResponse(o.ID); !jsonEqual(t, got, o) {
		t.Errorf("GET differs from the answer")
	}
	var v promptView
	e.call("GET", "/v1/prompts/"+promptID, "", nil).decode(t, &v)
	c := v.Prompt.Chat
	if c == nil || c.Metadata["topic"] != "greeting" || c.Responses == nil || c.Responses.Model != "default" || len(c.Messages) != 2 ||
		c.Messages[0].Role != "system" || c.Responses.InputStart != 1 {
		t.Errorf("stored %+v", c)
	}
	var items openaiapi.List[openaiapi.OutputItem]
	e.call("GET", "/v1/responses/"+o.ID+"/input_items", "", nil).decode(t, &items)
	if len(items.Data) != 1 || items.Data[0].Role != "user" || (*items.Data[0].Content)[0].Text != "Say hi" || items.HasMore {
		t.Errorf("input items %+v", items)
	}
}

func jsonEqual(t *testing.T, a, b any) bool {
	t.Helper()
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return string(x) == string(y)
}

const responseTools = `"tools":[{"type":"function","name":"weather","description":"The weather now.","strict":false,
	"parameters":{"type":"object","required":["city"],"properties":{"city":{"type":"string"}}}}]`

// Function tools: the model's call comes as a function_call item; its
// output goes back with the call (sent back as returned), through
// previous_response_id, or through item references, and is answered in
// words.
func TestResponsesTools(t *testing.T) {
	t.Parallel()
	e := setup(t)
	e.runWorker()
	r, o := e.createResponse(`{"model":"default",` + responseTools + `,"input":"Weather in Paris?"}`)
	if r.code != 200 || len(o.Output) != 1 || o.Output[0].Type != "function_call" || o.Output[0].Name != "weather" ||
		o.Output[0].CallID == "" || o.Output[0].Status != "completed" || len(o.Tools) != 1 || o.Tools[0].Name != "weather" {
		t.Fatalf("call: %d %s", r.code, r.body)
	}
	call := o.Output[0]
	sent, _ := json.Marshal(call)

	// The whole conversation, the call as the API returned it.
	r, o2 := e.createResponse(`{"model":"default",` + responseTools + `,"input":[{"role":"user","content":"Weather in Paris?"},` +
		string(sent) + `,{"type":"function_call_output","call_id":"` + call.CallID + `","output":"sunny, 21 degrees"}]}`)
	if r.code != 200 || !strings.Contains(outputText(o2), "sunny, 21 degrees") || len(o2.Output) != 1 {
		t.Fatalf("after the output: %d %s", r.code, r.body)
	}
	// The stored conversation: the user, the assistant turn with the call,
	// the tool result.
	p, err := e.st.GetPrompt(context.Background(), "", r.header.Get(headerPromptID))
	if err != nil {
		t.Fatal(err)
	}
	if m := p.Chat.Messages; len(m) != 3 || m[1].Role != "assistant" || len(m[1].ToolCalls) != 1 || m[1].ToolCalls[0].ID != call.CallID ||
		m[2].Role != "tool" || m[2].ToolCallID != call.CallID {
		t.Errorf("stored %+v", m)
	}

	// The output alone, continuing the response.
	r, o3 := e.createResponse(`{"model":"default",` + responseTools + `,"previous_response_id":"` + o.ID + `",
		"input":[{"type":"function_call_output","call_id":"` + call.CallID + `","output":"rain, 12 degrees"}]}`)
	if r.code != 200 || !strings.Contains(outputText(o3), "rain, 12 degrees") || deref(o3.PreviousResponseID) != o.ID {
		t.Fatalf("previous_response_id: %d %s", r.code, r.body)
	}

	// References to the stored items: the first request's input and call.
	var items openaiapi.List[openaiapi.OutputItem]
	e.call("GET", "/v1/responses/"+o.ID+"/input_items", "", nil).decode(t, &items)
	r, o4 := e.createResponse(`{"model":"default",` + responseTools + `,"input":[{"type":"item_reference","id":"` + items.Data[0].ID + `"},
		{"id":"` + call.ID + `"},{"type":"function_call_output","call_id":"` + call.CallID + `","output":"snow, 0 degrees"}]}`)
	if r.code != 200 || !strings.Contains(outputText(o4), "snow, 0 degrees") {
		t.Fatalf("item references: %d %s", r.code, r.body)
	}
	// A result for a call nobody made names the item.
	r, _ = e.createResponse(`{"model":"default",` + responseTools + `,"input":[{"role":"user","content":"x"},
		{"type":"function_call_output","call_id":"call_nobody_made","output":"x"}]}`)
	if er := r.oaErr(t); r.code != 400 || deref(er.Param) != "input[1].call_id" {
		t.Errorf("orphan output: %d %s", r.code, r.body)
	}
	r, _ = e.createResponse(`{"model":"default","input":[{"type":"item_reference","id":"msg_nope"}]}`)
	if er := r.oaErr(t); r.code != 404 || deref(er.Param) != "input[0].id" {
		t.Errorf("unknown reference: %d %s", r.code, r.body)
	}
}

// text.format json_schema: sent as chat's response_format (validated and
// repaired by the worker), echoed on the object.
func TestResponsesJSONSchema(t *testing.T) {
	t.Parallel()
	e := setup(t)
	e.runWorker()
	r, o := e.createResponse(`{"model":"promptkit-simulated","input":"A number, please.","text":{"format":{"type":"json_schema","name":"answer","strict":true,
		"schema":{"type":"object","properties":{"n":{"type":"integer","minimum":3}},"required":["n"],"additionalProperties":false}}}}`)
	if r.code != 200 || o.Text.Format.Type != "json_schema" || o.Text.Format.Name != "answer" || o.Text.Format.Strict == nil || !*o.Text.Format.Strict {
		t.Fatalf("response %d %s", r.code, r.body)
	}
	var out struct {
		N *int `json:"n"`
	}
	if err := json.Unmarshal([]byte(outputText(o)), &out); err != nil || out.N == nil || *out.N < 3 {
		t.Fatalf("text %q is not valid for the schema: %v", outputText(o), err)
	}
	p, err := e.st.GetPrompt(context.Background(), "", r.header.Get(headerPromptID))
	if err != nil || p.Chat.ResponseFormat != jobs.FormatJSONSchema || p.Chat.SchemaName != "answer" {
		t.Fatalf("prompt %+v %v", p, err)
	}
}

// previous_response_id: the stored conversation is the previous one
// (without its instructions), its answer, then the new input; a previous
// response that does not exist or has no answer yet is refused.
func TestResponsesPrevious(t *testing.T) {
	t.Parallel()
	e := setup(t)
	wait := e.callAsync("POST", "/v1/responses", "", `{"model":"default","input":"Remember 42.","instructions":"old"}`)
	j := e.claimNext()
	first := "resp_" + j.PromptID
	r := e.call("POST", "/v1/responses", "", `{"model":"default","input":"And?","previous_response_id":"`+first+`"}`)
	if er := r.oaErr(t); r.code != 400 || deref(er.Param) != "previous_response_id" {
		t.Errorf("unanswered previous: %d %s", r.code, r.body)
	}
	e.succeed(j, jobs.SucceedParams{Answer: jobs.Answer{Output: "Noted: 42.", Model: "m", FinishReason: "stop"}})
	if r := wait(); r.code != 200 {
		t.Fatalf("first: %d %s", r.code, r.body)
	}
	wait = e.callAsync("POST", "/v1/responses", "", `{"model":"default","input":"Which number?","instructions":"new","previous_response_id":"`+first+`"}`)
	j2 := e.claimNext()
	p, err := e.st.GetPrompt(context.Background(), "", j2.PromptID)
	if err != nil {
		t.Fatal(err)
	}
	want := []pktype.Message{{Role: "system", Content: "new"}, {Role: "user", Content: "Remember 42."},
		{Role: "assistant", Content: "Noted: 42."}, {Role: "user", Content: "Which number?"}}
	if !slices.EqualFunc(p.Chat.Messages, want, func(a, b pktype.Message) bool { return a.Role == b.Role && a.Content == b.Content }) ||
		p.Chat.Responses.InputStart != 3 {
		t.Errorf("stored conversation %+v", p.Chat.Messages)
	}
	e.succeed(j2, jobs.SucceedParams{Answer: jobs.Answer{Output: "42.", Model: "m"}})
	r = wait()
	var o openaiapi.Response
	r.decode(t, &o)
	if r.code != 200 || deref(o.PreviousResponseID) != first || outputText(o) != "42." {
		t.Errorf("second: %d %s", r.code, r.body)
	}
	r = e.call("POST", "/v1/responses", "", `{"model":"default","input":"x","previous_response_id":"resp_nope"}`)
	if er := r.oaErr(t); r.code != 404 || deref(er.Param) != "previous_response_id" {
		t.Errorf("unknown previous: %d %s", r.code, r.body)
	}
}

// A streamed request relays the backend's text as it comes: the first
// piece reaches the client while the backend holds the rest; the events
// are numbered from 0, in OpenAI's order, and end in response.completed
// with the stored answer and its usage.
func TestResponsesStream(t *testing.T) {
	t.Parallel()
	backend, url := newHeldStream(t, []string{"Hello", " there", ", world."})
	e := setupProvider(t, url, 0)
	s := e.openResponseStream("POST", "/v1/responses", `{"model":"default","stream":true,"input":"hi"}`)
	<-backend.started
	var evs []respEvent
	for text(evs) == "" {
		ev, ok := s.nextEvent()
		if !ok {
			t.Fatal("the stream ended before its first piece")
		}
		evs = append(evs, ev)
	}
	if text(evs) != "Hello" {
		t.Fatalf("first piece %q", text(evs))
	}
	backend.release <- struct{}{}
	backend.release <- struct{}{}
	evs = append(evs, s.restEvents()...)
	numbered(t, evs, 0)
	want := "response.created response.in_progress response.output_item.added response.content_part.added response.output_text.delta " +
		"response.output_text.done response.content_part.done response.output_item.done response.completed"
	if types(evs) != want {
		t.Errorf("events %s", types(evs))
	}
	last := evs[len(evs)-1].ev.Response
	if text(evs) != "Hello there, world." || last == nil || last.Status != "completed" || outputText(*last) != "Hello there, world." ||
		last.Usage == nil || last.Usage.TotalTokens != 7 || last.ID != "resp_"+s.res.Header.Get(headerPromptID) {
		t.Errorf("streamed %q, last %+v", text(evs), last)
	}
	if got := e.getResponse(last.ID); !jsonEqual(t, got, *last) {
		t.Errorf("GET differs from response.completed")
	}
}

// A backend call that fails after its first piece was relayed, retried
// with another answer: the stream ends in an error event, never the two
// answers spliced.
func TestResponsesStreamReplaced(t *testing.T) {
	t.Parallel()
	backend, url := newHeldStream(t, []string{"The answer is 4", ""}, []string{"Five."})
	e := setupProvider(t, url, 1)
	s := e.openResponseStream("POST", "/v1/responses", `{"model":"default","stream":true,"input":"2+2?"}`)
	<-backend.started
	var evs []respEvent
	for text(evs) == "" {
		ev, ok := s.nextEvent()
		if !ok {
			t.Fatal("the stream ended before its first piece")
		}
		evs = append(evs, ev)
	}
	backend.release <- struct{}{}
	evs = append(evs, s.restEvents()...)
	numbered(t, evs, 0)
	last := evs[len(evs)-1].ev
	if last.Type != "error" || deref(last.Code) != "stream_replaced" || strings.Contains(text(evs), "Five") {
		t.Errorf("events %s: %+v", types(evs), last)
	}
	if o := e.getResponse("resp_" + s.res.Header.Get(headerPromptID)); outputText(o) != "Five." {
		t.Errorf("stored %q", outputText(o))
	}
}

// Streamed tools: the call comes whole from the stored answer, as
// function_call items with their argument events.
func TestResponsesStreamTools(t *testing.T) {
	t.Parallel()
	e := setup(t)
	e.runWorker()
	s := e.openResponseStream("POST", "/v1/responses", `{"model":"default","stream":true,`+responseTools+`,"tool_choice":"required","input":"Weather in Lyon?"}`)
	evs := s.restEvents()
	numbered(t, evs, 0)
	want := "response.created response.in_progress response.output_item.added response.function_call_arguments.delta " +
		"response.function_call_arguments.done response.output_item.done response.completed"
	if types(evs) != want {
		t.Fatalf("events %s", types(evs))
	}
	var args string
	for _, ev := range evs {
		if ev.ev.Type == "response.function_call_arguments.delta" {
			args += *ev.ev.Delta
		}
	}
	var a struct{ City *string }
	done := evs[len(evs)-2].ev.Item
	if json.Unmarshal([]byte(args), &a) != nil || a.City == nil || done.Name != "weather" || *done.Arguments != args {
		t.Errorf("arguments %q, item %+v", args, done)
	}
}

// background: the object at once (queued); its stream follows the job
// from what is stored, and reading it again after any sequence number
// gives the same events.
func TestResponsesBackground(t *testing.T) {
	t.Parallel()
	e := setup(t, func(c *Config) { c.KeepAlive = 5 * time.Millisecond })
	r, o := e.createResponse(`{"model":"default","background":true,"input":"Tell me a long story."}`)
	if r.code != 200 || o.Status != "queued" || !o.Background || len(o.Output) != 0 {
		t.Fatalf("background: %d %s", r.code, r.body)
	}
	if got := e.getResponse(o.ID); got.Status != "queued" {
		t.Errorf("GET: %s", got.Status)
	}
	s := e.openResponseStream("GET", "/v1/responses/"+o.ID+"?stream=true", "")
	ev, ok := s.nextEvent()
	if !ok || ev.ev.Type != "response.created" || ev.ev.SequenceNumber != 0 || ev.ev.Response.Status != "queued" {
		t.Fatalf("first event %+v", ev)
	}
	j := e.claimNext()
	ev, ok = s.nextEvent()
	if !ok || ev.ev.Type != "response.in_progress" || ev.ev.SequenceNumber != 1 {
		t.Fatalf("second event %+v", ev)
	}
	story := strings.Repeat("Once upon a time, a queue met a worker. ", 6)
	e.succeed(j, jobs.SucceedParams{Answer: jobs.Answer{Output: story, Model: "m", FinishReason: "length", Usage: usage(5, 60, 65)}})
	rest := s.restEvents()
	all := append([]respEvent{{ev: openaiapi.ResponseEvent{Type: "response.created"}}, ev}, rest...)
	numbered(t, all[1:], 1)
	want := "response.created response.in_progress response.output_item.added response.content_part.added response.output_text.delta " +
		"response.output_text.done response.content_part.done response.output_item.done response.incomplete"
	if types(all) != want || text(rest) != story {
		t.Fatalf("events %s, text %q", types(all), text(rest))
	}
	final := rest[len(rest)-1].ev.Response
	if final.Status != "incomplete" || final.IncompleteDetails.Reason != "max_output_tokens" || final.Usage.OutputTokens != 60 {
		t.Errorf("final %+v", final)
	}

	// Read again from the start, and after each number: the same events,
	// byte for byte.
	full := e.openResponseStream("GET", "/v1/responses/"+o.ID+"?stream=true", "").restEvents()
	numbered(t, full, 0)
	if len(full) != len(rest)+2 || full[1].data != ev.data {
		t.Fatalf("replay: %d events, followed %d", len(full), len(rest)+2)
	}
	for i, f := range full[2:] {
		if f.data != rest[i].data {
			t.Fatalf("event %d differs:\n%s\n%s", i+2, f.data, rest[i].data)
		}
	}
	for _, after := range []int{0, 3, len(full) - 2, len(full) - 1} {
		got := e.openResponseStream("GET", "/v1/responses/"+o.ID+"?stream=true&starting_after="+strconv.Itoa(after), "").restEvents()
		if len(got) != len(full)-after-1 || len(got) > 0 && got[0].data != full[after+1].data {
			t.Errorf("starting_after=%d: %d events", after, len(got))
		}
	}
	// With stream: true too, the POST is the same stream, followed.
	s = e.openResponseStream("POST", "/v1/responses", `{"model":"default","background":true,"stream":true,"input":"Another."}`)
	j = e.claimNext()
	e.succeed(j, jobs.SucceedParams{Answer: jobs.Answer{Output: "Short.", Model: "m"}})
	evs := s.restEvents()
	numbered(t, evs, 0)
	if evs[len(evs)-1].ev.Type != "response.completed" || text(evs) != "Short." {
		t.Errorf("background stream: %s", types(evs))
	}
	// A response that was not made in the background has no stream to read.
	r = e.call("GET", "/v1/responses/"+o.ID+"?stream=maybe", "", nil)
	if er := r.oaErr(t); r.code != 400 || deref(er.Param) != "stream" {
		t.Errorf("stream=maybe: %d %s", r.code, r.body)
	}
}

// Cancel: a background response's job is cancelled; the object and its
// stream say so; cancelling again answers the same; a plain response
// cannot be cancelled here.
func TestResponsesCancel(t *testing.T) {
	t.Parallel()
	e := setup(t)
	_, o := e.createResponse(`{"model":"default","background":true,"input":"Wait for me."}`)
	r := e.call("POST", "/v1/responses/"+o.ID+"/cancel", "", nil)
	var c openaiapi.Response
	r.decode(t, &c)
	if r.code != 200 || c.Status != "cancelled" || c.ID != o.ID {
		t.Fatalf("cancel: %d %s", r.code, r.body)
	}
	again := e.call("POST", "/v1/responses/"+o.ID+"/cancel", "", nil)
	if again.code != 200 || !strings.Contains(string(again.body), `"status":"cancelled"`) {
		t.Errorf("cancel again: %d %s", again.code, again.body)
	}
	evs := e.openResponseStream("GET", "/v1/responses/"+o.ID+"?stream=true", "").restEvents()
	numbered(t, evs, 0)
	if types(evs) != "response.created response.in_progress response.failed" || evs[2].ev.Response.Status != "cancelled" {
		t.Errorf("stream of a cancelled response: %s", types(evs))
	}
	// Not background: refused, and the job goes on.
	wait := e.callAsync("POST", "/v1/responses", "", `{"model":"default","input":"Plain."}`)
	j := e.claimNext()
	r = e.call("POST", "/v1/responses/resp_"+j.PromptID+"/cancel", "", nil)
	if r.code != 400 {
		t.Errorf("cancel of a plain response: %d %s", r.code, r.body)
	}
	e.fail(j, jobs.KindProvider5xx, "HTTP 503 from the provider")
	// A failed job answers as a chat completion's would.
	if r := wait(); r.code != 502 || deref(r.oaErr(t).Code) != "provider_5xx" {
		t.Errorf("failed job: %d %s", r.code, r.body)
	}
	if f := e.getResponse("resp_" + j.PromptID); f.Status != "failed" || f.Error == nil || f.Error.Code != "provider_5xx" {
		t.Errorf("failed object %+v", f)
	}
}

// Delete: a response that ended goes, with its jobs; one still queued is
// a 409; an unknown one a 404.
func TestResponsesDelete(t *testing.T) {
	t.Parallel()
	e := setup(t)
	_, o := e.createResponse(`{"model":"default","background":true,"input":"Queued."}`)
	r := e.call("DELETE", "/v1/responses/"+o.ID, "", nil)
	if r.code != 409 || deref(r.oaErr(t).Code) != "response_in_progress" {
		t.Errorf("delete queued: %d %s", r.code, r.body)
	}
	e.call("POST", "/v1/responses/"+o.ID+"/cancel", "", nil)
	r = e.call("DELETE", "/v1/responses/"+o.ID, "", nil)
	var d openaiapi.DeletedResponse
	r.decode(t, &d)
	if r.code != 200 || d != (openaiapi.DeletedResponse{ID: o.ID, Object: "response", Deleted: true}) {
		t.Errorf("delete: %d %s", r.code, r.body)
	}
	for _, path := range []string{"/v1/responses/" + o.ID, "/v1/responses/" + o.ID + "/input_items", "/v1/prompts/" + strings.TrimPrefix(o.ID, "resp_")} {
		if r := e.call("GET", path, "", nil); r.code != 404 {
			t.Errorf("GET %s after delete: %d %s", path, r.code, r.body)
		}
	}
	if r := e.call("DELETE", "/v1/responses/"+o.ID, "", nil); r.code != 404 {
		t.Errorf("delete again: %d %s", r.code, r.body)
	}
	// A prompt that is not a response is not one here.
	s := e.submit("", map[string]any{"text": "not a response"})
	if r := e.call("GET", "/v1/responses/resp_"+s.PromptID, "", nil); r.code != 404 {
		t.Errorf("a prompt as a response: %d %s", r.code, r.body)
	}
}

// input_items pages through the request's own input, newest first by
// default as OpenAI does.
func TestResponsesInputItems(t *testing.T) {
	t.Parallel()
	e := setup(t)
	_, o := e.createResponse(`{"model":"default","background":true,"input":[{"role":"user","content":"one"},
		{"role":"assistant","content":"two"},{"role":"user","content":"three"}]}`)
	page := func(q string) openaiapi.List[openaiapi.OutputItem] {
		var l openaiapi.List[openaiapi.OutputItem]
		r := e.call("GET", "/v1/responses/"+o.ID+"/input_items"+q, "", nil)
		if r.code != 200 {
			t.Fatalf("%s: %d %s", q, r.code, r.body)
		}
		r.decode(t, &l)
		return l
	}
	texts := func(l openaiapi.List[openaiapi.OutputItem]) string {
		var out []string
		for _, it := range l.Data {
			out = append(out, (*it.Content)[0].Text)
		}
		return strings.Join(out, " ")
	}
	if l := page(""); texts(l) != "three two one" || l.HasMore {
		t.Errorf("default order: %s", texts(l))
	}
	l := page("?order=asc&limit=2")
	if texts(l) != "one two" || !l.HasMore || *l.LastID != l.Data[1].ID {
		t.Errorf("first page: %s %v", texts(l), l.HasMore)
	}
	if l := page("?order=asc&after=" + *l.LastID); texts(l) != "three" || l.HasMore {
		t.Errorf("second page: %s", texts(l))
	}
	for _, q := range []string{"?order=sideways", "?limit=101", "?after=nope", "?include=message.input_image.image_url"} {
		if r := e.call("GET", "/v1/responses/"+o.ID+"/input_items"+q, "", nil); r.code != 400 {
			t.Errorf("%s: %d %s", q, r.code, r.body)
		}
	}
}

// What cannot be honoured is refused, naming the parameter, before
// anything is stored; store and the hints are accepted.
func TestResponsesRefusals(t *testing.T) {
	t.Parallel()
	e := setup(t)
	for _, c := range []struct {
		body   string
		status int
		param  string
	}{
		{`{"model":"default","input":"x","tools":[{"type":"web_search_preview"}]}`, 400, "tools[0].type"},
		{`{"model":"default","input":"x","reasoning":{"effort":"high","budget":9}}`, 400, "reasoning.budget"},
		{`{"model":"default","input":"x","include":["web_search_call.action.sources"]}`, 400, "include[0]"},
		{`{"model":"default","input":[{"role":"user","content":[{"type":"input_file","file_id":"f"}]}]}`, 400, "input[0].content[0].type"},
		{`{"model":"default","input":"x","conversation":"c"}`, 400, "conversation"},
		{`{"model":"default","input":"x","seed":1}`, 400, "seed"},
		{`{"model":"nope","input":"x"}`, 404, "model"},
	} {
		r := e.call("POST", "/v1/responses", "", c.body)
		if r.code != c.status || deref(r.oaErr(t).Param) != c.param {
			t.Errorf("%s: %d %s", c.body, r.code, r.body)
		}
	}
	for _, store := range []string{"true", "false"} {
		r, o := e.createResponse(`{"model":"default","background":true,"input":"x","store":` + store + `}`)
		if r.code != 200 || o.Store != (store == "true") {
			t.Errorf("store %s: %d %s", store, r.code, r.body)
		}
	}
	page, err := e.st.ListJobs(context.Background(), jobs.ListParams{})
	if err != nil || len(page.Jobs) != 2 {
		t.Errorf("jobs stored: %d %v", len(page.Jobs), err)
	}
	for _, path := range []string{"/v1/responses/resp_nope", "/v1/responses/nope", "/v1/responses/resp_a_b/input_items"} {
		if r := e.call("GET", path, "", nil); r.code != 404 {
			t.Errorf("GET %s: %d %s", path, r.code, r.body)
		}
	}
	r, o := e.createResponse(`{"model":"default","background":true,"input":"x"}`)
	if r.code != 200 {
		t.Fatal(r.code)
	}
	// Another member's response is not there for this one.
	other := e.token("default", "bob", jobs.RoleMember)
	if r := e.call("GET", "/v1/responses/"+o.ID, other, nil); r.code != 404 {
		t.Errorf("another member's response: %d %s", r.code, r.body)
	}
}

// TestResponsesSchemasFitTheGoTypes: the documented Responses shapes
// accept what the encoders write in states the API tests do not reach,
// and the request schema accepts what DecodeResponses accepts, and is as
// closed.
func TestResponsesSchemasFitTheGoTypes(t *testing.T) {
	t.Parallel()
	all := `{"model":"m","input":[{"role":"developer","content":"d"},{"type":"message","role":"user","content":[{"type":"input_text","text":"a"}]},
		{"type":"message","role":"assistant","id":"msg_1","status":"completed","phase":null,"content":[{"type":"output_text","text":"t","annotations":[]}]},
		{"type":"function_call","id":"fc_1","call_id":"c1","name":"f","arguments":"{}","status":"completed"},
		{"type":"function_call_output","call_id":"c1","output":[{"type":"input_text","text":"r"}]},{"type":"item_reference","id":"msg_x"},{"id":"fc_x_0"}],
		"instructions":"i","tools":[{"type":"function","name":"f","description":"d","parameters":{"type":"object"},"strict":null}],
		"tool_choice":{"type":"function","name":"f"},"parallel_tool_calls":true,"text":{"format":{"type":"json_schema","name":"n","schema":{"type":"object"},"strict":true},"verbosity":null},
		"max_output_tokens":5,"temperature":1,"top_p":1,"stream":true,"stream_options":{"include_obfuscation":false},"background":false,"store":true,
		"previous_response_id":"resp_x","metadata":{"k":"v"},"user":"u","safety_identifier":"s","prompt_cache_key":"k","prompt_cache_retention":"24h",
		"truncation":"disabled","include":[],"top_logprobs":0,"service_tier":"default","reasoning":{"effort":null}}`
	if _, err := openaiapi.DecodeResponses([]byte(all)); err != nil {
		t.Fatalf("DecodeResponses: %v", err)
	}
	if err := oasValidate(t, "/components/schemas/ResponseCreateRequest", []byte(all)); err != nil {
		t.Errorf("ResponseCreateRequest: %v", err)
	}
	for _, body := range []string{
		`{"model":"m","input":"x","seed":1}`,
		`{"model":"m","input":"x","tools":[{"type":"web_search"}]}`,
		`{"model":"m","input":[{"role":"tool","content":"x"}]}`,
		`{"model":"m","input":"x","truncation":"auto"}`,
	} {
		if oasValidate(t, "/components/schemas/ResponseCreateRequest", []byte(body)) == nil {
			t.Errorf("ResponseCreateRequest accepts %s", body)
		}
		if _, err := openaiapi.DecodeResponses([]byte(body)); err == nil {
			t.Errorf("DecodeResponses accepts %s", body)
		}
	}

	p, err := openaiapi.DecodeResponses([]byte(`{"model":"m","input":"x","text":{"format":{"type":"json_object"}},"tools":[{"type":"function","name":"f"}],"tool_choice":"none"}`))
	if err != nil {
		t.Fatal(err)
	}
	c, err := p.Conversation(nil, p.Input)
	if err != nil {
		t.Fatal(err)
	}
	prompt := jobs.Prompt{ID: oasPromptA, CreatedAt: oasT0, Chat: &c}
	details := pktype.Usage{TokenUsage: pktype.TokenUsage{PromptTokens: 5, CompletionTokens: 4, CachedTokens: 2, ReasoningTokens: 1},
		Known: pktype.TokenUsagePresence{PromptTokens: true, CompletionTokens: true, CachedTokens: true, ReasoningTokens: true}}
	filtered := jobs.Response{Answer: jobs.Answer{Output: "x", FinishReason: "content_filter", Usage: details}}
	for name, o := range map[string]openaiapi.Response{
		"usage details, filtered": openaiapi.ResponseObject(prompt, jobs.Job{State: jobs.Succeeded}, &filtered),
		"answer archived":         openaiapi.ResponseObject(prompt, jobs.Job{State: jobs.Succeeded}, nil),
		"stuck":                   openaiapi.ResponseObject(prompt, jobs.Job{State: jobs.Failed, ErrorKind: jobs.KindStuck}, nil),
	} {
		b, _ := json.Marshal(o)
		if err := oasValidate(t, "/components/schemas/OpenAIResponse", b); err != nil {
			t.Errorf("%s: %v\n%s", name, err, b)
		}
	}
	for _, ev := range []openaiapi.ResponseEvent{openaiapi.ErrorEvent("stream_replaced", "m"), openaiapi.TextDelta(oasPromptA, openaiapi.ItemMessage, 0, "")} {
		b, _ := json.Marshal(ev)
		if err := oasValidate(t, "/components/schemas/ResponseStreamEvent", b); err != nil {
			t.Errorf("%s: %v", b, err)
		}
	}
}
