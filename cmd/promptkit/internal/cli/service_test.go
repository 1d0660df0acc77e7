package cli

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/promptkit/promptkit/internal/pgtest"
	"github.com/promptkit/promptkit/jobs"
	"github.com/promptkit/promptkit/jobs/worker"
	"github.com/promptkit/promptkit/providertest"
)

// startServe runs `promptkit serve` (with any further args) on a free
// port and returns its base URL and a stop function that waits for a
// clean exit.
func startServe(t *testing.T, db string, args ...string) (string, func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	done := make(chan int, 1)
	go func() {
		done <- Run(ctx, append([]string{"serve", "--addr", "127.0.0.1:0", "--database", db, "--shutdown-grace", "1ms"}, args...), io.Discard, pw)
		pw.Close()
	}()
	addr := regexp.MustCompile(`addr=(http://\S+)`)
	sc := bufio.NewScanner(pr)
	var url string
	for sc.Scan() {
		if m := addr.FindStringSubmatch(sc.Text()); m != nil {
			url = m[1]
			break
		}
	}
	if url == "" {
		cancel()
		t.Fatalf("serve did not report its address (exit %d)", <-done)
	}
	go io.Copy(io.Discard, pr) //nolint:errcheck // drain logs until the pipe closes
	return url, func() {
		cancel()
		if code := <-done; code != 0 {
			t.Errorf("serve exited %d", code)
		}
	}
}

