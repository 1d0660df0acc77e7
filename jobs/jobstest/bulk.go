package jobstest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/promptkit/promptkit/jobs"
)

// The bulk actions (jobs.CancelMatching, jobs.RetryMatching) run on any
// store through its Cancel, Retry, ListJobs and CountJobs: the suite runs
// them on each to prove those carry them.

// bulkJob enqueues a job of org at priority and drives it into state
// (queued, running, succeeded, failed or cancelled), one clock second
// after the previous one. Only one job may be queued at a time when a
// state that claims is asked for (see jobIn).
func (f *fixture) bulkJob(org string, state jobs.State) string {
	f.t.Helper()
	f.advance(time.Second)
	id := f.enqueue(jobs.EnqueueParams{OrgID: org}).JobID
	var err error
	switch state {
	case jobs.Queued:
	case jobs.Cancelled:
		_, err = f.store.Cancel(f.ctx, jobs.CancelParams{JobID: id})
	default:
		f.claimID("w-"+id, id)
		switch state {
		case jobs.Running:
		case jobs.Succeeded:
			_, err = f.store.Succeed(f.ctx, jobs.SucceedParams{JobID: id, Worker: "w-" + id, Answer: jobs.Answer{Output: "x"}})
		case jobs.Failed:
			_, err = f.store.Fail(f.ctx, jobs.FailParams{JobID: id, Worker: "w-" + id, Kind: jobs.KindProvider4xx, Message: "no"})
		default:
			f.t.Fatalf("bulkJob: state %s", state)
		}
	}
	if err != nil {
		f.t.Fatalf("bulkJob %s: %v", state, err)
	}
	return id
}

// expectBulk compares a bulk result, but for its ID, which must be set.
func expectBulk(t *testing.T, what string, got jobs.BulkResult, err error, want jobs.BulkResult) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	if got.ID == "" {
		t.Errorf("%s: no bulk ID", what)
	}
	want.ID = got.ID
	if got != want {
		t.Errorf("%s: %+v, want %+v", what, got, want)
	}
}

// A bulk cancel counts the queued and running jobs it would cancel, then
// cancels exactly those, each with an event naming who asked and the
// action; a filter naming a terminal state is refused.
func testBulkCancel(t *testing.T, h Harness) {
	f := setup(t, h)
	// Claiming states first: bulkJob claims the only queued job.
	r1 := f.bulkJob("org-a", jobs.Running)
	s1 := f.bulkJob("org-a", jobs.Succeeded)
	q1 := f.bulkJob("org-a", jobs.Queued)
	q2 := f.bulkJob("org-a", jobs.Queued)
	other := f.bulkJob("org-b", jobs.Queued)
	a := jobs.JobFilter{OrgID: "org-a"}

	for _, c := range []struct {
		f    jobs.JobFilter
		want int
	}{{a, 3}, {jobs.JobFilter{OrgID: "org-a", State: jobs.Queued}, 2}, {jobs.JobFilter{OrgID: "org-a", State: jobs.Running}, 1}, {jobs.JobFilter{}, 4}} {
		if n, err := jobs.CountCancellable(f.ctx, f.store, c.f); err != nil || n != c.want {
			t.Errorf("CountCancellable(%+v) = %d, %v; want %d", c.f, n, err, c.want)
		}
	}
	for _, st := range []jobs.State{jobs.Succeeded, jobs.Failed, jobs.Cancelled, jobs.Superseded} {
		bad := jobs.JobFilter{OrgID: "org-a", State: st}
		if _, err := jobs.CountCancellable(f.ctx, f.store, bad); !errors.Is(err, jobs.ErrInvalid) {
			t.Errorf("CountCancellable of %s jobs: %v, want ErrInvalid", st, err)
		}
		if _, err := jobs.CancelMatching(f.ctx, f.store, jobs.BulkParams{Filter: bad}); !errors.Is(err, jobs.ErrInvalid) {
			t.Errorf("CancelMatching of %s jobs: %v, want ErrInvalid", st, err)
		}
	}
	if _, err := jobs.CancelMatching(f.ctx, f.store, jobs.BulkParams{Filter: a, By: string(make([]byte, jobs.MaxActor+1))}); !errors.Is(err, jobs.ErrInvalid) {
		t.Errorf("CancelMatching with a By too long: %v, want ErrInvalid", err)
	}
	for _, id := range []string{r1, q1, q2} {
		if st := f.job(id).State; st == jobs.Cancelled {
			t.Fatalf("a refused bulk cancel cancelled %s", id)
		}
	}

	res, err := jobs.CancelMatching(f.ctx, f.store, jobs.BulkParams{Filter: a, By: "cli:alice"})
	expectBulk(t, "CancelMatching", res, err, jobs.BulkResult{Matched: 3, Done: 3})
	f.expectTransition(r1, jobs.Running, jobs.Cancelled)
	for _, id := range []string{q1, q2} {
		f.expectTransition(id, jobs.Queued, jobs.Cancelled)
	}
	for _, id := range []string{r1, q1, q2} {
		f.expectData(f.lastTransition(id), jobs.TransitionData{By: "cli:alice", Bulk: res.ID}, "bulk cancel event of "+id)
	}
	if f.job(s1).State != jobs.Succeeded || f.job(other).State != jobs.Queued {
		t.Errorf("bulk cancel of org-a changed a job it does not match: %s, %s", f.job(s1).State, f.job(other).State)
	}
	if n, err := jobs.CountCancellable(f.ctx, f.store, a); err != nil || n != 0 {
		t.Errorf("CountCancellable after = %d, %v", n, err)
	}
	again, err := jobs.CancelMatching(f.ctx, f.store, jobs.BulkParams{Filter: a, By: "cli:alice"})
	expectBulk(t, "CancelMatching again", again, err, jobs.BulkResult{})
	if again.ID == res.ID {
		t.Errorf("two bulk actions share the ID %s", res.ID)
	}
}

