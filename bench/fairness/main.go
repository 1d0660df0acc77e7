// Command fairness measures fair sharing between organisations: org A has
// a backlog of queued jobs at priority 50 and a worker is running them
// against a provider that serves -rps requests per second; then org B
// submits a few jobs at the same priority. It reports how long B's jobs
// take from B's submit (p50 and max), and A's throughput before B came and
// while B's jobs ran, with B's share of the completions in that window.
// The reference mode submits B's jobs as org A's, which is what every
// org's jobs got before fair sharing: they wait behind A's backlog.
//
//	cd bench && go run ./fairness -runs 3
//	cd bench && go run ./fairness -runs 3 -db sqlite,postgres   # PostgreSQL: PROMPTKIT_TEST_DATABASE_URL or -pg
//
// The provider is a providertest server answering after -latency; the
// worker runs -concurrency jobs at once, so the backend does at most
// concurrency / latency requests per second (8 / 80 ms = 100 by default).
// What is timed: A's jobs are enqueued (batches of 500) and the worker
// started; after -warmup B's jobs are submitted in one EnqueueBatch; the
// trial ends when B's last job has succeeded. A's throughput "before" is
// its completions per second from 1 s after the start to B's submit, and
// "during" from B's submit to B's last completion. Every trial gets a fresh
// store (SQLite file or PostgreSQL schema, dropped afterwards), and a
// deadline (-trial-timeout).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/promptkit/promptkit"
	"github.com/promptkit/promptkit/bench/internal/benchkit"
	"github.com/promptkit/promptkit/jobs"
	"github.com/promptkit/promptkit/jobs/pgstore"
	"github.com/promptkit/promptkit/jobs/sqlitestore"
	"github.com/promptkit/promptkit/jobs/worker"
	"github.com/promptkit/promptkit/providertest"
)

// config is one trial's shape.
type config struct {
	db          string // "sqlite" or "postgres"
	pgURL       string
	dir         string // for SQLite files
	a, b        int    // A's backlog, B's jobs
	concurrency int
	latency     time.Duration
	warmup      time.Duration
	// reference submits B's jobs as org A's.
	reference bool
}

// result is one trial's measurement.
type result struct {
	bP50, bMax time.Duration // B's completion times from its submit
	aBefore    float64       // A's completions/s before B's submit
	aDuring    float64       // A's completions/s while B's jobs ran
	bShare     float64       // B's share of the completions while they ran
}

const (
	orgA  = "org-a"
	orgB  = "org-b"
	batch = 500
)

func main() {
	runs := flag.Int("runs", 3, "trials per mode and database")
	dbs := flag.String("db", "sqlite", "databases: sqlite, postgres or both (comma-separated)")
	pgURL := flag.String("pg", os.Getenv("PROMPTKIT_TEST_DATABASE_URL"), "PostgreSQL URL (loopback; default PROMPTKIT_TEST_DATABASE_URL)")
	a := flag.Int("a", 10000, "org A's queued jobs")
	b := flag.Int("b", 50, "org B's jobs")
	rps := flag.Int("rps", 100, "requests per second the backend serves (concurrency / latency)")
	concurrency := flag.Int("concurrency", 8, "worker slots")
	warmup := flag.Duration("warmup", 3*time.Second, "A alone before B submits")
	reference := flag.Bool("reference", true, "also run the reference (B's jobs as org A's)")
	trialTimeout := flag.Duration("trial-timeout", 10*time.Minute, "deadline of one trial")
	flag.Parse()

	ctx := context.Background()
	tmp, err := os.MkdirTemp("", "fairness-")
	fatal(err)
	defer os.RemoveAll(tmp)
	latency := time.Duration(float64(time.Second) * float64(*concurrency) / float64(*rps))
	fmt.Printf("fairness: A %d jobs, B %d jobs, priority 50, backend %d req/s (%d slots × %v), %d cores, %s, %s\n",
		*a, *b, *rps, *concurrency, latency, runtime.NumCPU(), runtime.Version(), time.Now().UTC().Format(time.DateOnly))
	modes := []bool{false}
	if *reference {
		modes = append(modes, true)
	}
	fmt.Println("| database | mode | runs | B p50 s (min / median / max) | B max s | A before jobs/s | A during jobs/s | B's share during |")
	fmt.Println("|---|---|---|---|---|---|---|---|")
	for _, db := range benchkit.SplitList(*dbs) {
		if db == "postgres" {
			if *pgURL == "" || !benchkit.Loopback(*pgURL) {
				fatal(errors.New("postgres needs a loopback -pg or PROMPTKIT_TEST_DATABASE_URL"))
			}
			fatal(benchkit.DropLeftovers(ctx, *pgURL, "pkfair"))
		}
		for _, ref := range modes {
			var rs []result
			for range *runs {
				c := config{db: db, pgURL: *pgURL, dir: tmp, a: *a, b: *b, concurrency: *concurrency,
					latency: latency, warmup: *warmup, reference: ref}
				tctx, cancel := context.WithTimeout(ctx, *trialTimeout)
				r, err := run(tctx, c)
				cancel()
				fatal(err)
				rs = append(rs, r)
			}
			mode := "fair (B as org-b)"
			if ref {
				mode = "reference (B as org-a)"
			}
			fmt.Printf("| %s | %s | %d | %s | %s | %s | %s | %s |\n", db, mode, len(rs),
				spread(rs, func(r result) float64 { return r.bP50.Seconds() }, "%.2f"),
				spread(rs, func(r result) float64 { return r.bMax.Seconds() }, "%.2f"),
				spread(rs, func(r result) float64 { return r.aBefore }, "%.0f"),
				spread(rs, func(r result) float64 { return r.aDuring }, "%.0f"),
				spread(rs, func(r result) float64 { return r.bShare * 100 }, "%.0f %%"))
		}
	}
}

