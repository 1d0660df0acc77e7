package cli

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/promptkit/promptkit/internal/testkit"
	"github.com/promptkit/promptkit/jobs"
	"github.com/promptkit/promptkit/providertest"
)

// backends hold/release, orgs pause/resume and workers drain/undrain
// change the database as they say; ls shows it; unknown workers and bad
// names are usage errors.
func TestControlCommands(t *testing.T) {
	db := filepath.Join(t.TempDir(), "jobs.db")
	if code, _, errOut := run(t, "backends", "hold", "--database", db, "openai"); code != 0 {
		t.Fatalf("backends hold: %s", errOut)
	}
	code, out, _ := run(t, "backends", "ls", "--database", db, "--json")
	var bs []struct {
		Backend string `json:"backend"`
		Held    bool   `json:"held"`
	}
	if code != 0 || json.Unmarshal([]byte(out), &bs) != nil || len(bs) != 1 || bs[0].Backend != "openai" || !bs[0].Held {
		t.Fatalf("backends ls --json after hold: %d %s", code, out)
	}
	if code, out, _ := run(t, "backends", "ls", "--database", db); code != 0 || !strings.Contains(out, "HELD") ||
		!strings.Contains(out, "openai") {
		t.Fatalf("backends ls: %d %s", code, out)
	}
	if code, _, errOut := run(t, "backends", "release", "--database", db, "openai"); code != 0 {
		t.Fatalf("backends release: %s", errOut)
	}
	bs = nil
	if _, out, _ := run(t, "backends", "ls", "--database", db, "--json"); json.Unmarshal([]byte(out), &bs) != nil || bs[0].Held {
		t.Fatalf("backends ls --json after release: %s", out)
	}

	if code, _, errOut := run(t, "orgs", "pause", "--database", db, "acme"); code != 0 {
		t.Fatalf("orgs pause: %s", errOut)
	}
	code, out, _ = run(t, "limits", "ls", "--database", db, "--json")
	var ls []struct {
		Subject string `json:"subject"`
		Paused  bool   `json:"paused"`
	}
	if code != 0 || json.Unmarshal([]byte(out), &ls) != nil || len(ls) != 1 || ls[0].Subject != "acme" || !ls[0].Paused {
		t.Fatalf("limits ls --json after orgs pause: %d %s", code, out)
	}
	if code, _, errOut := run(t, "orgs", "resume", "--database", db, "acme"); code != 0 {
		t.Fatalf("orgs resume: %s", errOut)
	}
	ls = nil
	if _, out, _ := run(t, "limits", "ls", "--database", db, "--json"); json.Unmarshal([]byte(out), &ls) != nil || ls[0].Paused {
		t.Fatalf("limits ls --json after resume: %s", out)
	}

	st, err := openExisting(t.Context(), db)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if _, err := st.ReportWorker(t.Context(), jobs.WorkerReport{Worker: "w-1", Host: "h", PID: 7}); err != nil {
		t.Fatal(err)
	}
	if code, _, errOut := run(t, "workers", "drain", "--database", db, "w-1"); code != 0 {
		t.Fatalf("workers drain: %s", errOut)
	}
	code, out, _ = run(t, "workers", "ls", "--database", db, "--json")
	var ws []jobs.WorkerInfo
	if code != 0 || json.Unmarshal([]byte(out), &ws) != nil || len(ws) != 1 || ws[0].Worker != "w-1" || !ws[0].Draining || ws[0].PID != 7 {
		t.Fatalf("workers ls --json after drain: %d %s", code, out)
	}
	if code, out, _ := run(t, "workers", "ls", "--database", db); code != 0 || !strings.Contains(out, "DRAINING") ||
		!strings.Contains(out, "w-1") {
		t.Fatalf("workers ls: %d %s", code, out)
	}
	if code, _, errOut := run(t, "workers", "undrain", "--database", db, "w-1"); code != 0 {
		t.Fatalf("workers undrain: %s", errOut)
	}
	if draining, err := st.ReportWorker(t.Context(), jobs.WorkerReport{Worker: "w-1"}); err != nil || draining {
		t.Fatalf("after undrain: draining %v, %v", draining, err)
	}
	for _, args := range [][]string{
		{"workers", "drain", "--database", db, "nobody"},
		{"workers", "drain", "--database", db},
		{"orgs", "pause", "--database", db, " "},
		{"backends", "hold", "--database", db, ""},
	} {
		if code, _, _ := run(t, args...); code != 2 {
			t.Errorf("%v: exit %d, want 2", args, code)
		}
	}
}

