package pgstore_test

import (
	"context"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/promptkit/promptkit/internal/pgtest"
	"github.com/promptkit/promptkit/jobs"
	"github.com/promptkit/promptkit/jobs/pgstore"
)

// TestNotifyAcrossStores checks that a second store on the same schema
// (standing in for another process) wakes through LISTEN/NOTIFY, that a
// store on another schema does not, and that Close stops every goroutine.
func TestNotifyAcrossStores(t *testing.T) {
	pgtest.BaseURL(t) // skip before goleak records the goroutines
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	ctx := context.Background()
	dsn := pgtest.Schema(t)
	other := pgtest.Schema(t)

	a, err := pgstore.Open(ctx, dsn, jobs.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := pgstore.Open(ctx, dsn, jobs.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	c, err := pgstore.Open(ctx, other, jobs.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()

	nctx, cancel := context.WithCancel(ctx)
	wake := b.Notifier().Notify(nctx)
	foreign := c.Notifier().Notify(ctx)
	// The listener wakes subscribers once when it connects; drain that.
	waitWake(t, wake)
	waitWake(t, foreign)

	if _, err := a.Enqueue(ctx, jobs.EnqueueParams{OrgID: "o", Text: "t"}); err != nil {
		t.Fatal(err)
	}
	waitWake(t, wake)
	select {
	case <-foreign:
		t.Fatal("a store on another schema was woken")
	case <-time.After(200 * time.Millisecond):
	}

	// An empty claim changes nothing and must not wake anyone (or idle
	// workers would wake each other forever).
	if _, err := a.Claim(ctx, jobs.ClaimParams{Worker: "w", PriorityCeiling: new(int)}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-wake:
		t.Fatal("an empty claim notified")
	case <-time.After(200 * time.Millisecond):
	}

	cancel()
	if _, ok := <-wake; ok {
		// A wake-up may have been pending; the next receive must see the close.
		if _, ok := <-wake; ok {
			t.Fatal("channel still open after its context ended")
		}
	}
	a.Close()
	b.Close()
	c.Close()
	if _, ok := <-foreign; ok {
		t.Fatal("channel still open after Close")
	}
	if _, ok := <-b.Notifier().Notify(ctx); ok {
		t.Fatal("Notify after Close returned an open channel")
	}
}

func waitWake(t *testing.T, ch <-chan struct{}) {
	t.Helper()
	select {
	case _, ok := <-ch:
		if !ok {
			t.Fatal("notify channel closed")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no notification within 5s")
	}
}