// A bulk action acts on at most Limit jobs, newest first, and says more
// matched; the next call takes the rest.
func testBulkTruncated(t *testing.T, h Harness) {
	f := setup(t, h)
	var made []string
	for range 5 {
		made = append(made, f.bulkJob("org-a", jobs.Queued))
	}
	a := jobs.JobFilter{OrgID: "org-a"}
	res, err := jobs.CancelMatching(f.ctx, f.store, jobs.BulkParams{Filter: a, By: "b", Limit: 2})
	expectBulk(t, "CancelMatching limit 2", res, err, jobs.BulkResult{Matched: 5, Done: 2, Truncated: true})
	for i, id := range made {
		want := jobs.Queued
		if i >= 3 {
			want = jobs.Cancelled
		}
		if st := f.job(id).State; st != want {
			t.Errorf("job %d of 5 (oldest first): %s, want %s", i+1, st, want)
		}
	}
	rest, err := jobs.CancelMatching(f.ctx, f.store, jobs.BulkParams{Filter: a, By: "b", Limit: 3})
	expectBulk(t, "CancelMatching the rest", rest, err, jobs.BulkResult{Matched: 3, Done: 3})

	// Retry likewise.
	res, err = jobs.RetryMatching(f.ctx, f.store, jobs.BulkParams{Filter: a, By: "b", Limit: 4})
	expectBulk(t, "RetryMatching limit 4", res, err, jobs.BulkResult{Matched: 5, Done: 4, Truncated: true})
	if c, err := jobs.CountRetryable(f.ctx, f.store, a); err != nil || c != 1 || f.job(made[0]).State != jobs.Cancelled {
		t.Errorf("CountRetryable after = %d, %v; want 1, the oldest", c, err)
	}
}

// A bulk retry retries the current failed and cancelled jobs (succeeded
// ones only when named), each with events naming who asked and the
// action, keeping its priority.
func testBulkRetry(t *testing.T, h Harness) {
	f := setup(t, h)
	failed := f.bulkJob("org-a", jobs.Failed)
	succeeded := f.bulkJob("org-a", jobs.Succeeded)
	other := f.bulkJob("org-b", jobs.Failed)
	// old was retried before: superseded, its retry queued.
	old := f.bulkJob("org-a", jobs.Failed)
	if _, err := f.store.Retry(f.ctx, jobs.RetryParams{JobID: old}); err != nil {
		t.Fatal(err)
	}
	cancelled := f.bulkJob("org-a", jobs.Cancelled)
	a := jobs.JobFilter{OrgID: "org-a"}

	for _, c := range []struct {
		f    jobs.JobFilter
		want int
	}{{a, 2}, {jobs.JobFilter{OrgID: "org-a", State: jobs.Failed}, 1}, {jobs.JobFilter{OrgID: "org-a", State: jobs.Succeeded}, 1}, {jobs.JobFilter{}, 3}} {
		if n, err := jobs.CountRetryable(f.ctx, f.store, c.f); err != nil || n != c.want {
			t.Errorf("CountRetryable(%+v) = %d, %v; want %d", c.f, n, err, c.want)
		}
	}
	for _, st := range []jobs.State{jobs.Queued, jobs.Running, jobs.Superseded} {
		bad := jobs.JobFilter{OrgID: "org-a", State: st}
		if _, err := jobs.CountRetryable(f.ctx, f.store, bad); !errors.Is(err, jobs.ErrInvalid) {
			t.Errorf("CountRetryable of %s jobs: %v, want ErrInvalid", st, err)
		}
		if _, err := jobs.RetryMatching(f.ctx, f.store, jobs.BulkParams{Filter: bad}); !errors.Is(err, jobs.ErrInvalid) {
			t.Errorf("RetryMatching of %s jobs: %v, want ErrInvalid", st, err)
		}
	}

	res, err := jobs.RetryMatching(f.ctx, f.store, jobs.BulkParams{Filter: a, By: "token:t1"})
	expectBulk(t, "RetryMatching", res, err, jobs.BulkResult{Matched: 2, Done: 2})
	for id, from := range map[string]jobs.State{failed: jobs.Failed, cancelled: jobs.Cancelled} {
		f.expectTransition(id, from, jobs.Superseded)
		next := f.retryOf(id)
		f.expectData(f.lastTransition(id), jobs.TransitionData{SupersededBy: next, By: "token:t1", Bulk: res.ID}, "superseded event of "+id)
		f.expectData(f.events(next)[0], jobs.TransitionData{Supersedes: id, By: "token:t1", Bulk: res.ID}, "queued event of the retry of "+id)
		if j := f.job(next); j.State != jobs.Queued || j.Priority != f.job(id).Priority {
			t.Errorf("retry of %s: %s at priority %d", id, j.State, j.Priority)
		}
	}
	if f.job(succeeded).State != jobs.Succeeded || f.job(other).State != jobs.Failed || f.job(old).State != jobs.Superseded {
		t.Errorf("bulk retry changed a job it does not match")
	}
	res, err = jobs.RetryMatching(f.ctx, f.store, jobs.BulkParams{Filter: jobs.JobFilter{OrgID: "org-a", State: jobs.Succeeded}, By: "x"})
	expectBulk(t, "RetryMatching succeeded", res, err, jobs.BulkResult{Matched: 1, Done: 1})
	if f.job(succeeded).State != jobs.Superseded {
		t.Errorf("succeeded job named by the filter not retried: %s", f.job(succeeded).State)
	}
	if n, err := jobs.CountRetryable(f.ctx, f.store, a); err != nil || n != 0 {
		t.Errorf("CountRetryable after = %d, %v", n, err)
	}
}

