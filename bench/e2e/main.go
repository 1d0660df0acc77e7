// Command e2e measures the job service end to end: jobs per second through
// the worker runtime that `promptkit serve` runs (claim, engine run
// against a provider answering after -latency, the result with its
// attempt event), and pickup latency (enqueue → running) with idle
// workers, on SQLite and PostgreSQL. The worker reports each job it
// settles, so measuring costs the database nothing.
//
//	cd bench && go run ./e2e -runs 3
//	cd bench && go run ./e2e -workers 64 -latency 50ms -n 5000 -pickup 0   # the concurrency bound: 1,280 jobs/s
//
// PostgreSQL rows need PROMPTKIT_TEST_DATABASE_URL (each run uses a fresh
// schema, dropped afterwards). Everything runs on loopback and stops by
// itself.
package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/promptkit/promptkit"
	"github.com/promptkit/promptkit/jobs"
	"github.com/promptkit/promptkit/jobs/pgstore"
	"github.com/promptkit/promptkit/jobs/sqlitestore"
	"github.com/promptkit/promptkit/jobs/worker"
	"github.com/promptkit/promptkit/providertest"
)

type db struct {
	name string
	// open returns a fresh store, a reopen function for a second handle
	// (another "process"), and a cleanup.
	open func(ctx context.Context) (jobs.Store, func() (jobs.Store, error), func(), error)
}

func main() {
	n := flag.Int("n", 2000, "jobs per throughput run")
	workers := flag.Int("workers", 8, "worker concurrency")
	samples := flag.Int("pickup", 100, "pickup samples per run")
	runs := flag.Int("runs", 3, "runs per database")
	latency := flag.Duration("latency", 0, "provider latency per answer")
	only := flag.String("db", "sqlite,postgres", "databases")
	cpuProfile := flag.String("cpuprofile", "", "write a CPU profile of the throughput runs")
	flag.Parse()
	ctx := context.Background()
	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		must(err)
		must(pprof.StartCPUProfile(f))
		defer pprof.StopCPUProfile()
	}

	srv := providertest.NewServer(providertest.WithMaxRecorded(1), providertest.WithLatency(*latency))
	defer srv.Close()
	retries := 0
	eng, err := promptkit.New(promptkit.Config{
		Backends:         []promptkit.Backend{{ID: "fake", BaseURL: srv.URL}},
		Profiles:         []promptkit.Profile{{ID: "default", Backend: "fake", Model: "m"}},
		TransientRetries: &retries,
	})
	must(err)

	var dbs []db
	if strings.Contains(*only, "sqlite") {
		dbs = append(dbs, db{"sqlite", openSQLite})
	}
	if os.Getenv("PROMPTKIT_TEST_DATABASE_URL") != "" && strings.Contains(*only, "postgres") {
		dbs = append(dbs, db{"postgres", openPostgres})
	}
	fmt.Printf("%d jobs, %d workers, provider latency %v, %d pickup samples, %d runs; %s, %d cores, %s\n\n",
		*n, *workers, *latency, *samples, *runs, time.Now().Format("2006-01-02"), runtime.NumCPU(), runtime.Version())
	if *latency > 0 {
		fmt.Printf("concurrency bound: %.0f jobs/s\n\n", float64(*workers)/latency.Seconds())
	}
	fmt.Println("| database | jobs/s min | median | max | pickup p50 same process | p99 | pickup p50 other process | p99 |")
	fmt.Println("|---|---|---|---|---|---|---|---|")
	for _, d := range dbs {
		var rates []float64
		var same, other []time.Duration
		for r := 0; r < *runs; r++ {
			rates = append(rates, throughput(ctx, d, eng, *n, *workers))
			if *samples > 0 {
				s, o := pickup(ctx, d, eng, *samples)
				same, other = append(same, s...), append(other, o...)
			}
		}
		slices.Sort(rates)
		fmt.Printf("| %s | %.0f | %.0f | %.0f | %v | %v | %v | %v |\n", d.name, rates[0], rates[len(rates)/2], rates[len(rates)-1],
			pct(same, 50), pct(same, 99), pct(other, 50), pct(other, 99))
	}
}

func newWorker(st jobs.Store, eng *promptkit.Engine, conc int, observe func(worker.JobEvent)) *worker.Worker {
	w, err := worker.New(worker.Config{
		Store: st, Engine: eng, Concurrency: conc, BatchSize: conc,
		Logger:  slog.New(slog.NewTextHandler(io.Discard, nil)),
		Observe: observe,
	})
	must(err)
	return w
}

