package main

import (
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// steadyParams: Producers goroutines each insert one job per transaction,
// back to back, for Duration, while Workers work them off.
type steadyParams struct {
	Producers int
	Workers   int
	Duration  time.Duration
	// Drain bounds the wait, after the producers stop, for the last jobs
	// to start.
	Drain time.Duration
	// Cross: the producers insert through one store handle (River: an
	// insert-only client) and the workers claim through another, each with
	// its own connection pool and LISTEN connection, as two processes
	// would; a job's wake-up then reaches the workers only through
	// PostgreSQL's NOTIFY.
	Cross bool
}

type steadyResult struct {
	Inserted  int     `json:"inserted"`
	InsertJPS float64 `json:"insert_jobs_per_s"`
	// Latencies in milliseconds.
	InsertP50 float64 `json:"insert_p50_ms"`
	InsertP99 float64 `json:"insert_p99_ms"`
	StartP50  float64 `json:"start_p50_ms"`
	StartP99  float64 `json:"start_p99_ms"`
	// NotStarted counts inserted jobs that had not started when the drain
	// window closed (counted at the drain deadline in the start latencies).
	NotStarted int `json:"not_started"`
}

// steadyRecorder collects insert latencies (per producer call) and
// insert → worker-start latencies (reported by the worker from the T0 the
// producer stamped into the job just before inserting it).
type steadyRecorder struct {
	mu       sync.Mutex
	starts   []time.Duration
	startedN atomic.Int64
}

func newSteadyRecorder() *steadyRecorder { return &steadyRecorder{} }

func (r *steadyRecorder) started(t0 int64) {
	d := time.Duration(time.Now().UnixNano() - t0)
	r.mu.Lock()
	r.starts = append(r.starts, d)
	r.mu.Unlock()
	r.startedN.Add(1)
}

// run drives the producers with insert and returns the result once the
// inserted jobs have started (or the drain window closed).
func (r *steadyRecorder) run(ctx context.Context, p steadyParams, insert func(context.Context, time.Time) error) (steadyResult, error) {
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		inserts  []time.Duration
		firstErr error
	)
	pctx, cancel := context.WithTimeout(ctx, p.Duration)
	defer cancel()
	begin := time.Now()
	for range p.Producers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var local []time.Duration
			for pctx.Err() == nil {
				t0 := time.Now()
				if err := insert(ctx, t0); err != nil {
					mu.Lock()
					if firstErr == nil {
						firstErr = err
					}
					mu.Unlock()
					cancel()
					break
				}
				local = append(local, time.Since(t0))
			}
			mu.Lock()
			inserts = append(inserts, local...)
			mu.Unlock()
		}()
	}
	wg.Wait()
	elapsed := time.Since(begin)
	if firstErr != nil {
		return steadyResult{}, firstErr
	}
	n := len(inserts)
	deadline := time.Now().Add(p.Drain)
	for r.startedN.Load() < int64(n) && time.Now().Before(deadline) && ctx.Err() == nil {
		time.Sleep(5 * time.Millisecond)
	}
	r.mu.Lock()
	starts := slices.Clone(r.starts)
	r.mu.Unlock()
	res := steadyResult{Inserted: n, InsertJPS: float64(n) / elapsed.Seconds()}
	if missing := n - len(starts); missing > 0 {
		res.NotStarted = missing
		waited := time.Since(begin) // a lower bound for every missing job
		for range missing {
			starts = append(starts, waited)
		}
	}
	if n == 0 {
		return res, errors.New("no job inserted")
	}
	res.InsertP50, res.InsertP99 = pct(inserts, 0.50), pct(inserts, 0.99)
	res.StartP50, res.StartP99 = pct(starts, 0.50), pct(starts, 0.99)
	return res, nil
}

// pct returns the q-quantile of ds in milliseconds (nearest rank).
func pct(ds []time.Duration, q float64) float64 {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	i := int(q*float64(len(s))+0.5) - 1
	i = max(0, min(i, len(s)-1))
	return float64(s[i]) / float64(time.Millisecond)
}
