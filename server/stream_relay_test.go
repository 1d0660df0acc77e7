package server

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/promptkit/promptkit/internal/openaiapi"
	"github.com/promptkit/promptkit/internal/testkit"
	"github.com/promptkit/promptkit/internal/testkit/enginekit"
	"github.com/promptkit/promptkit/internal/testkit/storekit"
	"github.com/promptkit/promptkit/jobs"
	"github.com/promptkit/promptkit/jobs/worker"
	"github.com/promptkit/promptkit/pktype"
)

// heldStream is a backend that streams its answer in scripted parts: a
// part is written and flushed, then the next waits until the test
// releases it. A request's parts end with [DONE], unless the script cuts
// the stream off there.
type heldStream struct {
	t       *testing.T
	mu      sync.Mutex
	scripts [][]string // per request: the parts of its content, "" cuts the stream
	next    int
	release chan struct{}
	started chan int // receives a request's number once its first part is out
}

func newHeldStream(t *testing.T, scripts ...[]string) (*heldStream, string) {
	h := &heldStream{t: t, scripts: scripts, release: make(chan struct{}), started: make(chan int, len(scripts))}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(h.release) })
	return h, srv.URL + "/v1"
}

func (h *heldStream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h.mu.Lock()
	n := h.next
	h.next++
	h.mu.Unlock()
	var body struct{ Stream bool }
	if json.NewDecoder(r.Body).Decode(&body) != nil || !body.Stream || n >= len(h.scripts) {
		http.Error(w, `{"error":{"message":"unexpected","type":"invalid_request_error"}}`, 400)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	chunk := func(delta, finish string) {
		fmt.Fprintf(w, "data: {\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":%s,\"finish_reason\":%s}]}\n\n", delta, finish)
		w.(http.Flusher).Flush()
	}
	chunk(`{"role":"assistant","content":""}`, "null")
	for i, part := range h.scripts[n] {
		if i > 0 {
			select {
			case <-h.release:
			case <-r.Context().Done():
				return
			}
		}
		if part == "" {
			panic(http.ErrAbortHandler) // the connection drops mid-stream
		}
		b, _ := json.Marshal(part)
		chunk(`{"content":`+string(b)+`}`, "null")
		if i == 0 {
			h.started <- n
		}
	}
	chunk(`{}`, `"stop"`)
	fmt.Fprint(w, "data: {\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"m\",\"choices\":[],\"usage\":{\"prompt_tokens\":3,\"completion_tokens\":4,\"total_tokens\":7}}\n\ndata: [DONE]\n\n")
}

// setupProvider is setup with a worker whose engine calls the backend at
// url (one profile, "default"), with retries transient retries.
func setupProvider(t *testing.T, url string, retries int) *env {
	eng := enginekit.Provider(t, url, enginekit.Retries(retries))
	e := setup(t, func(c *Config) {
		c.Engine = eng
		c.Check = func(ctx context.Context, p jobs.EnqueueParams) error { return worker.Check(ctx, eng, p) }
	})
	e.eng = eng
	e.runWorker()
	return e
}

// chunkContent is a data line's content delta, and whether it is a chunk.
func chunkContent(t *testing.T, data string) (string, *string, bool) {
	var c openaiapi.ChatCompletionChunk
	if json.Unmarshal([]byte(data), &c) != nil || c.Object != "chat.completion.chunk" {
		return "", nil, false
	}
	if len(c.Choices) == 0 {
		return "", nil, true
	}
	text := ""
	if p := c.Choices[0].Delta.Content; p != nil {
		text = *p
	}
	return text, c.Choices[0].FinishReason, true
}

// A streamed chat completion relays the backend's pieces as they come:
// the first reaches the client while the backend still holds the rest;
// the answer is stored whole.
func TestChatStreamRelaysPieces(t *testing.T) {
	t.Parallel()
	backend, url := newHeldStream(t, []string{"Hello", " there", ", world."})
	e := setupProvider(t, url, 0)
	s := e.openChatStream(`{"model":"default","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"hi"}]}`)
	<-backend.started
	// The backend holds its second part: the first must come through.
	var got string
	for got == "" {
		line, ok := s.next()
		if !ok {
			t.Fatal("the stream ended before its first piece")
		}
		if data, ok := strings.CutPrefix(line, "data: "); ok {
			got, _, _ = chunkContent(t, data)
		}
	}
	if got != "Hello" {
		t.Fatalf("first piece %q", got)
	}
	backend.release <- struct{}{}
	backend.release <- struct{}{}
	data := s.rest()
	if len(data) == 0 || data[len(data)-1] != "[DONE]" {
		t.Fatalf("events %q", data)
	}
	finish := ""
	for _, d := range data[:len(data)-1] {
		if err := oasValidate(t, "/components/schemas/ChatCompletionChunk", []byte(d)); err != nil {
			t.Error(err)
		}
		text, f, ok := chunkContent(t, d)
		if !ok {
			t.Fatalf("not a chunk: %s", d)
		}
		got += text
		if f != nil {
			finish = *f
		}
	}
	if got != "Hello there, world." || finish != "stop" || !strings.Contains(data[len(data)-2], `"total_tokens":7`) {
		t.Errorf("streamed %q, finish %q: %q", got, finish, data)
	}
	var v promptView
	e.call("GET", "/v1/prompts/"+s.res.Header.Get(headerPromptID), "", nil).decode(t, &v)
	if v.Answer == nil || v.Answer.Output != "Hello there, world." {
		t.Errorf("stored %+v", v.Answer)
	}
}

// A backend call that fails after its first piece was relayed, retried
// with another answer: the stream ends in an error event naming the
// prompt, never the two answers spliced; the answer is stored.
func TestChatStreamReplacedAnswer(t *testing.T) {
	t.Parallel()
	backend, url := newHeldStream(t, []string{"The answer is 4", ""}, []string{"Five."})
	e := setupProvider(t, url, 1)
	s := e.openChatStream(`{"model":"default","stream":true,"messages":[{"role":"user","content":"2+2?"}]}`)
	<-backend.started
	var first string
	for first == "" {
		line, ok := s.next()
		if !ok {
			t.Fatal("the stream ended before its first piece")
		}
		if data, ok := strings.CutPrefix(line, "data: "); ok {
			first, _, _ = chunkContent(t, data)
		}
	}
	backend.release <- struct{}{} // the first call drops; the retry answers
	data := s.rest()
	last := data[len(data)-1]
	var er openaiapi.ErrorBody
	if json.Unmarshal([]byte(last), &er) != nil || deref(er.Error.Code) != "stream_replaced" || !strings.Contains(er.Error.Message, s.res.Header.Get(headerPromptID)) {
		t.Fatalf("events after the first piece: %q", data)
	}
	for _, d := range data {
		if strings.Contains(d, "Five") {
			t.Errorf("the retry's answer was spliced in: %q", data)
		}
	}
	var v promptView
	e.call("GET", "/v1/prompts/"+s.res.Header.Get(headerPromptID), "", nil).decode(t, &v)
	if v.Answer == nil || v.Answer.Output != "Five." {
		t.Errorf("stored %+v", v.Answer)
	}
}

// On PostgreSQL, the pieces reach the client when the job runs in another
// process: here a worker on a second store of the database, which shares
// nothing with the server's but the database.
func TestChatStreamAcrossProcesses(t *testing.T) {
	t.Parallel()
	db := storekit.Postgres.New(t)
	backend, url := newHeldStream(t, []string{"Across", " processes."})
	eng := enginekit.Provider(t, url, enginekit.Retries(0))
	e := setupStore(t, db.Open(t, jobs.Options{}), func(c *Config) {
		c.Engine = eng
		c.Check = func(ctx context.Context, p jobs.EnqueueParams) error { return worker.Check(ctx, eng, p) }
	})
	ws := db.Open(t, jobs.Options{})
	w, err := worker.New(worker.Config{Store: ws, Engine: eng, Concurrency: 2})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = w.Stop(context.Background()) })

	// Once a probe piece from the worker's store reaches the server's, the
	// server's store listens to the database.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	probe := e.st.Notifier().SubscribeDeltas(ctx, "probe")
	testkit.WaitFor(t, time.Minute, "the server's store to hear the worker's", func() (bool, string) {
		select {
		case <-probe:
			return true, ""
		default:
			ws.Notifier().PublishDelta("probe", pktype.StreamDelta{Generation: 1, Attempt: 1})
			return false, "no probe yet"
		}
	})

	s := e.openChatStream(`{"model":"default","stream":true,"messages":[{"role":"user","content":"hi"}]}`)
	<-backend.started
	var first string
	for first == "" {
		line, ok := s.next()
		if !ok {
			t.Fatal("the stream ended before its first piece")
		}
		if data, ok := strings.CutPrefix(line, "data: "); ok {
			first, _, _ = chunkContent(t, data)
		}
	}
	if first != "Across" {
		t.Fatalf("first piece %q", first)
	}
	backend.release <- struct{}{}
	got := first
	for _, d := range s.rest() {
		text, _, _ := chunkContent(t, d)
		got += text
	}
	if got != "Across processes." {
		t.Errorf("streamed %q", got)
	}
}
