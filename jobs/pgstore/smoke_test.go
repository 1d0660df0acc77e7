package pgstore_test

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/promptkit/promptkit/jobs"
	"github.com/promptkit/promptkit/pktype"
)

func TestSmokeLifecycle(t *testing.T) {
	ctx := context.Background()
	s, _ := open(t, jobs.Options{})
	e, err := s.Enqueue(ctx, jobs.EnqueueParams{OrgID: "o", CreatedBy: "u", Text: "hi"})
	if err != nil {
		t.Fatal(err)
	}
	got, err := s.Claim(ctx, jobs.ClaimParams{Worker: "w1", Limit: 5})
	if err != nil || len(got) != 1 || got[0].ID != e.JobID || got[0].State != jobs.Running {
		t.Fatalf("claim = %+v, %v", got, err)
	}
	_, err = s.Succeed(ctx, jobs.SucceedParams{JobID: e.JobID, Worker: "w2", Answer: jobs.Answer{Output: "x"}})
	if !errors.Is(err, jobs.ErrNotClaimed) {
		t.Fatalf("stale succeed: %v", err)
	}
	j, err := s.Succeed(ctx, jobs.SucceedParams{JobID: e.JobID, Worker: "w1", Answer: jobs.Answer{Output: "out",
		Usage: pktype.Usage{TokenUsage: pktype.TokenUsage{PromptTokens: 3}, Known: pktype.TokenUsagePresence{PromptTokens: true}}}})
	if err != nil || j.State != jobs.Succeeded || j.ResponseID != jobs.ResponseID(e.PromptID, e.JobID) {
		t.Fatalf("succeed = %+v, %v", j, err)
	}
	r, err := s.GetResponse(ctx, "o", j.ResponseID)
	if err != nil || r.Output != "out" || !r.Usage.Known.PromptTokens || r.Usage.Known.CompletionTokens {
		t.Fatalf("response = %+v, %v", r, err)
	}
	evs, err := s.JobEvents(ctx, "o", e.JobID)
	if err != nil || len(evs) != 3 || evs[0].To != jobs.Queued || evs[1].To != jobs.Running || evs[2].To != jobs.Succeeded {
		t.Fatalf("events = %+v, %v", evs, err)
	}
	nj, err := s.Retry(ctx, jobs.RetryParams{OrgID: "o", JobID: e.JobID})
	if err != nil || nj.Supersedes != e.JobID || nj.State != jobs.Queued {
		t.Fatalf("retry = %+v, %v", nj, err)
	}
	if _, err := s.Retry(ctx, jobs.RetryParams{OrgID: "o", JobID: e.JobID}); !errors.Is(err, jobs.ErrIllegalTransition) {
		t.Fatalf("retry superseded: %v", err)
	}
	ch, err := s.ChangesSince(ctx, jobs.ChangesParams{})
	if err != nil || len(ch.Jobs) != 2 {
		t.Fatalf("changes = %+v, %v", ch, err)
	}
	m, err := s.Metrics(ctx, jobs.MetricsParams{})
	if err != nil || m.Counts[jobs.Queued] != 1 || m.Counts[jobs.Superseded] != 1 || m.Finished != 0 {
		t.Fatalf("metrics = %+v, %v", m, err)
	}
}

func TestSmokeIdempotentConcurrent(t *testing.T) {
	ctx := context.Background()
	s, _ := open(t, jobs.Options{})
	var wg sync.WaitGroup
	res := make([]jobs.Enqueued, 8)
	for i := range res {
		wg.Go(func() {
			var err error
			res[i], err = s.Enqueue(ctx, jobs.EnqueueParams{OrgID: "o", Text: "t", IdempotencyKey: "k"})
			if err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	fresh := 0
	for _, r := range res {
		if r.JobID != res[0].JobID || r.PromptID != res[0].PromptID {
			t.Fatalf("different ids: %+v", res)
		}
		if !r.Existing {
			fresh++
		}
	}
	if fresh != 1 {
		t.Fatalf("%d fresh enqueues, want 1", fresh)
	}
}

// TestEnqueueBatchDuplicateKeys checks that two items of one batch with
// the same idempotency key yield one prompt and job.
func TestEnqueueBatchDuplicateKeys(t *testing.T) {
	ctx := context.Background()
	s, _ := open(t, jobs.Options{})
	got, err := s.EnqueueBatch(ctx, []jobs.EnqueueParams{
		{OrgID: "o", Text: "a", IdempotencyKey: "k"},
		{OrgID: "o", Text: "b"},
		{OrgID: "o", Text: "c", IdempotencyKey: "k"},
		{OrgID: "p", Text: "d", IdempotencyKey: "k"},
	})
	if err != nil {
		t.Fatal(err)
	}
	if got[0].Existing || !got[2].Existing || got[2].JobID != got[0].JobID || got[2].PromptID != got[0].PromptID {
		t.Fatalf("duplicate key in one batch: %+v", got)
	}
	if got[3].Existing || got[3].JobID == got[0].JobID {
		t.Fatalf("same key in another org: %+v", got)
	}
	page, err := s.ListJobs(ctx, jobs.ListParams{})
	if err != nil || len(page.Jobs) != 3 {
		t.Fatalf("ListJobs = %d jobs, %v; want 3", len(page.Jobs), err)
	}
}
