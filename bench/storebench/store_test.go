// Package storebench benchmarks promptkit's job stores (jobs/sqlitestore
// and jobs/pgstore) with the same sub-benchmarks on each database, so one
// command measures both side by side:
//
//	cd bench && go test ./storebench -run '^$' -bench . -count 5 -timeout 60m
//
// PostgreSQL: PROMPTKIT_TEST_DATABASE_URL (default: the loopback test
// database); every benchmark invocation gets a fresh schema, dropped
// afterwards. SQLite: a fresh file in a temporary directory.
//
// Sub-benchmarks (ns/op is per job for the enqueue and cycle ones):
//
//	EnqueueSingle     one Enqueue (one prompt, one job, one transaction) per op
//	EnqueueBatch100   EnqueueBatch of 100 per 100 ops
//	Cycle1, Cycle8    claim-and-succeed cycles: 1 or 8 goroutines each
//	                  looping Claim(Limit 1) → Succeed over b.N queued jobs
//	ClaimLatency100k  one Claim(Limit 1) with 100,000 jobs queued (topped
//	                  up every 100 claims, outside the timer); reports the
//	                  p50 and p99 of the individual claims
package storebench

import (
	"cmp"
	"context"
	"fmt"
	"math/rand/v2"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/promptkit/promptkit/jobs"
)

func BenchmarkStore(b *testing.B) {
	b.Run("db=sqlite", func(b *testing.B) { Bench(b, openSQLite) })
	b.Run("db=postgres", func(b *testing.B) { Bench(b, openPostgres) })
}

// Bench runs every sub-benchmark against stores made by open (a fresh,
// empty store per call; the store is closed and removed by open's
// cleanup).
func Bench(b *testing.B, open func(b *testing.B) jobs.Store) {
	b.Run("EnqueueSingle", func(b *testing.B) {
		st := open(b)
		ctx := context.Background()
		p := noop()
		for b.Loop() {
			if _, err := st.Enqueue(ctx, p); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "jobs/s")
	})
	b.Run("EnqueueBatch100", func(b *testing.B) {
		st := open(b)
		ctx := context.Background()
		ps := make([]jobs.EnqueueParams, 100)
		for i := range ps {
			ps[i] = noop()
		}
		b.ResetTimer()
		for done := 0; done < b.N; done += 100 {
			if _, err := st.EnqueueBatch(ctx, ps[:min(100, b.N-done)]); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "jobs/s")
	})
	for _, workers := range []int{1, 8} {
		b.Run("Cycle"+strconv.Itoa(workers), func(b *testing.B) {
			st := open(b)
			ctx := context.Background()
			fill(b, st, b.N)
			var claimed atomic.Int64
			var wg sync.WaitGroup
			errs := make(chan error, workers)
			b.ResetTimer()
			for i := range workers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					w := "w" + strconv.Itoa(i)
					for claimed.Load() < int64(b.N) {
						js, err := st.Claim(ctx, jobs.ClaimParams{Worker: w, Limit: 1})
						if err != nil {
							errs <- err
							return
						}
						if len(js) == 0 {
							continue // the last jobs are being claimed elsewhere
						}
						claimed.Add(int64(len(js)))
						for _, j := range js {
							if _, err := st.Succeed(ctx, jobs.SucceedParams{JobID: j.ID, Worker: w, Answer: jobs.Answer{Output: "ok"}}); err != nil {
								errs <- err
								return
							}
						}
					}
				}()
			}
			wg.Wait()
			b.StopTimer()
			close(errs)
			if err := <-errs; err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "jobs/s")
		})
	}
	b.Run("ClaimLatency100k", func(b *testing.B) {
		st := open(b)
		ctx := context.Background()
		fill(b, st, 100_000)
		ps := make([]jobs.EnqueueParams, 100)
		for i := range ps {
			ps[i] = noop()
		}
		var lat []time.Duration
		for b.Loop() {
			t0 := time.Now()
			js, err := st.Claim(ctx, jobs.ClaimParams{Worker: "w", Limit: 1})
			lat = append(lat, time.Since(t0))
			if err != nil || len(js) != 1 {
				b.Fatalf("claim: %d jobs, %v", len(js), err)
			}
			if len(lat)%100 == 0 {
				b.StopTimer()
				if _, err := st.EnqueueBatch(ctx, ps); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
			}
		}
		slices.Sort(lat)
		b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
		b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
	})
}

func noop() jobs.EnqueueParams {
	return jobs.EnqueueParams{OrgID: "bench", CreatedBy: "bench", Text: "noop"}
}

// fill queues n no-op jobs, outside the timer.
func fill(b *testing.B, st jobs.Store, n int) {
	b.Helper()
	b.StopTimer()
	defer b.StartTimer()
	ps := make([]jobs.EnqueueParams, 1000)
	for i := range ps {
		ps[i] = noop()
	}
	for done := 0; done < n; done += len(ps) {
		if _, err := st.EnqueueBatch(context.Background(), ps[:min(len(ps), n-done)]); err != nil {
			b.Fatal(err)
		}
	}
}

func openSQLite(b *testing.B) jobs.Store {
	b.Helper()
	b.StopTimer()
	defer b.StartTimer()
	st, err := openSQLiteStore(context.Background(), filepath.Join(b.TempDir(), "jobs.db"))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { st.Close() })
	return st
}

func pgURL() string {
	return cmp.Or(os.Getenv("PROMPTKIT_TEST_DATABASE_URL"), "postgres://postgres@127.0.0.1:5432/test?sslmode=disable")
}

func openPostgres(b *testing.B) jobs.Store {
	b.Helper()
	b.StopTimer()
	defer b.StartTimer()
	ctx := context.Background()
	base := pgURL()
	conn, err := pgx.Connect(ctx, base)
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close(ctx)
	schema := fmt.Sprintf("sb_pk_%d_%08x", os.Getpid(), rand.Uint32())
	if _, err := conn.Exec(ctx, "CREATE SCHEMA "+schema); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		c, err := pgx.Connect(ctx, base)
		if err != nil {
			b.Error(err)
			return
		}
		defer c.Close(ctx)
		if _, err := c.Exec(ctx, "DROP SCHEMA IF EXISTS "+schema+" CASCADE"); err != nil {
			b.Error(err)
		}
	})
	u, err := url.Parse(base)
	if err != nil {
		b.Fatal(err)
	}
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	st, err := openPGStore(ctx, u.String())
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { st.Close() })
	return st
}
