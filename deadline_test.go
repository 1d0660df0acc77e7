package promptkit_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/promptkit/promptkit"
	"github.com/promptkit/promptkit/providertest"
)

// recordingWait is a fake wait: it records and returns at once.
type recordingWait struct {
	mu    sync.Mutex
	waits []time.Duration
}

func (w *recordingWait) Wait(_ context.Context, d time.Duration) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.waits = append(w.waits, d)
	return nil
}

func (w *recordingWait) Count() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.waits)
}

// TestNoWaitPastDeadline: a Retry-After beyond the run's deadline ends the
// run at once with the provider's not-before time; a later run on the same
// backend is refused while the backend pause outlasts its deadline.
func TestNoWaitPastDeadline(t *testing.T) {
	t.Parallel()
	srv := providertest.NewServer()
	t.Cleanup(srv.Close)
	var w recordingWait
	retries := 2
	// The real clock: deadlines are real, and nothing here waits for real.
	eng, err := promptkit.NewWithSeams(promptkit.Config{
		Backends:         []promptkit.Backend{{ID: "b", BaseURL: srv.URL}},
		Profiles:         []promptkit.Profile{{ID: "p", Backend: "b", Model: "m"}},
		TransientRetries: &retries,
	}, time.Now, func(time.Duration) time.Duration { return 0 }, w.Wait)
	if err != nil {
		t.Fatal(err)
	}
	srv.Enqueue(providertest.Status(429).WithRetryAfter("600"))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	start := time.Now()
	_, err = eng.Run(ctx, promptkit.RunRequest{Text: "x", NoWaitPastDeadline: true})
	var ge *promptkit.GenerationError
	if !errors.As(err, &ge) || ge.StatusCode() != 429 || errors.Is(err, promptkit.ErrRetriesExhausted) {
		t.Fatalf("err = %v", err)
	}
	nb, ok := promptkit.NotBefore(err)
	if !ok || nb.Before(start.Add(599*time.Second)) {
		t.Fatalf("NotBefore = %v, %v", nb, ok)
	}
	if srv.Count() != 1 || w.Count() != 0 {
		t.Fatalf("provider calls %d, waits %d: want 1 and none", srv.Count(), w.Count())
	}

	// The backend is paused until nb: a second run is refused at once.
	_, err = eng.Run(ctx, promptkit.RunRequest{Text: "y", NoWaitPastDeadline: true})
	nb2, ok := promptkit.NotBefore(err)
	if !errors.Is(err, promptkit.ErrCapacity) || !ok || !nb2.Equal(nb) {
		t.Fatalf("paused backend: err = %v, NotBefore %v %v", err, nb2, ok)
	}
	if srv.Count() != 1 || w.Count() != 0 {
		t.Fatalf("provider calls %d, waits %d after the refused run", srv.Count(), w.Count())
	}
	if _, ok := promptkit.NotBefore(errors.New("other")); ok {
		t.Fatal("NotBefore of an unrelated error")
	}
}
