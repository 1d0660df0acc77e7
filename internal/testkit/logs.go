package testkit

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
)

// Logs captures log output in memory: an io.Writer for a logger (Logger,
// DebugLogger) or a process's output, read back with String, Contains,
// Count and Lines. It is safe for concurrent use, and it is a Source:
// every write signals its subscribers, so a wait for a line wakes when a
// line arrives. The zero value is empty and ready.
type Logs struct {
	mu   sync.Mutex
	buf  bytes.Buffer
	subs map[chan struct{}]struct{}
}

// Write appends p and signals the subscribers (see Notify).
func (l *Logs) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	n, err := l.buf.Write(p)
	for ch := range l.subs {
		select {
		case ch <- struct{}{}:
		default: // a signal is already pending: coalesced
		}
	}
	return n, err
}

// Notify returns a channel that receives a value, coalesced, after every
// write; it is closed when ctx ends.
func (l *Logs) Notify(ctx context.Context) <-chan struct{} {
	ch := make(chan struct{}, 1)
	l.mu.Lock()
	if l.subs == nil {
		l.subs = map[chan struct{}]struct{}{}
	}
	l.subs[ch] = struct{}{}
	l.mu.Unlock()
	context.AfterFunc(ctx, func() {
		l.mu.Lock()
		delete(l.subs, ch)
		close(ch)
		l.mu.Unlock()
	})
	return ch
}

// Logger returns a logger writing text lines to l at slog's default
// level, Info.
func (l *Logs) Logger() *slog.Logger { return slog.New(slog.NewTextHandler(l, nil)) }

// DebugLogger returns a logger writing text lines to l at every level
// from Debug up.
func (l *Logs) DebugLogger() *slog.Logger {
	return slog.New(slog.NewTextHandler(l, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// String returns everything written so far.
func (l *Logs) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

// Len is the number of bytes written so far.
func (l *Logs) Len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Len()
}

// Reset forgets what was written.
func (l *Logs) Reset() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.buf.Reset()
}

// Contains reports whether s occurs in what was written.
func (l *Logs) Contains(s string) bool { return strings.Contains(l.String(), s) }

// Count is how many times s occurs in what was written (a message logged
// once per line: the number of lines that hold it).
func (l *Logs) Count(s string) int { return strings.Count(l.String(), s) }

// Lines returns the complete lines written so far, without their
// newlines; a last line still being written is left out.
func (l *Logs) Lines() []string {
	s := l.String()
	end := strings.LastIndexByte(s, '\n')
	if end < 0 {
		return nil
	}
	return strings.Split(s[:end], "\n")
}

// TestLogger returns a logger at every level from Debug up that writes
// through t.Log until t ends, and drops what comes after (a loop still
// stopping must not log to a finished test).
func TestLogger(t testing.TB) *slog.Logger {
	w := &testWriter{t: t}
	t.Cleanup(func() { w.mu.Lock(); w.done = true; w.mu.Unlock() })
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

type testWriter struct {
	mu   sync.Mutex
	t    testing.TB
	done bool
}

func (w *testWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.done {
		w.t.Log(strings.TrimRight(string(p), "\n"))
	}
	return len(p), nil
}
