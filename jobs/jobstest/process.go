package jobstest

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"testing"

	"go.uber.org/goleak"

	"github.com/promptkit/promptkit/jobs"
)

// Environment of a child claimer process.
const (
	childEnv  = "PROMPTKIT_JOBSTEST_CHILD" // "claim" runs the claimer
	dsnEnv    = "PROMPTKIT_JOBSTEST_DSN"
	workerEnv = "PROMPTKIT_JOBSTEST_WORKER"
)

// Main is a TestMain for a store package: it runs the child claimer when
// the suite re-executes the test binary, and otherwise the tests, failing
// the run if any goroutine outlives them (every store the suite opens is
// closed, so this proves Close stops every goroutine the store started).
func Main(m *testing.M, h Harness) {
	RunChildIfRequested(h)
	goleak.VerifyTestMain(m)
}

// RunChildIfRequested runs the child claimer and exits when this process
// is one the suite started; otherwise it returns at once. Call it first in
// TestMain when Main does not fit (for example to wrap m.Run in a leak
// check).
func RunChildIfRequested(h Harness) {
	if os.Getenv(childEnv) == "" {
		return
	}
	if err := runChild(h, os.Stdin, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "jobstest child:", err)
		os.Exit(1)
	}
	os.Exit(0)
}

// runChild is the child claimer: it opens the store, reports "ready",
// waits until the parent closes its stdin (so both children start
// claiming together), claims until the queue is empty, and prints each
// claimed job ID on its own line followed by "done".
func runChild(h Harness, in io.Reader, out io.Writer) error {
	if mode := os.Getenv(childEnv); mode != "claim" {
		return fmt.Errorf("unknown mode %q", mode)
	}
	worker := os.Getenv(workerEnv)
	ctx := context.Background()
	st, err := h.Open(ctx, os.Getenv(dsnEnv), jobs.Options{})
	if err != nil {
		return fmt.Errorf("open: %w", err)
	}
	defer st.Close()
	w := bufio.NewWriter(out)
	fmt.Fprintln(w, "ready")
	if err := w.Flush(); err != nil {
		return err
	}
	if _, err := io.Copy(io.Discard, in); err != nil {
		return err
	}
	for {
		got, err := st.Claim(ctx, jobs.ClaimParams{Worker: worker, Limit: 5})
		if err != nil {
			return fmt.Errorf("claim: %w", err)
		}
		if len(got) == 0 {
			break
		}
		for _, j := range got {
			fmt.Fprintln(w, j.ID)
		}
	}
	fmt.Fprintln(w, "done")
	if err := w.Flush(); err != nil {
		return err
	}
	return st.Close()
}

// child is a running child claimer.
type child struct {
	worker string
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	lines  *bufio.Scanner
	stderr bytes.Buffer
}

// startChild re-executes the test binary as a claimer on dsn and waits
// for it to report ready.
func startChild(t *testing.T, dsn, worker string) *child {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		exe = os.Args[0]
	}
	c := &child{worker: worker}
	c.cmd = exec.CommandContext(t.Context(), exe, "-test.run=^$")
	c.cmd.Env = append(os.Environ(), childEnv+"=claim", dsnEnv+"="+dsn, workerEnv+"="+worker)
	c.cmd.Stderr = &c.stderr
	if c.stdin, err = c.cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	stdout, err := c.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := c.cmd.Start(); err != nil {
		t.Fatalf("starting child: %v", err)
	}
	c.lines = bufio.NewScanner(stdout)
	if !c.lines.Scan() || c.lines.Text() != "ready" {
		c.stdin.Close()
		_ = c.cmd.Wait()
		t.Fatalf("child %s did not report ready (does TestMain call jobstest.Main or RunChildIfRequested?); stderr:\n%s",
			worker, c.stderr.String())
	}
	return c
}

// finish reads the child's claimed IDs until "done" and waits for it.
func (c *child) finish() ([]string, error) {
	var got []string
	done := false
	for c.lines.Scan() {
		line := strings.TrimSpace(c.lines.Text())
		if line == "done" {
			done = true
			continue
		}
		got = append(got, line)
	}
	err := c.cmd.Wait()
	if err != nil || !done {
		return got, fmt.Errorf("child %s: exit %v, done=%v; stderr:\n%s", c.worker, err, done, c.stderr.String())
	}
	return got, nil
}
