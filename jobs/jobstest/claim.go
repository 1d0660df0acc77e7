package jobstest

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/promptkit/promptkit/jobs"
	"github.com/promptkit/promptkit/pktype"
)

func testClaimFields(t *testing.T, h Harness) {
	f := setup(t, h)
	_, err := f.store.Claim(f.ctx, jobs.ClaimParams{Worker: ""})
	wantErr(t, err, jobs.ErrInvalid, "Claim without a worker")
	if got := f.claim("w", 10); len(got) != 0 {
		t.Fatalf("Claim on an empty queue = %v", ids(got))
	}
	a := f.enqueue(jobs.EnqueueParams{})
	b := f.enqueue(jobs.EnqueueParams{})
	now := f.advance(time.Second)
	// Limit defaults to 1.
	got, err := f.store.Claim(f.ctx, jobs.ClaimParams{Worker: "w1"})
	if err != nil || len(got) != 1 || got[0].ID != a.JobID {
		t.Fatalf("Claim (default limit) = %v, %v; want [%s]", ids(got), err, a.JobID)
	}
	j := got[0]
	if j.State != jobs.Running || j.WorkerClaim != "w1" || j.Attempt != 1 {
		t.Errorf("claimed job = %+v", j)
	}
	sameTime(t, "ClaimedAt", j.ClaimedAt, now)
	sameTime(t, "StartedAt", j.StartedAt, now)
	sameTime(t, "HeartbeatAt", j.HeartbeatAt, now)
	sameTime(t, "UpdatedAt", j.UpdatedAt, now)
	if stored := f.job(a.JobID); stored.WorkerClaim != "w1" || stored.State != jobs.Running {
		t.Errorf("stored job = %+v", stored)
	}
	f.expectTransition(a.JobID, jobs.Queued, jobs.Running)
	if got := f.claim("w2", 10); len(got) != 1 || got[0].ID != b.JobID {
		t.Errorf("second Claim = %v, want [%s]", ids(got), b.JobID)
	}
	if got := f.claim("w3", 10); len(got) != 0 {
		t.Errorf("Claim after all claimed = %v", ids(got))
	}
}

// enqueueMany stores n jobs in batches.
func (f *fixture) enqueueMany(n int) []string {
	f.t.Helper()
	var out []string
	for len(out) < n {
		ps := make([]jobs.EnqueueParams, min(500, n-len(out)))
		for i := range ps {
			ps[i] = jobs.EnqueueParams{OrgID: "org-1", CreatedBy: "u", Text: "p"}
		}
		got, err := f.store.EnqueueBatch(f.ctx, ps)
		if err != nil {
			f.t.Fatalf("EnqueueBatch: %v", err)
		}
		for _, e := range got {
			out = append(out, e.JobID)
		}
	}
	return out
}

// checkClaimedOnce checks that claims (worker → job IDs) hold every job
// exactly once and that the store agrees on each job's worker.
func (f *fixture) checkClaimedOnce(all []string, claims map[string][]string) {
	f.t.Helper()
	owner := map[string]string{}
	for w, list := range claims {
		for _, id := range list {
			if prev, dup := owner[id]; dup {
				f.t.Errorf("job %s claimed by %s and %s", id, prev, w)
			}
			owner[id] = w
		}
	}
	for _, id := range all {
		if _, ok := owner[id]; !ok {
			f.t.Errorf("job %s never claimed", id)
		}
	}
	if len(owner) != len(all) {
		f.t.Errorf("%d jobs claimed, want %d", len(owner), len(all))
	}
	stored := map[string]string{}
	var after string
	for {
		page, err := f.store.ListJobs(f.ctx, jobs.ListParams{After: after, Limit: 1000})
		if err != nil {
			f.t.Fatal(err)
		}
		for _, j := range page.Jobs {
			if j.State != jobs.Running {
				f.t.Errorf("job %s is %s", j.ID, j.State)
			}
			stored[j.ID] = j.WorkerClaim
		}
		if after = page.Next; after == "" {
			break
		}
	}
	for id, w := range owner {
		if stored[id] != w {
			f.t.Errorf("job %s claimed by %s but stored claim is %q", id, w, stored[id])
		}
	}
}

// 16 goroutines claim 2,000 jobs: each is claimed exactly once.
func testClaimConcurrent(t *testing.T, h Harness) {
	f := setupRealClock(t, h)
	all := f.enqueueMany(2000)
	const workers = 16
	claims := make(map[string][]string, workers)
	var mu sync.Mutex
	var wg sync.WaitGroup
	for i := range workers {
		worker := fmt.Sprintf("worker-%02d", i)
		wg.Go(func() {
			var mine []string
			for {
				got, err := f.store.Claim(f.ctx, jobs.ClaimParams{Worker: worker, Limit: 5})
				if err != nil {
					t.Errorf("%s: Claim: %v", worker, err)
					return
				}
				if len(got) == 0 {
					break
				}
				for _, j := range got {
					if j.WorkerClaim != worker || j.State != jobs.Running {
						t.Errorf("%s got job %+v", worker, j)
					}
					mine = append(mine, j.ID)
				}
			}
			mu.Lock()
			claims[worker] = mine
			mu.Unlock()
		})
	}
	wg.Wait()
	f.checkClaimedOnce(all, claims)
}

