// Command routing measures a model group through the job service: jobs
// on a profile served by two backends, run by two workers (each with its
// own engine and store handle, sharing pacing and cooldowns through the
// store as two processes do).
//
// Two scenarios, each with -jobs jobs:
//
//   - broken: one backend answers 500 to everything. Every job must
//     succeed; the report gives the requests the broken backend received
//     in each cooldown window (the first window also holds the calls that
//     were already in flight when the first 500 came back).
//
//   - healthy: both answer, with weights 3 and 1. The report gives each
//     backend's share of the calls.
//
// Run it from the bench module:
//
//	go run ./routing -jobs 1000 -cooldown 500ms -latency 50ms -concurrency 8
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/promptkit/promptkit"
	"github.com/promptkit/promptkit/jobs"
	"github.com/promptkit/promptkit/jobs/sqlitestore"
	"github.com/promptkit/promptkit/jobs/worker"
)

func main() {
	n := flag.Int("jobs", 1000, "jobs per scenario")
	conc := flag.Int("concurrency", 16, "slots per worker (two workers)")
	latency := flag.Duration("latency", 20*time.Millisecond, "a healthy backend's answer time")
	cooldown := flag.Duration("cooldown", 2*time.Second, "the backends' cooldown")
	flag.Parse()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	for _, sc := range []scenario{{name: "broken", broken: true}, {name: "healthy"}} {
		r, err := run(ctx, sc, *n, *conc, *latency, *cooldown)
		if err != nil {
			fmt.Fprintf(os.Stderr, "routing: %s: %v\n", sc.name, err)
			os.Exit(1)
		}
		r.print(sc, *cooldown)
	}
}

type scenario struct {
	name   string
	broken bool // backend b answers 500
}

type result struct {
	jobs, succeeded int
	elapsed         time.Duration
	callsA, callsB  int64
	// windows counts backend b's requests per cooldown window from the
	// start.
	windows []int
}

func (r result) print(sc scenario, cooldown time.Duration) {
	fmt.Printf("%s: %d/%d jobs succeeded in %v; calls: a=%d b=%d", sc.name, r.succeeded, r.jobs, r.elapsed.Round(time.Millisecond), r.callsA, r.callsB)
	if sc.broken {
		fmt.Printf("; b's requests per %v window: %v\n", cooldown, r.windows)
		return
	}
	total := float64(r.callsA + r.callsB)
	fmt.Printf("; shares a=%.1f%% b=%.1f%% (weights 75%% / 25%%)\n", 100*float64(r.callsA)/total, 100*float64(r.callsB)/total)
}

// backend is a fake OpenAI-compatible endpoint counting its requests.
type backend struct {
	srv   *httptest.Server
	start time.Time
	mu    sync.Mutex
	at    []time.Duration // each request's time since start
}

func newBackend(fail bool, latency time.Duration) *backend {
	b := &backend{}
	b.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		b.mu.Lock()
		b.at = append(b.at, time.Since(b.start))
		b.mu.Unlock()
		if fail {
			w.WriteHeader(http.StatusInternalServerError)
			_, _ = io.WriteString(w, `{"error":{"message":"down","type":"server_error"}}`)
			return
		}
		time.Sleep(latency) // the provider's answer time
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{
			"id": "c", "object": "chat.completion", "model": "m",
			"choices": []any{map[string]any{"index": 0, "finish_reason": "stop",
				"message": map[string]any{"role": "assistant", "content": "ok"}}},
			"usage": map[string]int{"prompt_tokens": 10, "completion_tokens": 2, "total_tokens": 12},
		})
	}))
	return b
}

func (b *backend) calls() []time.Duration {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]time.Duration(nil), b.at...)
}

