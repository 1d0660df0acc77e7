package batch

import (
	"context"
	"testing"
	"time"

	"github.com/promptkit/promptkit/jobs"
)

// countingStore has one in_progress batch with a line still running and
// counts its jobs at a cost of cost on the processor's clock.
type countingStore struct {
	jobs.Store // nil: the processor calls only what is below
	now        time.Time
	cost       time.Duration
	counts     int
}

func (s *countingStore) ActiveBatches(context.Context) ([]jobs.Batch, error) {
	return []jobs.Batch{{ID: "batch_1", Status: jobs.BatchInProgress, ExpiresAt: s.now.Add(24 * time.Hour)}}, nil
}

func (s *countingStore) BatchProgress(context.Context, string) (jobs.BatchProgress, error) {
	s.counts++
	s.now = s.now.Add(s.cost)
	return jobs.BatchProgress{Lines: 2, Succeeded: 1, Unfinished: 1}, nil
}

// The stepping loop counts a batch's jobs again only after lookSpacing
// times the last count's duration; Step counts every time; a count that
// costs nothing (a small batch) is made at every step.
func TestCountsAreSpacedByTheirCost(t *testing.T) {
	st := &countingStore{now: time.Unix(1_000_000, 0), cost: time.Second}
	p, err := New(Config{Store: st, Now: func() time.Time { return st.now },
		Codec: unusedCodec{}, Resolve: func(string) (jobs.Target, bool) { return jobs.Target{}, false }})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	stepWant := func(spaced bool, want int) {
		t.Helper()
		if err := p.step(ctx, spaced); err != nil {
			t.Fatal(err)
		}
		if st.counts != want {
			t.Fatalf("%d counts, want %d", st.counts, want)
		}
	}
	stepWant(true, 1) // the first look counts; it took 1 s
	stepWant(true, 1)
	st.now = st.now.Add(lookSpacing*time.Second - time.Millisecond)
	stepWant(true, 1)
	st.now = st.now.Add(time.Millisecond)
	stepWant(true, 2)
	stepWant(false, 3) // Step: always
	st.cost = 0
	st.now = st.now.Add(lookSpacing * time.Second)
	stepWant(true, 4)
	stepWant(true, 5)
	stepWant(true, 6)
}

// unusedCodec is the Codec of a test that reads and writes no line (an
// internal test cannot import internal/openaiapi, which imports this
// package): calling it panics.
type unusedCodec struct{ Codec }
