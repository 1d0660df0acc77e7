package events

import (
	"context"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/promptkit/promptkit/jobs"
	"github.com/promptkit/promptkit/jobs/sqlitestore"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// startHub starts a hub on a new SQLite store; both stop with the test.
func startHub(t *testing.T) (jobs.Store, *Hub) {
	t.Helper()
	st, err := sqlitestore.Open(context.Background(), filepath.Join(t.TempDir(), "events.db"), jobs.Options{})
	if err != nil {
		t.Fatal(err)
	}
	h := New(Config{Store: st, Poll: time.Hour, Recheck: time.Hour, KeepAlive: time.Hour, Buffer: 1,
		Valid: nil, Log: slog.New(slog.DiscardHandler)})
	if err := h.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := h.Stop(context.Background()); err != nil {
			t.Error(err)
		}
		st.Close()
	})
	return st, h
}

// TestHubPausesSlowSubscriber: a subscriber whose buffer is full is told
// it is behind and skipped, not dropped; the others keep receiving, and
// after resume it receives what comes next. What it missed is in the store
// up to resume's Seq.
func TestHubPausesSlowSubscriber(t *testing.T) {
	t.Parallel()
	st, h := startHub(t)
	submit := func(text string) jobs.Enqueued {
		t.Helper()
		e, err := st.Enqueue(context.Background(), jobs.EnqueueParams{OrgID: "o", CreatedBy: "u", Text: text})
		if err != nil {
			t.Fatal(err)
		}
		return e
	}
	all := func(jobs.Event) bool { return true }
	slow, _ := h.subscribe(all, 1, nil) // never read until behind
	defer h.remove(slow)
	fast, _ := h.subscribe(all, 100, nil)
	defer h.remove(fast)
	a := submit("a")
	b := submit("b")
	<-slow.behind
	var last int64
	for _, want := range []string{a.JobID, b.JobID} {
		ev := <-fast.live
		if ev.JobID != want {
			t.Fatalf("fast subscriber got %s, want %s", ev.JobID, want)
		}
		last = ev.Seq
	}
	if ev := <-slow.live; ev.JobID != a.JobID {
		t.Fatalf("the slow subscriber's buffer holds %s, want %s", ev.JobID, a.JobID)
	}
	if got := h.resume(slow); got < last {
		t.Fatalf("resume at %d, before %d, the newest event handed out", got, last)
	}
	c := submit("c")
	if ev := <-slow.live; ev.JobID != c.JobID {
		t.Fatalf("after resume the slow subscriber got %s, want %s", ev.JobID, c.JobID)
	}
	h.mu.Lock()
	n := len(h.subs)
	h.mu.Unlock()
	if n != 2 {
		t.Fatalf("%d subscribers left, want 2", n)
	}
}

// TestWakeCoalesces: a waiter is woken once for any number of matching
// events before it looks, and not for others.
func TestWakeCoalesces(t *testing.T) {
	t.Parallel()
	st, h := startHub(t)
	ctx := context.Background()
	a, err := st.Enqueue(ctx, jobs.EnqueueParams{OrgID: "o", CreatedBy: "u", Text: "a"})
	if err != nil {
		t.Fatal(err)
	}
	wake, stop := h.Wake(func(e jobs.Event) bool { return e.PromptID == a.PromptID })
	defer stop()
	all, _ := h.subscribe(func(jobs.Event) bool { return true }, 100, nil)
	defer h.remove(all)
	// Three events of a's prompt: cancelled, superseded by a retry, and
	// the retry queued.
	if _, err := st.Cancel(ctx, jobs.CancelParams{OrgID: "o", JobID: a.JobID}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Retry(ctx, jobs.RetryParams{OrgID: "o", JobID: a.JobID}); err != nil {
		t.Fatal(err)
	}
	b, err := st.Enqueue(ctx, jobs.EnqueueParams{OrgID: "o", CreatedBy: "u", Text: "b"})
	if err != nil {
		t.Fatal(err)
	}
	// Once b's event is handed out, a's three have been too.
	matched := 0
	for ev := range all.live {
		if ev.JobID == b.JobID {
			break
		}
		matched++
	}
	if matched < 3 {
		t.Fatalf("%d events of a's prompt, want 3", matched)
	}
	<-wake
	select {
	case <-wake:
		t.Fatal("woken twice for events handed out before it looked")
	default:
	}
}
