package jobstest

import (
	"math"
	"slices"
	"testing"
	"time"

	"github.com/promptkit/promptkit/jobs"
)

// setLimit stores l, failing the test on an error.
func (f *fixture) setLimit(l jobs.Limit) jobs.Limit {
	f.t.Helper()
	out, err := f.store.SetLimit(f.ctx, l)
	if err != nil {
		f.t.Fatalf("SetLimit(%+v): %v", l, err)
	}
	return out
}

// queue enqueues n jobs of org at priority prio, in one batch, and
// returns their IDs in order.
func (f *fixture) queue(org string, prio, n int) []string {
	f.t.Helper()
	ps := make([]jobs.EnqueueParams, n)
	for i := range ps {
		ps[i] = jobs.EnqueueParams{OrgID: org, CreatedBy: "u", Text: "p", Priority: ptr(prio)}
	}
	es, err := f.store.EnqueueBatch(f.ctx, ps)
	if err != nil {
		f.t.Fatalf("EnqueueBatch: %v", err)
	}
	out := make([]string, n)
	for i, e := range es {
		out[i] = e.JobID
	}
	return out
}

// orgsOf names each job's org.
func orgsOf(js []jobs.Job) []string {
	out := make([]string, len(js))
	for i, j := range js {
		out[i] = j.OrgID
	}
	return out
}

// claimEach claims n jobs one call at a time (each call its own claim,
// as workers with one free slot make them).
func (f *fixture) claimEach(n int) []jobs.Job {
	f.t.Helper()
	var out []jobs.Job
	for range n {
		out = append(out, f.claim("w", 1)...)
	}
	return out
}

// ofOrg keeps the IDs of org's jobs, in order.
func ofOrg(js []jobs.Job, org string) []string {
	var out []string
	for _, j := range js {
		if j.OrgID == org {
			out = append(out, j.ID)
		}
	}
	return out
}

// Limits are stored per scope and subject, replaced whole by a second
// SetLimit, listed by scope then subject, and deleted once.
func testLimits(t *testing.T, h Harness) {
	f := setup(t, h)
	if ls, err := f.store.Limits(f.ctx); err != nil || len(ls) != 0 {
		t.Fatalf("Limits on a new store = %v, %v", ls, err)
	}
	full := jobs.Limit{Scope: jobs.LimitOrg, Subject: "org-b", RequestsPerMinute: 60, TokensPerMinute: 90000,
		MaxRunning: 4, DailyUSD: 12.5, MonthlyUSD: 300.25, Weight: 3}
	got := f.setLimit(full)
	want := full
	want.UpdatedAt = f.now()
	if got != want {
		t.Errorf("SetLimit = %+v, want %+v", got, want)
	}
	f.setLimit(jobs.Limit{Scope: jobs.LimitToken, Subject: "tok-1", RequestsPerMinute: 5})
	f.setLimit(jobs.Limit{Scope: jobs.LimitOrg, Subject: "org-a", MaxRunning: 1})
	// A second SetLimit replaces every field, zeros included.
	later := f.advance(time.Second)
	got = f.setLimit(jobs.Limit{Scope: jobs.LimitOrg, Subject: "org-b", Weight: 2})
	want = jobs.Limit{Scope: jobs.LimitOrg, Subject: "org-b", Weight: 2, UpdatedAt: later}
	if got != want {
		t.Errorf("SetLimit again = %+v, want %+v", got, want)
	}
	ls, err := f.store.Limits(f.ctx)
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, l := range ls {
		keys = append(keys, string(l.Scope)+"/"+l.Subject)
	}
	if want := []string{"org/org-a", "org/org-b", "token/tok-1"}; !slices.Equal(keys, want) {
		t.Errorf("Limits = %v, want %v", keys, want)
	}
	if ls[1] != want {
		t.Errorf("listed %+v, want %+v", ls[1], want)
	}
	if err := f.store.DeleteLimit(f.ctx, jobs.LimitOrg, "org-b"); err != nil {
		t.Fatalf("DeleteLimit: %v", err)
	}
	wantErr(t, f.store.DeleteLimit(f.ctx, jobs.LimitOrg, "org-b"), jobs.ErrNotFound, "second DeleteLimit")
	wantErr(t, f.store.DeleteLimit(f.ctx, jobs.LimitOrg, "tok-1"), jobs.ErrNotFound, "DeleteLimit in the wrong scope")
	if ls, _ := f.store.Limits(f.ctx); len(ls) != 2 {
		t.Errorf("Limits after a delete = %+v", ls)
	}
}