// Two OS processes claim 2,000 jobs from one database: each is claimed
// exactly once.
func testClaimTwoProcesses(t *testing.T, h Harness) {
	f := setupRealClock(t, h)
	all := f.enqueueMany(2000)
	children := []*child{startChild(t, f.dsn, "process-1"), startChild(t, f.dsn, "process-2")}
	// Both are open and waiting: let them go together.
	for _, c := range children {
		c.stdin.Close()
	}
	claims := map[string][]string{}
	errs := make([]error, len(children))
	lists := make([][]string, len(children))
	var wg sync.WaitGroup
	for i, c := range children {
		wg.Go(func() { lists[i], errs[i] = c.finish() })
	}
	wg.Wait()
	for i, c := range children {
		if errs[i] != nil {
			t.Fatal(errs[i])
		}
		claims[c.worker] = lists[i]
		t.Logf("%s claimed %d jobs", c.worker, len(lists[i]))
	}
	f.checkClaimedOnce(all, claims)
}

func testPriorityThenAge(t *testing.T, h Harness) {
	f := setup(t, h)
	p90 := f.enqueue(jobs.EnqueueParams{Priority: ptr(90)})
	p10 := f.enqueue(jobs.EnqueueParams{Priority: ptr(10)})
	p50 := f.enqueue(jobs.EnqueueParams{Priority: ptr(50)})
	for _, want := range []string{p10.JobID, p50.JobID, p90.JobID} {
		f.claimID("w", want)
	}

	// Equal priority, one org: the order they were queued in, whatever
	// their available_at (fair sharing orders by start tag: see Claim).
	t0 := f.now()
	a := f.enqueue(jobs.EnqueueParams{AvailableAt: t0.Add(2 * time.Second)})
	b := f.enqueue(jobs.EnqueueParams{AvailableAt: t0.Add(time.Second)})
	c := f.enqueue(jobs.EnqueueParams{})
	f.advance(3 * time.Second)
	got := f.claim("w", 10)
	want := []string{a.JobID, b.JobID, c.JobID}
	if g := ids(got); len(g) != 3 || g[0] != want[0] || g[1] != want[1] || g[2] != want[2] {
		t.Errorf("Claim order = %v, want %v (queued first, first)", g, want)
	}

	// Equal priority and available_at: older created_at first.
	at := f.now().Add(time.Minute)
	d := f.enqueue(jobs.EnqueueParams{AvailableAt: at})
	f.advance(time.Second)
	e := f.enqueue(jobs.EnqueueParams{AvailableAt: at})
	f.advance(time.Minute)
	if g := ids(f.claim("w", 10)); len(g) != 2 || g[0] != d.JobID || g[1] != e.JobID {
		t.Errorf("Claim order = %v, want [%s %s] (oldest created_at first)", g, d.JobID, e.JobID)
	}

	// A batch comes back in claim order: priority beats age.
	x := f.enqueue(jobs.EnqueueParams{Priority: ptr(70)})
	f.advance(time.Second)
	y := f.enqueue(jobs.EnqueueParams{Priority: ptr(20)})
	f.advance(time.Second)
	z := f.enqueue(jobs.EnqueueParams{Priority: ptr(20)})
	if g := ids(f.claim("w", 10)); len(g) != 3 || g[0] != y.JobID || g[1] != z.JobID || g[2] != x.JobID {
		t.Errorf("batch Claim order = %v, want [%s %s %s]", g, y.JobID, z.JobID, x.JobID)
	}
}

func testPriorityCeiling(t *testing.T, h Harness) {
	f := setup(t, h)
	p0 := f.enqueue(jobs.EnqueueParams{Priority: ptr(0)})
	p40 := f.enqueue(jobs.EnqueueParams{Priority: ptr(40)})
	p60 := f.enqueue(jobs.EnqueueParams{Priority: ptr(60)})
	p100 := f.enqueue(jobs.EnqueueParams{Priority: ptr(100)})
	claim := func(ceiling *int) []string {
		got, err := f.store.Claim(f.ctx, jobs.ClaimParams{Worker: "w", Limit: 10, PriorityCeiling: ceiling})
		if err != nil {
			t.Fatal(err)
		}
		return ids(got)
	}
	if g := claim(ptr(0)); len(g) != 1 || g[0] != p0.JobID {
		t.Errorf("ceiling 0 claimed %v, want [%s]", g, p0.JobID)
	}
	if g := claim(ptr(50)); len(g) != 1 || g[0] != p40.JobID {
		t.Errorf("ceiling 50 claimed %v, want [%s]", g, p40.JobID)
	}
	if g := claim(ptr(50)); len(g) != 0 {
		t.Errorf("ceiling 50 claimed %v, want none", g)
	}
	if g := claim(nil); len(g) != 2 || g[0] != p60.JobID || g[1] != p100.JobID {
		t.Errorf("default ceiling claimed %v, want [%s %s]", g, p60.JobID, p100.JobID)
	}
}

