package httpapi

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"
)

// SSE writes a Server-Sent Events answer: the event stream (GET
// /v1/events) and streamed chat completions share it.
type SSE struct {
	w  io.Writer
	rc *http.ResponseController
	// idle, when positive, is the write deadline each Flush (and Extend)
	// sets: a client that stops reading is cut then, and no one else.
	idle time.Duration
}

// ErrStreamWrite marks a failed write to the stream's client: it has
// gone, or stopped reading.
var ErrStreamWrite = errors.New("writing to the event stream")

// StartSSE answers 200 with the event-stream headers and sends them.
// With idle > 0, each Flush sets a write deadline of idle from then,
// instead of the server's write timeout, which would cut every stream;
// otherwise the caller sets the deadline.
func StartSSE(w http.ResponseWriter, idle time.Duration) (*SSE, error) {
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no") // proxies must not buffer the stream
	w.WriteHeader(http.StatusOK)
	s := &SSE{w: w, rc: http.NewResponseController(w), idle: idle}
	return s, s.Flush()
}

// Event writes one event (id 0 and an empty name are left out); Flush
// sends what was written.
func (s *SSE) Event(id int64, name string, data []byte) error {
	return s.write(Frame(id, name, data))
}

// Frame is one event as Event writes it: encoded once, it can be written
// to many streams with SSE.Frame.
func Frame(id int64, name string, data []byte) []byte {
	b := make([]byte, 0, len(data)+len(name)+40)
	if id > 0 {
		b = append(append(append(b, "id: "...), strconv.FormatInt(id, 10)...), '\n')
	}
	if name != "" {
		b = append(append(append(b, "event: "...), name...), '\n')
	}
	return append(append(append(b, "data: "...), data...), "\n\n"...)
}

// Frame writes an event Frame encoded; Flush sends what was written.
func (s *SSE) Frame(frame []byte) error { return s.write(frame) }

// Comment writes a comment line (a keep-alive, or the opening line).
func (s *SSE) Comment(text string) error {
	return s.write([]byte(": " + text + "\n\n"))
}

func (s *SSE) write(b []byte) error {
	if _, err := s.w.Write(b); err != nil {
		return fmt.Errorf("%w: %w", ErrStreamWrite, err)
	}
	return nil
}

// Extend moves the write deadline to idle from now, before a long run of
// writes (a replay) that comes before its Flush.
func (s *SSE) Extend() {
	if s.idle > 0 {
		_ = s.rc.SetWriteDeadline(time.Now().Add(s.idle))
	}
}

// Flush sends what was written.
func (s *SSE) Flush() error {
	s.Extend()
	if err := s.rc.Flush(); err != nil {
		return fmt.Errorf("%w: %w", ErrStreamWrite, err)
	}
	return nil
}
