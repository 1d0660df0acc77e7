//go:build linux

package faults_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/promptkit/promptkit/jobs"
)

// responseAnswer is what the held provider answers once serve has been
// killed and started again: long enough to be cut into several deltas.
const responseAnswer = "The lighthouse keeper counted the waves, one by one, until the fog lifted and the ships came home."

// heldProvider is an OpenAI-compatible backend whose first chat call
// never answers (it ends when its client goes: serve killed), and whose
// later calls answer responseAnswer at once.
type heldProvider struct {
	calls   atomic.Int32
	started chan struct{} // closed when the first call arrived
}

func (h *heldProvider) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	_, _ = io.Copy(io.Discard, r.Body)
	if h.calls.Add(1) == 1 {
		close(h.started)
		<-r.Context().Done()
		return
	}
	writeCompletion(w, responseAnswer, 3, 18)
}

// respEvent is one event of a response's stream: its data as sent, and
// its type and number.
type respEvent struct {
	data string
	Type string `json:"type"`
	Seq  int    `json:"sequence_number"`
	// Delta is a text delta's piece.
	Delta string `json:"delta"`
}

// eventReader reads a response's Server-Sent Events.
type eventReader struct {
	t   *testing.T
	res *http.Response
	sc  *bufio.Scanner
}

// openEvents sends req and returns the reader of its event stream.
func openEvents(t *testing.T, req *http.Request) *eventReader {
	t.Helper()
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { res.Body.Close() })
	if res.StatusCode != http.StatusOK || res.Header.Get("Content-Type") != "text/event-stream" {
		b, _ := io.ReadAll(res.Body)
		t.Fatalf("%s %s: %d %s", req.Method, req.URL.Path, res.StatusCode, b)
	}
	return &eventReader{t: t, res: res, sc: bufio.NewScanner(res.Body)}
}

// next returns the next event; ok is false when the stream ended (or
// broke: a killed server).
func (r *eventReader) next() (respEvent, bool) {
	var ev respEvent
	for r.sc.Scan() {
		line := r.sc.Text()
		switch {
		case line == "" && ev.data != "":
			if err := json.Unmarshal([]byte(ev.data), &ev); err != nil {
				r.t.Fatalf("event %s: %v", ev.data, err)
			}
			return ev, true
		case strings.HasPrefix(line, "data: "):
			ev.data = strings.TrimPrefix(line, "data: ")
		}
	}
	return ev, false
}

// rest reads every remaining event.
func (r *eventReader) rest() []respEvent {
	var out []respEvent
	for {
		ev, ok := r.next()
		if !ok {
			return out
		}
		out = append(out, ev)
	}
}

// TestResponseStreamKill streams a background response from `promptkit
// serve`, SIGKILLs serve while the response's job waits on the provider,
// starts serve again on the same SQLite database, and resumes the stream
// after the last event it got: the job is reclaimed and answered, and the
// resumed stream continues with the next sequence number and ends in
// response.completed with the whole answer. Read again from the start,
// the stream is the same, byte for byte, as what the client got from the
// two servers: the events are made from what is stored.
func TestResponseStreamKill(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), killDeadline)
	defer cancel()
	dir := t.TempDir()
	d := openSQLite(t, dir)
	provider := &heldProvider{started: make(chan struct{})}
	srv := httptest.NewServer(provider)
	t.Cleanup(srv.Close)
	cfg := writeConfig(t, dir, srv.URL+"/v1")
	args := []string{"serve", "--database", d.DSN, "--config", cfg, "--addr", "127.0.0.1:0",
		"--heartbeat-interval", killHeartbeat.String(), "--reclaim-after", killReclaimAfter.String(),
		"--stuck-after", "1h", "--shutdown-grace", "10s"}
	first := startProc(t, "serve-1", args)
	all := []*proc{first}
	defer func() {
		if t.Failed() {
			for _, p := range all {
				t.Logf("%s log (tail):\n%s", p.name, tail(p.output(), 20))
			}
		}
	}()
	base := serveURL(t, ctx, first)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/v1/responses",
		strings.NewReader(`{"model":"default","background":true,"stream":true,"input":"Tell me about the lighthouse."}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	live := openEvents(t, req)
	promptID := live.res.Header.Get("X-Promptkit-Prompt-Id")
	var got []respEvent
	for len(got) < 2 {
		ev, ok := live.next()
		if !ok {
			t.Fatalf("the stream ended after %d events", len(got))
		}
		got = append(got, ev)
	}
	if got[0].Type != "response.created" || got[1].Type != "response.in_progress" {
		t.Fatalf("first events %s, %s", got[0].Type, got[1].Type)
	}
	select {
	case <-provider.started:
	case <-ctx.Done():
		t.Fatal("the job never called the provider")
	}
	first.kill()
	if evs := live.rest(); len(evs) != 0 {
		t.Fatalf("the killed serve sent %d more events", len(evs))
	}

	second := startProc(t, "serve-2", args)
	all = append(all, second)
	base = serveURL(t, ctx, second)
	last := got[len(got)-1].Seq
	resume := func(after int) []respEvent {
		t.Helper()
		url := fmt.Sprintf("%s/v1/responses/resp_%s?stream=true", base, promptID)
		if after >= 0 {
			url += fmt.Sprintf("&starting_after=%d", after)
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			t.Fatal(err)
		}
		return openEvents(t, req).rest()
	}
	// Followed until the reclaimed job answers.
	rest := resume(last)
	if len(rest) == 0 || rest[0].Seq != last+1 || rest[len(rest)-1].Type != "response.completed" {
		t.Fatalf("resumed after %d: %d events, first %+v", last, len(rest), rest)
	}
	text := ""
	for i, ev := range rest {
		if ev.Seq != last+1+i {
			t.Fatalf("resumed event %d numbered %d", i, ev.Seq)
		}
		if ev.Type == "response.output_text.delta" {
			text += ev.Delta
		}
	}
	if text != responseAnswer {
		t.Errorf("resumed text %q", text)
	}
	// Read again from the start: what the client got, byte for byte.
	replay := resume(-1)
	want := append(got, rest...)
	if len(replay) != len(want) {
		t.Fatalf("replay has %d events, the client got %d", len(replay), len(want))
	}
	for i := range replay {
		if replay[i].data != want[i].data {
			t.Errorf("event %d differs:\nreplay %s\ngot    %s", i, replay[i].data, want[i].data)
		}
	}
	// The job behind it: reclaimed once, then answered.
	js, err := d.store.PromptJobs(ctx, "", promptID)
	if err != nil || len(js) != 1 || js[0].State != jobs.Succeeded || js[0].Attempt != 2 {
		t.Errorf("jobs %+v %v, want one succeeded on its second attempt", js, err)
	}
	if n := provider.calls.Load(); n != 2 {
		t.Errorf("%d provider calls, want 2 (the held one, then the reclaimed job's)", n)
	}
	code, err := second.stop(15 * time.Second)
	if err != nil || code != 0 {
		t.Errorf("%s: exit code %d after SIGTERM (%v)", second.name, code, err)
	}
	checkLogs(t, all)
	t.Logf("killed after event %d; resumed with %d events; serve warnings and errors: %s",
		last, len(rest), logSummary(first.output(), second.output()))
}