func testNotBefore(t *testing.T, h Harness) {
	f := setup(t, h)
	at := f.now().Add(time.Minute)
	e := f.enqueue(jobs.EnqueueParams{AvailableAt: at})
	if g := f.claim("w", 10); len(g) != 0 {
		t.Fatalf("claimed a job a minute early: %v", ids(g))
	}
	f.advance(time.Minute - time.Microsecond)
	if g := f.claim("w", 10); len(g) != 0 {
		t.Fatalf("claimed a job 1µs early: %v", ids(g))
	}
	f.advance(time.Microsecond)
	j := f.claimID("w", e.JobID)
	sameTime(t, "AvailableAt", j.AvailableAt, at)

	// Requeue's not-before time.
	back := f.now().Add(90 * time.Second)
	r, err := f.store.Requeue(f.ctx, jobs.RequeueParams{JobID: e.JobID, Worker: "w", AvailableAt: back, Kind: jobs.KindRateLimit})
	if err != nil {
		t.Fatal(err)
	}
	sameTime(t, "requeued AvailableAt", r.AvailableAt, back)
	f.advance(90*time.Second - time.Microsecond)
	if g := f.claim("w", 10); len(g) != 0 {
		t.Fatalf("claimed a requeued job early: %v", ids(g))
	}
	f.advance(time.Microsecond)
	f.claimID("w", e.JobID)
}

func testDependencies(t *testing.T, h Harness) {
	finish := map[string]func(f *fixture, id, worker string){
		"succeeded": func(f *fixture, id, w string) {
			if _, err := f.store.Succeed(f.ctx, jobs.SucceedParams{JobID: id, Worker: w, Answer: jobs.Answer{Output: "x"}}); err != nil {
				f.t.Fatal(err)
			}
		},
		"failed": func(f *fixture, id, w string) {
			if _, err := f.store.Fail(f.ctx, jobs.FailParams{JobID: id, Worker: w, Kind: jobs.KindAuth}); err != nil {
				f.t.Fatal(err)
			}
		},
		"cancelled": func(f *fixture, id, w string) {
			if _, err := f.store.Cancel(f.ctx, jobs.CancelParams{JobID: id}); err != nil {
				f.t.Fatal(err)
			}
		},
	}
	for name, fin := range finish {
		t.Run("parent "+name, func(t *testing.T) {
			t.Parallel()
			f := setup(t, h)
			parent := f.enqueue(jobs.EnqueueParams{OrgID: "org-1", Priority: ptr(50)})
			// The child outranks its parent but must wait for it.
			child := f.enqueue(jobs.EnqueueParams{OrgID: "org-1", Priority: ptr(0), DependsOn: parent.JobID})
			grandchild := f.enqueue(jobs.EnqueueParams{OrgID: "org-1", Priority: ptr(0), DependsOn: child.JobID})
			if g := ids(f.claim("w", 10)); len(g) != 1 || g[0] != parent.JobID {
				t.Fatalf("Claim = %v, want only the parent %s", g, parent.JobID)
			}
			if g := f.claim("w", 10); len(g) != 0 {
				t.Fatalf("claimed %v while the parent runs", ids(g))
			}
			fin(f, parent.JobID, "w")
			if g := ids(f.claim("w", 10)); len(g) != 1 || g[0] != child.JobID {
				t.Fatalf("Claim = %v, want only the child %s", g, child.JobID)
			}
			fin(f, child.JobID, "w")
			f.claimID("w", grandchild.JobID)
		})
	}
}

func testHeartbeat(t *testing.T, h Harness) {
	f := setup(t, h)
	a := f.enqueue(jobs.EnqueueParams{})
	b := f.enqueue(jobs.EnqueueParams{})
	q := f.enqueue(jobs.EnqueueParams{AvailableAt: f.now().Add(time.Hour)})
	f.claim("w", 2)
	if n, err := f.store.Heartbeat(f.ctx, jobs.HeartbeatParams{Worker: "w"}); n != 0 || err != nil {
		t.Errorf("Heartbeat of no jobs = %d, %v", n, err)
	}
	now := f.advance(time.Minute)
	if n, err := f.store.Heartbeat(f.ctx, jobs.HeartbeatParams{Worker: "w", JobIDs: []string{a.JobID, b.JobID}}); n != 2 || err != nil {
		t.Errorf("Heartbeat = %d, %v; want 2", n, err)
	}
	for _, id := range []string{a.JobID, b.JobID} {
		j := f.job(id)
		sameTime(t, "HeartbeatAt", j.HeartbeatAt, now)
		if j.State != jobs.Running || j.Attempt != 1 || j.WorkerClaim != "w" {
			t.Errorf("Heartbeat changed more than the heartbeat: %+v", j)
		}
	}
	f.advance(time.Minute)
	beforeB := f.job(b.JobID)
	n, err := f.store.Heartbeat(f.ctx, jobs.HeartbeatParams{Worker: "w", JobIDs: []string{a.JobID, q.JobID, jobs.NewID()}})
	if n != 1 {
		t.Errorf("Heartbeat with a queued and an unknown job updated %d, want 1", n)
	}
	wantErr(t, err, jobs.ErrNotClaimed, "Heartbeat with jobs not under the claim")
	sameTime(t, "HeartbeatAt", f.job(a.JobID).HeartbeatAt, f.now())
	sameTime(t, "untouched HeartbeatAt", f.job(b.JobID).HeartbeatAt, beforeB.HeartbeatAt)
	before := f.snapshot(b.JobID)
	n, err = f.store.Heartbeat(f.ctx, jobs.HeartbeatParams{Worker: "other", JobIDs: []string{b.JobID}})
	if n != 0 {
		t.Errorf("Heartbeat by another worker updated %d", n)
	}
	wantErr(t, err, jobs.ErrNotClaimed, "Heartbeat by another worker")
	f.unchanged(before, "another worker's Heartbeat")
}

