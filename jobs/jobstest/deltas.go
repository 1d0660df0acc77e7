package jobstest

import (
	"context"
	"reflect"
	"testing"
	"time"

	"github.com/promptkit/promptkit/jobs"
	"github.com/promptkit/promptkit/pktype"
)

// pieces are a job's answer pieces as a worker publishes them: text, then
// a tool call's start and its arguments.
func pieces() []pktype.StreamDelta {
	return []pktype.StreamDelta{
		{Generation: 1, Attempt: 1, Index: 0, Text: "Hello"},
		{Generation: 1, Attempt: 1, Index: 1, Text: " wörld"},
		{Generation: 1, Attempt: 1, Index: 2, ToolCalls: []pktype.ToolCallDelta{{Index: 0, ID: "c1", Name: "f"}}},
		{Generation: 1, Attempt: 1, Index: 3, ToolCalls: []pktype.ToolCallDelta{{Index: 0, Arguments: `{"a":1}`}}},
	}
}

// receive reads n pieces from ch.
func receive(t *testing.T, ch <-chan pktype.StreamDelta, n int, what string) []pktype.StreamDelta {
	t.Helper()
	var got []pktype.StreamDelta
	for len(got) < n {
		select {
		case d, ok := <-ch:
			if !ok {
				t.Fatalf("%s: closed after %d pieces", what, len(got))
			}
			got = append(got, d)
		case <-time.After(time.Minute):
			t.Fatalf("%s: %d pieces of %d received", what, len(got), n)
		}
	}
	return got
}

// testDeltas checks that a job's answer pieces reach its readers in the
// order published, only its readers, and, when the harness says the store
// carries them between processes, the readers of another store on the
// database; and that a subscription ends with its context.
func testDeltas(t *testing.T, h Harness) {
	f := setupRealClock(t, h)
	ctx, cancel := context.WithCancel(f.ctx)
	mine := f.store.Notifier().SubscribeDeltas(ctx, "job-1")
	other := f.store.Notifier().SubscribeDeltas(ctx, "job-2")
	for _, d := range pieces() {
		f.store.Notifier().PublishDelta("job-1", d)
	}
	if got := receive(t, mine, 4, "same store"); !reflect.DeepEqual(got, pieces()) {
		t.Errorf("same store: %+v, want %+v", got, pieces())
	}
	select {
	case d := <-other:
		t.Errorf("another job's reader got %+v", d)
	default:
	}
	cancel()
	if _, ok := <-mine; ok {
		t.Error("a subscription outlived its context")
	}

	second, err := h.Open(f.ctx, f.dsn, jobs.Options{})
	if err != nil {
		t.Fatalf("Harness.Open (second store): %v", err)
	}
	defer func() {
		if err := second.Close(); err != nil {
			t.Errorf("Close (second store): %v", err)
		}
	}()
	ctx, cancel = context.WithCancel(f.ctx)
	defer cancel()
	theirs := second.Notifier().SubscribeDeltas(ctx, "job-3")
	// The first wake says the second store watches the database.
	recv(t, second.Notifier().Notify(ctx), "second store's first Notify wake")
	for _, d := range pieces() {
		f.store.Notifier().PublishDelta("job-3", d)
	}
	if !h.CrossProcessDeltas {
		return
	}
	if got := receive(t, theirs, 4, "second store"); !reflect.DeepEqual(got, pieces()) {
		t.Errorf("second store: %+v, want %+v", got, pieces())
	}
	// Its own pieces reach it once, not again through the database.
	second.Notifier().PublishDelta("job-3", pieces()[0])
	f.store.Notifier().PublishDelta("job-3", pieces()[1])
	if got := receive(t, theirs, 2, "second store, own and other"); got[0].Text != "Hello" || got[1].Text != " wörld" {
		t.Errorf("second store got %+v", got)
	}
}
