package jobstest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"reflect"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/promptkit/promptkit/jobs"
)

func testPromptJobsAndEvents(t *testing.T, h Harness) {
	f := setup(t, h)
	e := f.enqueue(jobs.EnqueueParams{OrgID: "org-1"})
	f.claimID("w", e.JobID)
	f.advance(time.Second)
	if _, err := f.store.Requeue(f.ctx, jobs.RequeueParams{JobID: e.JobID, Worker: "w", Kind: jobs.KindTimeout}); err != nil {
		t.Fatal(err)
	}
	f.claimID("w", e.JobID)
	if err := f.store.AppendAttempt(f.ctx, jobs.AttemptParams{JobID: e.JobID, Worker: "w", Data: []byte(`{"n":2}`)}); err != nil {
		t.Fatal(err)
	}
	f.advance(time.Second)
	if _, err := f.store.Succeed(f.ctx, jobs.SucceedParams{JobID: e.JobID, Worker: "w", Answer: jobs.Answer{Output: "ok"}}); err != nil {
		t.Fatal(err)
	}
	f.advance(time.Second)
	r, err := f.store.Retry(f.ctx, jobs.RetryParams{JobID: e.JobID})
	if err != nil {
		t.Fatal(err)
	}

	ev, err := f.store.JobEvents(f.ctx, "org-1", e.JobID)
	if err != nil {
		t.Fatal(err)
	}
	want := []struct {
		typ      jobs.EventType
		from, to jobs.State
	}{
		{jobs.EventTransition, "", jobs.Queued},
		{jobs.EventTransition, jobs.Queued, jobs.Running},
		{jobs.EventTransition, jobs.Running, jobs.Queued},
		{jobs.EventTransition, jobs.Queued, jobs.Running},
		{jobs.EventAttempt, "", ""},
		{jobs.EventTransition, jobs.Running, jobs.Succeeded},
		{jobs.EventTransition, jobs.Succeeded, jobs.Superseded},
	}
	if len(ev) != len(want) {
		t.Fatalf("JobEvents: %d events, want %d: %+v", len(ev), len(want), ev)
	}
	for i, w := range want {
		got := ev[i]
		if got.Type != w.typ || got.From != w.from || got.To != w.to || got.JobID != e.JobID ||
			got.PromptID != e.PromptID || got.OrgID != "org-1" {
			t.Errorf("event %d = %+v, want %s %q → %q", i, got, w.typ, w.from, w.to)
		}
		if i > 0 && got.Seq <= ev[i-1].Seq {
			t.Errorf("event %d: seq %d after %d", i, got.Seq, ev[i-1].Seq)
		}
		if i > 0 && got.At.Before(ev[i-1].At) {
			t.Errorf("event %d: At %v before %v", i, got.At, ev[i-1].At)
		}
	}
	sameTime(t, "last event At", ev[len(ev)-1].At, f.now())
	if ev2, err := f.store.JobEvents(f.ctx, "org-2", e.JobID); len(ev2) != 0 || (err != nil && !errors.Is(err, jobs.ErrNotFound)) {
		t.Errorf("JobEvents in another org = %d events, %v; want none", len(ev2), err)
	}

	hist, err := f.store.PromptJobs(f.ctx, "org-1", e.PromptID)
	if err != nil {
		t.Fatal(err)
	}
	if g := ids(hist); len(g) != 2 || g[0] != e.JobID || g[1] != r.ID {
		t.Errorf("PromptJobs = %v, want [%s %s]", g, e.JobID, r.ID)
	}
	if rev, _ := f.store.JobEvents(f.ctx, "", r.ID); len(rev) != 1 || rev[0].To != jobs.Queued || rev[0].From != "" {
		t.Errorf("retry job events = %+v", rev)
	}
}

// listAll pages through ListJobs.
func (f *fixture) listAll(p jobs.ListParams) []jobs.Job {
	f.t.Helper()
	var out []jobs.Job
	for range 10000 {
		page, err := f.store.ListJobs(f.ctx, p)
		if err != nil {
			f.t.Fatalf("ListJobs: %v", err)
		}
		out = append(out, page.Jobs...)
		if page.Next == "" {
			return out
		}
		p.After = page.Next
	}
	f.t.Fatal("ListJobs never ended")
	return nil
}

// newestFirst checks ListJobs order: created_at descending, then ID
// descending.
func newestFirst(t *testing.T, js []jobs.Job) {
	t.Helper()
	for i := 1; i < len(js); i++ {
		a, b := js[i-1], js[i]
		if a.CreatedAt.Before(b.CreatedAt) || (a.CreatedAt.Equal(b.CreatedAt) && a.ID <= b.ID) {
			t.Errorf("ListJobs order: %s (%v) before %s (%v)", a.ID, a.CreatedAt, b.ID, b.CreatedAt)
			return
		}
	}
}

func testListJobsFilters(t *testing.T, h Harness) {
	f := setup(t, h)
	type spec struct{ org, user string }
	specs := []spec{{"org-a", "alice"}, {"org-a", "bob"}, {"org-b", "alice"}, {"org-a", "alice"}, {"org-b", "carol"}, {"org-a", "bob"}}
	var made []jobs.Enqueued
	for _, s := range specs {
		made = append(made, f.enqueue(jobs.EnqueueParams{OrgID: s.org, CreatedBy: s.user}))
		f.advance(time.Second)
	}
	mid := made[3]
	midAt := f.job(mid.JobID).CreatedAt
	// Claim the two oldest.
	f.claim("w", 2)

	count := func(p jobs.ListParams) int {
		js := f.listAll(p)
		newestFirst(t, js)
		for _, j := range js {
			if (p.OrgID != "" && j.OrgID != p.OrgID) || (p.CreatedBy != "" && j.CreatedBy != p.CreatedBy) ||
				(p.State != "" && j.State != p.State) || (!p.Since.IsZero() && j.CreatedAt.Before(p.Since)) {
				t.Errorf("ListJobs(%+v) returned %+v", p, j)
			}
		}
		return len(js)
	}
	for _, c := range []struct {
		p    jobs.ListParams
		want int
	}{
		{jobs.ListParams{}, 6},
		{jobs.ListParams{JobFilter: jobs.JobFilter{OrgID: "org-a"}}, 4},
		{jobs.ListParams{JobFilter: jobs.JobFilter{OrgID: "org-b"}}, 2},
		{jobs.ListParams{JobFilter: jobs.JobFilter{CreatedBy: "alice"}}, 3},
		{jobs.ListParams{JobFilter: jobs.JobFilter{OrgID: "org-a", CreatedBy: "bob"}}, 2},
		{jobs.ListParams{JobFilter: jobs.JobFilter{State: jobs.Running}}, 2},
		{jobs.ListParams{JobFilter: jobs.JobFilter{State: jobs.Queued, OrgID: "org-a"}}, 2},
		{jobs.ListParams{JobFilter: jobs.JobFilter{Since: midAt}}, 3},
		{jobs.ListParams{JobFilter: jobs.JobFilter{Since: midAt, OrgID: "org-b"}}, 1},
		{jobs.ListParams{JobFilter: jobs.JobFilter{OrgID: "org-c"}}, 0},
	} {
		if got := count(c.p); got != c.want {
			t.Errorf("ListJobs(%+v): %d jobs, want %d", c.p, got, c.want)
		}
	}
	all := f.listAll(jobs.ListParams{})
	if all[0].ID != made[5].JobID || all[5].ID != made[0].JobID {
		t.Errorf("ListJobs not newest first: %v", ids(all))
	}
}

