package promptkit_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/promptkit/promptkit"
	"github.com/promptkit/promptkit/internal/testkit"
	"github.com/promptkit/promptkit/providertest"
)

// deltaLog collects a run's pieces. OnDelta runs on the run's goroutine,
// so a test reads it only after Run returned.
type deltaLog struct{ got []promptkit.StreamDelta }

func (l *deltaLog) on(d promptkit.StreamDelta) { l.got = append(l.got, d) }

// text joins the pieces of one backend call.
func (l *deltaLog) text(gen, attempt int) string {
	var b strings.Builder
	for _, d := range l.got {
		if d.Generation == gen && d.Attempt == attempt {
			b.WriteString(d.Text)
		}
	}
	return b.String()
}

// checkNumbering checks that each call's pieces count from Index 0.
func (l *deltaLog) checkNumbering(t *testing.T) {
	t.Helper()
	next := map[[2]int]int{}
	for _, d := range l.got {
		k := [2]int{d.Generation, d.Attempt}
		if d.Generation < 1 || d.Attempt < 1 || d.Index != next[k] {
			t.Fatalf("piece %+v out of order (next index %d)", d, next[k])
		}
		next[k]++
	}
}

// A streamed run gets the pieces as they come, and the same result,
// usage and events as the same run not streamed; only the request's
// stream keys differ.
func TestRunStreamText(t *testing.T) {
	srv, eng := chatEngine(t, 0, nil)
	const answer = "The quick brown fox jumps over the lazy dog."
	srv.Enqueue(providertest.Reply(answer), providertest.Reply(answer))

	var plainEvents, streamEvents eventLog
	plain, err := eng.Run(context.Background(), promptkit.RunRequest{Text: "x", Observer: plainEvents.Observe})
	if err != nil {
		t.Fatal(err)
	}
	var log deltaLog
	res, err := eng.Run(context.Background(), promptkit.RunRequest{Text: "x", OnDelta: log.on, Observer: streamEvents.Observe})
	if err != nil {
		t.Fatal(err)
	}
	log.checkNumbering(t)
	if len(log.got) < 2 || log.text(1, 1) != answer || res.Text != answer {
		t.Fatalf("pieces %+v; result text %q", log.got, res.Text)
	}
	if res.FinishReason != plain.FinishReason || res.Model != plain.Model || res.Usage != plain.Usage ||
		res.Attempts != 1 || res.Validation.Status != plain.Validation.Status || res.PromptHash != plain.PromptHash {
		t.Errorf("streamed %+v\nplain    %+v", res, plain)
	}
	if !res.Usage.Known.PromptTokens || !res.Usage.Known.CompletionTokens {
		t.Errorf("usage %+v: the usage chunk was not read", res.Usage)
	}
	pe, se := plainEvents.Events(), streamEvents.Events()
	if eventKinds(pe) != eventKinds(se) || se[1].Usage != pe[1].Usage || se[1].StatusCode != 200 || lastEvent(t, se).Usage != lastEvent(t, pe).Usage {
		t.Errorf("events differ:\n%+v\n%+v", se, pe)
	}

	// The bodies differ in the stream keys only.
	pb, sb := body(t, srv, 0), body(t, srv, 1)
	if _, ok := pb["stream"]; ok {
		t.Errorf("plain request asks for a stream: %s", srv.Requests()[0].Body)
	}
	if string(sb["stream"]) != "true" || string(sb["stream_options"]) != `{"include_usage":true}` {
		t.Errorf("streamed request %s", srv.Requests()[1].Body)
	}
	delete(sb, "stream")
	delete(sb, "stream_options")
	if !reflect.DeepEqual(pb, sb) {
		t.Errorf("requests differ beyond the stream keys:\n%s\n%s", srv.Requests()[0].Body, srv.Requests()[1].Body)
	}
}

// A run without OnDelta sends what it always sent, byte for byte.
func TestRunWithoutOnDeltaUnchanged(t *testing.T) {
	srv, eng := chatEngine(t, 0, nil)
	if _, err := eng.Run(context.Background(), promptkit.RunRequest{Text: "a<b"}); err != nil {
		t.Fatal(err)
	}
	const want = `{"model":"m1","messages":[{"role":"system","content":"You are terse."},{"role":"user","content":"a<b"}],"temperature":0.5,"top_p":0.8,"max_tokens":100,"stop":["STOP"]}`
	if got := string(srv.Requests()[0].Body); got != want {
		t.Errorf("body = %s\nwant   %s", got, want)
	}
}

