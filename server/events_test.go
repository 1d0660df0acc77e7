package server

import (
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/promptkit/promptkit/internal/testkit/storekit"
	"github.com/promptkit/promptkit/jobs"
)

// transitions of a job that is submitted and finished.
func lifecycle(jobID string) []string {
	return []string{jobID + ">queued", jobID + ">running", jobID + ">succeeded"}
}

func collect(s *stream, n int) (got []string, last string) {
	for range n {
		ev := s.mustNext()
		if ev.event != "job.state_changed" || ev.id != strconv.FormatInt(ev.data.Seq, 10) {
			s.t.Fatalf("event %+v", ev)
		}
		got = append(got, ev.data.JobID+">"+string(ev.data.State))
		last = ev.id
	}
	return got, last
}

func TestEventsInOrder(t *testing.T) {
	onStores(t, jobs.Options{}, func(t *testing.T, e *env) {
		s := e.openStream("", "")
		var want []string
		for i := range 5 {
			sub := e.submit("", map[string]any{"text": fmt.Sprint("e", i)})
			e.finish(sub.JobID, "ok")
			want = append(want, lifecycle(sub.JobID)...)
		}
		got, _ := collect(s, len(want))
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("events:\n got %v\nwant %v", got, want)
		}
	})
}

// TestEventsReplayAndReconnect: a client that drops mid-stream and comes
// back with Last-Event-ID gets exactly what it missed, then live events.
func TestEventsReplayAndReconnect(t *testing.T) {
	onStores(t, jobs.Options{}, func(t *testing.T, e *env) {
		s := e.openStream("", "")
		a := e.submit("", map[string]any{"text": "a"})
		e.finish(a.JobID, "ok")
		got, last := collect(s, 2) // a>queued, a>running
		s.close()

		// Missed while disconnected: a's finish, and all of b.
		b := e.submit("", map[string]any{"text": "b"})
		e.finish(b.JobID, "ok")

		s = e.openStream("", last)
		c := e.submit("", map[string]any{"text": "c"}) // live after the replay
		more, _ := collect(s, 5)
		got = append(got, more...)
		want := append(append(lifecycle(a.JobID), lifecycle(b.JobID)...), c.JobID+">queued")
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("across the reconnect:\n got %v\nwant %v", got, want)
		}

		// Last-Event-ID 0 replays the whole log.
		all, _ := collect(e.openStream("", "0"), 7)
		if fmt.Sprint(all) != fmt.Sprint(want) {
			t.Fatalf("replay from 0:\n got %v\nwant %v", all, want)
		}
	})
}

// TestEventsOneReader: many clients cost one read of the log per change,
// not one per client.
func TestEventsOneReader(t *testing.T) {
	t.Parallel()
	base := setup(t).st
	counting := storekit.Count(base)
	e := setupStore(t, counting, func(c *Config) { c.PollInterval = time.Hour })
	const clients = 20
	var streams []*stream
	for range clients {
		streams = append(streams, e.openStream("", ""))
	}
	before := counting.Calls("EventsAfter")
	sub := e.submit("", map[string]any{"text": "x"})
	for _, s := range streams {
		if ev := s.mustNext(); ev.data.JobID != sub.JobID {
			t.Fatalf("got %+v", ev.data)
		}
	}
	if n := counting.Calls("EventsAfter") - before; n >= clients {
		t.Fatalf("%d event-log reads for one change and %d clients", n, clients)
	}
}

// TestCloseEndsStreams: Close ends open event streams cleanly instead of
// waiting for them.
func TestCloseEndsStreams(t *testing.T) {
	t.Parallel()
	e := setup(t)
	s := e.openStream("", "")
	if err := e.srv.Close(); err != nil {
		t.Fatal(err)
	}
	if _, ok := s.next(); ok {
		t.Fatal("an event after Close")
	}
	if err := s.lines.Err(); err != nil {
		t.Fatalf("the stream ended with %v, want a clean end", err)
	}
}

func TestKeepAlive(t *testing.T) {
	t.Parallel()
	e := setup(t, func(c *Config) { c.KeepAlive = time.Millisecond })
	s := e.openStream("", "")
	for s.lines.Scan() {
		if s.lines.Text() == ": keep-alive" {
			return
		}
	}
	t.Fatal("no keep-alive comment")
}
