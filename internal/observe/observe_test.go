package observe

import (
	"context"
	"testing"
	"time"

	"github.com/promptkit/promptkit/internal/llm"
)

func TestTotalsCountDispatchedOnly(t *testing.T) {
	t.Parallel()
	r := New(func() time.Time { return time.Unix(100, 0) }, nil)
	u := llm.Usage{PromptTokens: 3, CompletionTokens: 2, TotalTokens: 5}
	r.RecordAttempt(Attempt{Generation: 1, Attempt: 1, CapacityWait: time.Second}) // canceled before dispatch
	r.RecordAttempt(Attempt{Generation: 1, Attempt: 2, Dispatched: true, Duration: 2 * time.Second, Usage: u})
	r.RecordAttempt(Attempt{Generation: 2, Attempt: 1, Dispatched: true, Duration: time.Second, Usage: u})
	r.RecordAttempt(Attempt{Generation: 2, Attempt: 2, Dispatched: true, Duration: time.Second})
	r.RecordAttempt(Attempt{Generation: 3, Attempt: 1}) // a repair that never dispatched
	got := r.Totals()
	want := Totals{
		Attempts:         3,
		TransientRetries: 2,
		RepairCalls:      1,
		Usage:            llm.Usage{PromptTokens: 6, CompletionTokens: 4, TotalTokens: 10},
		CapacityWait:     time.Second,
		Generation:       4 * time.Second,
	}
	if got != want {
		t.Fatalf("totals = %+v, want %+v", got, want)
	}
}

func TestRunIDsAndContext(t *testing.T) {
	t.Parallel()
	a, b := New(time.Now, nil), New(time.Now, nil)
	if a.RunID() == "" || a.RunID() == b.RunID() {
		t.Fatalf("run IDs %q %q", a.RunID(), b.RunID())
	}
	if FromContext(context.Background()) != nil {
		t.Fatal("recorder from an empty context")
	}
	if FromContext(NewContext(context.Background(), a)) != a {
		t.Fatal("context does not carry the recorder")
	}
	var none *Recorder
	none.RecordAttempt(Attempt{Dispatched: true}) // must not panic
}