func TestRunStreamToolCalls(t *testing.T) {
	srv, eng := chatEngine(t, 0, nil)
	const args = `{"city":"Paris"}`
	srv.Enqueue(providertest.CallTool("weather", args))
	var log deltaLog
	res, err := eng.Run(context.Background(), promptkit.RunRequest{Text: "Weather in Paris?", OnDelta: log.on,
		ToolUse: promptkit.ToolUse{Tools: []promptkit.Tool{weatherTool}}})
	if err != nil {
		t.Fatal(err)
	}
	log.checkNumbering(t)
	want := []promptkit.ToolCall{{ID: "call_1", Type: "function", Function: promptkit.FunctionCall{Name: "weather", Arguments: args}}}
	if !reflect.DeepEqual(res.ToolCalls, want) || res.FinishReason != "tool_calls" {
		t.Fatalf("result %+v", res)
	}
	var joined promptkit.ToolCall
	for _, d := range log.got {
		for _, c := range d.ToolCalls {
			if c.Index != 0 {
				t.Fatalf("piece for call %d: %+v", c.Index, d)
			}
			joined.ID += c.ID
			joined.Function.Name += c.Name
			joined.Function.Arguments += c.Arguments
		}
	}
	if joined.ID != "call_1" || joined.Function.Name != "weather" || joined.Function.Arguments != args {
		t.Errorf("pieces join to %+v (%+v)", joined, log.got)
	}
}

// A retried call streams its answer again from Index 0, as attempt 2:
// after a 503, and after an error event in the middle of a stream.
func TestRunStreamRetry(t *testing.T) {
	const secret = "SECRET-PROVIDER-TEXT"
	midStream := providertest.Response{
		Header: http.Header{"Content-Type": {"text/event-stream"}},
		Body: []byte(`data: {"choices":[{"index":0,"delta":{"content":"Half "}}]}` + "\n\n" +
			`data: {"choices":[{"index":0,"delta":{"content":"an answer"}}]}` + "\n\n" +
			`data: {"error":{"message":"` + secret + `","type":"server_error"}}` + "\n\n"),
	}
	for _, c := range []struct {
		name   string
		first  providertest.Response
		lost   string // what the failed attempt streamed
		status int    // what it failed with
	}{
		{"503", providertest.Status(503), "", 503},
		{"error event", midStream, "Half an answer", 500},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := newSeamRig(t, seamOpts{})
			r.srv.Enqueue(c.first, providertest.Reply("Whole answer."))
			var log deltaLog
			var events eventLog
			res, err := r.eng.Run(context.Background(), promptkit.RunRequest{Text: "x", OnDelta: log.on, Observer: events.Observe})
			if err != nil {
				t.Fatal(err)
			}
			log.checkNumbering(t)
			if log.text(1, 1) != c.lost || log.text(1, 2) != "Whole answer." || res.Text != "Whole answer." || res.Attempts != 2 {
				t.Fatalf("pieces %+v; result %+v", log.got, res)
			}
			if evs := events.Events(); eventKinds(evs) != "started,attempt,retry_delay,attempt,finished" || evs[1].StatusCode != c.status || evs[3].StatusCode != 200 {
				t.Errorf("events %s: %+v", eventKinds(evs), evs)
			}
		})
	}

	// Without retries the error event is the run's error: a provider
	// status, its text kept out of the message.
	r := newSeamRig(t, seamOpts{retries: intp(0)})
	r.srv.Enqueue(midStream)
	var log deltaLog
	res, err := r.eng.Run(context.Background(), promptkit.RunRequest{Text: "x", OnDelta: log.on})
	var ge *promptkit.GenerationError
	if res != nil || !errors.As(err, &ge) || ge.StatusCode() != 500 || !strings.Contains(ge.Detail(), secret) {
		t.Fatalf("result %+v, err %v", res, err)
	}
	if strings.Contains(err.Error(), secret) || len(log.got) != 2 {
		t.Errorf("err %q; pieces %+v", err, log.got)
	}
}

// A repair is a new generation, and streams too.
func TestRunStreamRepair(t *testing.T) {
	srv, eng := chatEngine(t, 1, nil)
	srv.Enqueue(providertest.Reply("Sure, here it is."), providertest.Reply(`{"summary":"fixed"}`))
	var log deltaLog
	res, err := eng.Run(context.Background(), promptkit.RunRequest{Text: "x", OutputSchema: json.RawMessage(summarySchema), OnDelta: log.on})
	if err != nil {
		t.Fatal(err)
	}
	log.checkNumbering(t)
	if log.text(1, 1) != "Sure, here it is." || log.text(2, 1) != `{"summary":"fixed"}` {
		t.Fatalf("pieces %+v", log.got)
	}
	if res.Validation.Status != promptkit.ValidationValid || res.RepairCalls != 1 || string(res.Output) != `{"summary":"fixed"}` {
		t.Errorf("result %+v", res)
	}
	if string(body(t, srv, 1)["stream"]) != "true" {
		t.Errorf("repair request %s", srv.Requests()[1].Body)
	}
}