func testListJobsPagination(t *testing.T, h Harness) {
	f := setup(t, h)
	made := f.enqueueMany(23)
	var seen []jobs.Job
	p := jobs.ListParams{Limit: 5}
	sizes := []int{}
	for {
		page, err := f.store.ListJobs(f.ctx, p)
		if err != nil {
			t.Fatal(err)
		}
		// Every store encodes Next as jobs.Cursor: the same listing gives
		// the same cursors on both.
		if page.Next != "" && page.Next != jobs.CursorAfter(page.Jobs[len(page.Jobs)-1]).String() {
			t.Errorf("Next = %q, want jobs.CursorAfter(the last job).String()", page.Next)
		}
		sizes = append(sizes, len(page.Jobs))
		seen = append(seen, page.Jobs...)
		if page.Next == "" {
			break
		}
		p.After = page.Next
	}
	if fmt.Sprint(sizes) != "[5 5 5 5 3]" {
		t.Errorf("page sizes %v, want [5 5 5 5 3]", sizes)
	}
	newestFirst(t, seen)
	if len(seen) != len(made) {
		t.Errorf("listed %d jobs, want %d", len(seen), len(made))
	}
	// Exactly a page left: Next may be set, but the page after is empty.
	page, err := f.store.ListJobs(f.ctx, jobs.ListParams{Limit: 23})
	if err != nil || len(page.Jobs) != 23 {
		t.Fatalf("ListJobs(23) = %d, %v", len(page.Jobs), err)
	}
	if page.Next != "" {
		if rest, err := f.store.ListJobs(f.ctx, jobs.ListParams{Limit: 23, After: page.Next}); err != nil || len(rest.Jobs) != 0 || rest.Next != "" {
			t.Errorf("page after the last = %d jobs, next %q, %v", len(rest.Jobs), rest.Next, err)
		}
	}
	if page, err := f.store.ListJobs(f.ctx, jobs.ListParams{}); err != nil || len(page.Jobs) != 23 {
		t.Errorf("default limit: %d jobs, %v", len(page.Jobs), err)
	}
	_, err = f.store.ListJobs(f.ctx, jobs.ListParams{After: "not a cursor!"})
	wantErr(t, err, jobs.ErrInvalid, "ListJobs with a bad cursor")

	// A cursor made with jobs.Cursor works as After: it continues strictly
	// after that position.
	mid := seen[10]
	page, err = f.store.ListJobs(f.ctx, jobs.ListParams{After: jobs.Cursor{CreatedAt: mid.CreatedAt, ID: mid.ID}.String(), Limit: 3})
	if err != nil {
		t.Fatalf("ListJobs after a jobs.Cursor: %v", err)
	}
	if g, w := ids(page.Jobs), ids(seen[11:14]); fmt.Sprint(g) != fmt.Sprint(w) {
		t.Errorf("ListJobs after a jobs.Cursor = %v, want %v", g, w)
	}

	if page, err := f.store.ListJobs(f.ctx, jobs.ListParams{Limit: 5000}); err != nil || len(page.Jobs) != 23 {
		t.Errorf("ListJobs(Limit 5000) = %d jobs, %v; want 23 (the limit is capped, not refused)", len(page.Jobs), err)
	}
}

// Keyset pagination is stable while other jobs are inserted: every job
// that existed before the listing is listed exactly once, in order.
func testListJobsConcurrentInserts(t *testing.T, h Harness) {
	f := setupRealClock(t, h)
	before := f.enqueueMany(60)
	ctx, cancel := context.WithCancel(f.ctx)
	var wg sync.WaitGroup
	wg.Go(func() {
		for i := 0; ctx.Err() == nil && i < 200; i++ {
			if _, err := f.store.Enqueue(ctx, jobs.EnqueueParams{OrgID: "org-1", Text: "more"}); err != nil && ctx.Err() == nil {
				t.Errorf("Enqueue: %v", err)
				return
			}
		}
	})
	listed := f.listAll(jobs.ListParams{Limit: 7})
	cancel()
	wg.Wait()
	newestFirst(t, listed)
	count := map[string]int{}
	for _, j := range listed {
		count[j.ID]++
	}
	for id, n := range count {
		if n > 1 {
			t.Errorf("job %s listed %d times", id, n)
		}
	}
	for _, id := range before {
		if count[id] != 1 {
			t.Errorf("job %s listed %d times, want once", id, count[id])
		}
	}
}

// changes calls ChangesSince.
func (f *fixture) changes(p jobs.ChangesParams) jobs.Changes {
	f.t.Helper()
	c, err := f.store.ChangesSince(f.ctx, p)
	if err != nil {
		f.t.Fatalf("ChangesSince: %v", err)
	}
	for i := 1; i < len(c.Jobs); i++ {
		if c.Jobs[i].UpdatedAt.Before(c.Jobs[i-1].UpdatedAt) {
			f.t.Errorf("ChangesSince not oldest change first: %v after %v", c.Jobs[i].UpdatedAt, c.Jobs[i-1].UpdatedAt)
		}
	}
	for _, j := range c.Jobs {
		if !p.Since.IsZero() && !j.UpdatedAt.After(p.Since) {
			f.t.Errorf("ChangesSince(%v) returned job updated at %v", p.Since, j.UpdatedAt)
		}
		if p.OrgID != "" && j.OrgID != p.OrgID {
			f.t.Errorf("ChangesSince(org %s) returned a job of %s", p.OrgID, j.OrgID)
		}
		if p.CreatedBy != "" && j.CreatedBy != p.CreatedBy {
			f.t.Errorf("ChangesSince(user %s) returned a job of %s", p.CreatedBy, j.CreatedBy)
		}
	}
	return c
}

func stateOf(c jobs.Changes, id string) (jobs.State, bool) {
	for _, j := range c.Jobs {
		if j.ID == id {
			return j.State, true
		}
	}
	return "", false
}

func testChangesSince(t *testing.T, h Harness) {
	f := setup(t, h)
	a := f.enqueue(jobs.EnqueueParams{OrgID: "org-a"})
	f.advance(time.Second)
	b := f.enqueue(jobs.EnqueueParams{OrgID: "org-a"})
	f.advance(time.Second)
	other := f.enqueue(jobs.EnqueueParams{OrgID: "org-b"})
	f.advance(time.Second)

	all := f.changes(jobs.ChangesParams{})
	if g := ids(all.Jobs); len(g) != 3 || g[0] != a.JobID || g[1] != b.JobID || g[2] != other.JobID {
		t.Errorf("ChangesSince(zero) = %v, want all three oldest first", g)
	}
	if all.AsOf.IsZero() || all.AsOf.After(f.now()) {
		t.Errorf("AsOf = %v, now %v", all.AsOf, f.now())
	}
	org := f.changes(jobs.ChangesParams{OrgID: "org-a"})
	if len(org.Jobs) != 2 {
		t.Errorf("ChangesSince(org-a) = %v", ids(org.Jobs))
	}

	f.advance(time.Second)
	f.claimID("w", a.JobID)
	c := f.changes(jobs.ChangesParams{OrgID: "org-a", Since: org.AsOf})
	if st, ok := stateOf(c, a.JobID); !ok || st != jobs.Running {
		t.Errorf("ChangesSince after a claim = %v, want %s running", ids(c.Jobs), a.JobID)
	}
	if _, ok := stateOf(c, b.JobID); ok {
		t.Errorf("ChangesSince returned unchanged job %s", b.JobID)
	}
	f.advance(time.Second)
	if _, err := f.store.Cancel(f.ctx, jobs.CancelParams{JobID: b.JobID}); err != nil {
		t.Fatal(err)
	}
	c = f.changes(jobs.ChangesParams{OrgID: "org-a", Since: c.AsOf})
	if st, ok := stateOf(c, b.JobID); !ok || st != jobs.Cancelled {
		t.Errorf("ChangesSince after a cancel = %v, want %s cancelled", ids(c.Jobs), b.JobID)
	}
	// Job a may come back (a change may be returned twice), but only as it
	// is now.
	if st, ok := stateOf(c, a.JobID); ok && st != jobs.Running {
		t.Errorf("ChangesSince returned job %s as %s", a.JobID, st)
	}
}