func testSucceedResponse(t *testing.T, h Harness) {
	f := setup(t, h)
	e := f.enqueue(jobs.EnqueueParams{OrgID: "org-1"})
	f.claimID("w", e.JobID)
	now := f.advance(3 * time.Second)
	// A known zero (cached) and an unknown count (reasoning) both read back
	// as what they are.
	usage := pktype.Usage{
		TokenUsage: pktype.TokenUsage{PromptTokens: 12, CompletionTokens: 30, TotalTokens: 42},
		Known:      pktype.TokenUsagePresence{PromptTokens: true, CompletionTokens: true, TotalTokens: true, CachedTokens: true},
	}
	j, err := f.store.Succeed(f.ctx, jobs.SucceedParams{JobID: e.JobID, Worker: "w", Answer: jobs.Answer{Output: "the answer",
		Parsed: json.RawMessage(`{"answer": 42}`), Model: "model-x", Usage: usage}})
	if err != nil {
		t.Fatalf("Succeed: %v", err)
	}
	rid := jobs.ResponseID(e.PromptID, e.JobID)
	if j.State != jobs.Succeeded || j.ResponseID != rid {
		t.Errorf("succeeded job = %+v", j)
	}
	sameTime(t, "FinishedAt", j.FinishedAt, now)
	r, err := f.store.GetResponse(f.ctx, "org-1", rid)
	if err != nil {
		t.Fatalf("GetResponse: %v", err)
	}
	if r.ID != rid || r.PromptID != e.PromptID || r.JobID != e.JobID || r.Output != "the answer" ||
		r.Model != "model-x" || r.Usage != usage || !jsonEqual(r.Parsed, []byte(`{"answer":42}`)) {
		t.Errorf("response = %+v (parsed %s)", r, r.Parsed)
	}
	sameTime(t, "response CreatedAt", r.CreatedAt, now)
	_, err = f.store.GetResponse(f.ctx, "org-2", rid)
	wantErr(t, err, jobs.ErrNotFound, "GetResponse in another org")
	if _, err := f.store.GetResponse(f.ctx, "", rid); err != nil {
		t.Errorf("GetResponse any org: %v", err)
	}
}

func testRequeue(t *testing.T, h Harness) {
	f := setup(t, h)
	e := f.enqueue(jobs.EnqueueParams{})
	f.claimID("w", e.JobID)
	now := f.advance(time.Second)
	j, err := f.store.Requeue(f.ctx, jobs.RequeueParams{JobID: e.JobID, Worker: "w", Kind: jobs.KindProvider5xx, Message: "502 from upstream"})
	if err != nil {
		t.Fatalf("Requeue: %v", err)
	}
	if j.State != jobs.Queued || j.Attempt != 2 || j.WorkerClaim != "" || j.ErrorKind != jobs.KindProvider5xx ||
		j.ErrorMessage != "502 from upstream" || !j.FinishedAt.IsZero() {
		t.Errorf("requeued job = %+v", j)
	}
	sameTime(t, "AvailableAt (zero means now)", j.AvailableAt, now)
	f.expectTransition(e.JobID, jobs.Running, jobs.Queued)

	// A hand-back spends no attempt.
	f.claimID("w2", e.JobID)
	j, err = f.store.Requeue(f.ctx, jobs.RequeueParams{JobID: e.JobID, Worker: "w2", Handback: true})
	if err != nil {
		t.Fatalf("Requeue handback: %v", err)
	}
	if j.Attempt != 2 || j.State != jobs.Queued || j.WorkerClaim != "" {
		t.Errorf("handed-back job = %+v", j)
	}
	f.expectData(f.lastTransition(e.JobID), jobs.TransitionData{Worker: "w2", Handback: true}, "hand-back")
	j = f.claimID("w3", e.JobID)
	if j.Attempt != 2 {
		t.Errorf("claim kept attempt %d, want 2", j.Attempt)
	}
}

