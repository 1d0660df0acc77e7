package cli

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/promptkit/promptkit/providertest"
)

// The first signal ends the command's context; only the second ends the
// stop's context, and releases the signals (a third then gets Go's
// default action).
func TestOnSignals(t *testing.T) {
	t.Parallel()
	sigs := make(chan os.Signal)
	released := make(chan struct{})
	ctx, stop := onSignals(context.Background(), sigs, func() { close(released) })
	defer stop()

	sigs <- os.Interrupt
	<-ctx.Done()
	stopCtx, canHurry, release := stopContext(ctx)
	defer release()
	if !canHurry {
		t.Fatal("stopContext: no second signal wired")
	}
	if stopCtx.Err() != nil {
		t.Fatal("the first signal ended the stop's context")
	}
	select {
	case <-released:
		t.Fatal("the first signal released the signals")
	default:
	}

	// sigs is unbuffered, so this send returns once the watcher has
	// taken the second signal.
	sigs <- syscall.SIGTERM
	<-stopCtx.Done()
	<-released

	// Without onSignals (tests, library callers) the stop's context never
	// ends on its own.
	plain, cancel := context.WithCancel(context.Background())
	cancel()
	s, canHurry, release2 := stopContext(plain)
	defer release2()
	if canHurry || s.Err() != nil {
		t.Fatalf("stopContext of a plain context: canHurry %t, err %v", canHurry, s.Err())
	}
}

// A second signal on `promptkit worker` hands the running job back at
// once instead of waiting out an hour's shutdown grace: the job is
// queued again with its attempt unspent.
func TestSecondSignalHandsRunningJobsBack(t *testing.T) {
	t.Parallel()
	srv := providertest.NewServer()
	t.Cleanup(srv.Close)
	// The provider holds the answer until the test ends: the job runs
	// until the worker gives it up.
	hold := make(chan struct{})
	t.Cleanup(func() { close(hold) })
	srv.Enqueue(providertest.Response{Text: "late", Hold: hold})
	cfg := quickstart(t, srv.URL)
	db := filepath.Join(t.TempDir(), "signals.db")
	if code, _, errOut := run(t, "migrate", "--database", db); code != 0 {
		t.Fatalf("migrate: %s", errOut)
	}
	code, out, errOut := run(t, "submit", "--config", cfg, "--database", db, "--text", "hold me", "--json")
	var sub struct {
		JobID string `json:"job_id"`
	}
	if code != 0 || json.Unmarshal([]byte(out), &sub) != nil || sub.JobID == "" {
		t.Fatalf("submit: exit %d %s %s", code, out, errOut)
	}

	sigs := make(chan os.Signal)
	ctx, stop := onSignals(context.Background(), sigs, func() {})
	defer stop()
	pr, pw := io.Pipe()
	done := make(chan int, 1)
	go func() {
		done <- Run(ctx, []string{"worker", "--config", cfg, "--database", db, "--workers", "1", "--shutdown-grace", "1h"}, io.Discard, pw)
		pw.Close()
	}()
	logs := make(chan string, 100)
	go func() {
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			logs <- sc.Text()
		}
		close(logs)
		io.Copy(io.Discard, pr) //nolint:errcheck // drain after a long line
	}()
	waitLog := func(want string) {
		t.Helper()
		for l := range logs {
			if strings.Contains(l, want) {
				return
			}
		}
		t.Fatalf("the worker's log ended without %q (exit %d)", want, <-done)
	}

	arrived, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := srv.WaitArrivals(arrived, 1); err != nil {
		t.Fatalf("the job's provider call never came: %v", err)
	}
	sigs <- os.Interrupt
	waitLog("a second Ctrl-C")
	sigs <- os.Interrupt
	// Bounded so a regression fails rather than hangs; the hour's grace
	// is what it would otherwise wait.
	select {
	case code := <-done:
		if code != 0 {
			t.Fatalf("worker exited %d", code)
		}
	case <-time.After(time.Minute):
		t.Fatal("the worker still waits after the second signal")
	}

	code, out, errOut = run(t, "jobs", "show", sub.JobID, "--database", db, "--json")
	var show struct {
		Job struct {
			State   string `json:"state"`
			Attempt int    `json:"attempt"`
		} `json:"job"`
	}
	if code != 0 || json.Unmarshal([]byte(out), &show) != nil {
		t.Fatalf("jobs show: exit %d %s %s", code, out, errOut)
	}
	// A hand-back, not a failure or a spent attempt: the grace was cut
	// short, the job goes back as it came.
	if show.Job.State != "queued" || show.Job.Attempt > 1 || !strings.Contains(out, `"handback": true`) {
		t.Fatalf("job after the second signal: %s", out)
	}
}
