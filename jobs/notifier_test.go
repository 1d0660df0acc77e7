package jobs_test

import (
	"context"
	"testing"

	"github.com/promptkit/promptkit/jobs"
	"github.com/promptkit/promptkit/pktype"
)

// TestLocalNotifier checks the in-process Notifier a driver builds on:
// its watcher starts with the first subscription and stops with Close,
// which Close waits for; Broadcast wakes subscribers, coalesced; pieces
// reach only their job's readers; Close closes every Notify channel and
// later ones come closed.
func TestLocalNotifier(t *testing.T) {
	started, stopped := make(chan struct{}), make(chan struct{})
	n := jobs.NewLocalNotifier(func(ctx context.Context) error {
		close(started)
		<-ctx.Done()
		close(stopped)
		return nil
	})
	select {
	case <-started:
		t.Fatal("the watcher started before anyone subscribed")
	default:
	}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	wake := n.Notify(ctx)
	<-started // blocks, failing by the test's timeout, if it never starts

	n.Broadcast()
	n.Broadcast() // coalesces with the first
	if _, ok := <-wake; !ok {
		t.Fatal("Notify channel closed; want a wake-up")
	}
	select {
	case <-wake:
		t.Error("two broadcasts to a waiting subscriber gave two wake-ups")
	default:
	}

	mine := n.SubscribeDeltas(ctx, "job-1")
	other := n.SubscribeDeltas(ctx, "job-2")
	d := pktype.StreamDelta{Index: 0, Text: "Hello"}
	n.PublishDelta("job-1", d)
	if got := <-mine; got.Text != d.Text {
		t.Errorf("reader got %+v, want %+v", got, d)
	}
	select {
	case got := <-other:
		t.Errorf("another job's reader got %+v", got)
	default:
	}
	// A reader coming late gets the job's first pieces.
	if got := <-n.SubscribeDeltas(ctx, "job-1"); got.Text != d.Text {
		t.Errorf("late reader got %+v, want %+v", got, d)
	}

	if err := n.Close(context.Background()); err != nil {
		t.Fatalf("Close: %v", err)
	}
	select {
	case <-stopped:
	default:
		t.Error("Close returned before the watcher stopped")
	}
	if _, ok := <-wake; ok {
		t.Error("Notify channel open after Close")
	}
	if _, ok := <-n.Notify(ctx); ok {
		t.Error("Notify after Close delivered a value; want a closed channel")
	}
	if err := n.Close(context.Background()); err != nil {
		t.Errorf("second Close: %v", err)
	}
}