// A change in the same clock instant as the previous call's AsOf is not
// lost: with a clock that does not move, every change must still show up.
func testChangesSinceSameInstant(t *testing.T, h Harness) {
	f := setup(t, h)
	a := f.enqueue(jobs.EnqueueParams{})
	c := f.changes(jobs.ChangesParams{})
	if _, ok := stateOf(c, a.JobID); !ok {
		t.Fatalf("ChangesSince(zero) misses the enqueued job")
	}
	f.claimID("w", a.JobID) // same instant as the call above
	c = f.changes(jobs.ChangesParams{Since: c.AsOf})
	if st, ok := stateOf(c, a.JobID); !ok || st != jobs.Running {
		t.Fatalf("change in the same instant as AsOf lost: got %v", c.Jobs)
	}
	b := f.enqueue(jobs.EnqueueParams{})
	c = f.changes(jobs.ChangesParams{Since: c.AsOf})
	if _, ok := stateOf(c, b.JobID); !ok {
		t.Fatalf("enqueue in the same instant as AsOf lost: got %v", ids(c.Jobs))
	}
}

// Following AsOf with a small Limit reaches every change, also when many
// share one timestamp.
func testChangesSincePaging(t *testing.T, h Harness) {
	for _, step := range []time.Duration{0, time.Microsecond} {
		t.Run(fmt.Sprintf("step %v", step), func(t *testing.T) {
			t.Parallel()
			f := setup(t, h)
			var made []string
			for range 10 {
				made = append(made, f.enqueue(jobs.EnqueueParams{}).JobID)
				f.advance(step)
			}
			f.advance(time.Second)
			seen := map[string]bool{}
			var since time.Time
			for range 20 {
				c := f.changes(jobs.ChangesParams{Since: since, Limit: 3})
				for _, j := range c.Jobs {
					seen[j.ID] = true
				}
				since = c.AsOf
				if len(seen) == len(made) {
					break
				}
			}
			if len(seen) != len(made) {
				t.Errorf("paging with Limit 3 reached %d of %d jobs in 20 calls", len(seen), len(made))
			}
		})
	}
}

// concurrentJobs is how many jobs the concurrent-writer tests drive: each
// goes through four to six transactions.
const concurrentJobs = 120

// runWriters drives every queued job to a terminal state from several
// goroutines: claims, attempts, requeues once, then succeeds, fails or is
// cancelled. It returns when the queue is empty. It may run outside the
// test goroutine.
func (f *fixture) runWriters(writers int) {
	var wg sync.WaitGroup
	var k atomic.Int64
	for w := range writers {
		worker := fmt.Sprintf("writer-%d", w)
		wg.Go(func() {
			for {
				got, err := f.store.Claim(f.ctx, jobs.ClaimParams{Worker: worker, Limit: 3})
				if err != nil {
					f.t.Errorf("Claim: %v", err)
					return
				}
				if len(got) == 0 {
					return
				}
				for _, j := range got {
					if err := f.store.AppendAttempt(f.ctx, jobs.AttemptParams{JobID: j.ID, Worker: worker, Data: []byte(`{"ok":true}`)}); err != nil {
						f.t.Errorf("AppendAttempt: %v", err)
					}
					switch i := k.Add(1); {
					case j.Attempt == 1 && i%3 == 0:
						_, err = f.store.Requeue(f.ctx, jobs.RequeueParams{JobID: j.ID, Worker: worker, Kind: jobs.KindTimeout})
					case i%5 == 0:
						_, err = f.store.Fail(f.ctx, jobs.FailParams{JobID: j.ID, Worker: worker, Kind: jobs.KindProvider4xx})
					case i%7 == 0:
						_, err = f.store.Cancel(f.ctx, jobs.CancelParams{JobID: j.ID})
					default:
						_, err = f.store.Succeed(f.ctx, jobs.SucceedParams{JobID: j.ID, Worker: worker, Answer: jobs.Answer{Output: "ok"}})
					}
					if err != nil {
						f.t.Errorf("finishing %s: %v", j.ID, err)
					}
				}
			}
		})
	}
	wg.Wait()
}

// Since-polling under concurrent writers: a poller following AsOf ends up
// having seen every job's final state.
func testChangesSinceConcurrent(t *testing.T, h Harness) {
	f := setupRealClock(t, h)
	const limit = 25
	seen := map[string]jobs.State{}
	var since time.Time
	poll := func() int {
		c := f.changes(jobs.ChangesParams{Since: since, Limit: limit})
		for _, j := range c.Jobs {
			seen[j.ID] = j.State
		}
		since = c.AsOf
		return len(c.Jobs)
	}
	all := f.enqueueMany(concurrentJobs)
	done := make(chan struct{})
	go func() { f.runWriters(4); close(done) }()
	polls := 0
	for writing := true; writing; {
		select {
		case <-done:
			writing = false
		default:
			poll()
			polls++
		}
	}
	// Catch up: until a page comes back short.
	for i := 0; ; i++ {
		if poll() < limit {
			break
		}
		if i > 1000 {
			t.Fatal("ChangesSince never caught up")
		}
	}
	t.Logf("%d polls while writing", polls)
	for _, id := range all {
		j := f.job(id)
		if !j.State.Terminal() {
			t.Errorf("job %s is %s after the writers", id, j.State)
		}
		if seen[id] != j.State {
			t.Errorf("job %s: poller last saw %q, final state %s", id, seen[id], j.State)
		}
	}
}

func testEventsAfter(t *testing.T, h Harness) {
	f := setup(t, h)
	a := f.enqueue(jobs.EnqueueParams{OrgID: "org-a"})
	b := f.enqueue(jobs.EnqueueParams{OrgID: "org-b"})
	f.claim("w", 2)
	all := f.allEvents()
	if len(all) != 4 {
		t.Fatalf("%d events, want 4", len(all))
	}
	for i := 1; i < len(all); i++ {
		if all[i].Seq <= all[i-1].Seq {
			t.Errorf("seq %d after %d", all[i].Seq, all[i-1].Seq)
		}
	}
	page, err := f.store.EventsAfter(f.ctx, jobs.EventsParams{After: all[0].Seq, Limit: 2})
	if err != nil || len(page) != 2 || page[0].Seq != all[1].Seq || page[1].Seq != all[2].Seq {
		t.Errorf("EventsAfter(seq 1, limit 2) = %+v, %v", page, err)
	}
	page, err = f.store.EventsAfter(f.ctx, jobs.EventsParams{After: all[3].Seq})
	if err != nil || len(page) != 0 {
		t.Errorf("EventsAfter(last) = %+v, %v", page, err)
	}
	orgA, err := f.store.EventsAfter(f.ctx, jobs.EventsParams{OrgID: "org-a"})
	if err != nil || len(orgA) != 2 {
		t.Fatalf("EventsAfter(org-a) = %+v, %v", orgA, err)
	}
	for _, e := range orgA {
		if e.JobID != a.JobID || e.OrgID != "org-a" {
			t.Errorf("EventsAfter(org-a) returned %+v", e)
		}
	}
	orgB, _ := f.store.EventsAfter(f.ctx, jobs.EventsParams{OrgID: "org-b", After: orgA[1].Seq})
	for _, e := range orgB {
		if e.JobID != b.JobID {
			t.Errorf("EventsAfter(org-b) returned %+v", e)
		}
	}
}