// `promptkit worker` drained (promptkit workers drain) lets its running
// job finish, claims nothing more, and exits 0 once idle, saying so.
func TestWorkerExitsWhenDrained(t *testing.T) {
	t.Parallel()
	srv := providertest.NewServer()
	t.Cleanup(srv.Close)
	release := make(chan struct{})
	srv.Enqueue(providertest.Response{Text: "first", Hold: release})
	cfg := quickstart(t, srv.URL)
	db := filepath.Join(t.TempDir(), "drain.db")
	if code, _, errOut := run(t, "migrate", "--database", db); code != 0 {
		t.Fatalf("migrate: %s", errOut)
	}
	submit := func(text string) string {
		t.Helper()
		code, out, errOut := run(t, "submit", "--config", cfg, "--database", db, "--text", text, "--json")
		var sub struct {
			JobID string `json:"job_id"`
		}
		if code != 0 || json.Unmarshal([]byte(out), &sub) != nil || sub.JobID == "" {
			t.Fatalf("submit: exit %d %s %s", code, out, errOut)
		}
		return sub.JobID
	}
	first := submit("first")

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	pr, pw := io.Pipe()
	done := make(chan int, 1)
	go func() {
		done <- Run(ctx, []string{"worker", "--config", cfg, "--database", db, "--workers", "1",
			"--heartbeat-interval", "50ms"}, io.Discard, pw)
		pw.Close()
	}()
	var logs strings.Builder
	logged := make(chan struct{})
	go func() {
		defer close(logged)
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			logs.WriteString(sc.Text() + "\n")
		}
		io.Copy(io.Discard, pr) //nolint:errcheck // drain after a long line
	}()
	if err := srv.WaitArrivals(ctx, 1); err != nil {
		t.Fatalf("the first job's provider call never came: %v", err)
	}
	st, err := openExisting(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	var name string
	listed := func() bool {
		ws, err := st.Workers(ctx, time.Time{})
		if err != nil || len(ws) != 1 {
			return false
		}
		name = ws[0].Worker
		return true
	}
	if !testkit.Until(ctx, time.Minute, listed, st.Notifier()) {
		t.Fatal("the worker never reported itself")
	}
	if code, _, errOut := run(t, "workers", "drain", "--database", db, name); code != 0 {
		t.Fatalf("workers drain: %s", errOut)
	}
	draining := func() bool {
		ws, err := st.Workers(ctx, time.Time{})
		return err == nil && len(ws) == 1 && ws[0].Draining
	}
	if !testkit.Until(ctx, time.Minute, draining, st.Notifier()) {
		t.Fatal("the drain was never stored")
	}
	// The worker learns of the drain at its next report; a job queued
	// after that stays queued. The first job is still held by the provider,
	// so the worker cannot have exited yet.
	reported := func() bool {
		ws, err := st.Workers(ctx, time.Time{})
		return err == nil && len(ws) == 1 && ws[0].SeenAt.After(time.Now().Add(-time.Hour)) && ws[0].Running == 1
	}
	if !testkit.Until(ctx, time.Minute, reported, st.Notifier()) {
		t.Fatal("the worker never reported its running job")
	}
	close(release)
	select {
	case code := <-done:
		if code != 0 {
			t.Fatalf("worker exited %d", code)
		}
	case <-ctx.Done():
		cancel()
		<-logged
		t.Fatalf("the drained worker never exited:\n%s", logs.String())
	}
	<-logged
	if !strings.Contains(logs.String(), "drained: no running jobs; exiting") {
		t.Errorf("the worker's log lacks the drain:\n%s", logs.String())
	}
	j, err := st.GetJob(ctx, "", first)
	if err != nil || j.State != jobs.Succeeded {
		t.Fatalf("the running job when drained: %+v, %v; want succeeded", j.State, err)
	}
	second := submit("second")
	if j, err := st.GetJob(ctx, "", second); err != nil || j.State != jobs.Queued {
		t.Fatalf("a job after the drain: %v, %v; want queued", j.State, err)
	}
}