func testFailAndAttempt(t *testing.T, h Harness) {
	f := setup(t, h)
	e := f.enqueue(jobs.EnqueueParams{})
	f.claimID("w", e.JobID)
	data := json.RawMessage(`{"status": 429, "ms": 120, "usage": {"total_tokens": 3}}`)
	if err := f.store.AppendAttempt(f.ctx, jobs.AttemptParams{JobID: e.JobID, Worker: "w", Data: data}); err != nil {
		t.Fatalf("AppendAttempt: %v", err)
	}
	err := f.store.AppendAttempt(f.ctx, jobs.AttemptParams{JobID: e.JobID, Worker: "other", Data: data})
	wantErr(t, err, jobs.ErrNotClaimed, "AppendAttempt by another worker")
	now := f.advance(time.Second)
	j, err := f.store.Fail(f.ctx, jobs.FailParams{JobID: e.JobID, Worker: "w", Kind: jobs.KindRateLimit, Message: "budget spent"})
	if err != nil {
		t.Fatalf("Fail: %v", err)
	}
	if j.State != jobs.Failed || j.ErrorKind != jobs.KindRateLimit || j.ErrorMessage != "budget spent" {
		t.Errorf("failed job = %+v", j)
	}
	sameTime(t, "FinishedAt", j.FinishedAt, now)
	err = f.store.AppendAttempt(f.ctx, jobs.AttemptParams{JobID: e.JobID, Worker: "w", Data: data})
	wantErr(t, err, jobs.ErrNotClaimed, "AppendAttempt after Fail")
	var attempts []jobs.Event
	for _, ev := range f.events(e.JobID) {
		if ev.Type == jobs.EventAttempt {
			attempts = append(attempts, ev)
		}
	}
	if len(attempts) != 1 {
		t.Fatalf("%d attempt events, want 1", len(attempts))
	}
	a := attempts[0]
	if a.JobID != e.JobID || a.PromptID != e.PromptID || a.From != "" || a.To != "" || !jsonEqual(a.Data, data) {
		t.Errorf("attempt event = %+v (data %s)", a, a.Data)
	}
}

// ClaimAs stores a job claimed by the worker it names, with the events a
// claim would have written, in the same call; an idempotent repeat
// claims nothing, and a dependency or a later start cannot go with it.
func testEnqueueClaimAs(t *testing.T, h Harness) {
	f := setup(t, h)
	e, err := f.store.Enqueue(f.ctx, jobs.EnqueueParams{Text: "now", ClaimAs: "w", IdempotencyKey: "k"})
	if err != nil {
		t.Fatal(err)
	}
	c := e.Claimed
	if e.State != jobs.Running || c == nil || c.ID != e.JobID || c.State != jobs.Running || c.WorkerClaim != "w" ||
		c.ClaimedAt.IsZero() || c.HeartbeatAt.IsZero() || c.Attempt != 1 {
		t.Fatalf("Enqueue with ClaimAs = %+v, claimed %+v", e, c)
	}
	if j := f.job(e.JobID); j.State != jobs.Running || j.WorkerClaim != "w" {
		t.Errorf("stored job = %+v", j)
	}
	var seen []string
	for _, ev := range f.events(e.JobID) {
		seen = append(seen, string(ev.From)+"→"+string(ev.To))
	}
	if want := []string{"→queued", "queued→running"}; !slices.Equal(seen, want) {
		t.Errorf("events %v, want %v", seen, want)
	}
	f.expectData(f.lastTransition(e.JobID), jobs.TransitionData{Worker: "w"}, "claim as stored")
	if got := f.claim("other", 10); len(got) != 0 {
		t.Errorf("another worker claimed %v", got)
	}
	again, err := f.store.Enqueue(f.ctx, jobs.EnqueueParams{Text: "now", ClaimAs: "w2", IdempotencyKey: "k"})
	if err != nil || !again.Existing || again.Claimed != nil || again.JobID != e.JobID {
		t.Errorf("repeat = %+v, %v", again, err)
	}
	if _, err := f.store.Succeed(f.ctx, jobs.SucceedParams{JobID: e.JobID, Worker: "w", Answer: jobs.Answer{Output: "ok"}}); err != nil {
		t.Errorf("Succeed by the claiming worker: %v", err)
	}
	batch, err := f.store.EnqueueBatch(f.ctx, []jobs.EnqueueParams{{Text: "queued"}, {Text: "claimed", ClaimAs: "w"}})
	if err != nil || batch[0].Claimed != nil || batch[0].State != jobs.Queued || batch[1].Claimed == nil ||
		batch[1].Claimed.WorkerClaim != "w" {
		t.Errorf("EnqueueBatch with one ClaimAs = %+v, %v", batch, err)
	}
	_, err = f.store.Enqueue(f.ctx, jobs.EnqueueParams{Text: "x", ClaimAs: "w", DependsOn: e.JobID})
	wantErr(t, err, jobs.ErrInvalid, "ClaimAs with DependsOn")
	_, err = f.store.Enqueue(f.ctx, jobs.EnqueueParams{Text: "x", ClaimAs: "w", AvailableAt: f.advance(0).Add(time.Hour)})
	wantErr(t, err, jobs.ErrInvalid, "ClaimAs with AvailableAt")
}

