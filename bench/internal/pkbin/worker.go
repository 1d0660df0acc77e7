package pkbin

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"
)

// Worker is a running `promptkit worker` whose output goes to a log file.
type Worker struct {
	cmd  *exec.Cmd
	log  string
	done chan struct{}
}

// StartWorker runs `bin worker args…`, appending its output to the file
// log, and waits up to timeout for its "worker running" line (it has
// opened the database and claims from now on).
func StartWorker(bin, log string, timeout time.Duration, args ...string) (*Worker, error) {
	w := &Worker{log: log, done: make(chan struct{})}
	logf, err := os.OpenFile(log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, err
	}
	defer logf.Close()
	off, _ := logf.Seek(0, io.SeekEnd)
	w.cmd = exec.Command(bin, append([]string{"worker"}, args...)...)
	w.cmd.Stdout, w.cmd.Stderr = logf, logf
	if err := w.cmd.Start(); err != nil {
		return nil, err
	}
	// Owned by w: it ends when the process does, which Stop ensures.
	go func() { _ = w.cmd.Wait(); close(w.done) }()
	deadline := time.Now().Add(timeout)
	for {
		b, _ := os.ReadFile(log)
		if bytes.Contains(b[min(off, int64(len(b))):], []byte(`msg="worker running"`)) {
			return w, nil
		}
		select {
		case <-w.done:
			return nil, fmt.Errorf("worker exited:\n%s", b)
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			w.Stop(timeout)
			return nil, fmt.Errorf("worker did not start within %v:\n%s", timeout, b)
		}
	}
}

// Pid is its process id.
func (w *Worker) Pid() int { return w.cmd.Process.Pid }

// CPU is its user+system CPU seconds so far.
func (w *Worker) CPU() float64 { return ProcCPU(w.cmd.Process.Pid) }

// Done is closed once the process has exited.
func (w *Worker) Done() <-chan struct{} { return w.done }

// Stop ends the worker with SIGTERM, and with SIGKILL after grace.
func (w *Worker) Stop(grace time.Duration) {
	_ = w.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-w.done:
	case <-time.After(grace):
		_ = w.cmd.Process.Kill()
		<-w.done
	}
}

// Tail returns the last n lines of its log.
func (w *Worker) Tail(n int) string {
	b, _ := os.ReadFile(w.log)
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// Warnings counts its log's WARN and ERROR lines.
func (w *Worker) Warnings() int {
	b, _ := os.ReadFile(w.log)
	return bytes.Count(b, []byte("level=WARN")) + bytes.Count(b, []byte("level=ERROR"))
}