// raceStore lets a test change a job just before a bulk action acts on it.
type raceStore struct {
	jobs.Store
	before func(jobID string)
}

func (r raceStore) Cancel(ctx context.Context, p jobs.CancelParams) (jobs.Job, error) {
	r.before(p.JobID)
	return r.Store.Cancel(ctx, p)
}

func (r raceStore) Retry(ctx context.Context, p jobs.RetryParams) (jobs.Job, error) {
	r.before(p.JobID)
	return r.Store.Retry(ctx, p)
}

// stopStore ends a context once it has cancelled a job.
type stopStore struct {
	jobs.Store
	cancel context.CancelFunc
}

func (s stopStore) Cancel(ctx context.Context, p jobs.CancelParams) (jobs.Job, error) {
	defer s.cancel()
	return s.Store.Cancel(ctx, p)
}

// A job that changes between the listing and its turn (cancelled, retried
// or deleted by someone else) is Skipped, not an error, and not acted on
// twice; a context that ends stops the action where it is.
func testBulkSkipped(t *testing.T, h Harness) {
	f := setup(t, h)
	q1 := f.bulkJob("org-a", jobs.Queued)
	q2 := f.bulkJob("org-a", jobs.Queued)
	a := jobs.JobFilter{OrgID: "org-a"}
	race := raceStore{Store: f.store, before: func(id string) {
		if id == q2 {
			if _, err := f.store.Cancel(f.ctx, jobs.CancelParams{JobID: id, By: "someone else"}); err != nil {
				t.Fatal(err)
			}
		}
	}}
	res, err := jobs.CancelMatching(f.ctx, race, jobs.BulkParams{Filter: a, By: "bulk"})
	expectBulk(t, "CancelMatching with a race", res, err, jobs.BulkResult{Matched: 2, Done: 1, Skipped: 1})
	f.expectData(f.lastTransition(q2), jobs.TransitionData{By: "someone else"}, "the job cancelled meanwhile")
	f.expectData(f.lastTransition(q1), jobs.TransitionData{By: "bulk", Bulk: res.ID}, "the job the bulk cancel cancelled")

	// Retry: q2 is retried by someone else first, q1's prompt deleted.
	race.before = func(id string) {
		var err error
		switch id {
		case q2:
			_, err = f.store.Retry(f.ctx, jobs.RetryParams{JobID: id})
		case q1:
			err = f.store.DeletePrompt(f.ctx, "", f.job(id).PromptID)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	res, err = jobs.RetryMatching(f.ctx, race, jobs.BulkParams{Filter: a, By: "bulk"})
	expectBulk(t, "RetryMatching with races", res, err, jobs.BulkResult{Matched: 2, Skipped: 2})
	if js, err := f.store.PromptJobs(f.ctx, "", f.job(q2).PromptID); err != nil || len(js) != 2 {
		t.Errorf("the job retried meanwhile has %d jobs (%v), want 2: retried once", len(js), err)
	}

	// A context that ends after the first job stops the action there.
	for range 3 {
		f.bulkJob("org-c", jobs.Queued)
	}
	ctx, cancel := context.WithCancel(f.ctx)
	defer cancel()
	stop := stopStore{Store: f.store, cancel: cancel}
	c := jobs.JobFilter{OrgID: "org-c"}
	res, err = jobs.CancelMatching(ctx, stop, jobs.BulkParams{Filter: c, By: "bulk"})
	if !errors.Is(err, context.Canceled) || res.Done != 1 || res.Skipped != 0 || res.Matched != 3 {
		t.Errorf("CancelMatching with its context ended after one job: %+v, %v", res, err)
	}
	if n, err := jobs.CountCancellable(f.ctx, f.store, c); err != nil || n != 2 {
		t.Errorf("after a stopped bulk cancel %d jobs are left (%v), want 2", n, err)
	}
}
