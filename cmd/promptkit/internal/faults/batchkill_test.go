//go:build linux

package faults_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"regexp"
	"testing"
	"time"

	"github.com/promptkit/promptkit/internal/testkit"
	"github.com/promptkit/promptkit/jobs"
	"github.com/promptkit/promptkit/providertest"
)

// The batch-kill test's shape: enough lines, slow enough calls and few
// enough slots that the batch is still running when half of it is done.
const (
	killLines   = 400
	killWorkers = 8
	killLatency = 30 * time.Millisecond
	// A killed serve's running jobs are back in the queue about a second
	// after their last heartbeat.
	killHeartbeat    = 100 * time.Millisecond
	killReclaimAfter = time.Second
	killDeadline     = 2 * time.Minute
)

// TestBatchKill runs a batch through `promptkit serve`, SIGKILLs the
// serve process when about half the lines are done, starts it again on
// the same SQLite database, and checks that the batch completes with
// every custom_id exactly once in the output file, each with its own
// answer, and nothing in the error file; that each line's job succeeded
// with one response; and that every provider call is accounted for.
func TestBatchKill(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), killDeadline)
	defer cancel()
	dir := t.TempDir()
	d := openSQLite(t, dir)
	srv := providertest.NewServer(providertest.WithLatency(killLatency))
	t.Cleanup(srv.Close)
	cfg := writeConfig(t, dir, srv.URL)

	args := []string{"serve", "--database", d.DSN, "--config", cfg, "--addr", "127.0.0.1:0",
		"--workers", fmt.Sprint(killWorkers),
		"--heartbeat-interval", killHeartbeat.String(),
		"--reclaim-after", killReclaimAfter.String(),
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
	api := &batchAPI{t: t, ctx: ctx, base: serveURL(t, ctx, first)}

	// The input file: line i asks "batch line i" under custom_id "line-i".
	var in bytes.Buffer
	text := map[string]string{} // custom_id → the line's user text
	for i := range killLines {
		id, msg := fmt.Sprintf("line-%04d", i), fmt.Sprintf("batch line %04d", i)
		text[id] = msg
		line, err := json.Marshal(map[string]any{
			"custom_id": id, "method": "POST", "url": "/v1/chat/completions",
			"body": map[string]any{"model": "default", "messages": []map[string]string{{"role": "user", "content": msg}}},
		})
		if err != nil {
			t.Fatal(err)
		}
		in.Write(line)
		in.WriteByte('\n')
	}
	fileID := api.upload("input.jsonl", in.Bytes())
	var b batchObject
	api.do(http.MethodPost, "/v1/batches", map[string]any{
		"input_file_id": fileID, "endpoint": "/v1/chat/completions", "completion_window": "24h",
	}, http.StatusOK, &b)
	batchID := b.ID

	// Kill serve once half the lines are done, while the rest are queued
	// or running.
	testkit.WaitFor(t, time.Until(deadlineOf(ctx)), "half the batch to complete", func() (bool, string) {
		b = api.batch(batchID, "")
		return b.Counts.Completed >= killLines/2, fmt.Sprintf("%s %+v", b.Status, b.Counts)
	}, d.store.Notifier())
	first.kill()
	killedAt := b.Counts
	if killedAt.Completed >= killLines {
		t.Fatalf("the whole batch was done before the kill (%+v): the test proved nothing (make it longer)", killedAt)
	}

	// A new serve on the same database finishes the batch.
	second := startProc(t, "serve-2", args)
	all = append(all, second)
	api.base = serveURL(t, ctx, second)
	// Each read waits on serve (?wait=) until the batch is terminal, so
	// the test looks again only until the new serve answers.
	testkit.WaitFor(t, time.Until(deadlineOf(ctx)), "the batch to complete", func() (bool, string) {
		b = api.batch(batchID, "30s")
		return b.Status.Terminal(), fmt.Sprintf("%s %+v", b.Status, b.Counts)
	}, d.store.Notifier())
	if b.Status != jobs.BatchCompleted || b.Counts != (jobs.BatchCounts{Total: killLines, Completed: killLines}) {
		t.Fatalf("batch %s with counts %+v, want completed with %d of %d", b.Status, b.Counts, killLines, killLines)
	}

	// The output file: every custom_id once, each with its own answer.
	if b.OutputFileID == "" {
		t.Fatal("the completed batch has no output file")
	}
	seen := map[string]int{}
	errs := &errorList{t: t, limit: 10}
	for _, raw := range api.lines(b.OutputFileID) {
		var l outputLine
		if err := json.Unmarshal(raw, &l); err != nil {
			errs.add("output line %q: %v", raw, err)
			continue
		}
		seen[l.CustomID]++
		want, ok := text[l.CustomID]
		switch {
		case !ok:
			errs.add("output line for unknown custom_id %q", l.CustomID)
		case l.Response == nil || l.Response.StatusCode != http.StatusOK || l.Error != nil:
			errs.add("output line %s: response %+v error %+v, want status 200 and no error", l.CustomID, l.Response, l.Error)
		case len(l.Response.Body.Choices) != 1 || l.Response.Body.Choices[0].Message.Content != "Fake provider reply: "+want:
			errs.add("output line %s: answer %+v, want the reply to %q", l.CustomID, l.Response.Body.Choices, want)
		}
	}
	for id := range text {
		if seen[id] != 1 {
			errs.add("custom_id %s appears %d times in the output file, want once", id, seen[id])
		}
	}
	errs.done("output problems")
	if b.ErrorFileID != "" {
		if n := len(api.lines(b.ErrorFileID)); n != 0 {
			t.Errorf("the error file has %d lines, want none", n)
		}
	}

	// The jobs behind the lines: each succeeded once, its events a
	// gap-free path, and the provider's calls all accounted for.
	byText := map[string]string{}
	var ids []string
	after := ""
	for {
		page, err := d.store.BatchResults(ctx, jobs.BatchResultsParams{BatchID: batchID, After: after})
		if err != nil {
			t.Fatalf("BatchResults: %v", err)
		}
		if len(page) == 0 {
			break
		}
		for _, r := range page {
			ids = append(ids, r.Job.ID)
			byText[text[r.Prompt.CustomID]] = r.Job.ID
			after = r.Prompt.ID
		}
	}
	if len(ids) != killLines {
		t.Errorf("the batch has %d lines in the store, want %d", len(ids), killLines)
	}
	code, err := second.stop(15 * time.Second)
	if err != nil || code != 0 {
		t.Errorf("%s: exit code %d after SIGTERM (%v)", second.name, code, err)
	}
	checkLogs(t, all)
	a := auditJobs(t, ctx, d, ids)
	c := providerCalls(t, srv, byText)
	checkCalls(t, c, a)
	t.Logf("%d lines, %d slots, provider latency %v; killed at %+v", killLines, killWorkers, killLatency, killedAt)
	t.Logf("%d succeeded, others %s; %d attempt events, %d interrupted attempts (reclaims); provider calls %d (jobs by calls made %s), killed mid-call %d, duplicate responses %d",
		a.succeeded, sortedCounts(a.others), a.attempts, a.interrupted, c.total, c.histogram(ids), c.cancelled, a.duplicates)
	t.Logf("serve warnings and errors: %s", logSummary(first.output(), second.output()))
}

