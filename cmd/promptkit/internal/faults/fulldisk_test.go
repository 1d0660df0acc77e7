//go:build linux

package faults_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/promptkit/promptkit/internal/testkit"
	"github.com/promptkit/promptkit/jobs"
	"github.com/promptkit/promptkit/jobs/worker"
	"github.com/promptkit/promptkit/providertest"
)

// The full-disk test's shape: a tmpfs small enough to fill in a moment.
const (
	diskSize         = "8m"
	diskJobs         = 200
	diskAfter        = 20 // jobs enqueued once the disk has room again
	diskLatency      = 20 * time.Millisecond
	diskReclaimAfter = time.Minute
	// diskMaxTries bounds the enqueues that may still fit in space the
	// database had already allocated before one fails.
	diskMaxTries = 5000
	diskDeadline = 2 * time.Minute
)

// TestFullDisk runs a SQLite database on a small tmpfs, fills the disk
// while a worker runs jobs, and checks that writes fail with a clear
// error (no panic), that Check reports the failure, that everything
// completes once space is freed, and that the database file is intact.
func TestFullDisk(t *testing.T) {
	start := time.Now()
	if os.Geteuid() != 0 {
		t.Skip("not running as root: cannot mount a tmpfs for the full-disk test")
	}
	dir := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size="+diskSize, "tmpfs", dir).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a tmpfs (%v: %s): skipping the full-disk test", err, strings.TrimSpace(string(out)))
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", dir).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v: %s", dir, err, out)
			_ = exec.Command("umount", "-l", dir).Run()
		}
	})
	ctx, cancel := context.WithTimeout(t.Context(), diskDeadline)
	defer cancel()
	d := openSQLite(t, dir)
	srv := providertest.NewServer(providertest.WithLatency(diskLatency))
	t.Cleanup(srv.Close)

	var logs testkit.Logs
	defer func() {
		if t.Failed() {
			t.Logf("worker log (tail):\n%s", tail(logs.String(), 40))
		}
	}()
	w, err := worker.New(worker.Config{
		Store: d.store, Engine: newEngine(t, srv.URL), Concurrency: 4,
		PollInterval: 100 * time.Millisecond, HeartbeatInterval: time.Second,
		Logger: logs.Logger(),
	})
	if err != nil {
		t.Fatal(err)
	}
	r, err := worker.NewReclaimer(worker.ReclaimerConfig{Store: d.store, ReclaimAfter: diskReclaimAfter, StuckAfter: time.Hour, HeartbeatInterval: time.Second, Logger: logs.Logger()})
	if err != nil {
		t.Fatal(err)
	}
	byText := map[string]string{}
	ids := enqueueJobs(t, ctx, d.store, 0, diskJobs, byText)
	stop := startAll(t, w, r)
	defer stop()
	testkit.WaitFor(t, time.Minute, "some jobs to succeed", atLeast(ctx, d.store, diskJobs/10), d.store.Notifier())

	// Fill the disk, then enqueue until a write fails: the database may
	// first use space it had already allocated.
	filler := filepath.Join(dir, "filler")
	full := time.Now()
	filled, err := fillDisk(filler)
	if err != nil {
		t.Fatalf("filling the disk: %v", err)
	}
	var werr error
	tries := 0
	for ; tries < diskMaxTries && werr == nil; tries++ {
		var e jobs.Enqueued
		e, werr = d.store.Enqueue(ctx, jobs.EnqueueParams{OrgID: "org", CreatedBy: "faults", Text: jobText(diskJobs + tries), MaxAttempts: maxAttempts})
		if werr == nil {
			ids = append(ids, e.JobID)
			byText[jobText(diskJobs+tries)] = e.JobID
		}
	}
	during, _ := counts(ctx, d.store)
	switch {
	case werr == nil:
		t.Fatalf("%d enqueues succeeded on a full disk", tries)
	case !errorsMention(werr, "disk", "full"):
		t.Errorf("Enqueue on a full disk: %v; want an error that says the disk is full", werr)
	}
	checkErr := d.store.Check(ctx)
	if checkErr == nil {
		// A checkpoint may have given back some of the WAL's space, and
		// writes work again: then readiness is right to say so. Otherwise
		// it must not say nil.
		e, err := d.store.Enqueue(ctx, jobs.EnqueueParams{OrgID: "org", CreatedBy: "faults", Text: jobText(diskJobs + tries), MaxAttempts: maxAttempts})
		if err != nil {
			t.Errorf("Check returned nil while writes fail with a full disk (%v): readiness does not reflect failing writes", err)
		} else {
			ids = append(ids, e.JobID)
			byText[jobText(diskJobs+tries)] = e.JobID
			tries++
		}
	}

	// The disk stays full until the worker has met it too (a finished
	// answer whose write failed is being held), unless writes work again
	// already.
	if checkErr != nil {
		testkit.WaitFor(t, time.Minute, "the worker to hold a result it cannot write", func() (bool, string) {
			held := logs.Count("job finalization failing")
			return held > 0, fmt.Sprintf("%d results held", held)
		}, &logs)
	}
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	outage := time.Since(full)
	testkit.WaitFor(t, time.Until(deadlineOf(ctx)), "every job to finish once the disk has room", settled(ctx, d.store, len(ids)), d.store.Notifier())
	ids = append(ids, enqueueJobs(t, ctx, d.store, diskJobs+tries, diskAfter, byText)...)
	testkit.WaitFor(t, time.Until(deadlineOf(ctx)), "the jobs enqueued after recovery to finish", settled(ctx, d.store, len(ids)), d.store.Notifier())
	// Check passes again once a write has stored something: the store's
	// writes are what signal it.
	var lastCheck error
	if !testkit.Until(ctx, 10*time.Second, func() bool { lastCheck = d.store.Check(ctx); return lastCheck == nil }, d.store.Notifier()) {
		t.Errorf("Check still fails once the disk has room and writes succeed: %v", lastCheck)
	}
	stop()

	a := auditJobs(t, ctx, d, ids)
	calls := providerCalls(t, srv, byText)
	if thrownAway := calls.total - a.jobs; thrownAway != 0 {
		t.Errorf("%d answers thrown away: the provider was called %d times for %d jobs", thrownAway, calls.total, a.jobs)
	}
	if err := d.store.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	if res, err := integrityCheck(ctx, d.DSN); err != nil || res != "ok" {
		t.Errorf("PRAGMA integrity_check: %q, %v", res, err)
	}
	t.Logf("disk: %s tmpfs, filler %d KiB; %d enqueues fit after the disk was full, then: %v", diskSize, filled>>10, tries-1, werr)
	t.Logf("disk: Check while full: %v", checkErr)
	t.Logf("disk: jobs when the write failed %s; disk full for %v", sortedCounts(during), outage.Round(time.Millisecond))
	t.Logf("disk: %d jobs, %d succeeded, others %s; %d attempt events (%d provider calls without one), %d reclaims; total %v",
		a.jobs, a.succeeded, sortedCounts(a.others), a.attempts, calls.total-a.attempts, a.interrupted, time.Since(start).Round(time.Millisecond))
	t.Logf("disk: provider calls %d (jobs by calls made %s), answers thrown away %d, duplicate responses %d",
		calls.total, calls.histogram(ids), calls.total-a.jobs, a.duplicates)
	t.Logf("disk: worker log: %d finalizations made after the database recovered; warnings and errors: %s",
		logs.Count("job finalized after the database recovered"), logSummary(logs.String()))
	checkCalls(t, calls, a)
}

// fillDisk writes path until the file system is full and returns how many
// bytes it wrote.
func fillDisk(path string) (int64, error) {
	f, err := os.Create(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	buf := make([]byte, 64<<10)
	var n int64
	for {
		m, err := f.Write(buf)
		n += int64(m)
		if errors.Is(err, syscall.ENOSPC) {
			return n, nil
		}
		if err != nil {
			return n, err
		}
	}
}

// integrityCheck runs PRAGMA integrity_check on the SQLite file at path.
func integrityCheck(ctx context.Context, path string) (string, error) {
	db, err := sql.Open("sqlite", "file:"+path)
	if err != nil {
		return "", err
	}
	defer db.Close()
	var res string
	if err := db.QueryRowContext(ctx, `PRAGMA integrity_check`).Scan(&res); err != nil {
		return "", fmt.Errorf("integrity_check: %w", err)
	}
	return res, nil
}