func TestServeSubmitWaitAndOperate(t *testing.T) {
	t.Parallel()
	db := filepath.Join(t.TempDir(), "promptkit.db")
	url, stop := startServe(t, db)
	defer stop()

	for _, path := range []string{"/healthz", "/readyz"} {
		resp, err := http.Get(url + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("%s: %d", path, resp.StatusCode)
		}
	}

	// serve's /metrics carries the engine's pacing: what each backend's
	// pacer follows now (the simulated backend is unpaced).
	resp, err := http.Get(url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || !strings.Contains(string(body), `promptkit_backend_learned_rate{backend="`) {
		t.Errorf("/metrics lacks promptkit_backend_learned_rate (err %v)", err)
	}

	code, out, errOut := run(t, "submit", "--database", db, "--text", "hello service", "--wait")
	if code != 0 || !strings.Contains(out, "promptkit simulated backend (no backend configured): hello service") {
		t.Fatalf("submit --wait: exit %d, out %q, err %q", code, out, errOut)
	}

	code, out, _ = run(t, "jobs", "list", "--database", db, "--json")
	var listed []map[string]any
	if code != 0 || json.Unmarshal([]byte(out), &listed) != nil || len(listed) != 1 {
		t.Fatalf("jobs list --json: exit %d, %s", code, out)
	}
	for _, col := range []string{"id", "prompt_id", "state", "priority", "attempt", "max_attempts", "created_at"} {
		if _, ok := listed[0][col]; !ok {
			t.Errorf("jobs list --json lacks column %q: %v", col, listed[0])
		}
	}
	id := listed[0]["id"].(string)
	if listed[0]["state"] != "succeeded" {
		t.Fatalf("state = %v", listed[0]["state"])
	}

	code, out, _ = run(t, "jobs", "show", id, "--database", db)
	for _, want := range []string{"succeeded", "(new) -> queued", "queued -> running", "running -> succeeded", "attempt ", "from backend simulated", `"backend":"simulated"`} {
		if code != 0 || !strings.Contains(out, want) {
			t.Errorf("jobs show lacks %q:\n%s", want, out)
		}
	}

	code, out, _ = run(t, "jobs", "metrics", "--database", db, "--by-org")
	if code != 0 || !regexp.MustCompile(`(?m)^ORG\s+FINISHED\s+LATENCY AVG\s+LATENCY P95\ndefault\s+1\s`).MatchString(out) {
		t.Fatalf("jobs metrics --by-org: exit %d\n%s", code, out)
	}
	code, out, _ = run(t, "jobs", "retry", id, "--database", db)
	if code != 0 || !strings.Contains(out, "supersedes "+id) {
		t.Fatalf("jobs retry: exit %d %s", code, out)
	}
	code, out, _ = run(t, "jobs", "metrics", "--database", db, "--json")
	var m struct{ Counts map[string]int }
	if code != 0 || json.Unmarshal([]byte(out), &m) != nil || m.Counts["superseded"] != 1 || len(m.Counts) != 6 {
		t.Fatalf("jobs metrics --json: exit %d %s", code, out)
	}
}

func TestOperatorCommandsWithoutServe(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	db := filepath.Join(dir, "ops.db")
	if code, _, errOut := run(t, "migrate", "--database", db); code != 0 {
		t.Fatalf("migrate: %s", errOut)
	}
	code, out, _ := run(t, "submit", "--database", db, "--text", "queued only", "--priority", "10", "--json")
	var sub struct {
		JobID string `json:"job_id"`
	}
	if code != 0 || json.Unmarshal([]byte(out), &sub) != nil || sub.JobID == "" {
		t.Fatalf("submit: exit %d %s", code, out)
	}
	code, out, _ = run(t, "jobs", "cancel", sub.JobID, "--database", db)
	if code != 0 || !strings.Contains(out, "cancelled") {
		t.Fatalf("cancel: exit %d %s", code, out)
	}
	code, _, errOut := run(t, "jobs", "cancel", sub.JobID, "--database", db)
	if code != 1 || !strings.Contains(errOut, "cancelled") {
		t.Fatalf("second cancel: exit %d %s", code, errOut)
	}

	file := filepath.Join(dir, "prompts.jsonl")
	lines := `{"text":"one","priority":5}` + "\n" + `{"text":"two","scheduled_for":"2000-01-01T00:00:00Z"}` + "\n\n" +
		`{"text":"three","profile":"default","depends_on":"` + sub.JobID + `"}` + "\n"
	if err := os.WriteFile(file, []byte(lines), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, errOut = run(t, "submit", "--database", db, "--file", file, "--json")
	if code != 0 || !strings.Contains(errOut, "queued 3 prompts") || !strings.Contains(errOut, "100%") {
		t.Fatalf("submit --file: exit %d %s %s", code, out, errOut)
	}
	// One JSON object per stored line, naming the line and the ids.
	var lineNos []int
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		var r struct {
			Line  int    `json:"line"`
			JobID string `json:"job_id"`
		}
		if json.Unmarshal([]byte(l), &r) != nil || r.JobID == "" {
			t.Fatalf("submit --file --json line %q", l)
		}
		lineNos = append(lineNos, r.Line)
	}
	if fmt.Sprint(lineNos) != "[1 2 4]" {
		t.Fatalf("lines %v, want [1 2 4]", lineNos)
	}
	code, out, _ = run(t, "jobs", "list", "--database", db, "--state", "queued")
	if code != 0 || strings.Count(out, "queued") != 3 {
		t.Fatalf("jobs list --state queued:\n%s", out)
	}
	code, out, _ = run(t, "jobs", "reclaim", "--database", db)
	if code != 0 || !strings.Contains(out, "requeued 0") {
		t.Fatalf("reclaim: exit %d %s", code, out)
	}
	code, _, errOut = run(t, "jobs", "archive", "--database", db, "--before", "2999-01-01")
	if code != 2 || !strings.Contains(errOut, "pass --yes to confirm") {
		t.Fatalf("archive without --yes and no terminal: exit %d %s", code, errOut)
	}
	code, out, _ = run(t, "jobs", "archive", "--database", db, "--before", "2999-01-01", "--yes")
	if code != 0 || !strings.Contains(out, "archived 1 jobs") {
		t.Fatalf("archive: exit %d %s", code, out)
	}

	bad := filepath.Join(dir, "bad.jsonl")
	if err := os.WriteFile(bad, []byte(`{"text":"ok"}`+"\n"+`{"txt":"SECRET-LINE"}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	badOpts := filepath.Join(dir, "badopts.jsonl")
	if err := os.WriteFile(badOpts, []byte(`{"text":"x","execution_options":{"router_model":"r"}}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		args []string
		code int
		want string
	}{
		{[]string{"submit", "--database", db, "--file", bad}, 1, "bad.jsonl:2"},
		{[]string{"submit", "--database", db}, 2, "exactly one of --text and --file"},
		{[]string{"submit", "--database", db, "--text", "x", "--priority", "101"}, 2, "0–100"},
		{[]string{"jobs", "list", "--database", db, "--state", "done"}, 2, "--state"},
		{[]string{"jobs", "show", "nope", "--database", db}, 1, "not found"},
		{[]string{"jobs", "archive", "--database", db}, 2, "--before"},
		{[]string{"jobs", "list", "--database", db, "--since", "yesterday"}, 2, "--since"},
		// Refused at submission: what a worker could not run.
		{[]string{"submit", "--database", db, "--text", "x", "--profile", "nope"}, 2, "profile not found"},
		{[]string{"submit", "--database", db, "--text", "x", "--prefer-provider", "nope"}, 2, "does not serve"},
		{[]string{"submit", "--database", db, "--text", "x", "--depth", "-1"}, 2, "depth"},
		{[]string{"submit", "--database", db, "--file", badOpts}, 1, "badopts.jsonl:1: jobs: invalid parameters: execution_options.router_model"},
		// Settings that cannot work together.
		{[]string{"worker", "--once", "--database", db, "--reclaim-after", "3s"}, 2, "heartbeat interval 30s is not below reclaim_after 3s"},
		{[]string{"worker", "--once", "--database", db, "--reclaim-after", "20m"}, 2, "reclaim_after 20m0s is not below stuck_after 15m0s"},
		{[]string{"jobs", "reclaim", "--database", db, "--reclaim-after", "20m"}, 2, "not below stuck_after"},
	}
	for _, c := range cases {
		code, _, errOut := run(t, c.args...)
		if code != c.code || !strings.Contains(errOut, c.want) || strings.Contains(errOut, "SECRET-LINE") {
			t.Errorf("%v: exit %d, stderr %q; want exit %d mentioning %q", c.args, code, errOut, c.code, c.want)
		}
	}
}

// TestUnreachableProviderReadsAsSuch: a job whose provider cannot be
// reached says so in words, under its own kind, instead of reading like a
// configuration error.
func TestUnreachableProviderReadsAsSuch(t *testing.T) {
	t.Parallel()
	srv := providertest.NewServer()
	cfg := quickstart(t, srv.URL)
	srv.Close() // nothing listens there now
	db := filepath.Join(t.TempDir(), "jobs.db")
	code, out, errOut := run(t, "submit", "--config", cfg, "--database", db, "--text", "hi", "--max-attempts", "1", "--idempotency-key", "k", "--json")
	var sub struct {
		JobID string `json:"job_id"`
	}
	if code != 0 || json.Unmarshal([]byte(out), &sub) != nil {
		t.Fatalf("submit: %d %s %s", code, out, errOut)
	}
	if code, _, errOut := run(t, "worker", "--once", "--config", cfg, "--database", db); code != 0 {
		t.Fatalf("worker --once: %d %s", code, errOut)
	}
	code, out, _ = run(t, "jobs", "show", sub.JobID, "--database", db)
	if code != 0 || !strings.Contains(out, "error transport (the provider could not be reached)") ||
		!strings.Contains(out, "what to do: "+jobs.KindTransport.Advice()) {
		t.Fatalf("jobs show: %d\n%s", code, out)
	}
	// A repeat with the key finds the failed job: --wait says how it ended.
	code, _, errOut = run(t, "submit", "--config", cfg, "--database", db, "--text", "hi", "--max-attempts", "1", "--idempotency-key", "k", "--wait")
	want := "job " + sub.JobID + " failed on attempt 1 of 1: the provider could not be reached (transport): "
	if code != 1 || !strings.Contains(errOut, want) || strings.Contains(errOut, "unknown profile") {
		t.Fatalf("submit --wait: exit %d, %q, want it to contain %q", code, errOut, want)
	}
}

// TestWorkerWaitsForTheDatabase: a worker started while PostgreSQL cannot
// be reached waits for it, says so, and starts once it answers, instead
// of exiting. The "database" is a port that refuses connections until the
// test starts forwarding it to the real server.
func TestWorkerWaitsForTheDatabase(t *testing.T) {
	t.Parallel()
	base, err := url.Parse(pgtest.Schema(t))
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close() // refused until forwarded
	target := base.Host
	base.Host = fmt.Sprintf("127.0.0.1:%d", port)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	pr, pw := io.Pipe()
	done := make(chan int, 1)
	go func() {
		done <- Run(ctx, []string{"worker", "--database", base.String()}, io.Discard, pw)
		pw.Close()
	}()
	lines := bufio.NewScanner(pr)
	waitLine := func(substr string) {
		t.Helper()
		for lines.Scan() {
			if strings.Contains(lines.Text(), substr) {
				return
			}
		}
		t.Fatalf("the worker never logged %q (exit %d)", substr, <-done)
	}
	waitLine("database unreachable; waiting for it")
	fwd, err := net.Listen("tcp", base.Host)
	if err != nil {
		t.Fatal(err)
	}
	defer fwd.Close()
	go forward(fwd, target)
	waitLine("worker running")
	cancel()
	go io.Copy(io.Discard, pr) //nolint:errcheck // drain until the pipe closes
	if code := <-done; code != 0 {
		t.Fatalf("worker exited %d", code)
	}
}

// forward relays every connection accepted on ln to target until ln
// closes.
func forward(ln net.Listener, target string) {
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		go func() {
			defer c.Close()
			up, err := net.Dial("tcp", target)
			if err != nil {
				return
			}
			defer up.Close()
			go io.Copy(up, c) //nolint:errcheck // ends when either side closes
			io.Copy(c, up)    //nolint:errcheck
		}()
	}
}

// shutdown_grace is always a given value in the CLI (a flag or key not
// given holds worker.DefaultShutdownGrace), so its 0s is a grace of
// zero: the worker's negative grace, handing jobs back at once — not the
// worker's zero, "not set", which is the 10 s default.
func TestWorkerGrace(t *testing.T) {
	t.Parallel()
	for in, want := range map[time.Duration]time.Duration{
		0:                           -1,
		time.Millisecond:            time.Millisecond,
		worker.DefaultShutdownGrace: worker.DefaultShutdownGrace,
	} {
		if got := workerGrace(in); got != want {
			t.Errorf("workerGrace(%v) = %v, want %v", in, got, want)
		}
	}
}
