package storekit_test

import (
	"context"
	"strings"
	"sync"
	"testing"

	"go.uber.org/goleak"

	"github.com/promptkit/promptkit/internal/testkit/storekit"
	"github.com/promptkit/promptkit/jobs"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// Each gives every kind a fresh database; a second store opened on it
// sees the first one's writes, and Responses counts the response rows
// straight from the table.
func TestEachDatabase(t *testing.T) {
	var mu sync.Mutex
	ran := map[storekit.Kind]bool{}
	t.Cleanup(func() {
		if !ran[storekit.SQLite] {
			t.Error("Each did not run on SQLite")
		}
	})
	storekit.Each(t, func(t *testing.T, db storekit.DB) {
		mu.Lock()
		ran[db.Kind] = true
		mu.Unlock()
		ctx := t.Context()
		st := db.Open(t, jobs.Options{})
		if n, err := st.Metrics(ctx, jobs.MetricsParams{}); err != nil || n.Counts[jobs.Queued] != 0 {
			t.Fatalf("a fresh database holds jobs: %v %v", n.Counts, err)
		}
		e, err := st.Enqueue(ctx, jobs.EnqueueParams{OrgID: "org", CreatedBy: "kit", Text: "x"})
		if err != nil {
			t.Fatal(err)
		}
		other, err := db.Kind.Open(ctx, db.DSN, jobs.Options{})
		if err != nil {
			t.Fatal(err)
		}
		defer other.Close()
		if js, err := other.Claim(ctx, jobs.ClaimParams{Worker: "w", Limit: 1}); err != nil || len(js) != 1 || js[0].ID != e.JobID {
			t.Fatalf("the second store claimed %v, %v", js, err)
		}
		if n, err := db.Responses(ctx); err != nil || len(n) != 0 {
			t.Fatalf("responses before Succeed: %v, %v", n, err)
		}
		if _, err := other.Succeed(ctx, jobs.SucceedParams{JobID: e.JobID, Worker: "w", Answer: jobs.Answer{Output: "out", Model: "m"}}); err != nil {
			t.Fatal(err)
		}
		if n, err := db.Responses(ctx); err != nil || len(n) != 1 || n[e.JobID] != 1 {
			t.Fatalf("responses after Succeed: %v, %v", n, err)
		}
	})
}

func TestCounting(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := storekit.Count(storekit.SQLite.New(t).Open(t, jobs.Options{}))
	e, err := st.Enqueue(ctx, jobs.EnqueueParams{OrgID: "org", CreatedBy: "kit", Text: "x"})
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			if _, err := st.GetPrompt(ctx, "", e.PromptID); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if _, err := st.GetPrompts(ctx, "", []string{e.PromptID}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.GetJob(ctx, "", e.JobID); err != nil {
		t.Fatal(err)
	}
	if st.Calls("GetPrompt") != 4 || st.Calls("GetPrompts") != 1 || st.Calls("Thread") != 0 {
		t.Fatalf("GetPrompt %d, GetPrompts %d, Thread %d; want 4, 1, 0", st.Calls("GetPrompt"), st.Calls("GetPrompts"), st.Calls("Thread"))
	}
	if n := st.Take(); len(n) != 3 || n["GetPrompt"] != 4 || n["GetPrompts"] != 1 || n["GetJob"] != 1 {
		t.Fatalf("Take = %v", n)
	}
	if n := st.Take(); len(n) != 0 || st.Calls("GetPrompt") != 0 {
		t.Fatalf("after Take: %v", n)
	}
	defer func() {
		if r := recover(); r == nil || !strings.Contains(r.(string), "does not count Enqueue") {
			t.Fatalf("Calls of an uncounted method: recovered %v, want a panic naming it", r)
		}
	}()
	st.Calls("Enqueue")
}