// Claimed names the given jobs still running under the worker: not one
// another worker runs, one cancelled, one finished, or an unknown ID.
func testClaimed(t *testing.T, h Harness) {
	f := setup(t, h)
	var ids []string
	for range 4 {
		ids = append(ids, f.enqueue(jobs.EnqueueParams{}).JobID)
	}
	for _, id := range ids[:3] {
		f.claimID("w", id)
	}
	f.claimID("other", ids[3])
	if _, err := f.store.Cancel(f.ctx, jobs.CancelParams{JobID: ids[1]}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.store.Succeed(f.ctx, jobs.SucceedParams{JobID: ids[2], Worker: "w"}); err != nil {
		t.Fatal(err)
	}
	got, err := f.store.Claimed(f.ctx, "w", append(slices.Clone(ids), "no-such-job"))
	if err != nil || !slices.Equal(got, ids[:1]) {
		t.Errorf("Claimed = %v, %v; want %v", got, err, ids[:1])
	}
	if got, err := f.store.Claimed(f.ctx, "w", nil); err != nil || len(got) != 0 {
		t.Errorf("Claimed of none = %v, %v", got, err)
	}
}

// A finishing write records the attempt events it carries before its
// transition, in order, in the same transaction; one that does not take
// effect (the claim is lost) records none, and bad attempt data refuses
// the whole write.
func testFinishWithAttempts(t *testing.T, h Harness) {
	f := setup(t, h)
	one, two := json.RawMessage(`{"attempt":1,"status_code":500}`), json.RawMessage(`{"attempt":2,"status_code":200}`)
	kinds := func(jobID string) []string {
		var out []string
		for _, ev := range f.events(jobID) {
			switch ev.Type {
			case jobs.EventAttempt:
				var d struct{ Attempt int }
				if err := json.Unmarshal(ev.Data, &d); err != nil {
					t.Fatalf("attempt data %s: %v", ev.Data, err)
				}
				out = append(out, fmt.Sprintf("attempt %d", d.Attempt))
			case jobs.EventTransition:
				out = append(out, string(ev.To))
			}
		}
		return out
	}
	for _, c := range []struct {
		name  string
		write func(jobID, worker string, attempts []json.RawMessage) error
		to    jobs.State
	}{
		{"succeed", func(id, w string, a []json.RawMessage) error {
			_, err := f.store.Succeed(f.ctx, jobs.SucceedParams{JobID: id, Worker: w, Answer: jobs.Answer{Output: "ok"}, AttemptEvents: a})
			return err
		}, jobs.Succeeded},
		{"fail", func(id, w string, a []json.RawMessage) error {
			_, err := f.store.Fail(f.ctx, jobs.FailParams{JobID: id, Worker: w, Kind: jobs.KindTimeout, AttemptEvents: a})
			return err
		}, jobs.Failed},
		// Last: the job it requeues would be the next claim.
		{"requeue", func(id, w string, a []json.RawMessage) error {
			_, err := f.store.Requeue(f.ctx, jobs.RequeueParams{JobID: id, Worker: w, Kind: jobs.KindTimeout, AttemptEvents: a})
			return err
		}, jobs.Queued},
	} {
		e := f.enqueue(jobs.EnqueueParams{})
		f.claimID("w", e.JobID)
		wantErr(t, c.write(e.JobID, "other", []json.RawMessage{one}), jobs.ErrNotClaimed, c.name+" by another worker")
		wantErr(t, c.write(e.JobID, "w", []json.RawMessage{one, []byte(`{`)}), jobs.ErrInvalid, c.name+" with bad attempt data")
		if err := c.write(e.JobID, "w", []json.RawMessage{one, two}); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		want := []string{"queued", "running", "attempt 1", "attempt 2", string(c.to)}
		if got := kinds(e.JobID); !slices.Equal(got, want) {
			t.Errorf("%s: events %v, want %v", c.name, got, want)
		}
	}
}

// A stored error message is what jobs.ErrorMessage keeps of the caller's:
// redacted, valid UTF-8, at most 500 bytes, cut between characters. The
// message here is multi-byte, over 500 bytes, holds an API key and an
// invalid byte (which PostgreSQL would refuse to store), and its cut falls
// inside a character.
func testErrorMessageBounded(t *testing.T, h Harness) {
	f := setup(t, h)
	const key = "sk-abcdefghijklmnop1234"
	msg := "provider said: key " + key + " rejected \xff " + strings.Repeat("é", 400)
	want := jobs.ErrorMessage(msg)
	if len(want) > jobs.MaxErrorMessage || !utf8.ValidString(want) || strings.Contains(want, key) {
		t.Fatalf("jobs.ErrorMessage keeps %q", want)
	}
	check := func(what string, j jobs.Job, w string) {
		t.Helper()
		stored := f.job(j.ID).ErrorMessage
		if stored != want || j.ErrorMessage != want {
			t.Errorf("%s: stored message %q (returned %q), want %q", what, stored, j.ErrorMessage, want)
		}
		if len(stored) > jobs.MaxErrorMessage || !utf8.ValidString(stored) || strings.Contains(stored, key) {
			t.Errorf("%s: stored message of %d bytes, valid UTF-8 %v, with the key %v",
				what, len(stored), utf8.ValidString(stored), strings.Contains(stored, key))
		}
		f.expectData(f.lastTransition(j.ID), jobs.TransitionData{Worker: w, ErrorKind: jobs.KindProvider4xx, ErrorMessage: want}, what)
	}
	e := f.enqueue(jobs.EnqueueParams{})
	f.claimID("w", e.JobID)
	j, err := f.store.Requeue(f.ctx, jobs.RequeueParams{JobID: e.JobID, Worker: "w", Kind: jobs.KindProvider4xx, Message: msg})
	if err != nil {
		t.Fatalf("Requeue: %v", err)
	}
	check("Requeue", j, "w")
	f.claimID("w2", e.JobID)
	if j, err = f.store.Fail(f.ctx, jobs.FailParams{JobID: e.JobID, Worker: "w2", Kind: jobs.KindProvider4xx, Message: msg}); err != nil {
		t.Fatalf("Fail: %v", err)
	}
	check("Fail", j, "w2")
}

var defaultReclaim = jobs.ReclaimParams{ReclaimAfter: 5 * time.Minute, StuckAfter: 15 * time.Minute}

// expectReclaimed checks that Reclaim at now applied
// ReclaimParams.Decide to before (the job as its lost worker left it): the
// state, kind and message Decide chose, and an event naming the worker.
func (f *fixture) expectReclaimed(before jobs.Job, now time.Time) {
	f.t.Helper()
	d := defaultReclaim.Decide(before)
	j := f.job(before.ID)
	if j.State != d.To || j.ErrorKind != d.Kind || j.ErrorMessage != d.Message {
		f.t.Errorf("reclaimed job: %s %q %q; want %s %q %q", j.State, j.ErrorKind, j.ErrorMessage, d.To, d.Kind, d.Message)
	}
	e := f.lastTransition(before.ID)
	if e.From != jobs.Running || e.To != d.To {
		f.t.Errorf("reclaim event %s → %s, want running → %s", e.From, e.To, d.To)
	}
	f.expectData(e, jobs.TransitionData{Worker: before.WorkerClaim, ErrorKind: d.Kind, ErrorMessage: d.Message}, "reclaim")
}

// Thresholds that ReclaimParams.Normalize refuses are ErrInvalid on every
// store, and such a call changes nothing.
func testReclaimInvalid(t *testing.T, h Harness) {
	f := setup(t, h)
	e := f.enqueue(jobs.EnqueueParams{})
	f.claimID("w", e.JobID)
	f.advance(time.Hour)
	before := f.snapshot(e.JobID)
	for name, p := range map[string]jobs.ReclaimParams{
		"negative reclaim_after":          {ReclaimAfter: -time.Minute},
		"negative stuck_after":            {StuckAfter: -time.Minute},
		"reclaim_after equal stuck_after": {ReclaimAfter: time.Minute, StuckAfter: time.Minute},
		"reclaim_after above stuck_after": {ReclaimAfter: 20 * time.Minute},
	} {
		_, err := f.store.Reclaim(f.ctx, p)
		wantNormalizeErr(t, err, p, name)
	}
	f.unchanged(before, "an invalid Reclaim")
}

// Heartbeat exactly 5 minutes old: not reclaimed; 5 minutes + 1µs:
// reclaimed.
func testReclaimHeartbeatEdge(t *testing.T, h Harness) {
	f := setup(t, h)
	e := f.enqueue(jobs.EnqueueParams{})
	fresh := f.enqueue(jobs.EnqueueParams{})
	queued := f.enqueue(jobs.EnqueueParams{AvailableAt: f.now().Add(time.Hour)})
	claimed := f.claimID("w", e.JobID)
	f.advance(time.Minute)
	f.claimID("w", fresh.JobID)
	f.advance(4 * time.Minute)
	if r, err := f.store.Reclaim(f.ctx, defaultReclaim); err != nil || len(r.Requeued)+len(r.Failed) != 0 {
		t.Fatalf("Reclaim at exactly 5 minutes = %+v, %v; want nothing", r, err)
	}
	if j := f.job(e.JobID); j.State != jobs.Running || j.WorkerClaim != "w" {
		t.Fatalf("job at exactly 5 minutes = %+v", j)
	}
	now := f.advance(time.Microsecond)
	r, err := f.store.Reclaim(f.ctx, defaultReclaim)
	if err != nil || len(r.Requeued) != 1 || r.Requeued[0] != e.JobID || len(r.Failed) != 0 {
		t.Fatalf("Reclaim at 5 minutes + 1µs = %+v, %v; want [%s] requeued", r, err, e.JobID)
	}
	j := f.job(e.JobID)
	if j.State != jobs.Queued || j.Attempt != 2 || j.ErrorKind != jobs.KindWorkerCrash || j.WorkerClaim != "" {
		t.Errorf("reclaimed job = %+v", j)
	}
	sameTime(t, "AvailableAt", j.AvailableAt, now)
	f.expectReclaimed(claimed, now)
	if j := f.job(fresh.JobID); j.State != jobs.Running {
		t.Errorf("job with a 4-minute heartbeat is %s", j.State)
	}
	if j := f.job(queued.JobID); j.State != jobs.Queued || j.Attempt != 1 {
		t.Errorf("queued job touched: %+v", j)
	}
	// Available at once.
	if g := ids(f.claim("w2", 10)); len(g) != 1 || g[0] != e.JobID {
		t.Errorf("Claim after reclaim = %v", g)
	}

	// A heartbeat keeps a long-running job.
	f.advance(4 * time.Minute)
	if _, err := f.store.Heartbeat(f.ctx, jobs.HeartbeatParams{Worker: "w", JobIDs: []string{fresh.JobID}}); err != nil {
		t.Fatal(err)
	}
	f.advance(4 * time.Minute)
	if r, err := f.store.Reclaim(f.ctx, defaultReclaim); err != nil || contains(r.Requeued, fresh.JobID) || contains(r.Failed, fresh.JobID) {
		t.Errorf("Reclaim took a job with a 4-minute-old heartbeat: %+v, %v", r, err)
	}
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// Stuck rules: heart-beaten for exactly 15 minutes → failed; 15 minutes −
// 1µs → requeued; attempt == max_attempts → failed. Time without
// heartbeats (the service was down) does not count as running.
func testReclaimStuckEdges(t *testing.T, h Harness) {
	// ran claims a job, heartbeats it after run, then lets the heartbeat
	// go stale by gap and reclaims.
	ran := func(t *testing.T, run, gap time.Duration) (jobs.Job, jobs.Reclaimed, time.Time) {
		f := setup(t, h)
		e := f.enqueue(jobs.EnqueueParams{})
		f.claimID("w", e.JobID)
		f.advance(run)
		if _, err := f.store.Heartbeat(f.ctx, jobs.HeartbeatParams{Worker: "w", JobIDs: []string{e.JobID}}); err != nil {
			t.Fatal(err)
		}
		before := f.job(e.JobID)
		now := f.advance(gap)
		r, err := f.store.Reclaim(f.ctx, defaultReclaim)
		if err != nil {
			t.Fatal(err)
		}
		f.expectReclaimed(before, now)
		return f.job(e.JobID), r, now
	}
	t.Run("heart-beaten for exactly 15 minutes", func(t *testing.T) {
		t.Parallel()
		j, r, now := ran(t, 15*time.Minute, 5*time.Minute+time.Microsecond)
		if len(r.Failed) != 1 || r.Failed[0] != j.ID || len(r.Requeued) != 0 {
			t.Fatalf("Reclaim = %+v; want [%s] failed", r, j.ID)
		}
		if j.State != jobs.Failed || j.ErrorKind != jobs.KindStuck || j.Attempt != 1 {
			t.Errorf("stuck job = %+v", j)
		}
		sameTime(t, "FinishedAt", j.FinishedAt, now)
	})
	t.Run("heart-beaten for 15 minutes - 1µs", func(t *testing.T) {
		t.Parallel()
		j, r, _ := ran(t, 15*time.Minute-time.Microsecond, 5*time.Minute+time.Microsecond)
		if len(r.Requeued) != 1 || r.Requeued[0] != j.ID || len(r.Failed) != 0 {
			t.Fatalf("Reclaim = %+v; want [%s] requeued", r, j.ID)
		}
		if j.State != jobs.Queued || j.Attempt != 2 || j.ErrorKind != jobs.KindWorkerCrash {
			t.Errorf("reclaimed job = %+v", j)
		}
	})
	t.Run("an outage longer than stuck_after", func(t *testing.T) {
		t.Parallel()
		// Ran 2 s, then the whole service was down for an hour: started
		// an hour ago, but it is a crash, not a stuck job.
		j, r, _ := ran(t, 2*time.Second, time.Hour)
		if len(r.Requeued) != 1 || r.Requeued[0] != j.ID || len(r.Failed) != 0 {
			t.Fatalf("Reclaim = %+v; want [%s] requeued", r, j.ID)
		}
		if j.State != jobs.Queued || j.Attempt != 2 || j.ErrorKind != jobs.KindWorkerCrash {
			t.Errorf("job reclaimed after an outage = %+v", j)
		}
	})
	t.Run("attempts spent", func(t *testing.T) {
		t.Parallel()
		f := setup(t, h)
		one := f.enqueue(jobs.EnqueueParams{MaxAttempts: 1})
		two := f.enqueue(jobs.EnqueueParams{MaxAttempts: 2})
		claimed := f.claim("w", 2)
		now := f.advance(5*time.Minute + time.Microsecond)
		r, err := f.store.Reclaim(f.ctx, defaultReclaim)
		if err != nil || len(r.Failed) != 1 || r.Failed[0] != one.JobID || len(r.Requeued) != 1 || r.Requeued[0] != two.JobID {
			t.Fatalf("Reclaim = %+v, %v; want %s failed (1 of 1) and %s requeued (1 of 2)", r, err, one.JobID, two.JobID)
		}
		if j := f.job(one.JobID); j.State != jobs.Failed || j.ErrorKind != jobs.KindStuck {
			t.Errorf("job at attempt == max_attempts = %+v", j)
		}
		if j := f.job(two.JobID); j.Attempt != 2 {
			t.Errorf("requeued job attempt %d, want 2", j.Attempt)
		}
		for _, j := range claimed {
			f.expectReclaimed(j, now)
		}
		f.claimID("w", two.JobID)
		f.advance(5*time.Minute + time.Microsecond)
		r, err = f.store.Reclaim(f.ctx, defaultReclaim)
		if err != nil || len(r.Failed) != 1 || r.Failed[0] != two.JobID {
			t.Fatalf("Reclaim = %+v, %v; want %s failed (2 of 2)", r, err, two.JobID)
		}
		if j := f.job(two.JobID); j.State != jobs.Failed || j.ErrorKind != jobs.KindStuck || j.Attempt != 2 {
			t.Errorf("job at attempt == max_attempts = %+v", j)
		}
	})
}
