package jobstest

import (
	"fmt"
	"testing"

	"github.com/promptkit/promptkit/jobs"
)

// A large keyed batch, the shape the batch processor sends (keys
// batch/<id>/<line>): keys stored by earlier calls return those calls'
// IDs, an expired key gets a new prompt, a repeat within the batch gets
// the first item's IDs, and every new job has its queued event. Sent
// again, the batch returns the same IDs and stores nothing. A bad item or
// an idempotency conflict anywhere in such a batch stores nothing of it.
func testEnqueueBatchLargeKeyed(t *testing.T, h Harness) {
	f := setup(t, h)
	const n, distinct = 600, 550 // items 550… repeat items 0…
	key := func(batch string, i int) string { return fmt.Sprintf("batch/%s/%d", batch, i%distinct) }
	item := func(batch string, i int) jobs.EnqueueParams {
		p := jobs.EnqueueParams{OrgID: "org-a", CreatedBy: "u", Text: fmt.Sprintf("line %d", i%distinct),
			IdempotencyKey: key(batch, i), RequestHash: fmt.Sprintf("h%d", i%distinct)}
		if i%distinct == 10 {
			p.KeyExpires = true
		}
		return p
	}
	// Line 10's key expired (its job failed); lines 0…9 were stored before.
	expired := f.enqueue(item("b1", 10))
	f.finishAs(expired.JobID, jobs.Failed)
	var earlier []jobs.Enqueued
	for i := range 10 {
		earlier = append(earlier, f.enqueue(item("b1", i)))
	}
	jobsBefore, eventsBefore := f.storedCounts()

	ps := make([]jobs.EnqueueParams, n)
	for i := range ps {
		ps[i] = item("b1", i)
	}
	got, err := f.store.EnqueueBatch(f.ctx, ps)
	if err != nil {
		t.Fatalf("EnqueueBatch: %v", err)
	}
	if len(got) != n {
		t.Fatalf("EnqueueBatch returned %d results for %d", len(got), n)
	}
	fresh := 0
	for i, e := range got {
		switch {
		case i >= distinct:
			if first := got[i-distinct]; !e.Existing || e.PromptID != first.PromptID || e.JobID != first.JobID {
				t.Errorf("item %d (a repeat of item %d) = %+v, want %+v", i, i-distinct, e, first)
			}
		case i < 10:
			if !e.Existing || e.PromptID != earlier[i].PromptID || e.JobID != earlier[i].JobID {
				t.Errorf("item %d (key stored earlier) = %+v, want %+v", i, e, earlier[i])
			}
		default:
			if e.Existing || e.State != jobs.Queued || e.PromptID == expired.PromptID {
				t.Errorf("item %d = %+v, want a new queued job", i, e)
			}
			fresh++
		}
	}
	for _, i := range []int{10, 11, 300, distinct - 1} {
		p, err := f.store.GetPrompt(f.ctx, "", got[i].PromptID)
		if err != nil || p.Text != ps[i].Text || p.IdempotencyKey != ps[i].IdempotencyKey {
			t.Errorf("item %d's prompt = %q, key %q, %v; want %q, %q", i, p.Text, p.IdempotencyKey, err, ps[i].Text, ps[i].IdempotencyKey)
		}
		f.expectTransition(got[i].JobID, "", jobs.Queued)
	}
	jobsAfter, eventsAfter := f.storedCounts()
	if jobsAfter != jobsBefore+fresh || eventsAfter != eventsBefore+fresh {
		t.Errorf("jobs %d → %d, events %d → %d; want %d more of each", jobsBefore, jobsAfter, eventsBefore, eventsAfter, fresh)
	}

	// Sent again: the same IDs, nothing stored.
	again, err := f.store.EnqueueBatch(f.ctx, ps)
	if err != nil {
		t.Fatalf("EnqueueBatch again: %v", err)
	}
	for i, e := range again {
		if !e.Existing || e.PromptID != got[i].PromptID || e.JobID != got[i].JobID {
			t.Errorf("item %d sent again = %+v, want %+v", i, e, got[i])
		}
	}
	if j, ev := f.storedCounts(); j != jobsAfter || ev != eventsAfter {
		t.Errorf("the repeated batch stored jobs %d → %d, events %d → %d", jobsAfter, j, eventsAfter, ev)
	}

	// All or nothing: one bad item, or one conflicting key, among new keys.
	for name, c := range map[string]struct {
		bad  func(p *jobs.EnqueueParams)
		want error
	}{
		"unknown depends_on": {func(p *jobs.EnqueueParams) { p.DependsOn = jobs.NewID() }, jobs.ErrInvalid},
		"unknown parent":     {func(p *jobs.EnqueueParams) { p.ParentID = jobs.NewID() }, jobs.ErrInvalid},
		"conflicting key": {func(p *jobs.EnqueueParams) {
			p.IdempotencyKey, p.RequestHash = key("b1", 5), "another request"
		}, jobs.ErrIdempotencyConflict},
	} {
		batch := make([]jobs.EnqueueParams, n)
		for i := range batch {
			batch[i] = item("b2", i)
		}
		c.bad(&batch[n/2-1])
		_, err := f.store.EnqueueBatch(f.ctx, batch)
		wantErr(t, err, c.want, "a large keyed EnqueueBatch with "+name)
		if j, ev := f.storedCounts(); j != jobsAfter || ev != eventsAfter {
			t.Errorf("a batch with %s stored jobs %d → %d, events %d → %d", name, jobsAfter, j, eventsAfter, ev)
		}
	}
	if e := f.enqueue(item("b2", 0)); e.Existing {
		t.Errorf("a key of the failed batches = %+v, want a new prompt: a failed batch stored its keys", e)
	}
}
