package worker_test

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"os/exec"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/promptkit/promptkit/internal/testkit"
	"github.com/promptkit/promptkit/internal/testkit/storekit"
	"github.com/promptkit/promptkit/jobs"
	"github.com/promptkit/promptkit/jobs/worker"
	"github.com/promptkit/promptkit/providertest"
)

// Environment of the child worker process.
const (
	childEnv      = "PROMPTKIT_WORKER_TEST_CHILD"
	childStore    = "PROMPTKIT_WORKER_TEST_STORE"
	childDSN      = "PROMPTKIT_WORKER_TEST_DSN"
	childProvider = "PROMPTKIT_WORKER_TEST_PROVIDER"
	childName     = "PROMPTKIT_WORKER_TEST_NAME"
	childClock    = "PROMPTKIT_WORKER_TEST_CLOCK"
)

// TestWorkerChildProcess is not a test: TestWorkerKilledMidJob re-executes
// the test binary to run it as a separate worker process, which it then
// kills with SIGKILL.
func TestWorkerChildProcess(t *testing.T) {
	if os.Getenv(childEnv) != "1" {
		t.Skip("helper process for TestWorkerKilledMidJob")
	}
	// Only a hang ends this way: the parent kills the process first.
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	nanos, err := strconv.ParseInt(os.Getenv(childClock), 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	now := func() time.Time { return time.Unix(0, nanos).UTC() }
	store, err := storekit.Kind(os.Getenv(childStore)).Open(ctx, os.Getenv(childDSN), jobs.Options{Now: now})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	w, err := worker.New(worker.Config{
		Store: store, Engine: newEngine(t, os.Getenv(childProvider), 0), Name: os.Getenv(childName),
		Concurrency: 1, PollInterval: 20 * time.Millisecond, HeartbeatInterval: time.Hour,
		Logger: slog.New(slog.NewTextHandler(os.Stderr, nil)), Now: now, Jitter: halfJitter,
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Start(ctx); err != nil {
		t.Fatal(err)
	}
	<-ctx.Done()
	t.Fatal("the child worker was not killed")
}

// A worker process killed with SIGKILL in the middle of a job: the job is
// reclaimed and completed by another worker, with exactly one response.
func TestWorkerKilledMidJob(t *testing.T) {
	eachStore(t, func(t *testing.T, f *fixture) {
		hold := make(chan struct{}) // never released: the child dies first
		defer close(hold)
		f.srv.Enqueue(providertest.Response{Text: "from the dead", Hold: hold}, providertest.Reply("from the living"))
		e := f.enqueue(jobs.EnqueueParams{Text: "survive this"})

		name := "child-" + string(f.db.Kind)
		cmd := exec.Command(os.Args[0], "-test.run=^TestWorkerChildProcess$", "-test.count=1")
		cmd.Env = append(os.Environ(),
			childEnv+"=1", childStore+"="+string(f.db.Kind), childDSN+"="+f.db.DSN,
			childProvider+"="+f.srv.URL, childName+"="+name,
			childClock+"="+strconv.FormatInt(f.clock.Now().UnixNano(), 10),
		)
		var out testkit.Logs // read while the child still writes
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		exited := make(chan error, 1)
		go func() { exited <- cmd.Wait() }()
		reaped := false
		defer func() {
			if !reaped {
				_ = cmd.Process.Kill()
				<-exited
			}
		}()

		// The child claimed the job and its request is in flight.
		arrived := make(chan error, 1)
		go func() { arrived <- f.srv.WaitArrivals(f.ctx, 1) }()
		select {
		case err := <-arrived:
			if err != nil {
				t.Fatalf("the child's request never arrived: %v\n%s", err, out.String())
			}
		case err := <-exited:
			reaped = true
			t.Fatalf("the child exited early: %v\n%s", err, out.String())
		}
		if j := f.job(e.JobID); j.State != jobs.Running || j.WorkerClaim != name {
			t.Fatalf("before the kill: state=%s claim=%q", j.State, j.WorkerClaim)
		}

		if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		err := <-exited
		reaped = true
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
			t.Fatalf("child exit: %v, want killed by SIGKILL", err)
		}
		if j := f.job(e.JobID); j.State != jobs.Running || j.WorkerClaim != name {
			t.Fatalf("after the kill: state=%s claim=%q", j.State, j.WorkerClaim)
		}

		f.clock.Advance(5*time.Minute + time.Second)
		got, err := f.reclaimer().Sweep(f.ctx)
		if err != nil || len(got.Requeued) != 1 || got.Requeued[0] != e.JobID {
			t.Fatalf("Sweep = %+v, %v", got, err)
		}
		f.runOnce(f.worker("parent"), 1)

		j := f.job(e.JobID)
		if j.State != jobs.Succeeded || j.Attempt != 2 || j.WorkerClaim != "parent" {
			t.Fatalf("final: state=%s attempt=%d claim=%q", j.State, j.Attempt, j.WorkerClaim)
		}
		if r, err := f.store.GetResponse(f.ctx, "", j.ResponseID); err != nil || r.Output != "from the living" {
			t.Fatalf("response %+v, %v", r, err)
		}
		if n := f.responses(e.JobID); n != 1 {
			t.Fatalf("%d response rows, want 1", n)
		}
		evs, _ := f.events(e.JobID)
		want := []string{"→queued", "queued→running", "running→queued", "queued→running", "running→succeeded"}
		if !eq(transitions(evs), want) {
			t.Fatalf("events = %v, want transitions %v", evs, want)
		}
		if f.srv.Count() != 2 {
			t.Fatalf("provider saw %d requests, want 2", f.srv.Count())
		}
	})
}
