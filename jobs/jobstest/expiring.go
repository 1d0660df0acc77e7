package jobstest

import (
	"sync"
	"testing"
	"time"

	"github.com/promptkit/promptkit/jobs"
)

// An expiring key (KeyExpires) holds while its prompt has a job queued
// or running, or one that succeeded less than KeyGrace ago on the store's
// clock; past that, or at once after a job that failed or was cancelled,
// a call takes the key from the old prompt and stores a new one under it.
// A key without KeyExpires never lapses.
func testExpiringKey(t *testing.T, h Harness) {
	f := setup(t, h)
	const grace = 5 * time.Minute
	exp := func(org, key string, g time.Duration) jobs.EnqueueParams {
		return jobs.EnqueueParams{OrgID: org, Text: "same", IdempotencyKey: key, RequestHash: "h", KeyExpires: true, KeyGrace: g}
	}
	first := f.enqueue(exp("org-a", "k", grace))
	if first.Existing {
		t.Fatalf("first call = %+v", first)
	}
	// Queued, then running however long it runs: the same prompt.
	if r := f.enqueue(exp("org-a", "k", grace)); r.PromptID != first.PromptID || r.JobID != first.JobID || !r.Existing || r.State != jobs.Queued {
		t.Errorf("repeat while queued = %+v, want %+v", r, first)
	}
	j := f.claimID("w", first.JobID)
	f.advance(24 * time.Hour)
	if r := f.enqueue(exp("org-a", "k", grace)); r.JobID != first.JobID || !r.Existing || r.State != jobs.Running {
		t.Errorf("repeat while running = %+v", r)
	}
	// Another org's key of the same name is another key.
	other := f.enqueue(exp("org-b", "k", grace))
	if other.Existing {
		t.Errorf("same key in another org = %+v", other)
	}
	f.finishAs(other.JobID, jobs.Succeeded) // out of the way of the claims below
	if _, err := f.store.Succeed(f.ctx, jobs.SucceedParams{JobID: j.ID, Worker: "w", Answer: jobs.Answer{Output: "answer"}}); err != nil {
		t.Fatal(err)
	}
	// Finished: held up to (not at) grace after finished_at.
	f.advance(grace - time.Microsecond)
	if r := f.enqueue(exp("org-a", "k", grace)); r.JobID != first.JobID || !r.Existing || r.State != jobs.Succeeded {
		t.Errorf("repeat within the grace = %+v", r)
	}
	// A call whose grace is shorter sees the key expired already.
	jobsBefore, _ := f.storedCounts()
	f.advance(time.Microsecond)
	second := f.enqueue(exp("org-a", "k", grace))
	if second.Existing || second.PromptID == first.PromptID || second.State != jobs.Queued {
		t.Fatalf("call after the grace = %+v, want a new prompt", second)
	}
	if n, _ := f.storedCounts(); n != jobsBefore+1 {
		t.Errorf("jobs %d → %d, want one more", jobsBefore, n)
	}
	old, err := f.store.GetPrompt(f.ctx, "", first.PromptID)
	if err != nil || old.IdempotencyKey != "" || f.job(first.JobID).State != jobs.Succeeded {
		t.Errorf("the old prompt: key %q, %v; its job must be untouched", old.IdempotencyKey, err)
	}
	if p, _ := f.store.GetPrompt(f.ctx, "", second.PromptID); p.IdempotencyKey != "k" {
		t.Errorf("the new prompt's key = %q", p.IdempotencyKey)
	}
	if r := f.enqueue(exp("org-a", "k", grace)); r.PromptID != second.PromptID || !r.Existing {
		t.Errorf("repeat of the new prompt = %+v", r)
	}
	// The same key without KeyExpires, as a caller's own key, holds
	// however long ago the prompt finished; a hash that differs conflicts.
	f.finishAs(second.JobID, jobs.Failed)
	f.advance(24 * time.Hour)
	if r := f.enqueue(jobs.EnqueueParams{OrgID: "org-a", Text: "same", IdempotencyKey: "k", RequestHash: "h"}); r.PromptID != second.PromptID || !r.Existing {
		t.Errorf("a key that does not expire = %+v, want %s", r, second.PromptID)
	}
	// A retry of the prompt queues a job again: the key holds again.
	retried, err := f.store.Retry(f.ctx, jobs.RetryParams{JobID: second.JobID})
	if err != nil {
		t.Fatal(err)
	}
	if r := f.enqueue(exp("org-a", "k", grace)); r.PromptID != second.PromptID || !r.Existing {
		t.Errorf("repeat after a retry = %+v", r)
	}
	p := exp("org-a", "k", grace)
	p.RequestHash = "other"
	_, err = f.store.Enqueue(f.ctx, p)
	wantErr(t, err, jobs.ErrIdempotencyConflict, "an expiring key with another hash")

	// Grace 0: only while a job is queued or running.
	f.finishAs(retried.ID, jobs.Cancelled)
	third := f.enqueue(exp("org-a", "k", 0))
	if third.Existing || third.PromptID == second.PromptID {
		t.Errorf("grace 0 after the job ended = %+v, want a new prompt", third)
	}
	if r := f.enqueue(exp("org-a", "k", 0)); r.PromptID != third.PromptID || !r.Existing {
		t.Errorf("grace 0 while queued = %+v", r)
	}

	// A job that failed releases the key at once, within the grace: a
	// retry after a failure asks for another try. In one batch, a repeat
	// of the released key gets the new prompt.
	f.finishAs(third.JobID, jobs.Failed)
	got, err := f.store.EnqueueBatch(f.ctx, []jobs.EnqueueParams{exp("org-a", "k", grace), exp("org-a", "k", grace), exp("org-a", "k2", grace)})
	if err != nil {
		t.Fatal(err)
	}
	if got[0].Existing || got[0].PromptID == third.PromptID || !got[1].Existing || got[1].PromptID != got[0].PromptID || got[2].Existing {
		t.Errorf("batch = %+v", got)
	}

	// A fresh key is taken whatever its holder does, even while its job is
	// queued: the call is a new request, never a repeat; a later call
	// that is a repeat finds the newest.
	fresh := func() jobs.EnqueueParams {
		p := exp("org-a", "f", grace)
		p.KeyFresh = true
		return p
	}
	s1 := f.enqueue(fresh())
	s2 := f.enqueue(fresh())
	if s1.Existing || s2.Existing || s1.PromptID == s2.PromptID || s1.JobID == s2.JobID {
		t.Errorf("two fresh calls with one key = %+v and %+v, want two prompts", s1, s2)
	}
	if r := f.enqueue(exp("org-a", "f", grace)); r.PromptID != s2.PromptID || !r.Existing {
		t.Errorf("a repeat after two fresh calls = %+v, want the second %s", r, s2.PromptID)
	}
	if p, _ := f.store.GetPrompt(f.ctx, "", s1.PromptID); p.IdempotencyKey != "" || f.job(s1.JobID).State != jobs.Queued {
		t.Errorf("the first fresh call's prompt: key %q; its job must go on", p.IdempotencyKey)
	}

	for _, bad := range []jobs.EnqueueParams{
		{OrgID: "org-a", Text: "x", KeyExpires: true},
		{OrgID: "org-a", Text: "x", IdempotencyKey: "k", KeyFresh: true},
		{OrgID: "org-a", Text: "x", IdempotencyKey: "k", KeyExpires: true, KeyGrace: -time.Second},
		{OrgID: "org-a", Text: "x", IdempotencyKey: "k", KeyGrace: time.Second},
	} {
		_, err := f.store.Enqueue(f.ctx, bad)
		wantErr(t, err, jobs.ErrInvalid, "an invalid expiring key")
	}
}

