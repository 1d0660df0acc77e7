package frontdoor

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/promptkit/promptkit/jobs"
	"github.com/promptkit/promptkit/server/internal/auth"
	"github.com/promptkit/promptkit/server/internal/submit"
)

// slowBatchStore holds one in_progress batch whose every read costs
// cost (the count of a big batch's jobs), and notifies without pause.
type slowBatchStore struct {
	jobs.Store // nil: GetBatch only reads and notifies
	cost       time.Duration
	reads      atomic.Int32
}

func (s *slowBatchStore) GetBatch(ctx context.Context, org, id string) (jobs.Batch, error) {
	s.reads.Add(1)
	time.Sleep(s.cost) // the read's cost, not a synchronisation
	return jobs.Batch{ID: id, OrgID: org, CreatedBy: "u", Status: jobs.BatchInProgress}, nil
}

func (s *slowBatchStore) Notify(ctx context.Context) <-chan struct{} {
	ch := make(chan struct{})
	go func() {
		for {
			select {
			case ch <- struct{}{}:
			case <-ctx.Done():
				return
			}
		}
	}()
	return ch
}

// A ?wait= read of a batch that never ends, on a queue that notifies
// all the time, reads the batch about once per ten times a read costs,
// not back to back.
func TestWaitSpacesItsReads(t *testing.T) {
	const cost, wait = 20 * time.Millisecond, time.Second
	st := &slowBatchStore{cost: cost}
	a := &API{Store: st, Jobs: submit.Jobs{Store: st, Serving: context.Background()}, MaxWait: time.Minute}
	r := httptest.NewRequest(http.MethodGet, "/v1/batches/batch_1?wait=1s", nil)
	r.SetPathValue("id", "batch_1")
	r = r.WithContext(auth.With(r.Context(), auth.Identity{Org: "o", User: "u", Role: jobs.RoleMember}))
	start := time.Now()
	if err := a.GetBatch(httptest.NewRecorder(), r); err != nil {
		t.Fatal(err)
	}
	took := time.Since(start)
	// Back to back, a second of reads costing 20 ms each would be about
	// 50; spaced, about 5 (each read and the pause after it: 200 ms).
	n := int(st.reads.Load())
	if max := int(took/(10*cost)) + 3; n < 2 || n > max {
		t.Fatalf("%d reads in %v, want 2 to %d", n, took.Round(time.Millisecond), max)
	}
}
