package jobstest

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/promptkit/promptkit/jobs"
)

// Every JobFilter field narrows ListJobs and CountJobs alike: profile and
// batch through the prompt, backend through the job's usage ledger rows,
// priority bounds inclusive, Until exclusive (at the stored microsecond);
// paging stays newest first.
func testJobFilter(t *testing.T, h Harness) {
	f := setup(t, h)
	b := f.newBatch("org-a")
	times := map[string]time.Time{}
	add := func(name string, p jobs.EnqueueParams) string {
		id := f.enqueue(p).JobID
		times[name] = f.job(id).CreatedAt
		f.advance(time.Second)
		return id
	}
	// j1: org-a alice, profile fast, priority 10, called b1, succeeded.
	j1 := add("j1", jobs.EnqueueParams{OrgID: "org-a", CreatedBy: "alice", Profile: "fast", Priority: ptr(10)})
	f.claimID("w1", j1)
	if _, err := f.store.Succeed(f.ctx, jobs.SucceedParams{JobID: j1, Worker: "w1", Answer: jobs.Answer{Output: "x", Backend: "b1"},
		AttemptEvents: []json.RawMessage{attemptEvent("m", "b1", 1, 1, 0, 0, 0.1)}}); err != nil {
		t.Fatal(err)
	}
	// j2: org-a bob, profile slow, priority 50, queued.
	j2 := add("j2", jobs.EnqueueParams{OrgID: "org-a", CreatedBy: "bob", Profile: "slow", Priority: ptr(50)})
	// j3: org-b alice, profile fast, priority 5 (so it is claimed before
	// j2), called b2, failed, then retried as j6 (which made no call).
	j3 := add("j3", jobs.EnqueueParams{OrgID: "org-b", CreatedBy: "alice", Profile: "fast", Priority: ptr(5)})
	f.claimID("w3", j3)
	if _, err := f.store.Fail(f.ctx, jobs.FailParams{JobID: j3, Worker: "w3", Kind: jobs.KindProvider4xx, Message: "no",
		AttemptEvents: []json.RawMessage{attemptEvent("m", "b2", 1, 1, 0, 0, 0.1)}}); err != nil {
		t.Fatal(err)
	}
	// l1, l2: lines of batch b, priority 70.
	l1 := add("l1", jobs.EnqueueParams{OrgID: "org-a", CreatedBy: "alice", BatchID: b.ID, CustomID: "1", Priority: ptr(70)})
	l2 := add("l2", jobs.EnqueueParams{OrgID: "org-a", CreatedBy: "alice", BatchID: b.ID, CustomID: "2", Priority: ptr(70)})
	retried, err := f.store.Retry(f.ctx, jobs.RetryParams{JobID: j3})
	if err != nil {
		t.Fatal(err)
	}
	j6 := retried.ID

	for _, c := range []struct {
		name string
		f    jobs.JobFilter
		want []string // newest first
	}{
		{"none", jobs.JobFilter{}, []string{j6, l2, l1, j3, j2, j1}},
		{"profile", jobs.JobFilter{Profile: "fast"}, []string{j6, j3, j1}},
		{"profile current", jobs.JobFilter{Profile: "fast", Current: true}, []string{j6, j1}},
		{"profile unknown", jobs.JobFilter{Profile: "fas"}, nil},
		{"backend b1", jobs.JobFilter{Backend: "b1"}, []string{j1}},
		{"backend b2", jobs.JobFilter{Backend: "b2"}, []string{j3}},
		{"backend unknown", jobs.JobFilter{Backend: "b3"}, nil},
		{"min priority", jobs.JobFilter{MinPriority: ptr(50)}, []string{l2, l1, j2}},
		{"priority range", jobs.JobFilter{MinPriority: ptr(10), MaxPriority: ptr(50)}, []string{j2, j1}},
		{"max priority", jobs.JobFilter{MaxPriority: ptr(5)}, []string{j6, j3}},
		{"one priority", jobs.JobFilter{MinPriority: ptr(70), MaxPriority: ptr(70)}, []string{l2, l1}},
		{"batch", jobs.JobFilter{BatchID: b.ID}, []string{l2, l1}},
		{"batch queued", jobs.JobFilter{BatchID: b.ID, State: jobs.Queued, OrgID: "org-a"}, []string{l2, l1}},
		{"batch unknown", jobs.JobFilter{BatchID: "batch_unknown"}, nil},
		{"since until", jobs.JobFilter{Since: times["j2"], Until: times["l2"]}, []string{l1, j3, j2}},
		{"until is exclusive", jobs.JobFilter{Until: times["j1"]}, nil},
		{"until below a microsecond", jobs.JobFilter{Until: times["j1"].Add(time.Nanosecond)}, []string{j1}},
		{"since equals until", jobs.JobFilter{Since: times["j2"], Until: times["j2"]}, nil},
		{"combined", jobs.JobFilter{OrgID: "org-a", Profile: "fast", Backend: "b1", State: jobs.Succeeded}, []string{j1}},
		{"combined none", jobs.JobFilter{OrgID: "org-b", Backend: "b1"}, nil},
		{"state superseded", jobs.JobFilter{State: jobs.Superseded, CreatedBy: "alice"}, []string{j3}},
	} {
		got := ids(f.listAll(jobs.ListParams{JobFilter: c.f, Limit: 2}))
		newestFirst(t, f.listAll(jobs.ListParams{JobFilter: c.f, Limit: 2}))
		if !slices.Equal(got, c.want) {
			t.Errorf("%s: ListJobs %v, want %v", c.name, got, c.want)
		}
		n, err := f.store.CountJobs(f.ctx, c.f)
		if err != nil || n != len(c.want) {
			t.Errorf("%s: CountJobs = %d, %v; want %d", c.name, n, err, len(c.want))
		}
	}

	for _, c := range []struct {
		name string
		f    jobs.JobFilter
	}{
		{"unknown state", jobs.JobFilter{State: "done"}},
		{"min priority below 0", jobs.JobFilter{MinPriority: ptr(-1)}},
		{"max priority above 100", jobs.JobFilter{MaxPriority: ptr(101)}},
		{"min above max", jobs.JobFilter{MinPriority: ptr(60), MaxPriority: ptr(40)}},
		{"until before since", jobs.JobFilter{Since: T0, Until: T0.Add(-time.Second)}},
		{"NUL in profile", jobs.JobFilter{Profile: "a\x00b"}},
		{"NUL in backend", jobs.JobFilter{Backend: "a\x00b"}},
	} {
		_, err := f.store.ListJobs(f.ctx, jobs.ListParams{JobFilter: c.f})
		wantNormalizeErr(t, err, c.f, "ListJobs "+c.name)
		_, err = f.store.CountJobs(f.ctx, c.f)
		wantNormalizeErr(t, err, c.f, "CountJobs "+c.name)
	}
}

