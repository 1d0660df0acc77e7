package notify

import (
	"context"
	"sync/atomic"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// closed reports whether ch is closed, draining at most one pending value.
func closed(ch <-chan struct{}) bool {
	select {
	case _, ok := <-ch:
		if !ok {
			return true
		}
		_, ok = <-ch
		return !ok
	default:
		return false
	}
}

func TestHub(t *testing.T) {
	var starts atomic.Int32
	watching := make(chan struct{})
	var h *Hub
	h = New(func(ctx context.Context) error {
		starts.Add(1)
		close(watching)
		<-ctx.Done() // until Close
		return ctx.Err()
	})
	ctx, cancel := context.WithCancel(context.Background())
	a := h.Subscribe(ctx)
	b := h.Subscribe(context.Background())
	<-watching
	if n := starts.Load(); n != 1 {
		t.Fatalf("the watcher started %d times, want once", n)
	}

	// Wake-ups coalesce and never block.
	h.Broadcast()
	h.Broadcast()
	for _, ch := range []<-chan struct{}{a, b} {
		if _, ok := <-ch; !ok {
			t.Fatal("channel closed")
		}
		select {
		case <-ch:
			t.Fatal("two wake-ups were not coalesced")
		default:
		}
	}

	// The context's end closes its channel only. AfterFunc runs on its own
	// goroutine: wait for the close.
	cancel()
	for range a {
	}
	if closed(b) {
		t.Fatal("another subscriber's channel closed")
	}

	ended, stop := context.WithCancel(context.Background())
	stop()
	if !closed(h.Subscribe(ended)) {
		t.Error("Subscribe with an ended context returned an open channel")
	}

	// Close stops the watcher (goleak checks it is gone) and is safe twice.
	if err := h.Close(context.Background()); err != nil {
		t.Errorf("Close: %v", err)
	}
	if err := h.Close(context.Background()); err != nil {
		t.Errorf("Close again: %v", err)
	}
	if !closed(b) {
		t.Error("Close left a channel open")
	}
	if !closed(h.Subscribe(context.Background())) {
		t.Error("Subscribe after Close returned an open channel")
	}
	h.Broadcast() // no subscribers, no panic
	if n := starts.Load(); n != 1 {
		t.Errorf("the watcher started %d times, want once", n)
	}
}

func TestCloseBeforeStart(t *testing.T) {
	h := New(func(context.Context) error { t.Error("the watcher ran"); return nil })
	if err := h.Close(context.Background()); err != nil {
		t.Errorf("Close: %v", err)
	}
	if !closed(h.Subscribe(context.Background())) {
		t.Error("Subscribe after Close returned an open channel")
	}
}
