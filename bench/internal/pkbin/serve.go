package pkbin

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Serve is a running `promptkit serve` whose output goes to a log file.
type Serve struct {
	// URL is where it listens, from its "listening" log line.
	URL  string
	cmd  *exec.Cmd
	log  string
	done chan struct{}
	err  error // what Wait returned; read once done is closed
}

var listenLine = regexp.MustCompile(`msg="promptkit serve listening[^"]*" addr=(\S+)`)

// StartServe runs `bin serve args…`, appending its output to the file
// log, and waits up to timeout for the line saying where it listens (a
// restart on the same log reads only what the new process wrote).
func StartServe(bin, log string, timeout time.Duration, args ...string) (*Serve, error) {
	s := &Serve{log: log, done: make(chan struct{})}
	logf, err := os.OpenFile(log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, err
	}
	defer logf.Close()
	off, _ := logf.Seek(0, io.SeekEnd)
	s.cmd = exec.Command(bin, append([]string{"serve"}, args...)...)
	s.cmd.Stdout, s.cmd.Stderr = logf, logf
	if err := s.cmd.Start(); err != nil {
		return nil, err
	}
	go func() { s.err = s.cmd.Wait(); close(s.done) }()
	deadline := time.Now().Add(timeout)
	for s.URL == "" {
		b, _ := os.ReadFile(log)
		if m := listenLine.FindSubmatch(b[min(off, int64(len(b))):]); m != nil {
			s.URL = string(m[1])
			break
		}
		select {
		case <-s.done:
			return nil, fmt.Errorf("serve exited:\n%s", b)
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			s.Stop(timeout)
			return nil, fmt.Errorf("serve did not listen within %v:\n%s", timeout, b)
		}
	}
	return s, nil
}

// Done is closed once the process has exited.
func (s *Serve) Done() <-chan struct{} { return s.done }

// Stop ends serve with SIGINT, and with SIGKILL after grace.
func (s *Serve) Stop(grace time.Duration) { _ = s.stop(os.Interrupt, grace) }

// Terminate ends serve with SIGTERM and waits up to grace for it to exit,
// killing it after that. It returns nil if serve exited with status 0,
// and otherwise an error saying how it ended.
func (s *Serve) Terminate(grace time.Duration) error { return s.stop(syscall.SIGTERM, grace) }

func (s *Serve) stop(sig os.Signal, grace time.Duration) error {
	_ = s.cmd.Process.Signal(sig)
	select {
	case <-s.done:
		if s.err != nil {
			return fmt.Errorf("serve: %w", s.err)
		}
		return nil
	case <-time.After(grace):
		_ = s.cmd.Process.Kill()
		<-s.done
		return fmt.Errorf("serve did not stop within %v of %v; killed", grace, sig)
	}
}

// Kill ends serve with SIGKILL, as a crash would.
func (s *Serve) Kill() {
	_ = s.cmd.Process.Signal(syscall.SIGKILL)
	<-s.done
}

// Tail returns the last n lines of its log.
func (s *Serve) Tail(n int) string {
	b, _ := os.ReadFile(s.log)
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// Warnings counts its log's WARN and ERROR lines.
func (s *Serve) Warnings() int {
	b, _ := os.ReadFile(s.log)
	return bytes.Count(b, []byte("level=WARN")) + bytes.Count(b, []byte("level=ERROR"))
}

// Memory reads its VmRSS and VmHWM in KiB.
func (s *Serve) Memory() (rss, hwm int) { return s.Status("VmRSS:"), s.Status("VmHWM:") }

// Status reads one KiB figure of its /proc status ("VmRSS:"); 0 once it
// has exited.
func (s *Serve) Status(key string) int {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", s.cmd.Process.Pid))
	if err != nil {
		return 0
	}
	for l := range strings.SplitSeq(string(b), "\n") {
		if f := strings.Fields(l); len(f) >= 2 && f[0] == key {
			n, _ := strconv.Atoi(f[1])
			return n
		}
	}
	return 0
}

// ResetPeak sets its VmHWM to its current RSS, so that the next reading
// is the peak of what starts now.
func (s *Serve) ResetPeak() {
	_ = os.WriteFile(fmt.Sprintf("/proc/%d/clear_refs", s.cmd.Process.Pid), []byte("5"), 0)
}

// CPU is its user+system CPU seconds so far.
func (s *Serve) CPU() float64 { return ProcCPU(s.cmd.Process.Pid) }

// Pid is its process id.
func (s *Serve) Pid() int { return s.cmd.Process.Pid }

// ProcCPU is the user+system CPU seconds of process pid so far, all its
// threads (those that ended too), from /proc/<pid>/stat; 0 when it cannot
// be read (the process has exited).
func ProcCPU(pid int) float64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// Fields after the command name, which is in parentheses.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 || i+2 > len(b) {
		return 0
	}
	f := strings.Fields(string(b[i+2:]))
	if len(f) < 13 {
		return 0
	}
	u, _ := strconv.ParseFloat(f[11], 64)
	k, _ := strconv.ParseFloat(f[12], 64)
	return (u + k) / 100 // USER_HZ
}
