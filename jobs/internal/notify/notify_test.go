package notify

import (
	"context"
	"testing"
)

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
	starts := 0
	h := New(func() { starts++ })
	ctx, cancel := context.WithCancel(context.Background())
	a := h.Subscribe(ctx)
	b := h.Subscribe(context.Background())
	if starts != 1 {
		t.Fatalf("start ran %d times, want once", starts)
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

	if !h.Close() || !h.Close() {
		t.Error("Close does not report that start ran")
	}
	if !closed(b) {
		t.Error("Close left a channel open")
	}
	if !closed(h.Subscribe(context.Background())) {
		t.Error("Subscribe after Close returned an open channel")
	}
	h.Broadcast() // no subscribers, no panic
}

func TestCloseBeforeStart(t *testing.T) {
	h := New(func() { t.Error("start ran") })
	if h.Close() {
		t.Error("Close reports a start that never happened")
	}
	if !closed(h.Subscribe(context.Background())) {
		t.Error("Subscribe after Close returned an open channel")
	}
}