// LatestEventSeq is 0 on an empty log, then the newest Seq: paging from
// it returns only events written later.
func testLatestEventSeq(t *testing.T, h Harness) {
	f := setup(t, h)
	if seq, err := f.store.LatestEventSeq(f.ctx); err != nil || seq != 0 {
		t.Fatalf("LatestEventSeq on an empty log = %d, %v", seq, err)
	}
	f.enqueue(jobs.EnqueueParams{})
	f.claim("w", 1)
	all := f.allEvents()
	seq, err := f.store.LatestEventSeq(f.ctx)
	if err != nil || seq != all[len(all)-1].Seq {
		t.Fatalf("LatestEventSeq = %d, %v; newest event %d", seq, err, all[len(all)-1].Seq)
	}
	later := f.enqueue(jobs.EnqueueParams{})
	page, err := f.store.EventsAfter(f.ctx, jobs.EventsParams{After: seq})
	if err != nil || len(page) != 1 || page[0].JobID != later.JobID {
		t.Fatalf("EventsAfter(LatestEventSeq) = %+v, %v; want only the later job's event", page, err)
	}
}

// Event-log completeness: a reader paging by Seq while writers run sees
// every event exactly once, in strictly increasing order, and its total
// equals the log's.
func testEventsAfterConcurrent(t *testing.T, h Harness) {
	f := setupRealClock(t, h)
	var got []jobs.Event
	var after int64
	read := func() int {
		page, err := f.store.EventsAfter(f.ctx, jobs.EventsParams{After: after, Limit: 37})
		if err != nil {
			t.Fatalf("EventsAfter: %v", err)
		}
		for _, e := range page {
			if e.Seq <= after {
				t.Fatalf("EventsAfter(%d) returned seq %d", after, e.Seq)
			}
			after = e.Seq
		}
		got = append(got, page...)
		return len(page)
	}
	all := f.enqueueMany(concurrentJobs)
	done := make(chan struct{})
	go func() { f.runWriters(4); close(done) }()
	for writing := true; writing; {
		select {
		case <-done:
			writing = false
		default:
			read()
		}
	}
	for read() > 0 {
	}
	log := f.allEvents()
	want := 0
	for _, id := range all {
		want += len(f.events(id))
	}
	if len(log) != want {
		t.Errorf("log has %d events, jobs have %d", len(log), want)
	}
	if len(got) != len(log) {
		t.Errorf("reader saw %d events, log has %d", len(got), len(log))
	}
	for i := range min(len(got), len(log)) {
		if got[i].Seq != log[i].Seq || got[i].JobID != log[i].JobID || got[i].To != log[i].To {
			t.Fatalf("event %d: reader saw %+v, log has %+v (an event committed behind the reader)", i, got[i], log[i])
		}
	}
}

func testMetrics(t *testing.T, h Harness) {
	f := setup(t, h)
	t0 := f.now()
	made := f.enqueueMany(20)
	if got := f.claim("w", 20); len(got) != 20 {
		t.Fatalf("claimed %d", len(got))
	}
	succeed := func(id string) {
		if _, err := f.store.Succeed(f.ctx, jobs.SucceedParams{JobID: id, Worker: "w", Answer: jobs.Answer{Output: "ok"}}); err != nil {
			t.Fatal(err)
		}
	}
	fail := func(id string, k jobs.ErrorKind) {
		if _, err := f.store.Fail(f.ctx, jobs.FailParams{JobID: id, Worker: "w", Kind: k}); err != nil {
			t.Fatal(err)
		}
	}
	// Latencies: 12 jobs take 1 s, 6 take 2 s, 2 take 10 s (chosen so that
	// nearest-rank and interpolated percentiles agree).
	f.advance(time.Second)
	for _, id := range made[:10] {
		succeed(id)
	}
	fail(made[10], jobs.KindTimeout)
	fail(made[11], jobs.KindTimeout)
	f.advance(time.Second)
	for _, id := range made[12:16] {
		succeed(id)
	}
	fail(made[16], jobs.KindParse)
	if _, err := f.store.Cancel(f.ctx, jobs.CancelParams{JobID: made[17]}); err != nil {
		t.Fatal(err)
	}
	f.advance(8 * time.Second)
	succeed(made[18])
	succeed(made[19])
	// Not finished: one queued, one running; and one job in another org.
	f.enqueue(jobs.EnqueueParams{OrgID: "org-1"})
	f.enqueue(jobs.EnqueueParams{OrgID: "org-1"})
	f.claim("w", 1)
	f.enqueue(jobs.EnqueueParams{OrgID: "org-2", AvailableAt: f.now().Add(time.Hour)})

	m, err := f.store.Metrics(f.ctx, jobs.MetricsParams{OrgID: "org-1"})
	if err != nil {
		t.Fatalf("Metrics: %v", err)
	}
	wantCounts := map[jobs.State]int{jobs.Queued: 1, jobs.Running: 1, jobs.Succeeded: 16, jobs.Failed: 3, jobs.Cancelled: 1, jobs.Superseded: 0}
	for _, st := range jobs.States() {
		n, ok := m.Counts[st]
		if !ok || n != wantCounts[st] {
			t.Errorf("Counts[%s] = %d (present %v), want %d", st, n, ok, wantCounts[st])
		}
	}
	if m.Finished != 20 {
		t.Errorf("Finished = %d, want 20", m.Finished)
	}
	if m.LatencyP50 != time.Second || m.LatencyP95 != 10*time.Second || m.LatencyP99 != 10*time.Second {
		t.Errorf("latency p50/p95/p99 = %v/%v/%v, want 1s/10s/10s", m.LatencyP50, m.LatencyP95, m.LatencyP99)
	}
	wantRate := map[jobs.ErrorKind]float64{jobs.KindTimeout: 0.1, jobs.KindParse: 0.05}
	for _, k := range jobs.ErrorKinds() {
		if got := m.ErrorRate[k]; math.Abs(got-wantRate[k]) > 1e-9 {
			t.Errorf("ErrorRate[%s] = %v, want %v", k, got, wantRate[k])
		}
	}

	// The window: jobs finished at or after t0 + 2 s.
	m, err = f.store.Metrics(f.ctx, jobs.MetricsParams{Since: t0.Add(2 * time.Second)})
	if err != nil {
		t.Fatal(err)
	}
	if m.Finished != 8 || m.LatencyP50 != 2*time.Second || m.LatencyP95 != 10*time.Second || m.LatencyP99 != 10*time.Second {
		t.Errorf("window: finished %d, p50/p95/p99 %v/%v/%v; want 8, 2s/10s/10s", m.Finished, m.LatencyP50, m.LatencyP95, m.LatencyP99)
	}
	if got := m.ErrorRate[jobs.KindParse]; math.Abs(got-0.125) > 1e-9 {
		t.Errorf("window ErrorRate[parse] = %v, want 0.125", got)
	}
	if got := m.ErrorRate[jobs.KindTimeout]; got != 0 {
		t.Errorf("window ErrorRate[timeout] = %v, want 0", got)
	}
	if m.Counts[jobs.Queued] != 2 {
		t.Errorf("all orgs: Counts[queued] = %d, want 2", m.Counts[jobs.Queued])
	}

	m, err = f.store.Metrics(f.ctx, jobs.MetricsParams{OrgID: "org-2"})
	if err != nil {
		t.Fatal(err)
	}
	if m.Counts[jobs.Queued] != 1 || m.Finished != 0 || m.LatencyP50 != 0 || len(m.Counts) != len(jobs.States()) {
		t.Errorf("org-2 metrics = %+v", m)
	}
}