// listening matches serve's startup line, which names its address.
var listening = regexp.MustCompile(`msg="promptkit serve listening[^"]*" addr=(\S+)`)

// serveURL waits for p's startup line, woken by p's output and its exit,
// and returns its base URL.
func serveURL(t *testing.T, ctx context.Context, p *proc) string {
	t.Helper()
	var url string
	testkit.WaitFor(t, time.Until(deadlineOf(ctx)), p.name+" to listen", func() (bool, string) {
		select {
		case <-p.done:
			t.Fatalf("%s exited (%v):\n%s", p.name, p.err, tail(p.output(), 20))
		default:
		}
		m := listening.FindStringSubmatch(p.output())
		if m == nil {
			return false, tail(p.output(), 3)
		}
		url = m[1]
		return true, ""
	}, p.out, testkit.Chan(p.done))
	return url
}

// batchObject is the part of OpenAI's batch object the test reads.
type batchObject struct {
	ID           string           `json:"id"`
	Status       jobs.BatchStatus `json:"status"`
	OutputFileID string           `json:"output_file_id"`
	ErrorFileID  string           `json:"error_file_id"`
	Counts       jobs.BatchCounts `json:"request_counts"`
}

// outputLine is one line of a batch's output or error file.
type outputLine struct {
	CustomID string `json:"custom_id"`
	Response *struct {
		StatusCode int `json:"status_code"`
		Body       struct {
			Choices []struct {
				Message struct {
					Content string `json:"content"`
				} `json:"message"`
			} `json:"choices"`
		} `json:"body"`
	} `json:"response"`
	Error *struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

// batchAPI calls serve's files and batches endpoints; any failure ends
// the test.
type batchAPI struct {
	t    *testing.T
	ctx  context.Context
	base string
}

func (a *batchAPI) send(req *http.Request, want int) []byte {
	a.t.Helper()
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		a.t.Fatalf("%s %s: %v", req.Method, req.URL.Path, err)
	}
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	if err != nil {
		a.t.Fatalf("%s %s: reading the answer: %v", req.Method, req.URL.Path, err)
	}
	if res.StatusCode != want {
		a.t.Fatalf("%s %s: status %d, want %d: %s", req.Method, req.URL.Path, res.StatusCode, want, body)
	}
	return body
}