func run(ctx context.Context, sc scenario, n, conc int, latency, cooldown time.Duration) (result, error) {
	dir, err := os.MkdirTemp("", "routing-bench")
	if err != nil {
		return result{}, err
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "jobs.db")

	a := newBackend(false, latency)
	defer a.srv.Close()
	b := newBackend(sc.broken, latency)
	defer b.srv.Close()
	weightA := 1
	if !sc.broken {
		weightA = 3
	}
	cfg := promptkit.Config{
		Backends: []promptkit.Backend{
			{ID: "a", BaseURL: a.srv.URL, Cooldown: cooldown},
			{ID: "b", BaseURL: b.srv.URL, Cooldown: cooldown},
		},
		Profiles: []promptkit.Profile{{ID: "default", Model: "m",
			Backends: []promptkit.ProfileBackend{{ID: "a", Weight: weightA}, {ID: "b", Weight: 1}}}},
	}

	var succeeded atomic.Int64
	done := make(chan struct{})
	var once sync.Once
	var bad atomic.Value
	observe := func(ev worker.JobEvent) {
		switch {
		case ev.Claimed:
		case ev.Outcome == worker.OutcomeSucceeded:
			if succeeded.Add(1) == int64(n) {
				once.Do(func() { close(done) })
			}
		case ev.Outcome == worker.OutcomeRetried:
		default:
			bad.CompareAndSwap(nil, fmt.Sprintf("job %s: %s", ev.Job.ID, ev.Outcome))
			once.Do(func() { close(done) })
		}
	}

	wctx, stop := context.WithCancel(ctx)
	defer stop()
	var shares sync.WaitGroup
	defer shares.Wait() // after stop: SharePacing returns when wctx ends
	var workers []*worker.Worker
	var stores []jobs.Store
	defer func() {
		for _, st := range stores {
			st.Close()
		}
	}()
	for i := range 2 {
		st, err := sqlitestore.Open(ctx, path, jobs.Options{})
		if err != nil {
			return result{}, err
		}
		stores = append(stores, st)
		eng, err := promptkit.New(cfg)
		if err != nil {
			return result{}, err
		}
		shares.Add(1)
		go func() {
			defer shares.Done()
			_ = eng.SharePacing(wctx, worker.PacingStore(st), promptkit.SharePacingOptions{Peer: fmt.Sprintf("w%d", i)})
		}()
		w, err := worker.New(worker.Config{
			Store: st, Engine: eng, Concurrency: conc, Name: fmt.Sprintf("w%d", i),
			Logger:  slog.New(slog.NewTextHandler(io.Discard, nil)),
			Observe: observe,
		})
		if err != nil {
			return result{}, err
		}
		workers = append(workers, w)
	}
	ps := make([]jobs.EnqueueParams, n)
	for i := range ps {
		ps[i] = jobs.EnqueueParams{Text: fmt.Sprintf("job %d", i)}
	}
	if _, err := stores[0].EnqueueBatch(ctx, ps); err != nil {
		return result{}, err
	}
	start := time.Now()
	a.start, b.start = start, start // count from the workers' start
	for _, w := range workers {
		if err := w.Start(wctx); err != nil {
			return result{}, err
		}
	}
	select {
	case <-done:
	case <-ctx.Done():
	}
	elapsed := time.Since(start)
	var errs []error
	for _, w := range workers {
		errs = append(errs, w.Stop(context.WithoutCancel(ctx)))
	}
	stop()
	if err := errors.Join(errs...); err != nil {
		return result{}, err
	}
	if v := bad.Load(); v != nil {
		return result{}, errors.New(v.(string))
	}
	r := result{jobs: n, succeeded: int(succeeded.Load()), elapsed: elapsed}
	callsA, callsB := a.calls(), b.calls()
	r.callsA, r.callsB = int64(len(callsA)), int64(len(callsB))
	r.windows = make([]int, int(elapsed/cooldown)+1)
	for _, at := range callsB {
		if k := int(at / cooldown); k < len(r.windows) {
			r.windows[k]++
		}
	}
	if r.succeeded < n {
		return r, fmt.Errorf("%d of %d jobs succeeded", r.succeeded, n)
	}
	return r, nil
}