// throughput enqueues n jobs, then measures how long a running worker
// takes to finish them all.
func throughput(ctx context.Context, d db, eng *promptkit.Engine, n, conc int) float64 {
	st, _, cleanup, err := d.open(ctx)
	must(err)
	defer cleanup()
	for i := 0; i < n; i += 500 {
		batch := make([]jobs.EnqueueParams, 0, 500)
		for j := i; j < min(i+500, n); j++ {
			batch = append(batch, jobs.EnqueueParams{Text: fmt.Sprintf("job %d", j)})
		}
		_, err := st.EnqueueBatch(ctx, batch)
		must(err)
	}
	// The worker says when each job is settled, so the measurement costs
	// the database nothing.
	var settled atomic.Int64
	done := make(chan struct{})
	w := newWorker(st, eng, conc, func(e worker.JobEvent) {
		if e.Outcome == worker.OutcomeSucceeded && settled.Add(1) == int64(n) {
			close(done)
		}
	})
	start := time.Now()
	must(w.Start(ctx))
	select {
	case <-done:
	case <-time.After(5 * time.Minute):
		panic("e2e: timed out")
	}
	elapsed := time.Since(start)
	must(w.Stop(context.WithoutCancel(ctx)))
	return float64(n) / elapsed.Seconds()
}

// pickup measures enqueue → claim with an idle worker, enqueuing through
// the worker's own store handle (as serve's HTTP API will) and through a
// second handle (as `promptkit submit` in another process does).
func pickup(ctx context.Context, d db, eng *promptkit.Engine, samples int) (same, other []time.Duration) {
	st, reopen, cleanup, err := d.open(ctx)
	must(err)
	defer cleanup()
	second, err := reopen()
	must(err)
	defer second.Close()
	w := newWorker(st, eng, 4, nil)
	must(w.Start(ctx))
	defer func() { must(w.Stop(context.WithoutCancel(ctx))) }()
	one := func(via jobs.Store) time.Duration {
		e, err := via.Enqueue(ctx, jobs.EnqueueParams{Text: "pickup"})
		must(err)
		for {
			j, err := st.GetJob(ctx, "", e.JobID)
			must(err)
			if j.State == jobs.Succeeded {
				return j.ClaimedAt.Sub(j.CreatedAt)
			}
			time.Sleep(2 * time.Millisecond) // benchmark poll; the sample itself comes from the store's timestamps
		}
	}
	for i := 0; i < samples; i++ {
		same = append(same, one(st))
		other = append(other, one(second))
		if os.Getenv("E2E_DEBUG") != "" {
			fmt.Fprintln(os.Stderr, d.name, i, same[len(same)-1], other[len(other)-1])
		}
	}
	return same, other
}

func pct(ds []time.Duration, p int) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	i := (len(s)*p + 99) / 100
	return s[max(0, min(i-1, len(s)-1))].Round(100 * time.Microsecond)
}

func openSQLite(ctx context.Context) (jobs.Store, func() (jobs.Store, error), func(), error) {
	dir, err := os.MkdirTemp("", "promptkit-e2e-")
	if err != nil {
		return nil, nil, nil, err
	}
	path := filepath.Join(dir, "jobs.db")
	st, err := sqlitestore.Open(ctx, path, jobs.Options{})
	if err != nil {
		return nil, nil, nil, err
	}
	reopen := func() (jobs.Store, error) { return sqlitestore.Open(ctx, path, jobs.Options{}) }
	return st, reopen, func() { st.Close(); os.RemoveAll(dir) }, nil
}

func openPostgres(ctx context.Context) (jobs.Store, func() (jobs.Store, error), func(), error) {
	base := os.Getenv("PROMPTKIT_TEST_DATABASE_URL")
	var b [6]byte
	_, _ = rand.Read(b[:])
	schema := "e2e_" + hex.EncodeToString(b[:])
	conn, err := pgx.Connect(ctx, base)
	if err != nil {
		return nil, nil, nil, err
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "CREATE SCHEMA "+schema); err != nil {
		return nil, nil, nil, err
	}
	u, _ := url.Parse(base)
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	dsn := u.String()
	st, err := pgstore.Open(ctx, dsn, jobs.Options{})
	if err != nil {
		return nil, nil, nil, err
	}
	reopen := func() (jobs.Store, error) { return pgstore.Open(ctx, dsn, jobs.Options{}) }
	cleanup := func() {
		st.Close()
		if c, err := pgx.Connect(ctx, base); err == nil {
			_, _ = c.Exec(ctx, "DROP SCHEMA "+schema+" CASCADE")
			c.Close(ctx)
		}
	}
	return st, reopen, cleanup, nil
}

func must(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		os.Exit(1)
	}
}