// SetLimit refuses what Limit.Normalize refuses, storing nothing.
func testLimitsInvalid(t *testing.T, h Harness) {
	f := setup(t, h)
	for _, l := range []jobs.Limit{
		{Scope: "team", Subject: "x"},
		{Scope: jobs.LimitOrg},
		{Scope: jobs.LimitOrg, Subject: " "},
		{Scope: jobs.LimitOrg, Subject: "o", RequestsPerMinute: -1},
		{Scope: jobs.LimitOrg, Subject: "o", TokensPerMinute: -1},
		{Scope: jobs.LimitOrg, Subject: "o", MaxRunning: -1},
		{Scope: jobs.LimitOrg, Subject: "o", DailyUSD: -0.01},
		{Scope: jobs.LimitOrg, Subject: "o", MonthlyUSD: math.NaN()},
		{Scope: jobs.LimitOrg, Subject: "o", MonthlyUSD: math.Inf(1)},
		{Scope: jobs.LimitOrg, Subject: "o", Weight: -1},
		{Scope: jobs.LimitOrg, Subject: "o", Weight: jobs.MaxWeight + 1},
		{Scope: jobs.LimitToken, Subject: "t", Weight: 1},
		{Scope: jobs.LimitToken, Subject: "t", MaxRunning: 1},
		{Scope: jobs.LimitOrg, Subject: "o\x00"},
	} {
		_, err := f.store.SetLimit(f.ctx, l)
		wantNormalizeErr(t, err, l, "SetLimit")
	}
	if ls, err := f.store.Limits(f.ctx); err != nil || len(ls) != 0 {
		t.Errorf("Limits after refusals = %+v, %v", ls, err)
	}
}

// Among jobs of one priority, claims serve the orgs in turn: org B's three
// jobs, queued behind org A's hundred, come among the first claims, each
// org's own jobs in the order they were queued; a job requeued keeps its
// place.
func testFairOrder(t *testing.T, h Harness) {
	f := setup(t, h)
	a := f.queue("org-a", 50, 100)
	b := f.queue("org-b", 50, 3)
	got := f.claimEach(8)
	t.Logf("claim order %v", orgsOf(got))
	if g := ofOrg(got, "org-b"); !slices.Equal(g, b) {
		t.Errorf("org-b's jobs among the first 8 claims: %v, want all of %v in order", g, b)
	}
	// Interleaved: never two of B's in a row, and A's head first (it was
	// queued before B came).
	if got[0].ID != a[0] {
		t.Errorf("first claim %s, want org-a's first job", got[0].ID)
	}
	for i := 1; i < len(got); i++ {
		if got[i].OrgID == "org-b" && got[i-1].OrgID == "org-b" {
			t.Errorf("claims %d and %d both org-b's: %v", i-1, i, orgsOf(got))
		}
	}
	if g := ofOrg(got, "org-a"); !slices.Equal(g, a[:len(g)]) {
		t.Errorf("org-a's claims %v, want its first %d in order", g, len(g))
	}
	// A requeued job comes back before the org's later jobs.
	back := got[0]
	if _, err := f.store.Requeue(f.ctx, jobs.RequeueParams{JobID: back.ID, Worker: "w", Handback: true}); err != nil {
		t.Fatal(err)
	}
	if g := f.claim("w", 1); len(g) != 1 || g[0].ID != back.ID {
		t.Errorf("after a requeue claimed %v, want %s back first", ids(g), back.ID)
	}
	// One claim of many jobs takes them in the same order.
	rest := f.claim("w", 200)
	if g := ofOrg(rest, "org-a"); !slices.Equal(g, a[len(a)-len(g):]) || len(rest) != 100-5 {
		t.Errorf("the rest: %d jobs, org-a's in order: %v", len(rest), slices.Equal(g, a[len(a)-len(g):]))
	}
}

// Weights share the claims: an org of weight 2 gets two claims for every
// one of an org of weight 1 while both have work; priority still comes
// first.
func testFairWeights(t *testing.T, h Harness) {
	f := setup(t, h)
	f.setLimit(jobs.Limit{Scope: jobs.LimitOrg, Subject: "org-a", Weight: 2})
	f.queue("org-a", 50, 40)
	f.queue("org-b", 50, 40)
	urgent := f.queue("org-c", 10, 2)
	got := f.claim("w", 2)
	if !slices.Equal(ids(got), urgent) {
		t.Errorf("first claims %v, want org-c's urgent %v", ids(got), urgent)
	}
	got = f.claimEach(30)
	na, nb := len(ofOrg(got, "org-a")), len(ofOrg(got, "org-b"))
	if na < 19 || na > 21 || na+nb != 30 {
		t.Errorf("30 claims: org-a (weight 2) %d, org-b (weight 1) %d, want 2:1 (±1): %v", na, nb, orgsOf(got))
	}
	// Over each window of 6 claims, the share holds too.
	for i := 0; i+6 <= len(got); i += 6 {
		if n := len(ofOrg(got[i:i+6], "org-a")); n < 3 || n > 5 {
			t.Errorf("claims %d–%d: org-a got %d of 6: %v", i, i+5, n, orgsOf(got[i:i+6]))
		}
	}
}

