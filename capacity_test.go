package promptkit_test

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/promptkit/promptkit"
	"github.com/promptkit/promptkit/providertest"
)

// TestMaxActiveBoundsInFlight keeps requests in flight on the provider and
// releases them one at a time; the provider measures concurrency itself.
func TestMaxActiveBoundsInFlight(t *testing.T) {
	t.Parallel()
	const limit, runs = 3, 12
	b := setup(t, setupOpts{maxActive: limit})
	holds := make([]chan struct{}, runs)
	for i := range holds {
		holds[i] = make(chan struct{})
		// Scripted replies are taken in arrival order, so holds[i] keeps the
		// i-th arriving request in flight.
		b.srv.Enqueue(providertest.Response{Hold: holds[i], Text: "ok"})
	}
	var wg sync.WaitGroup
	errs := make(chan error, runs)
	for i := 0; i < runs; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := b.eng.Run(context.Background(), promptkit.RunRequest{Text: "x"})
			errs <- err
		}()
	}
	for released := 0; released < runs; released++ {
		// With the limit working, exactly released+limit requests can have
		// arrived by now; a broken limit lets more in and raises MaxInFlight.
		if err := b.srv.WaitArrivals(context.Background(), min(released+limit, runs)); err != nil {
			t.Fatal(err)
		}
		close(holds[released])
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if got := b.srv.MaxInFlight(); got != limit {
		t.Fatalf("provider saw %d requests in flight at once, want exactly %d", got, limit)
	}
}

// TestAdmissionQueueFull: with one run executing and one queue slot, of two
// more runs one waits and the other is refused at once with ErrCapacity.
func TestAdmissionQueueFull(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{maxRuns: 1, maxQueued: 1})
	hold := make(chan struct{})
	b.srv.Enqueue(providertest.Response{Hold: hold, Text: "first"})
	first := make(chan error, 1)
	go func() {
		_, err := b.eng.Run(context.Background(), promptkit.RunRequest{Text: "a"})
		first <- err
	}()
	if err := b.srv.WaitArrivals(context.Background(), 1); err != nil {
		t.Fatal(err)
	}
	others := make(chan error, 2)
	for i := 0; i < 2; i++ {
		go func() {
			_, err := b.eng.Run(context.Background(), promptkit.RunRequest{Text: "b"})
			others <- err
		}()
	}
	// Whichever of the two came second is refused while the first still runs.
	if err := <-others; !errors.Is(err, promptkit.ErrCapacity) || errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want an immediate ErrCapacity", err)
	}
	close(hold)
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	if err := <-others; err != nil {
		t.Fatalf("queued run: %v", err)
	}
}

// TestRepairsShareTheRunsAdmission: a run holds its admission through its
// repair generation. While the first run's repair is in flight, with one
// run allowed and one queue slot, one of two new runs must be refused.
func TestRepairsShareTheRunsAdmission(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{maxRuns: 1, maxQueued: 1, repairBudget: 1})
	hold := make(chan struct{})
	b.srv.Enqueue(
		providertest.Reply("invalid"),
		providertest.Response{Hold: hold, Text: `{"summary":"ok"}`},
	)
	first := make(chan error, 1)
	go func() {
		_, err := b.eng.Run(context.Background(), summarize("x"))
		first <- err
	}()
	if err := b.srv.WaitArrivals(context.Background(), 2); err != nil {
		t.Fatal(err)
	}
	others := make(chan error, 2)
	for i := 0; i < 2; i++ {
		go func() {
			_, err := b.eng.Run(context.Background(), promptkit.RunRequest{Text: "y"})
			others <- err
		}()
	}
	if err := <-others; !errors.Is(err, promptkit.ErrCapacity) {
		t.Fatalf("err = %v: admission was not held during the repair", err)
	}
	close(hold)
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	if err := <-others; err != nil {
		t.Fatal(err)
	}
}
