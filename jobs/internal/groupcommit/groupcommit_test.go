package groupcommit

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
)

type testReq struct {
	key string
	n   int
	out int
}

// waitQueue spins until the group's queue holds n calls.
func waitQueue[R any](g *Group[R], n int) {
	for {
		g.mu.Lock()
		l := len(g.queue)
		g.mu.Unlock()
		if l == n {
			return
		}
	}
}

// idle reports whether the group is back at rest.
func idle[R any](g *Group[R]) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return !g.leading && !g.running && len(g.queue) == 0
}

// Every call runs exactly once, batches respect max and conflict keys,
// and each call gets its own result and error.
func TestEveryCallOnce(t *testing.T) {
	var mu sync.Mutex
	ran := map[*testReq]int{}
	const max = 7
	g := New(max, func(r *testReq) string { return r.key }, func(_ context.Context, reqs []*testReq) []error {
		if len(reqs) > max {
			t.Errorf("batch of %d > max %d", len(reqs), max)
		}
		seen := map[string]bool{}
		errs := make([]error, len(reqs))
		mu.Lock()
		defer mu.Unlock()
		for i, r := range reqs {
			if r.key != "" && seen[r.key] {
				t.Errorf("key %q twice in one batch", r.key)
			}
			seen[r.key] = true
			ran[r]++
			r.out = r.n * 2
			if r.n%5 == 0 {
				errs[i] = fmt.Errorf("call %d failed", r.n)
			}
		}
		return errs
	})
	var wg sync.WaitGroup
	for w := range 20 {
		wg.Go(func() {
			for i := range 50 {
				n := w*1000 + i
				r := &testReq{key: fmt.Sprint(i % 3), n: n}
				err := g.Do(context.Background(), r)
				if (n%5 == 0) != (err != nil) {
					t.Errorf("call %d: error %v", n, err)
				}
				if r.out != n*2 {
					t.Errorf("call %d: out %d", n, r.out)
				}
			}
		})
	}
	wg.Wait()
	if len(ran) != 20*50 {
		t.Fatalf("%d calls ran, want %d", len(ran), 20*50)
	}
	for r, n := range ran {
		if n != 1 {
			t.Fatalf("call %d ran %d times", r.n, n)
		}
	}
	if !idle(g) {
		t.Fatal("group not idle")
	}
}

// blockingGroup returns a group whose first batch blocks until release is
// closed, once it has signalled started; it records which calls ran.
func blockingGroup() (g *Group[*testReq], started, release chan struct{}, ran func() map[int]bool) {
	started, release = make(chan struct{}, 1), make(chan struct{})
	var mu sync.Mutex
	done := map[int]bool{}
	g = New(100, nil, func(_ context.Context, reqs []*testReq) []error {
		select {
		case started <- struct{}{}:
		default:
		}
		<-release
		mu.Lock()
		defer mu.Unlock()
		for _, r := range reqs {
			done[r.n] = true
		}
		return make([]error, len(reqs))
	})
	return g, started, release, func() map[int]bool {
		mu.Lock()
		defer mu.Unlock()
		return done
	}
}

// A call whose context ends while it waits is not run and returns the
// context's error, also when it was next in line to lead; a call whose
// context had already ended is refused at once.
func TestCancelWhileWaiting(t *testing.T) {
	g, started, release, ran := blockingGroup()
	first := make(chan error, 1)
	go func() { first <- g.Do(context.Background(), &testReq{n: 0}) }()
	<-started

	var wg sync.WaitGroup
	results := make([]error, 10)
	cancels := make([]context.CancelFunc, 10)
	for i := range 10 {
		ctx, cancel := context.WithCancel(context.Background())
		cancels[i] = cancel
		wg.Go(func() { results[i] = g.Do(ctx, &testReq{n: i + 1}) })
	}
	waitQueue(g, 10)
	for i := 0; i < 10; i += 2 {
		cancels[i]()
	}
	waitQueue(g, 5)
	close(release)
	wg.Wait()
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	for i := range 10 {
		cancelled := i%2 == 0
		if cancelled != errors.Is(results[i], context.Canceled) {
			t.Errorf("call %d: error %v", i+1, results[i])
		}
		if cancelled == ran()[i+1] {
			t.Errorf("call %d: cancelled=%v ran=%v", i+1, cancelled, ran()[i+1])
		}
	}
	for _, c := range cancels {
		c()
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := g.Do(ctx, &testReq{n: 99}); !errors.Is(err, context.Canceled) || ran()[99] {
		t.Errorf("call with an ended context: %v, ran %v", err, ran()[99])
	}
	if !idle(g) {
		t.Fatal("group not idle")
	}
}

// A call whose context ends after it was queued but before its batch is
// cut is answered by the cutter, not run.
func TestEndedContextNotRun(t *testing.T) {
	var ran []int
	g := New(10, nil, func(_ context.Context, reqs []*testReq) []error {
		for _, r := range reqs {
			ran = append(ran, r.n)
		}
		return make([]error, len(reqs))
	})
	ctx, cancel := context.WithCancel(context.Background())
	c := &call[*testReq]{ctx: ctx, req: &testReq{n: 1}, done: make(chan struct{}), lead: make(chan struct{}, 1)}
	live := &call[*testReq]{ctx: context.Background(), req: &testReq{n: 2}, done: make(chan struct{}), lead: make(chan struct{}, 1)}
	g.queue = []*call[*testReq]{c, live}
	g.leading = true
	cancel()
	g.runBatch(context.Background())
	<-c.done
	<-live.done
	if !errors.Is(c.err, context.Canceled) || live.err != nil || len(ran) != 1 || ran[0] != 2 {
		t.Errorf("cancelled call: %v; live call: %v; ran %v", c.err, live.err, ran)
	}
	if !idle(g) {
		t.Fatal("group not idle")
	}
}

// Close waits for the batch in hand, answers waiting calls with ErrClosed
// without running them, refuses later calls, and may be called again.
func TestClose(t *testing.T) {
	g, started, release, ran := blockingGroup()
	first := make(chan error, 1)
	go func() { first <- g.Do(context.Background(), &testReq{n: 0}) }()
	<-started
	waiting := make(chan error, 1)
	go func() { waiting <- g.Do(context.Background(), &testReq{n: 1}) }()
	waitQueue(g, 1)

	closed := make(chan struct{})
	go func() { g.Close(); close(closed) }()
	if err := <-waiting; !errors.Is(err, ErrClosed) {
		t.Errorf("waiting call: %v, want ErrClosed", err)
	}
	select {
	case <-closed:
		t.Fatal("Close returned while a batch was running")
	default:
	}
	close(release)
	<-closed
	if err := <-first; err != nil {
		t.Errorf("the running call: %v", err)
	}
	if ran()[1] {
		t.Error("a call waiting at Close ran")
	}
	if err := g.Do(context.Background(), &testReq{n: 2}); !errors.Is(err, ErrClosed) {
		t.Errorf("call after Close: %v, want ErrClosed", err)
	}
	g.Close()
	if !idle(g) {
		t.Fatal("group not idle")
	}
}
