package cli

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/promptkit/promptkit/internal/testkit"
	"github.com/promptkit/promptkit/jobs"
	"github.com/promptkit/promptkit/jobs/sqlitestore"
	"github.com/promptkit/promptkit/providertest"
)

// A worker shares its pacing through the database: a Retry-After it
// receives is the database's, which `jobs metrics` shows, and its
// --metrics-addr serves the pacing gauges.
func TestWorkerSharesPacingAndServesMetrics(t *testing.T) {
	t.Parallel()
	prov := httptest.NewServer(providertest.NewHandler(providertest.WithRateLimit(1), providertest.WithRetryAfter("30")))
	defer prov.Close()
	dir := t.TempDir()
	cfg := writeConfig(t, dir, prov.URL+"/v1", "", "")
	db := filepath.Join(dir, "jobs.db")
	st, err := sqlitestore.Open(t.Context(), db, jobs.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	for i := range 3 {
		if _, err := st.Enqueue(t.Context(), jobs.EnqueueParams{Text: fmt.Sprint("job ", i), CreatedBy: "u"}); err != nil {
			t.Fatal(err)
		}
	}

	ctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	done := make(chan int, 1)
	go func() {
		done <- Run(ctx, []string{"worker", "--config", cfg, "--database", db, "--workers", "3",
			"--shutdown-grace", "1ms", "--metrics-addr", "127.0.0.1:0"}, io.Discard, pw)
		pw.Close()
	}()
	defer func() {
		cancel()
		if code := <-done; code != 0 {
			t.Errorf("worker exited %d", code)
		}
	}()
	re := regexp.MustCompile(`url=(http://\S+/metrics)`)
	sc := bufio.NewScanner(pr)
	var metricsURL string
	for sc.Scan() {
		if m := re.FindStringSubmatch(sc.Text()); m != nil {
			metricsURL = m[1]
			break
		}
	}
	if metricsURL == "" {
		t.Fatal("worker did not report its metrics address")
	}
	go io.Copy(io.Discard, pr) //nolint:errcheck // drain logs until the pipe closes

	// One job is admitted, the others meet the limit: the 429's
	// Retry-After pauses the backend, in the database too.
	testkit.WaitFor(t, 30*time.Second, "a shared pause", func() (bool, string) {
		got, err := st.SyncPacing(t.Context(), jobs.PacingSyncParams{})
		if err != nil {
			return false, err.Error()
		}
		return len(got) == 1 && got[0].PauseUntil.After(time.Now()), fmt.Sprintf("%+v", got)
	})

	code, out, errOut := run(t, "jobs", "metrics", "--database", db, "--json")
	if code != 0 {
		t.Fatalf("jobs metrics --json: exit %d: %s", code, errOut)
	}
	var m struct {
		Counts map[string]int  `json:"counts"`
		Pacing []backendPacing `json:"pacing"`
	}
	if err := json.Unmarshal([]byte(out), &m); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if len(m.Pacing) != 1 || m.Pacing[0].Backend != "local" || m.Pacing[0].PausedUntil == nil || len(m.Counts) == 0 {
		t.Fatalf("jobs metrics --json: %s", out)
	}
	code, out, _ = run(t, "jobs", "metrics", "--database", db)
	if code != 0 || !strings.Contains(out, "PAUSED UNTIL") || !regexp.MustCompile(`(?m)^local\s`).MatchString(out) {
		t.Fatalf("jobs metrics: exit %d:\n%s", code, out)
	}

	resp, err := http.Get(metricsURL)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{
		`promptkit_backend_pacing_share{backend="local"}`,
		`promptkit_backend_pacing_processes{backend="local"}`,
		`promptkit_backend_pause_seconds{backend="local"} 2`, // 29.x s left
		`promptkit_job_attempts_total 3`,
	} {
		if !strings.Contains(string(body), want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
}

func TestWorkerMetricsAddrNotWithOnce(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	code, _, errOut := run(t, "worker", "--database", filepath.Join(dir, "jobs.db"), "--once", "--metrics-addr", "127.0.0.1:0")
	if code != 2 || !strings.Contains(errOut, "--metrics-addr") {
		t.Fatalf("exit %d: %s", code, errOut)
	}
}
