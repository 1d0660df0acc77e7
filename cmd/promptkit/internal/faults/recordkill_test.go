//go:build linux

package faults_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/promptkit/promptkit"
	"github.com/promptkit/promptkit/internal/testkit"
	"github.com/promptkit/promptkit/jobs"
	"github.com/promptkit/promptkit/jobs/worker"
)

// A recordKill scenario's provider calls: the first one's answer makes the
// run call again at once (or after a retry wait), the second is held
// until serve is killed, and every later one (the reclaimed job's run)
// answers.
type callAnswer int

const (
	answer500          callAnswer = iota // HTTP 500
	answer503                            // HTTP 503
	answerNotJSON                        // 200, but not the JSON object asked for
	answerBrokenStream                   // a stream an error event ends after a first piece
	answerHeld                           // held until the client goes (a piece first, for a stream)
)

// recordProvider is an OpenAI-compatible fake of two backends, /primary
// and /fallback: call n gets script[n-1], and the calls after the script
// a JSON object (streamed when asked). It counts the calls by backend and
// wakes the test when the held call has arrived.
type recordProvider struct {
	script []callAnswer
	held   chan struct{} // receives when the held call arrives

	mu    sync.Mutex
	calls []string // the backend of each call, in arrival order
}

func (p *recordProvider) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	backend, _, _ := strings.Cut(strings.TrimPrefix(r.URL.Path, "/"), "/")
	p.mu.Lock()
	p.calls = append(p.calls, backend)
	n := len(p.calls)
	p.mu.Unlock()
	stream := bytes.Contains(body, []byte(`"stream":true`))
	if n > len(p.script) {
		if stream {
			writeStream(w, `{"ok":true}`, "")
		} else {
			writeCompletion(w, `{"ok":true}`, 5, 3)
		}
		return
	}
	switch p.script[n-1] {
	case answer500, answer503:
		code := http.StatusInternalServerError
		if p.script[n-1] == answer503 {
			code = http.StatusServiceUnavailable
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(code)
		_, _ = w.Write([]byte(`{"error":{"message":"unavailable","type":"server_error"}}`))
	case answerNotJSON:
		writeCompletion(w, "not an object", 5, 3)
	case answerBrokenStream:
		writeStream(w, "Half", `{"error":{"message":"stream broke","type":"server_error"}}`)
	case answerHeld:
		if stream {
			w.Header().Set("Content-Type", "text/event-stream")
			_, _ = io.WriteString(w, chunkEvent("Hal"))
			w.(http.Flusher).Flush()
		}
		p.held <- struct{}{}
		<-r.Context().Done()
	}
}

// backends returns the backend of each call so far.
func (p *recordProvider) backends() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.calls...)
}

// chunkEvent is a stream's event carrying piece.
func chunkEvent(piece string) string {
	return `data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"faults-model","choices":[{"index":0,"delta":{"role":"assistant","content":` +
		fmt.Sprintf("%q", piece) + `},"finish_reason":null}]}` + "\n\n"
}

// writeStream streams piece, then ends the stream: with the error event
// errData when it is set, else with finish_reason stop and [DONE].
func writeStream(w http.ResponseWriter, piece, errData string) {
	w.Header().Set("Content-Type", "text/event-stream")
	_, _ = io.WriteString(w, chunkEvent(piece))
	if errData != "" {
		_, _ = io.WriteString(w, "data: "+errData+"\n\n")
		return
	}
	_, _ = io.WriteString(w, `data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"faults-model","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}`+"\n\n")
	_, _ = io.WriteString(w, "data: [DONE]\n\n")
}

// recordScenario is one way a run calls the provider a second time.
type recordScenario struct {
	name  string
	group bool // the profile is a model group: primary, then fallback
	job   jobs.EnqueueParams
	// script is the provider's first two answers; the second is held.
	script []callAnswer
	// second is the backend the held call must go to.
	second string
}

var recordScenarios = []recordScenario{
	// The primary answers 500: the fallback is called at once.
	{name: "failover", group: true, job: jobs.EnqueueParams{Text: "fail over"},
		script: []callAnswer{answer500, answerHeld}, second: "fallback"},
	// The answer is not the JSON object asked for: a repair is called at once.
	{name: "repair", job: jobs.EnqueueParams{Chat: &jobs.ChatRequest{
		Messages:       []promptkit.Message{{Role: promptkit.RoleUser, Content: "an object, please"}},
		ResponseFormat: jobs.FormatJSONObject}},
		script: []callAnswer{answerNotJSON, answerHeld}, second: "primary"},
	// A streamed answer breaks on the primary: the fallback streams.
	{name: "stream", group: true, job: jobs.EnqueueParams{Text: "stream it", ExecutionOptions: jobs.ExecutionOptions{Stream: true}},
		script: []callAnswer{answerBrokenStream, answerHeld}, second: "fallback"},
	// A 503 on the one backend: retried after the backoff.
	{name: "retry", job: jobs.EnqueueParams{Text: "try again"},
		script: []callAnswer{answer503, answerHeld}, second: "primary"},
}

// TestRecordKill SIGKILLs `promptkit serve` during the second provider
// call of a job's run, at each point where a run calls again — a failover
// to a model group's fallback, a schema repair, a streamed call on the
// fallback after the primary's stream broke, a plain transient retry —
// then reclaims the job and lets a new serve finish it. At the kill, the
// first call's attempt event and ledger row are already stored; at the
// end the provider's calls equal the attempt events plus the reclaims
// (at most one call of a run unrecorded, whatever the routing), and the
// ledger has a row for each call.
func TestRecordKill(t *testing.T) {
	for _, sc := range recordScenarios {
		t.Run(sc.name, func(t *testing.T) {
			t.Run("sqlite", func(t *testing.T) { recordKill(t, openSQLite(t, t.TempDir()), sc) })
			t.Run("postgres", func(t *testing.T) { recordKill(t, openPostgresSchema(t), sc) })
		})
	}
}

