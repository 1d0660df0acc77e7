package frontdoor

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/promptkit/promptkit/internal/testkit"
	"github.com/promptkit/promptkit/jobs"
	"github.com/promptkit/promptkit/server/internal/auth"
	"github.com/promptkit/promptkit/server/internal/submit"
)

// slowBatchStore holds one in_progress batch whose every read costs
// cost on the clock (the count of a big batch's jobs).
type slowBatchStore struct {
	jobs.Store // nil: GetBatch only reads
	clock      *testkit.Clock
	cost       time.Duration
	reads      int
}

func (s *slowBatchStore) GetBatch(ctx context.Context, org, id string) (jobs.Batch, error) {
	s.reads++
	s.clock.Advance(s.cost)
	return jobs.Batch{ID: id, OrgID: org, CreatedBy: "u", Status: jobs.BatchInProgress}, nil
}

// busyNotifier notifies without pause.
type busyNotifier struct {
	jobs.Notifier // nil: only Notify is called
}

func (busyNotifier) Notify(ctx context.Context) <-chan struct{} {
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
// all the time, pauses lookSpacing times a read's cost after each read,
// instead of reading back to back; the wait's end cuts the pause short.
func TestWaitSpacesItsReads(t *testing.T) {
	const cost = 20 * time.Millisecond
	clock := testkit.NewClock(time.Unix(1_000_000, 0))
	st := &slowBatchStore{clock: clock, cost: cost}
	serving, closeServer := context.WithCancel(context.Background())
	defer closeServer()
	clock.OnWait(func(ctx context.Context, d time.Duration) error {
		if len(clock.Waits()) == 3 {
			closeServer() // the server closes: the wait ends, after a last look
		}
		return nil
	})
	a := &API{Store: st, Notifier: busyNotifier{}, Jobs: submit.Jobs{Store: st, Serving: serving}, MaxWait: time.Minute,
		Now: clock.Now, Wait: clock.Wait}
	r := httptest.NewRequest(http.MethodGet, "/v1/batches/batch_1?wait=60s", nil)
	r.SetPathValue("id", "batch_1")
	r = r.WithContext(auth.With(r.Context(), auth.Identity{Org: "o", User: "u", Role: jobs.RoleMember}))
	if err := a.GetBatch(httptest.NewRecorder(), r); err != nil {
		t.Fatal(err)
	}
	waits := clock.Waits()
	if len(waits) < 3 || st.reads != len(waits) {
		t.Fatalf("%d reads, waits %v: want a pause after every read", st.reads, waits)
	}
	for _, w := range waits {
		if w != lookSpacing*cost {
			t.Fatalf("waits %v, want each %v", waits, lookSpacing*cost)
		}
	}
}