// An org that comes back after idling is served in turn with the org
// whose backlog built up meanwhile: neither behind that backlog nor ahead
// of its head.
func testFairIdleReturn(t *testing.T, h Harness) {
	f := setup(t, h)
	f.queue("org-a", 50, 10)
	f.queue("org-b", 50, 10)
	if got := f.claim("w", 20); len(got) != 20 {
		t.Fatalf("claimed %d, want 20", len(got))
	}
	a := f.queue("org-a", 50, 20)
	if got := f.claim("w", 10); !slices.Equal(ids(got), a[:10]) {
		t.Fatalf("claimed %v, want org-a's first 10", ids(got))
	}
	b := f.queue("org-b", 50, 2)
	got := f.claimEach(6)
	t.Logf("claim order %v", orgsOf(got))
	if got[0].ID != a[10] {
		t.Errorf("first claim after org-b's return %s (%s), want org-a's head %s", got[0].ID, got[0].OrgID, a[10])
	}
	first := slices.IndexFunc(got, func(j jobs.Job) bool { return j.OrgID == "org-b" })
	if first < 1 || first > 2 || !slices.Equal(ofOrg(got, "org-b"), b) {
		t.Errorf("org-b's jobs at %v, want both among the first 6 claims, the first 2nd or 3rd", orgsOf(got))
	}
}

// An org's MaxRunning caps its running jobs at every claim, counted on the
// database (a second store on it sees the first's), a claim of many
// taking only the room left; its other jobs stay queued without holding
// up other orgs' jobs; ClaimAs leaves a job queued when the org is full.
func testMaxRunning(t *testing.T, h Harness) {
	f := setup(t, h)
	f.setLimit(jobs.Limit{Scope: jobs.LimitOrg, Subject: "org-a", MaxRunning: 3})
	a := f.queue("org-a", 50, 10)
	b := f.queue("org-b", 50, 4)
	got := f.claim("w", 2)
	if !slices.Equal(ofOrg(got, "org-a"), a[:len(ofOrg(got, "org-a"))]) {
		t.Errorf("claimed %v", orgsOf(got))
	}
	running := len(ofOrg(got, "org-a"))
	got = f.claim("w", 20)
	if n := len(ofOrg(got, "org-a")); running+n != 3 {
		t.Errorf("claim of 20 took %d of org-a's with %d running, want %d (MaxRunning 3)", n, running, 3-running)
	}
	if n := len(ofOrg(got, "org-b")) + 2 - running; n != len(b) {
		t.Errorf("org-b's jobs claimed: %d, want all %d: %v", n, len(b), orgsOf(got))
	}
	if got := f.claim("w", 20); len(got) != 0 {
		t.Errorf("claim with org-a full took %v", orgsOf(got))
	}
	// Another store on the database counts the first one's running jobs.
	other, err := h.Open(f.ctx, f.dsn, jobs.Options{Now: f.clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	if got, err := other.Claim(f.ctx, jobs.ClaimParams{Worker: "w2", Limit: 5}); err != nil || len(got) != 0 {
		t.Errorf("second store claimed %v, %v with org-a full", ids(got), err)
	}
	// Behind org-a's queued jobs, another org's job is claimed.
	c := f.queue("org-c", 50, 1)
	if got := f.claim("w", 5); !slices.Equal(ids(got), c) {
		t.Errorf("claimed %v, want only org-c's %v", ids(got), c)
	}
	// The interactive path respects the cap too: the job just queues.
	e, err := f.store.Enqueue(f.ctx, jobs.EnqueueParams{OrgID: "org-a", CreatedBy: "u", Text: "now", ClaimAs: "w"})
	if err != nil || e.Claimed != nil || e.State != jobs.Queued {
		t.Errorf("ClaimAs with org-a full = %+v, %v; want queued", e, err)
	}
	// One job finishes: there is room for one, across stores.
	if _, err := f.store.Succeed(f.ctx, jobs.SucceedParams{JobID: a[0], Worker: "w", Answer: jobs.Answer{Output: "ok"}}); err != nil {
		t.Fatal(err)
	}
	got, err = other.Claim(f.ctx, jobs.ClaimParams{Worker: "w2", Limit: 5})
	if err != nil || len(got) != 1 || got[0].ID != a[3] {
		t.Errorf("second store claimed %v, %v; want org-a's next, %s, alone", ids(got), err, a[3])
	}
	if _, err := f.store.Succeed(f.ctx, jobs.SucceedParams{JobID: a[1], Worker: "w", Answer: jobs.Answer{Output: "ok"}}); err != nil {
		t.Fatal(err)
	}
	batch, err := f.store.EnqueueBatch(f.ctx, []jobs.EnqueueParams{
		{OrgID: "org-a", CreatedBy: "u", Text: "x", ClaimAs: "w"},
		{OrgID: "org-a", CreatedBy: "u", Text: "y", ClaimAs: "w"},
		{OrgID: "org-b", CreatedBy: "u", Text: "z", ClaimAs: "w"},
	})
	if err != nil || (batch[0].Claimed != nil) == (batch[1].Claimed != nil) || batch[2].Claimed == nil {
		t.Errorf("EnqueueBatch with ClaimAs and room for one of org-a's = %+v, %v", batch, err)
	}
	// Lifting the limit frees the queue.
	if err := f.store.DeleteLimit(f.ctx, jobs.LimitOrg, "org-a"); err != nil {
		t.Fatal(err)
	}
	if got := f.claim("w", 20); len(got) != 10-4+1+1 {
		t.Errorf("after DeleteLimit claimed %d, want %d", len(got), 10-4+1+1)
	}
}
