package pgstore_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/promptkit/promptkit/jobs"
)

// BenchmarkEnqueue measures one job per transaction, from 8 goroutines.
func BenchmarkEnqueue(b *testing.B) {
	s, _ := open(b, jobs.Options{})
	ctx := context.Background()
	b.SetParallelism(4) // 4 × GOMAXPROCS(2) = 8 producers
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := s.Enqueue(ctx, jobs.EnqueueParams{OrgID: "o", CreatedBy: "u", Text: "hello"}); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "jobs/s")
}

// BenchmarkEnqueueBatch measures batches of 100 jobs per transaction.
func BenchmarkEnqueueBatch(b *testing.B) {
	s, _ := open(b, jobs.Options{})
	ctx := context.Background()
	batch := make([]jobs.EnqueueParams, 100)
	for i := range batch {
		batch[i] = jobs.EnqueueParams{OrgID: "o", CreatedBy: "u", Text: "hello"}
	}
	for b.Loop() {
		if _, err := s.EnqueueBatch(ctx, batch); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N*len(batch))/b.Elapsed().Seconds(), "jobs/s")
}

// BenchmarkClaimSucceed measures claim-and-succeed cycles (claim batches
// of 10, one Succeed per job) with 1 and 8 workers.
func BenchmarkClaimSucceed(b *testing.B) {
	for _, workers := range []int{1, 8} {
		b.Run(fmt.Sprintf("workers=%d", workers), func(b *testing.B) { benchClaimSucceed(b, workers) })
	}
}

func benchClaimSucceed(b *testing.B, workers int) {
	s, _ := open(b, jobs.Options{})
	ctx := context.Background()
	n := b.N
	batch := make([]jobs.EnqueueParams, 0, 1000)
	for i := 0; i < n; i++ {
		batch = append(batch, jobs.EnqueueParams{OrgID: "o", Text: "t"})
		if len(batch) == cap(batch) || i == n-1 {
			if _, err := s.EnqueueBatch(ctx, batch); err != nil {
				b.Fatal(err)
			}
			batch = batch[:0]
		}
	}
	var done atomic.Int64
	b.ResetTimer()
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			name := fmt.Sprintf("w%d", w)
			for done.Load() < int64(n) {
				js, err := s.Claim(ctx, jobs.ClaimParams{Worker: name, Limit: 10})
				if err != nil {
					b.Error(err)
					return
				}
				if len(js) == 0 {
					return
				}
				for _, j := range js {
					if _, err := s.Succeed(ctx, jobs.SucceedParams{JobID: j.ID, Worker: name, Answer: jobs.Answer{Output: "ok"}}); err != nil {
						b.Error(err)
						return
					}
					done.Add(1)
				}
			}
		})
	}
	wg.Wait()
	b.ReportMetric(float64(n)/b.Elapsed().Seconds(), "jobs/s")
}