// Concurrent calls with one expired key store one new prompt between
// them, and the others get its IDs: on one store (whose calls may share
// a transaction) and on two stores of the database (which cannot).
func testExpiringKeyConcurrent(t *testing.T, h Harness) {
	f := setup(t, h)
	second, err := h.Open(f.ctx, f.dsn, jobs.Options{Now: f.clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = second.Close() })
	stores := []jobs.Store{f.store, second}
	p := jobs.EnqueueParams{OrgID: "org-a", CreatedBy: "u", Text: "same", IdempotencyKey: "k", RequestHash: "h",
		KeyExpires: true, KeyGrace: time.Minute}
	first := f.enqueue(p)
	f.finishAs(first.JobID, jobs.Succeeded)
	f.advance(time.Minute)
	const n = 8
	out := make([]jobs.Enqueued, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { out[i], errs[i] = stores[i%2].Enqueue(f.ctx, p) })
	}
	wg.Wait()
	fresh := 0
	for i := range n {
		if errs[i] != nil {
			t.Fatalf("call %d: %v", i, errs[i])
		}
		if out[i].PromptID == first.PromptID || out[i].PromptID != out[0].PromptID || out[i].JobID != out[0].JobID {
			t.Errorf("call %d = %+v, want the one new prompt %s", i, out[i], out[0].PromptID)
		}
		if !out[i].Existing {
			fresh++
		}
	}
	if fresh != 1 {
		t.Errorf("%d calls stored a prompt, want 1", fresh)
	}
	if stored, _ := f.storedCounts(); stored != 2 {
		t.Errorf("%d jobs stored, want 2", stored)
	}
}

// finishAs claims the queued job id and ends it in state (succeeded,
// failed or cancelled), at the clock's time.
func (f *fixture) finishAs(id string, state jobs.State) {
	f.t.Helper()
	f.claimID("w", id)
	var err error
	switch state {
	case jobs.Succeeded:
		_, err = f.store.Succeed(f.ctx, jobs.SucceedParams{JobID: id, Worker: "w", Answer: jobs.Answer{Output: "answer"}})
	case jobs.Failed:
		_, err = f.store.Fail(f.ctx, jobs.FailParams{JobID: id, Worker: "w", Kind: jobs.KindProvider5xx, Message: "HTTP 503"})
	case jobs.Cancelled:
		_, err = f.store.Cancel(f.ctx, jobs.CancelParams{JobID: id})
	default:
		f.t.Fatalf("finishAs %s", state)
	}
	if err != nil {
		f.t.Fatal(err)
	}
}