// do sends body (JSON, or none when nil) and decodes the answer into out.
func (a *batchAPI) do(method, path string, body any, want int, out any) {
	a.t.Helper()
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			a.t.Fatal(err)
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(a.ctx, method, a.base+path, rd)
	if err != nil {
		a.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if err := json.Unmarshal(a.send(req, want), out); err != nil {
		a.t.Fatalf("%s %s: decoding the answer: %v", method, path, err)
	}
}

// upload stores content as a batch input file and returns its ID.
func (a *batchAPI) upload(name string, content []byte) string {
	a.t.Helper()
	var body bytes.Buffer
	mw := multipart.NewWriter(&body)
	if err := mw.WriteField("purpose", "batch"); err != nil {
		a.t.Fatal(err)
	}
	fw, err := mw.CreateFormFile("file", name)
	if err != nil {
		a.t.Fatal(err)
	}
	fw.Write(content)
	if err := mw.Close(); err != nil {
		a.t.Fatal(err)
	}
	req, err := http.NewRequestWithContext(a.ctx, http.MethodPost, a.base+"/v1/files", &body)
	if err != nil {
		a.t.Fatal(err)
	}
	req.Header.Set("Content-Type", mw.FormDataContentType())
	var f struct {
		ID    string `json:"id"`
		Bytes int64  `json:"bytes"`
	}
	if err := json.Unmarshal(a.send(req, http.StatusOK), &f); err != nil {
		a.t.Fatalf("POST /v1/files: decoding the answer: %v", err)
	}
	if f.ID == "" || f.Bytes != int64(len(content)) {
		a.t.Fatalf("POST /v1/files: file %q of %d bytes, want an id and %d bytes", f.ID, f.Bytes, len(content))
	}
	return f.ID
}

// batch reads a batch, held with a non-empty wait until it is terminal
// (?wait=); a transport error (serve just killed, or not yet up) reads
// as an empty batch, for testkit.WaitFor to try again.
func (a *batchAPI) batch(id, wait string) batchObject {
	url := a.base + "/v1/batches/" + id
	if wait != "" {
		url += "?wait=" + wait
	}
	req, err := http.NewRequestWithContext(a.ctx, http.MethodGet, url, nil)
	if err != nil {
		a.t.Fatal(err)
	}
	var b batchObject
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return b
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(res.Body)
		a.t.Fatalf("GET /v1/batches/%s: status %d: %s", id, res.StatusCode, body)
	}
	if err := json.NewDecoder(res.Body).Decode(&b); err != nil {
		a.t.Fatalf("GET /v1/batches/%s: %v", id, err)
	}
	return b
}

// lines downloads a file and returns its non-empty lines.
func (a *batchAPI) lines(id string) [][]byte {
	a.t.Helper()
	req, err := http.NewRequestWithContext(a.ctx, http.MethodGet, a.base+"/v1/files/"+id+"/content", nil)
	if err != nil {
		a.t.Fatal(err)
	}
	body := a.send(req, http.StatusOK)
	var out [][]byte
	sc := bufio.NewScanner(bytes.NewReader(body))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		if l := bytes.TrimSpace(sc.Bytes()); len(l) > 0 {
			out = append(out, append([]byte(nil), l...))
		}
	}
	if err := sc.Err(); err != nil {
		a.t.Fatal(err)
	}
	return out
}
