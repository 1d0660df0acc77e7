package sqlitestore_test

import (
	"path/filepath"
	"strconv"
	"sync/atomic"
	"testing"

	"github.com/promptkit/promptkit/jobs"
	"github.com/promptkit/promptkit/jobs/sqlitestore"
)

func benchStore(b *testing.B) *sqlitestore.Store {
	b.Helper()
	s, err := sqlitestore.Open(b.Context(), filepath.Join(b.TempDir(), "jobs.db"), jobs.Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	return s
}

// One caller: one transaction per Enqueue.
func BenchmarkEnqueue(b *testing.B) {
	s := benchStore(b)
	for b.Loop() {
		if _, err := s.Enqueue(b.Context(), jobs.EnqueueParams{Text: "x"}); err != nil {
			b.Fatal(err)
		}
	}
}

// Many callers: group commit shares transactions between them.
func BenchmarkEnqueueParallel(b *testing.B) {
	s := benchStore(b)
	b.SetParallelism(8)
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := s.Enqueue(b.Context(), jobs.EnqueueParams{Text: "x"}); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

// Batches of 100; the reported ns/op is per job.
func BenchmarkEnqueueBatch(b *testing.B) {
	s := benchStore(b)
	const size = 100
	ps := make([]jobs.EnqueueParams, size)
	for i := range ps {
		ps[i] = jobs.EnqueueParams{Text: "x"}
	}
	n := 0
	for b.Loop() {
		if n%size == 0 {
			if _, err := s.EnqueueBatch(b.Context(), ps); err != nil {
				b.Fatal(err)
			}
		}
		n++
	}
}

// Claim one job and succeed it, 8 workers.
func BenchmarkClaimSucceed(b *testing.B) {
	s := benchStore(b)
	ps := make([]jobs.EnqueueParams, 500)
	for i := range ps {
		ps[i] = jobs.EnqueueParams{Text: "x"}
	}
	for queued := 0; queued < b.N; queued += len(ps) {
		if _, err := s.EnqueueBatch(b.Context(), ps); err != nil {
			b.Fatal(err)
		}
	}
	var w atomic.Int64
	b.SetParallelism(8)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		worker := "w" + strconv.FormatInt(w.Add(1), 10)
		for pb.Next() {
			got, err := s.Claim(b.Context(), jobs.ClaimParams{Worker: worker})
			if err != nil || len(got) != 1 {
				b.Errorf("Claim = %d jobs, %v", len(got), err)
				return
			}
			if _, err := s.Succeed(b.Context(), jobs.SucceedParams{JobID: got[0].ID, Worker: worker, Answer: jobs.Answer{Output: "ok"}}); err != nil {
				b.Error(err)
				return
			}
		}
	})
}