func testArchive(t *testing.T, h Harness) {
	f := setup(t, h)
	t0 := f.now()
	newJob := func() jobs.Enqueued { return f.enqueue(jobs.EnqueueParams{OrgID: "org-1"}) }
	j1, j2, j5, j8, j4, j10, j11 := newJob(), newJob(), newJob(), newJob(), newJob(), newJob(), newJob()
	for _, e := range []jobs.Enqueued{j1, j2, j5, j8, j4, j10, j11} {
		f.claimID("w", e.JobID)
	}
	j7 := newJob()
	j3 := f.enqueue(jobs.EnqueueParams{OrgID: "org-1", AvailableAt: t0.Add(time.Hour)})
	succeed := func(id string) {
		if _, err := f.store.Succeed(f.ctx, jobs.SucceedParams{JobID: id, Worker: "w", Answer: jobs.Answer{Output: "ok"}}); err != nil {
			t.Fatal(err)
		}
	}
	fail := func(id string) {
		if _, err := f.store.Fail(f.ctx, jobs.FailParams{JobID: id, Worker: "w", Kind: jobs.KindAuth}); err != nil {
			t.Fatal(err)
		}
	}
	retry := func(id string) jobs.Job {
		r, err := f.store.Retry(f.ctx, jobs.RetryParams{JobID: id})
		if err != nil {
			t.Fatal(err)
		}
		return r
	}

	f.advance(time.Minute)
	succeed(j1.JobID)
	fail(j5.JobID)
	if _, err := f.store.Cancel(f.ctx, jobs.CancelParams{JobID: j7.JobID}); err != nil {
		t.Fatal(err)
	}
	j6 := retry(j5.JobID)
	f.claimID("w", j6.ID)
	fail(j8.JobID)
	f.advance(time.Minute)
	fail(j2.JobID)
	f.advance(time.Minute)
	succeed(j6.ID)
	f.advance(2 * time.Minute)
	succeed(j10.JobID) // exactly at the cut-off: kept
	f.advance(5 * time.Minute)
	succeed(j4.JobID)
	j9 := retry(j8.JobID) // j8 finished before the cut-off; its retry stays queued

	n, err := f.store.Archive(f.ctx, t0.Add(5*time.Minute))
	if err != nil {
		t.Fatalf("Archive: %v", err)
	}
	if n != 6 {
		t.Errorf("Archive deleted %d jobs, want 6", n)
	}
	gone := map[string]bool{j1.JobID: true, j2.JobID: true, j5.JobID: true, j6.ID: true, j7.JobID: true, j8.JobID: true}
	for id := range gone {
		_, err := f.store.GetJob(f.ctx, "", id)
		wantErr(t, err, jobs.ErrNotFound, "GetJob of an archived job")
	}
	for _, id := range []string{j3.JobID, j4.JobID, j9.ID, j10.JobID, j11.JobID} {
		f.job(id)
		if len(f.events(id)) == 0 {
			t.Errorf("kept job %s lost its events", id)
		}
	}
	for _, p := range []string{j1.PromptID, j2.PromptID, j5.PromptID, j7.PromptID} {
		_, err := f.store.GetPrompt(f.ctx, "", p)
		wantErr(t, err, jobs.ErrNotFound, "GetPrompt of a prompt left without jobs")
	}
	if hist, err := f.store.PromptJobs(f.ctx, "", j8.PromptID); err != nil || len(hist) != 1 || hist[0].ID != j9.ID {
		t.Errorf("PromptJobs of a prompt with a kept retry = %v, %v; want [%s]", ids(hist), err, j9.ID)
	}
	_, err = f.store.GetResponse(f.ctx, "", jobs.ResponseID(j1.PromptID, j1.JobID))
	wantErr(t, err, jobs.ErrNotFound, "GetResponse of an archived job")
	if _, err := f.store.GetResponse(f.ctx, "", jobs.ResponseID(j4.PromptID, j4.JobID)); err != nil {
		t.Errorf("kept job's response: %v", err)
	}
	for _, e := range f.allEvents() {
		if gone[e.JobID] {
			t.Errorf("event of archived job %s kept: %+v", e.JobID, e)
		}
	}
	if n, err := f.store.Archive(f.ctx, t0.Add(5*time.Minute)); n != 0 || err != nil {
		t.Errorf("second Archive = %d, %v", n, err)
	}
	// New events after archiving keep increasing past every earlier seq.
	last := f.allEvents()
	maxSeq := last[len(last)-1].Seq
	f.claimID("w", j9.ID)
	if ev := f.allEvents(); ev[len(ev)-1].Seq <= maxSeq {
		t.Errorf("seq %d after archiving, not above %d", ev[len(ev)-1].Seq, maxSeq)
	}
}

func testNotify(t *testing.T, h Harness) {
	f := setup(t, h)
	ctx, cancel := context.WithCancel(f.ctx)
	if f.store.Notifier() != f.store.Notifier() {
		t.Error("Notifier returned another notifier on a second call")
	}
	ch := f.store.Notifier().Notify(ctx)
	e := f.enqueue(jobs.EnqueueParams{})
	recv(t, ch, "notification after Enqueue")
	f.claimID("w", e.JobID)
	recv(t, ch, "notification after Claim")
	if _, err := f.store.Cancel(f.ctx, jobs.CancelParams{JobID: e.JobID}); err != nil {
		t.Fatal(err)
	}
	recv(t, ch, "notification after Cancel")
	cancel()
	for recv(t, ch, "close after the context ends") {
	}

	// Closing the store closes every channel; Close is safe to repeat.
	ch2 := f.store.Notifier().Notify(f.ctx)
	if err := f.store.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	for recv(t, ch2, "close after the store closes") {
	}
	_ = f.store.Close()
	if ch3 := f.store.Notifier().Notify(f.ctx); recv(t, ch3, "Notify on a closed store") {
		t.Errorf("Notify on a closed store delivered a value")
	}
	// Calls after Close fail; they neither hang nor panic.
	if _, err := f.store.Enqueue(f.ctx, jobs.EnqueueParams{Text: "late"}); err == nil {
		t.Errorf("Enqueue on a closed store succeeded")
	}
	if _, err := f.store.Claim(f.ctx, jobs.ClaimParams{Worker: "w"}); err == nil {
		t.Errorf("Claim on a closed store succeeded")
	}
}