// spread formats min / median / max of a measure over the runs.
func spread(rs []result, f func(result) float64, format string) string {
	vs := make([]float64, len(rs))
	for i, r := range rs {
		vs[i] = f(r)
	}
	slices.Sort(vs)
	med := vs[len(vs)/2]
	if len(vs)%2 == 0 {
		med = (vs[len(vs)/2-1] + vs[len(vs)/2]) / 2
	}
	return strings.Join([]string{fmt.Sprintf(format, vs[0]), fmt.Sprintf(format, med), fmt.Sprintf(format, vs[len(vs)-1])}, " / ")
}

// done is one job's success as the worker reported it.
type done struct {
	at time.Time
	id string
}

// run runs one trial.
func run(ctx context.Context, c config) (result, error) {
	st, closeStore, err := open(ctx, c)
	if err != nil {
		return result{}, err
	}
	defer closeStore()
	srv := providertest.NewServer(providertest.WithLatency(c.latency), providertest.WithMaxRecorded(1))
	defer srv.Close()
	retries := 0
	eng, err := promptkit.New(promptkit.Config{
		Backends:         []promptkit.Backend{{ID: "fake", BaseURL: srv.URL}},
		Profiles:         []promptkit.Profile{{ID: "default", Backend: "fake", Model: "m"}},
		TransientRetries: &retries,
	})
	if err != nil {
		return result{}, err
	}
	if err := enqueue(ctx, st, orgA, c.a); err != nil {
		return result{}, err
	}

	var (
		mu       sync.Mutex
		finished []done
		failed   error
		wake     = make(chan struct{}, 1)
	)
	w, err := worker.New(worker.Config{
		Store: st, Engine: eng, Concurrency: c.concurrency, BatchSize: c.concurrency,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Observe: func(ev worker.JobEvent) {
			if ev.Claimed {
				return
			}
			mu.Lock()
			if ev.Outcome == worker.OutcomeSucceeded {
				finished = append(finished, done{time.Now(), ev.Job.ID})
			} else if failed == nil {
				failed = fmt.Errorf("job %s: %s", ev.Job.ID, ev.Outcome)
			}
			mu.Unlock()
			select {
			case wake <- struct{}{}:
			default:
			}
		},
	})
	if err != nil {
		return result{}, err
	}
	start := time.Now()
	if err := w.Start(ctx); err != nil {
		return result{}, err
	}
	defer func() { _ = w.Stop(context.WithoutCancel(ctx)) }()

	select {
	case <-time.After(c.warmup):
	case <-ctx.Done():
		return result{}, ctx.Err()
	}
	bOrg := orgB
	if c.reference {
		bOrg = orgA
	}
	submit := time.Now()
	bIDs, err := enqueueIDs(ctx, st, bOrg, c.b)
	if err != nil {
		return result{}, err
	}
	isB := make(map[string]bool, len(bIDs))
	for _, id := range bIDs {
		isB[id] = true
	}
	// Until every one of B's jobs has succeeded.
	for {
		mu.Lock()
		n, ferr := 0, failed
		for _, d := range finished {
			if isB[d.id] {
				n++
			}
		}
		mu.Unlock()
		if ferr != nil {
			return result{}, ferr
		}
		if n == len(bIDs) {
			break
		}
		select {
		case <-wake:
		case <-ctx.Done():
			return result{}, fmt.Errorf("%d of B's %d jobs done: %w", n, len(bIDs), ctx.Err())
		}
	}
	mu.Lock()
	defer mu.Unlock()
	return measure(finished, isB, start, submit), nil
}

