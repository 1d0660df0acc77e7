package pgstore

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
)

// These tests need no database: they check the group commit's
// bookkeeping.

type testReq struct {
	key string
	n   int
	out int
}

func TestGroupEveryCallOnce(t *testing.T) {
	var mu sync.Mutex
	ran := map[*testReq]int{}
	g := &group[*testReq]{max: 7, key: func(r *testReq) string { return r.key }}
	g.run = func(_ context.Context, reqs []*testReq) []error {
		if len(reqs) > g.max {
			t.Errorf("batch of %d > max %d", len(reqs), g.max)
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
	}
	var wg sync.WaitGroup
	for w := range 20 {
		wg.Go(func() {
			for i := range 50 {
				n := w*1000 + i
				r := &testReq{key: fmt.Sprint(i % 3), n: n}
				err := g.do(context.Background(), r)
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
	if g.busy || len(g.queue) != 0 {
		t.Fatalf("group not idle: busy=%v queue=%d", g.busy, len(g.queue))
	}
}

func TestGroupCancelWhileWaiting(t *testing.T) {
	release := make(chan struct{})
	started := make(chan struct{}, 1)
	var mu sync.Mutex
	ran := map[int]bool{}
	g := &group[*testReq]{max: 100, key: func(*testReq) string { return "" }}
	g.run = func(_ context.Context, reqs []*testReq) []error {
		select {
		case started <- struct{}{}:
		default:
		}
		<-release
		mu.Lock()
		defer mu.Unlock()
		for _, r := range reqs {
			ran[r.n] = true
		}
		return make([]error, len(reqs))
	}
	// The first call leads and blocks inside run.
	first := make(chan error, 1)
	go func() { first <- g.do(context.Background(), &testReq{n: 0}) }()
	<-started

	// Queue more calls behind it; cancel half of them while they wait,
	// including the oldest one, which is next in line to lead.
	var wg sync.WaitGroup
	results := make([]error, 10)
	cancels := make([]context.CancelFunc, 10)
	for i := range 10 {
		ctx, cancel := context.WithCancel(context.Background())
		cancels[i] = cancel
		wg.Go(func() { results[i] = g.do(ctx, &testReq{n: i + 1}) })
	}
	for waiting := 0; waiting < 10; {
		g.mu.Lock()
		waiting = len(g.queue)
		g.mu.Unlock()
	}
	for i := 0; i < 10; i += 2 {
		cancels[i]()
	}
	// Wait until the cancelled calls have left the queue.
	for waiting := 10; waiting > 5; {
		g.mu.Lock()
		waiting = len(g.queue)
		g.mu.Unlock()
	}
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
		if cancelled == ran[i+1] {
			t.Errorf("call %d: cancelled=%v ran=%v", i+1, cancelled, ran[i+1])
		}
	}
	for _, c := range cancels {
		c()
	}
	if g.busy || len(g.queue) != 0 {
		t.Fatalf("group not idle: busy=%v queue=%d", g.busy, len(g.queue))
	}
}