// Metrics by org: per org, the jobs finished in the window whose outcome
// stands, their average latency (whole microseconds, rounded down) and
// their nearest-rank p95 (the latency of the ⌈0.95·n⌉-th fastest job,
// where an interpolating method would give another value).
func testMetricsByOrg(t *testing.T, h Harness) {
	f := setup(t, h)
	t0 := f.now()
	enqueue := func(org string, n int) []string {
		var out []string
		for range n {
			out = append(out, f.enqueue(jobs.EnqueueParams{OrgID: org}).JobID)
		}
		return out
	}
	a, b, c, d := enqueue("org-a", 3), enqueue("org-b", 20), enqueue("org-c", 1), enqueue("org-d", 1)
	if got := f.claim("w", 100); len(got) != 25 {
		t.Fatalf("claimed %d jobs, want 25", len(got))
	}
	succeed := func(id string) {
		t.Helper()
		if _, err := f.store.Succeed(f.ctx, jobs.SucceedParams{JobID: id, Worker: "w", Answer: jobs.Answer{Output: "ok"}}); err != nil {
			t.Fatal(err)
		}
	}
	f.advance(500 * time.Millisecond)
	succeed(d[0]) // before the window below
	f.advance(500 * time.Millisecond)
	succeed(a[0])
	for _, id := range b[:19] {
		succeed(id)
	}
	succeed(c[0]) // its retry replaces the outcome: not counted
	if _, err := f.store.Retry(f.ctx, jobs.RetryParams{JobID: c[0]}); err != nil {
		t.Fatal(err)
	}
	f.advance(time.Second)
	if _, err := f.store.Fail(f.ctx, jobs.FailParams{JobID: a[1], Worker: "w", Kind: jobs.KindTimeout}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.store.Cancel(f.ctx, jobs.CancelParams{JobID: a[2]}); err != nil {
		t.Fatal(err)
	}
	f.advance(8 * time.Second)
	succeed(b[19])

	orgA := jobs.OrgLatency{OrgID: "org-a", Finished: 3, LatencyAverage: 1666666 * time.Microsecond, LatencyP95: 2 * time.Second}
	orgB := jobs.OrgLatency{OrgID: "org-b", Finished: 20, LatencyAverage: 1450 * time.Millisecond, LatencyP95: time.Second}
	orgD := jobs.OrgLatency{OrgID: "org-d", Finished: 1, LatencyAverage: 500 * time.Millisecond, LatencyP95: 500 * time.Millisecond}
	for _, c := range []struct {
		p    jobs.MetricsParams
		want []jobs.OrgLatency
	}{
		{jobs.MetricsParams{ByOrg: true, Since: t0.Add(time.Second)}, []jobs.OrgLatency{orgA, orgB}},
		{jobs.MetricsParams{ByOrg: true}, []jobs.OrgLatency{orgA, orgB, orgD}},
		{jobs.MetricsParams{ByOrg: true, OrgID: "org-b"}, []jobs.OrgLatency{orgB}},
		{jobs.MetricsParams{ByOrg: true, OrgID: "org-c"}, nil},
		{jobs.MetricsParams{}, nil},
	} {
		m, err := f.store.Metrics(f.ctx, c.p)
		if err != nil {
			t.Fatalf("Metrics(%+v): %v", c.p, err)
		}
		if len(m.Orgs) != len(c.want) || (len(c.want) > 0 && !reflect.DeepEqual(m.Orgs, c.want)) {
			t.Errorf("Metrics(%+v).Orgs =\n%+v\nwant\n%+v", c.p, m.Orgs, c.want)
		}
	}
}

// Thread: the ancestors of a prompt, oldest first, up to a depth, each
// with the output of its latest job in state succeeded; an archived
// ancestor ends the thread.
func testThread(t *testing.T, h Harness) {
	f := setup(t, h)
	finish := func(e jobs.Enqueued, output *string) {
		t.Helper()
		f.claimID("w", e.JobID)
		var err error
		if output != nil {
			_, err = f.store.Succeed(f.ctx, jobs.SucceedParams{JobID: e.JobID, Worker: "w", Answer: jobs.Answer{Output: *output}})
		} else {
			_, err = f.store.Fail(f.ctx, jobs.FailParams{JobID: e.JobID, Worker: "w", Kind: jobs.KindParse})
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	retry := func(id string) jobs.Enqueued {
		t.Helper()
		r, err := f.store.Retry(f.ctx, jobs.RetryParams{JobID: id})
		if err != nil {
			t.Fatal(err)
		}
		return jobs.Enqueued{PromptID: r.PromptID, JobID: r.ID}
	}
	// p1: answered, then retried and answered again (the retry's output
	// is the latest).
	p1 := f.enqueue(jobs.EnqueueParams{OrgID: "org-1", Text: "one"})
	finish(p1, ptr("first answer"))
	finish(retry(p1.JobID), ptr("answer one"))
	cut := f.advance(time.Hour)
	f.advance(time.Minute)
	// p2: a named prompt whose job failed.
	p2 := f.enqueue(jobs.EnqueueParams{OrgID: "org-1", PromptRef: "summarize", Inputs: json.RawMessage(`{"doc":"d"}`), ParentID: p1.PromptID})
	finish(p2, nil)
	// p3: answered with an empty output.
	p3 := f.enqueue(jobs.EnqueueParams{OrgID: "org-1", Text: "three", ParentID: p2.PromptID})
	finish(p3, ptr(""))
	// p4: answered, then retried; the retry is still queued, so no job of
	// p4 is in state succeeded.
	p4 := f.enqueue(jobs.EnqueueParams{OrgID: "org-1", Text: "four", ParentID: p3.PromptID})
	finish(p4, ptr("answer four"))
	retry(p4.JobID)
	p5 := f.enqueue(jobs.EnqueueParams{OrgID: "org-1", Text: "five", ParentID: p4.PromptID})

	turns := map[string]jobs.Turn{
		p1.PromptID: {PromptID: p1.PromptID, Text: "one", Answer: "answer one", Answered: true},
		p2.PromptID: {PromptID: p2.PromptID},
		p3.PromptID: {PromptID: p3.PromptID, Text: "three", Answered: true},
		p4.PromptID: {PromptID: p4.PromptID, Text: "four"},
	}
	check := func(p jobs.ThreadParams, want ...jobs.Enqueued) {
		t.Helper()
		got, err := f.store.Thread(f.ctx, p)
		if err != nil {
			t.Fatalf("Thread(%+v): %v", p, err)
		}
		var w []jobs.Turn
		for _, e := range want {
			w = append(w, turns[e.PromptID])
		}
		if len(got) != len(w) || (len(w) > 0 && !reflect.DeepEqual(got, w)) {
			t.Errorf("Thread(depth %d, org %q) =\n%+v\nwant\n%+v", p.Depth, p.OrgID, got, w)
		}
	}
	check(jobs.ThreadParams{OrgID: "org-1", PromptID: p5.PromptID, Depth: 10}, p1, p2, p3, p4)
	check(jobs.ThreadParams{PromptID: p5.PromptID, Depth: 4}, p1, p2, p3, p4)
	check(jobs.ThreadParams{OrgID: "org-1", PromptID: p5.PromptID, Depth: 2}, p3, p4)
	check(jobs.ThreadParams{OrgID: "org-1", PromptID: p5.PromptID})
	check(jobs.ThreadParams{OrgID: "org-1", PromptID: p1.PromptID, Depth: 3})
	check(jobs.ThreadParams{OrgID: "org-1", PromptID: p3.PromptID, Depth: 3}, p1, p2)

	_, err := f.store.Thread(f.ctx, jobs.ThreadParams{OrgID: "org-2", PromptID: p5.PromptID, Depth: 3})
	wantErr(t, err, jobs.ErrNotFound, "Thread in another org")
	_, err = f.store.Thread(f.ctx, jobs.ThreadParams{PromptID: jobs.NewID(), Depth: 3})
	wantErr(t, err, jobs.ErrNotFound, "Thread of an unknown prompt")

	// Archiving p1 (both its jobs finished before the cut) ends the thread
	// at p2, whose parent is gone.
	if n, err := f.store.Archive(f.ctx, cut); err != nil || n != 2 {
		t.Fatalf("Archive = %d, %v; want p1's two jobs", n, err)
	}
	check(jobs.ThreadParams{OrgID: "org-1", PromptID: p5.PromptID, Depth: 10}, p2, p3, p4)
}

// Archive works through more jobs than one transaction takes
// (jobs.ArchiveBatch) and reports them all.
func testArchiveBatches(t *testing.T, h Harness) {
	f := setup(t, h)
	made := f.enqueueMany(jobs.ArchiveBatch + 1)
	for _, id := range made {
		if _, err := f.store.Cancel(f.ctx, jobs.CancelParams{JobID: id}); err != nil {
			t.Fatal(err)
		}
	}
	kept := f.enqueue(jobs.EnqueueParams{})
	n, err := f.store.Archive(f.ctx, f.advance(time.Second))
	if err != nil || n != len(made) {
		t.Fatalf("Archive = %d, %v; want %d", n, err, len(made))
	}
	if all := f.listAll(jobs.ListParams{}); len(all) != 1 || all[0].ID != kept.JobID {
		t.Errorf("after Archive: %d jobs left, want only the queued one", len(all))
	}
}

// Current leaves out superseded jobs: each prompt once, with its latest
// job, on every page.
func testListJobsCurrent(t *testing.T, h Harness) {
	f := setup(t, h)
	retry := func(id string) string {
		t.Helper()
		f.advance(time.Second)
		j, err := f.store.Retry(f.ctx, jobs.RetryParams{JobID: id})
		if err != nil {
			t.Fatalf("Retry: %v", err)
		}
		return j.ID
	}
	first, _ := f.jobIn(jobs.Failed)
	retry1 := retry(first.ID)
	if _, err := f.store.Cancel(f.ctx, jobs.CancelParams{JobID: retry1}); err != nil {
		t.Fatal(err)
	}
	retry2 := retry(retry1)
	f.advance(time.Second)
	plain := f.enqueue(jobs.EnqueueParams{OrgID: "org-1"})
	f.advance(time.Second)
	other := f.enqueue(jobs.EnqueueParams{OrgID: "org-2", CreatedBy: "bob"})

	for _, c := range []struct {
		p    jobs.ListParams
		want []string
	}{
		{jobs.ListParams{JobFilter: jobs.JobFilter{Current: true}}, []string{other.JobID, plain.JobID, retry2}},
		{jobs.ListParams{JobFilter: jobs.JobFilter{Current: true}, Limit: 1}, []string{other.JobID, plain.JobID, retry2}},
		{jobs.ListParams{JobFilter: jobs.JobFilter{Current: true, OrgID: "org-1"}}, []string{plain.JobID, retry2}},
		{jobs.ListParams{JobFilter: jobs.JobFilter{Current: true, CreatedBy: "bob"}}, []string{other.JobID}},
		{jobs.ListParams{JobFilter: jobs.JobFilter{Current: true, State: jobs.Queued, OrgID: "org-1"}}, []string{plain.JobID, retry2}},
		{jobs.ListParams{JobFilter: jobs.JobFilter{Current: true, State: jobs.Superseded}}, nil},
		{jobs.ListParams{JobFilter: jobs.JobFilter{State: jobs.Superseded}}, []string{retry1, first.ID}},
		{jobs.ListParams{JobFilter: jobs.JobFilter{OrgID: "org-1"}}, []string{plain.JobID, retry2, retry1, first.ID}},
	} {
		got := ids(f.listAll(c.p))
		if fmt.Sprint(got) != fmt.Sprint(c.want) && !(len(got) == 0 && len(c.want) == 0) {
			t.Errorf("ListJobs(%+v) = %v, want %v", c.p, got, c.want)
		}
	}
}

// ChangesSince with CreatedBy returns only that user's jobs, alone or with
// an org, also on a page cut inside one timestamp.
func testChangesSinceCreatedBy(t *testing.T, h Harness) {
	f := setup(t, h)
	// Three changes in one instant, then one later.
	a1 := f.enqueue(jobs.EnqueueParams{OrgID: "org-a", CreatedBy: "alice"})
	b1 := f.enqueue(jobs.EnqueueParams{OrgID: "org-a", CreatedBy: "bob"})
	a2 := f.enqueue(jobs.EnqueueParams{OrgID: "org-b", CreatedBy: "alice"})
	f.advance(time.Second)
	a3 := f.enqueue(jobs.EnqueueParams{OrgID: "org-a", CreatedBy: "alice"})
	f.advance(time.Second)

	has := func(c jobs.Changes, want ...string) {
		t.Helper()
		got := map[string]bool{}
		for _, j := range c.Jobs {
			got[j.ID] = true
		}
		for _, id := range want {
			if !got[id] {
				t.Errorf("ChangesSince = %v, lacks %s", ids(c.Jobs), id)
			}
		}
		if len(got) != len(want) {
			t.Errorf("ChangesSince = %v, want %v", ids(c.Jobs), want)
		}
	}
	has(f.changes(jobs.ChangesParams{CreatedBy: "alice"}), a1.JobID, a2.JobID, a3.JobID)
	has(f.changes(jobs.ChangesParams{CreatedBy: "bob"}), b1.JobID)
	has(f.changes(jobs.ChangesParams{CreatedBy: "alice", OrgID: "org-a"}), a1.JobID, a3.JobID)
	has(f.changes(jobs.ChangesParams{CreatedBy: "bob", OrgID: "org-b"}))
	has(f.changes(jobs.ChangesParams{CreatedBy: "carol"}))
	// A page of one is extended to the end of its timestamp, with the
	// user's jobs only.
	page := f.changes(jobs.ChangesParams{CreatedBy: "alice", Limit: 1})
	has(page, a1.JobID, a2.JobID)
	has(f.changes(jobs.ChangesParams{CreatedBy: "alice", Since: page.AsOf}), a3.JobID)

	f.claimID("w", a1.JobID)
	f.advance(time.Second)
	before := f.changes(jobs.ChangesParams{})
	f.advance(time.Second)
	f.claimID("w", b1.JobID)
	has(f.changes(jobs.ChangesParams{CreatedBy: "alice", Since: before.AsOf}))
	has(f.changes(jobs.ChangesParams{CreatedBy: "bob", Since: before.AsOf}), b1.JobID)
}

// EventsAfter fills each event's CreatedBy and Attempt from its job as it
// is when read, and filters by CreatedBy (with or without an org), page by
// page; JobEvents leaves both zero.
func testEventsAfterJobFields(t *testing.T, h Harness) {
	f := setup(t, h)
	a := f.enqueue(jobs.EnqueueParams{OrgID: "org-a", CreatedBy: "alice"})
	b := f.enqueue(jobs.EnqueueParams{OrgID: "org-a", CreatedBy: "bob"})
	c := f.enqueue(jobs.EnqueueParams{OrgID: "org-b", CreatedBy: "alice"})
	f.claimID("w1", a.JobID)
	if _, err := f.store.Requeue(f.ctx, jobs.RequeueParams{JobID: a.JobID, Worker: "w1", Kind: jobs.KindTimeout}); err != nil {
		t.Fatal(err)
	}
	f.claimID("w2", a.JobID)
	if err := f.store.AppendAttempt(f.ctx, jobs.AttemptParams{JobID: a.JobID, Worker: "w2", Data: []byte(`{"n":1}`)}); err != nil {
		t.Fatal(err)
	}
	f.claimID("w3", b.JobID)

	jobOf := map[string]jobs.Job{}
	for _, e := range []jobs.Enqueued{a, b, c} {
		jobOf[e.JobID] = f.job(e.JobID)
	}
	if jobOf[a.JobID].Attempt != 2 {
		t.Fatalf("requeued job attempt %d, want 2", jobOf[a.JobID].Attempt)
	}
	all := f.allEvents()
	if len(all) != 8 { // a: 5 (→queued, claim, requeue, claim, attempt), b: 2, c: 1
		t.Fatalf("%d events, want 8", len(all))
	}
	for _, e := range all {
		j := jobOf[e.JobID]
		if e.CreatedBy != j.CreatedBy || e.Attempt != j.Attempt {
			t.Errorf("event %d of job %s: CreatedBy %q Attempt %d, want the job's %q and %d", e.Seq, e.JobID, e.CreatedBy, e.Attempt, j.CreatedBy, j.Attempt)
		}
	}
	for _, e := range f.events(a.JobID) {
		if e.CreatedBy != "" || e.Attempt != 0 {
			t.Errorf("JobEvents: event %d has CreatedBy %q Attempt %d, want both zero", e.Seq, e.CreatedBy, e.Attempt)
		}
	}

	for _, p := range []jobs.EventsParams{
		{CreatedBy: "alice"},
		{CreatedBy: "bob"},
		{CreatedBy: "alice", OrgID: "org-a"},
		{CreatedBy: "alice", OrgID: "org-b"},
		{CreatedBy: "bob", OrgID: "org-b"},
		{CreatedBy: "carol"},
	} {
		var want []int64
		for _, e := range all {
			if e.CreatedBy == p.CreatedBy && (p.OrgID == "" || e.OrgID == p.OrgID) {
				want = append(want, e.Seq)
			}
		}
		// One page, and pages of one.
		page, err := f.store.EventsAfter(f.ctx, p)
		if err != nil {
			t.Fatalf("EventsAfter(%+v): %v", p, err)
		}
		var paged []int64
		for q := p; ; {
			q.Limit = 1
			one, err := f.store.EventsAfter(f.ctx, q)
			if err != nil {
				t.Fatalf("EventsAfter(%+v): %v", q, err)
			}
			if len(one) == 0 {
				break
			}
			if len(one) != 1 {
				t.Fatalf("EventsAfter(%+v) = %d events, want at most 1", q, len(one))
			}
			paged = append(paged, one[0].Seq)
			q.After = one[0].Seq
		}
		var got []int64
		for _, e := range page {
			got = append(got, e.Seq)
			if e.CreatedBy != p.CreatedBy {
				t.Errorf("EventsAfter(%+v) returned an event of %q's job", p, e.CreatedBy)
			}
		}
		if fmt.Sprint(got) != fmt.Sprint(want) || fmt.Sprint(paged) != fmt.Sprint(want) {
			t.Errorf("EventsAfter(%+v): seqs %v, paged %v, want %v", p, got, paged, want)
		}
	}
}

// Metrics with ByOrg counts each org's jobs by state, every state a key,
// orgs with any job in order, and its jobs failed in the window; an org
// filter keeps one org, and without ByOrg there are none.
func testMetricsOrgCounts(t *testing.T, h Harness) {
	f := setup(t, h)
	// finish enqueues a job of org, claims it and moves it on with do.
	finish := func(org string, do func(id string) error) string {
		t.Helper()
		e := f.enqueue(jobs.EnqueueParams{OrgID: org})
		f.claimID("w", e.JobID)
		if err := do(e.JobID); err != nil {
			t.Fatal(err)
		}
		return e.JobID
	}
	succeed := func(id string) error {
		_, err := f.store.Succeed(f.ctx, jobs.SucceedParams{JobID: id, Worker: "w", Answer: jobs.Answer{Output: "ok"}})
		return err
	}
	fail := func(id string) error {
		_, err := f.store.Fail(f.ctx, jobs.FailParams{JobID: id, Worker: "w", Kind: jobs.KindParse})
		return err
	}
	finish("org-a", fail) // before the window
	since := f.advance(time.Second)
	finish("org-a", fail)
	finish("org-a", fail)
	finish("org-a", succeed)
	finish("org-b", func(id string) error {
		_, err := f.store.Cancel(f.ctx, jobs.CancelParams{JobID: id})
		return err
	})
	retried := finish("org-b", fail)
	running := f.enqueue(jobs.EnqueueParams{OrgID: "org-a"})
	f.claimID("w", running.JobID)
	// A failed job retried is superseded, not failed: its retry queues.
	if _, err := f.store.Retry(f.ctx, jobs.RetryParams{JobID: retried}); err != nil {
		t.Fatal(err)
	}
	f.enqueue(jobs.EnqueueParams{OrgID: "org-a"})
	f.enqueue(jobs.EnqueueParams{OrgID: "org-c"})

	counts := func(org string, failed int, n map[jobs.State]int) jobs.OrgCounts {
		o := jobs.NewOrgCounts(org)
		maps.Copy(o.Counts, n)
		o.FailedInWindow = failed
		return o
	}
	orgA := counts("org-a", 2, map[jobs.State]int{jobs.Queued: 1, jobs.Running: 1, jobs.Succeeded: 1, jobs.Failed: 3})
	orgB := counts("org-b", 0, map[jobs.State]int{jobs.Queued: 1, jobs.Cancelled: 1, jobs.Superseded: 1})
	orgC := counts("org-c", 0, map[jobs.State]int{jobs.Queued: 1})
	orgAAll := orgA
	orgAAll.FailedInWindow = 3
	for _, c := range []struct {
		p    jobs.MetricsParams
		want []jobs.OrgCounts
	}{
		{jobs.MetricsParams{ByOrg: true, Since: since}, []jobs.OrgCounts{orgA, orgB, orgC}},
		{jobs.MetricsParams{ByOrg: true}, []jobs.OrgCounts{orgAAll, orgB, orgC}},
		{jobs.MetricsParams{ByOrg: true, Since: since, OrgID: "org-a"}, []jobs.OrgCounts{orgA}},
		{jobs.MetricsParams{ByOrg: true, OrgID: "org-z"}, nil},
		{jobs.MetricsParams{Since: since}, nil},
	} {
		m, err := f.store.Metrics(f.ctx, c.p)
		if err != nil {
			t.Fatalf("Metrics(%+v): %v", c.p, err)
		}
		if len(m.OrgCounts) != len(c.want) || (len(c.want) > 0 && !reflect.DeepEqual(m.OrgCounts, c.want)) {
			t.Errorf("Metrics(%+v).OrgCounts =\n%+v\nwant\n%+v", c.p, m.OrgCounts, c.want)
		}
	}
}