// measure computes a trial's result from the successes.
func measure(finished []done, isB map[string]bool, start, submit time.Time) result {
	var bTimes []time.Duration
	var last time.Time
	for _, d := range finished {
		if isB[d.id] {
			bTimes = append(bTimes, d.at.Sub(submit))
			last = d.at
		}
	}
	slices.Sort(bTimes)
	var r result
	if len(bTimes) == 0 {
		return r
	}
	r.bP50, r.bMax = bTimes[(len(bTimes)-1)/2], bTimes[len(bTimes)-1]
	from := start.Add(time.Second) // past the worker's start-up
	var aBefore, aDuring, bDuring int
	for _, d := range finished {
		switch {
		case isB[d.id]:
			bDuring++
		case d.at.After(from) && !d.at.After(submit):
			aBefore++
		case d.at.After(submit) && !d.at.After(last):
			aDuring++
		}
	}
	if s := submit.Sub(from).Seconds(); s > 0 {
		r.aBefore = float64(aBefore) / s
	}
	if s := last.Sub(submit).Seconds(); s > 0 {
		r.aDuring = float64(aDuring) / s
	}
	r.bShare = float64(bDuring) / float64(aDuring+bDuring)
	return r
}

// open opens a fresh store of c's database.
func open(ctx context.Context, c config) (jobs.Store, func(), error) {
	switch c.db {
	case "sqlite":
		dir, err := os.MkdirTemp(c.dir, "fair-")
		if err != nil {
			return nil, nil, err
		}
		st, err := sqlitestore.Open(ctx, filepath.Join(dir, "jobs.db"), jobs.Options{})
		if err != nil {
			os.RemoveAll(dir)
			return nil, nil, err
		}
		return st, func() { st.Close(); os.RemoveAll(dir) }, nil
	case "postgres":
		schema, drop, err := benchkit.NewSchema(ctx, c.pgURL, "pkfair")
		if err != nil {
			return nil, nil, err
		}
		u, err := benchkit.WithSearchPath(c.pgURL, schema)
		if err != nil {
			_ = drop()
			return nil, nil, err
		}
		st, err := pgstore.Open(ctx, u, jobs.Options{})
		if err != nil {
			_ = drop()
			return nil, nil, err
		}
		return st, func() {
			st.Close()
			if err := drop(); err != nil {
				fmt.Fprintln(os.Stderr, "fairness: drop schema:", err)
			}
		}, nil
	}
	return nil, nil, fmt.Errorf("unknown database %q", c.db)
}

func enqueue(ctx context.Context, st jobs.Store, org string, n int) error {
	_, err := enqueueIDs(ctx, st, org, n)
	return err
}

// enqueueIDs enqueues n jobs of org at priority 50, in batches, and
// returns their IDs.
func enqueueIDs(ctx context.Context, st jobs.Store, org string, n int) ([]string, error) {
	prio := 50
	var ids []string
	for i := 0; i < n; i += batch {
		ps := make([]jobs.EnqueueParams, 0, batch)
		for j := i; j < min(i+batch, n); j++ {
			ps = append(ps, jobs.EnqueueParams{OrgID: org, CreatedBy: "bench", Priority: &prio,
				Text: fmt.Sprintf("Say hello to job %d of %s.", j, org)})
		}
		es, err := st.EnqueueBatch(ctx, ps)
		if err != nil {
			return nil, fmt.Errorf("EnqueueBatch: %w", err)
		}
		for _, e := range es {
			ids = append(ids, e.JobID)
		}
	}
	return ids, nil
}

func fatal(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, "fairness:", err)
		os.Exit(1)
	}
}