// Cancel and Retry record who asked (By) and in which bulk action (Bulk)
// in the data of the events their transitions already write: the
// cancelled event, and a retry's superseded and queued events.
func testCancelRetryAudit(t *testing.T, h Harness) {
	f := setup(t, h)
	q, _ := f.jobIn(jobs.Queued)
	if _, err := f.store.Cancel(f.ctx, jobs.CancelParams{JobID: q.ID, By: "cli:alice", Bulk: "bulk-1"}); err != nil {
		t.Fatal(err)
	}
	f.expectTransition(q.ID, jobs.Queued, jobs.Cancelled)
	f.expectData(f.lastTransition(q.ID), jobs.TransitionData{By: "cli:alice", Bulk: "bulk-1"}, "cancel with by and bulk")

	r, _ := f.jobIn(jobs.Running)
	if _, err := f.store.Cancel(f.ctx, jobs.CancelParams{JobID: r.ID, By: "local"}); err != nil {
		t.Fatal(err)
	}
	f.expectData(f.lastTransition(r.ID), jobs.TransitionData{By: "local"}, "cancel of a running job with by")

	fresh, err := f.store.Retry(f.ctx, jobs.RetryParams{JobID: q.ID, By: "token:t1", Bulk: "bulk-2"})
	if err != nil {
		t.Fatal(err)
	}
	f.expectTransition(q.ID, jobs.Cancelled, jobs.Superseded)
	f.expectData(f.lastTransition(q.ID), jobs.TransitionData{SupersededBy: fresh.ID, By: "token:t1", Bulk: "bulk-2"},
		"superseded event of a retry with by and bulk")
	evs := f.events(fresh.ID)
	if len(evs) != 1 || evs[0].To != jobs.Queued {
		t.Fatalf("retry's events: %+v", evs)
	}
	f.expectData(evs[0], jobs.TransitionData{Supersedes: q.ID, By: "token:t1", Bulk: "bulk-2"}, "queued event of a retry with by and bulk")

	// The longest By and Bulk are stored whole; one byte more is refused
	// and changes nothing.
	long := strings.Repeat("x", jobs.MaxActor)
	if _, err := f.store.Cancel(f.ctx, jobs.CancelParams{JobID: fresh.ID, By: long, Bulk: long}); err != nil {
		t.Fatalf("Cancel with a By of %d bytes: %v", jobs.MaxActor, err)
	}
	f.expectData(f.lastTransition(fresh.ID), jobs.TransitionData{By: long, Bulk: long}, "cancel with the longest by")
	done, _ := f.jobIn(jobs.Failed)
	live, _ := f.jobIn(jobs.Queued)
	before := f.snapshot(live.ID)
	for _, p := range []jobs.CancelParams{{JobID: live.ID, By: long + "x"}, {JobID: live.ID, Bulk: long + "x"}, {JobID: live.ID, By: "a\x00"}} {
		_, err := f.store.Cancel(f.ctx, p)
		wantNormalizeErr(t, err, p, "Cancel with a bad By or Bulk")
	}
	f.unchanged(before, "refused Cancel")
	before = f.snapshot(done.ID)
	for _, p := range []jobs.RetryParams{{JobID: done.ID, By: long + "x"}, {JobID: done.ID, Bulk: long + "x"}} {
		_, err := f.store.Retry(f.ctx, p)
		wantNormalizeErr(t, err, p, "Retry with a bad By or Bulk")
	}
	f.unchanged(before, "refused Retry")
}