// Pieces reach OnDelta while the backend is still generating: the
// provider here sends one piece, then waits until the test has seen it.
func TestRunStreamDeltasBeforeBackendFinishes(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, `data: {"model":"m1","choices":[{"index":0,"delta":{"content":"First "}}]}`+"\n\n")
		w.(http.Flusher).Flush()
		select {
		case <-release:
		case <-r.Context().Done():
			return
		}
		_, _ = io.WriteString(w, `data: {"model":"m1","choices":[{"index":0,"delta":{"content":"second."},"finish_reason":"stop"}]}`+"\n\n"+
			`data: {"model":"m1","choices":[],"usage":{"prompt_tokens":2,"completion_tokens":2,"total_tokens":4}}`+"\n\n"+
			"data: [DONE]\n\n")
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(func() {
		select {
		case <-release:
		default:
			close(release)
		}
	})
	eng, err := promptkit.New(promptkit.Config{
		Backends: []promptkit.Backend{{ID: "local", BaseURL: srv.URL}},
		Profiles: []promptkit.Profile{{ID: "default", Backend: "local", Model: "m1"}},
	})
	if err != nil {
		t.Fatal(err)
	}

	first := make(chan promptkit.StreamDelta, 1)
	type result struct {
		res *promptkit.RunResult
		err error
	}
	done := make(chan result, 1)
	var log deltaLog
	go func() {
		res, err := eng.Run(deadlockGuard(t), promptkit.RunRequest{Text: "x", OnDelta: func(d promptkit.StreamDelta) {
			log.on(d)
			if d.Index == 0 {
				first <- d
			}
		}})
		done <- result{res, err}
	}()
	select {
	case d := <-first:
		// The backend cannot have finished: it waits for release.
		if d.Text != "First " || d.Generation != 1 || d.Attempt != 1 {
			t.Errorf("first piece %+v", d)
		}
	case r := <-done:
		t.Fatalf("run ended before any piece arrived: %+v, %v", r.res, r.err)
	}
	close(release)
	r := <-done
	if r.err != nil || r.res.Text != "First second." || !r.res.Usage.Known.TotalTokens || r.res.Usage.TotalTokens != 4 {
		t.Fatalf("result %+v, %v", r.res, r.err)
	}
	if len(log.got) != 2 || log.got[1].Index != 1 {
		t.Errorf("pieces %+v", log.got)
	}
}

// An injected client does not stream: OnDelta is never called.
func TestRunStreamInjectedClient(t *testing.T) {
	r := newSeamRig(t, seamOpts{client: &countingClient{resp: &promptkit.GenerateResponse{Text: "hi"}}})
	called := false
	if _, err := r.eng.Run(context.Background(), promptkit.RunRequest{Text: "x", OnDelta: func(promptkit.StreamDelta) { called = true }}); err != nil {
		t.Fatal(err)
	}
	if called {
		t.Error("OnDelta called for an injected client")
	}
}

// A prepared run keeps OnDelta; the attempt event reports the time to
// the first piece.
func TestRunPreparedStreams(t *testing.T) {
	srv := providertest.NewServer()
	t.Cleanup(srv.Close)
	clock := testkit.NewClock(time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC), testkit.Ticking(time.Millisecond))
	eng, err := promptkit.NewWithSeams(seamConfig(srv.URL, seamOpts{}), clock.Now, clock.Jitter, clock.Wait)
	if err != nil {
		t.Fatal(err)
	}
	var log deltaLog
	var events eventLog
	h, err := eng.PrepareExecution(context.Background(), promptkit.RunRequest{Text: "hello there", OnDelta: log.on, Observer: events.Observe})
	if err != nil {
		t.Fatal(err)
	}
	res, err := eng.RunPrepared(context.Background(), h)
	if err != nil {
		t.Fatal(err)
	}
	if log.text(1, 1) != res.Text || len(log.got) < 2 {
		t.Fatalf("pieces %+v; text %q", log.got, res.Text)
	}
	evs := events.Events()
	if a := evs[1]; a.Kind != promptkit.ExecutionAttempt || a.TimeToFirstDelta <= 0 || a.TimeToFirstDelta > a.GenerationDuration {
		t.Errorf("attempt event %+v", a)
	}

	// Not streamed: no time to a first piece.
	events = eventLog{}
	if _, err := eng.Run(context.Background(), promptkit.RunRequest{Text: "x", Observer: events.Observe}); err != nil {
		t.Fatal(err)
	}
	if a := events.Events()[1]; a.TimeToFirstDelta != 0 {
		t.Errorf("plain attempt event %+v", a)
	}
}