func recordKill(t *testing.T, d *database, sc recordScenario) {
	ctx, cancel := context.WithTimeout(t.Context(), killDeadline)
	defer cancel()
	dir := t.TempDir()
	provider := &recordProvider{script: sc.script, held: make(chan struct{}, 1)}
	srv := httptest.NewServer(provider)
	t.Cleanup(srv.Close)
	route := "backend: primary"
	if sc.group {
		route = "backends:\n      - {id: primary}\n      - {id: fallback, fallback: true}"
	}
	cfg := filepath.Join(dir, "promptkit.yaml")
	if err := os.WriteFile(cfg, []byte(fmt.Sprintf(`backends:
  - id: primary
    base_url: %[1]s/primary/v1
    timeout: 20s
    cooldown: 1h
  - id: fallback
    base_url: %[1]s/fallback/v1
    timeout: 20s
profiles:
  - id: default
    model: faults-model
    repair_budget: 1
    %[2]s
`, srv.URL, route)), 0o600); err != nil {
		t.Fatal(err)
	}
	job := sc.job
	job.OrgID, job.CreatedBy, job.MaxAttempts = "org", "faults", maxAttempts
	e, err := d.store.Enqueue(ctx, job)
	if err != nil {
		t.Fatal(err)
	}
	args := []string{"serve", "--database", d.DSN, "--config", cfg, "--addr", "127.0.0.1:0", "--workers", "1",
		"--heartbeat-interval", killHeartbeat.String(), "--reclaim-after", killReclaimAfter.String(),
		"--stuck-after", "1h", "--shutdown-grace", "10s"}
	var all []*proc
	defer func() {
		if t.Failed() {
			for _, p := range all {
				t.Logf("%s log (tail):\n%s", p.name, tail(p.output(), 20))
			}
		}
	}()
	// record is what the store says about the job: its chain (attempt
	// events, reclaims) and the ledger's rows.
	record := func() (chain, int64) {
		t.Helper()
		j, err := d.store.GetJob(ctx, "", e.JobID)
		if err != nil {
			t.Fatal(err)
		}
		evs, err := d.store.JobEvents(ctx, "", e.JobID)
		if err != nil {
			t.Fatal(err)
		}
		c, err := checkChain(j, evs)
		if err != nil {
			t.Errorf("event chain: %v", err)
		}
		b, err := d.store.Usage(ctx, jobs.UsageParams{})
		if err != nil {
			t.Fatal(err)
		}
		var rows int64
		for _, x := range b {
			rows += x.Requests
		}
		return c, rows
	}

	first := startProc(t, "serve-1", args)
	all = append(all, first)
	select {
	case <-provider.held:
	case <-first.done:
		t.Fatalf("serve-1 exited (%v)", first.err)
	case <-ctx.Done():
		t.Fatalf("the second call never came; calls %v", provider.backends())
	}
	first.kill()
	if got := provider.backends(); len(got) != 2 || got[1] != sc.second {
		t.Fatalf("calls went to %v, want 2 with the second on %s", got, sc.second)
	}
	// Killed with the second call in flight: the first is recorded.
	atKill, rowsAtKill := record()
	if atKill.attempts != 1 || rowsAtKill != 1 {
		t.Errorf("at the kill, during call 2: %d attempt events and %d ledger rows, want 1 and 1: call 1 went unrecorded",
			atKill.attempts, rowsAtKill)
	}

	reclaimer, err := worker.NewReclaimer(worker.ReclaimerConfig{Store: d.store, ReclaimAfter: killReclaimAfter, StuckAfter: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if !testkit.Until(ctx, time.Until(deadlineOf(ctx)), func() bool {
		if _, err := reclaimer.Sweep(ctx); err != nil {
			t.Fatalf("reclaim: %v", err)
		}
		j, err := d.store.GetJob(ctx, "", e.JobID)
		return err == nil && j.State == jobs.Queued
	}, d.store.Notifier()) {
		t.Fatal("the killed serve's job was never reclaimed")
	}

	second := startProc(t, "serve-2", args)
	all = append(all, second)
	var j jobs.Job
	if !testkit.Until(ctx, time.Until(deadlineOf(ctx)), func() bool {
		select {
		case <-second.done:
			t.Fatalf("serve-2 exited (%v)", second.err)
		default:
		}
		j, err = d.store.GetJob(ctx, "", e.JobID)
		return err == nil && j.State.Terminal()
	}, d.store.Notifier(), testkit.Chan(second.done)) {
		t.Fatal("the reclaimed job never finished")
	}
	if _, err := second.stop(15 * time.Second); err != nil {
		t.Error(err)
	}
	if j.State != jobs.Succeeded {
		t.Errorf("job %s %q: %s", j.State, j.ErrorKind, j.ErrorMessage)
	}

	end, rows := record()
	calls := len(provider.backends())
	t.Logf("%s on %s: %d provider calls (%v); at the kill %d attempt events, %d ledger rows; at the end %d attempt events + %d reclaims, %d ledger rows",
		sc.name, d.name(), calls, provider.backends(), atKill.attempts, rowsAtKill, end.attempts, end.interrupted, rows)
	if calls != end.attempts+end.interrupted || end.interrupted != 1 {
		t.Errorf("%d provider calls, %d attempt events + %d reclaims: want calls = events + reclaims, with one reclaim",
			calls, end.attempts, end.interrupted)
	}
	if rows != int64(calls) {
		t.Errorf("%d ledger rows for %d provider calls", rows, calls)
	}
	checkLogs(t, all)
}
