package jobstest

import (
	"slices"
	"testing"
	"time"

	"github.com/promptkit/promptkit/jobs"
)

// PauseOrg holds a paused org's queued jobs in the queue, whatever its
// MaxRunning, on Claim of one or many, on a second store and on the
// interactive path (ClaimAs), while its running jobs finish and the other
// orgs' jobs are claimed; it sets only the paused flag (SetLimit keeps
// it, Limits shows it), and resuming frees the queue. DeleteLimit removes
// the pause with the limit.
func testPauseOrg(t *testing.T, h Harness) {
	f := setup(t, h)
	a := f.queue("org-a", 50, 4)
	running := f.claim("w", 1)
	if len(running) != 1 || running[0].ID != a[0] {
		t.Fatalf("claimed %v, want org-a's first", ids(running))
	}
	// A pause creates the org's limit, with no other bound.
	got, err := f.store.PauseOrg(f.ctx, "org-a", true)
	want := jobs.Limit{Scope: jobs.LimitOrg, Subject: "org-a", Paused: true, UpdatedAt: f.now()}
	if err != nil || got != want {
		t.Fatalf("PauseOrg = %+v, %v; want %+v", got, err, want)
	}
	b := f.queue("org-b", 50, 2)
	if got := f.claim("w", 10); !slices.Equal(ids(got), b) {
		t.Errorf("with org-a paused claimed %v, want only org-b's %v", orgsOf(got), b)
	}
	if got := f.claimEach(2); len(got) != 0 {
		t.Errorf("claims of one with org-a paused took %v", orgsOf(got))
	}
	other, err := h.Open(f.ctx, f.dsn, jobs.Options{Now: f.clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	if got, err := other.Claim(f.ctx, jobs.ClaimParams{Worker: "w2", Limit: 5}); err != nil || len(got) != 0 {
		t.Errorf("second store claimed %v, %v with org-a paused", ids(got), err)
	}
	e, err := f.store.Enqueue(f.ctx, jobs.EnqueueParams{OrgID: "org-a", CreatedBy: "u", Text: "now", ClaimAs: "w"})
	if err != nil || e.Claimed != nil || e.State != jobs.Queued {
		t.Errorf("ClaimAs with org-a paused = %+v, %v; want queued", e, err)
	}
	// Its running job finishes normally.
	if _, err := f.store.Succeed(f.ctx, jobs.SucceedParams{JobID: a[0], Worker: "w", Answer: jobs.Answer{Output: "ok"}}); err != nil {
		t.Errorf("Succeed of a paused org's running job: %v", err)
	}
	// SetLimit replaces every other field and keeps the pause.
	f.advance(time.Second)
	set := f.setLimit(jobs.Limit{Scope: jobs.LimitOrg, Subject: "org-a", MaxRunning: 10, Weight: 2})
	if !set.Paused || set.MaxRunning != 10 || set.Weight != 2 {
		t.Errorf("SetLimit on a paused org = %+v, want paused with MaxRunning 10, Weight 2", set)
	}
	if got := f.claim("w", 10); len(got) != 0 {
		t.Errorf("paused org with MaxRunning 10 claimed %v", ids(got))
	}
	ls, err := f.store.Limits(f.ctx)
	if err != nil || len(ls) != 1 || !ls[0].Paused || ls[0].MaxRunning != 10 {
		t.Errorf("Limits = %+v, %v; want org-a's, paused", ls, err)
	}
	// Resume: only the flag changes, and the queue moves again.
	later := f.advance(time.Second)
	got, err = f.store.PauseOrg(f.ctx, "org-a", false)
	want = jobs.Limit{Scope: jobs.LimitOrg, Subject: "org-a", MaxRunning: 10, Weight: 2, UpdatedAt: later}
	if err != nil || got != want {
		t.Errorf("PauseOrg(false) = %+v, %v; want %+v", got, err, want)
	}
	if got := f.claim("w", 10); !slices.Equal(ids(got), append(slices.Clone(a[1:]), e.JobID)) {
		t.Errorf("after resume claimed %v, want org-a's queued %v then %s", ids(got), a[1:], e.JobID)
	}
	// DeleteLimit removes the pause too.
	f.store.PauseOrg(f.ctx, "org-c", true)
	c := f.queue("org-c", 50, 1)
	if got := f.claim("w", 1); len(got) != 0 {
		t.Errorf("paused org-c claimed %v", ids(got))
	}
	if err := f.store.DeleteLimit(f.ctx, jobs.LimitOrg, "org-c"); err != nil {
		t.Fatal(err)
	}
	if got := f.claim("w", 1); !slices.Equal(ids(got), c) {
		t.Errorf("after DeleteLimit claimed %v, want %v", ids(got), c)
	}
	for _, org := range []string{"", " ", "o\x00"} {
		_, err := f.store.PauseOrg(f.ctx, org, true)
		wantErr(t, err, jobs.ErrInvalid, "PauseOrg("+org+")")
	}
}

// SkipProfiles leaves queued the jobs of the profiles listed ("" the
// default), without holding up the others, across orgs with and without
// a concurrency limit; a claim without it takes them.
func testClaimSkipProfiles(t *testing.T, h Harness) {
	f := setup(t, h)
	f.setLimit(jobs.Limit{Scope: jobs.LimitOrg, Subject: "org-b", MaxRunning: 5})
	var held, def, other []string
	for _, org := range []string{"org-a", "org-b"} {
		held = append(held, f.enqueue(jobs.EnqueueParams{OrgID: org, Profile: "slow"}).JobID)
		def = append(def, f.enqueue(jobs.EnqueueParams{OrgID: org}).JobID)
		other = append(other, f.enqueue(jobs.EnqueueParams{OrgID: org, Profile: "fast"}).JobID)
	}
	skip := func(limit int, profiles ...string) []string {
		got, err := f.store.Claim(f.ctx, jobs.ClaimParams{Worker: "w", Limit: limit, SkipProfiles: profiles})
		if err != nil {
			t.Fatalf("Claim skipping %q: %v", profiles, err)
		}
		out := ids(got)
		slices.Sort(out)
		return out
	}
	sorted := func(xs ...[]string) []string {
		out := slices.Concat(xs...)
		slices.Sort(out)
		return out
	}
	if got := skip(10, "slow", ""); !slices.Equal(got, sorted(other)) {
		t.Errorf("skipping slow and the default claimed %v, want the fast jobs %v", got, sorted(other))
	}
	if got := skip(10, "slow", "slow"); !slices.Equal(got, sorted(def)) {
		t.Errorf("skipping slow claimed %v, want the default profile's %v", got, sorted(def))
	}
	if got := skip(10); !slices.Equal(got, sorted(held)) {
		t.Errorf("skipping nothing claimed %v, want the slow jobs %v", got, sorted(held))
	}
	_, err := f.store.Claim(f.ctx, jobs.ClaimParams{Worker: "w", SkipProfiles: []string{"a\x00"}})
	wantErr(t, err, jobs.ErrInvalid, "Claim skipping a profile with NUL")
}

// HoldBackend sets and clears a hold on the backend's shared pacing row,
// which SyncPacing returns, also when only reading, leaving the pacers'
// state as it was.
func testHoldBackend(t *testing.T, h Harness) {
	f := setup(t, h)
	pause := f.now().Add(time.Minute)
	f.syncPacing(jobs.PacingSyncParams{Peer: "p", Updates: []jobs.PacingUpdate{{Backend: "b1", Demand: 1, PauseUntil: pause}}})
	f.advance(time.Second)
	for _, b := range []string{"b1", "b2"} {
		if err := f.store.HoldBackend(f.ctx, b, true); err != nil {
			t.Fatalf("HoldBackend(%s): %v", b, err)
		}
	}
	got := f.syncPacing(jobs.PacingSyncParams{})
	b1, ok1 := pacingOf(got, "b1")
	b2, ok2 := pacingOf(got, "b2")
	if !ok1 || !b1.Held || !b1.PauseUntil.Equal(pause) || len(b1.Peers) != 1 {
		t.Errorf("b1 after hold = %+v, want held, its pause and peer kept", b1)
	}
	if !ok2 || !b2.Held || !b2.PauseUntil.IsZero() || !b2.UpdatedAt.Equal(f.now()) {
		t.Errorf("b2 after hold = %+v, want held at %v", b2, f.now())
	}
	// A pacer's news leaves the hold alone.
	f.syncPacing(jobs.PacingSyncParams{Peer: "p", Updates: []jobs.PacingUpdate{{Backend: "b2", Demand: 1, CooldownUntil: pause}}})
	if err := f.store.HoldBackend(f.ctx, "b1", false); err != nil {
		t.Fatal(err)
	}
	got = f.syncPacing(jobs.PacingSyncParams{})
	if b, _ := pacingOf(got, "b1"); b.Held {
		t.Errorf("b1 after release = %+v", b)
	}
	if b, _ := pacingOf(got, "b2"); !b.Held || !b.CooldownUntil.Equal(pause) {
		t.Errorf("b2 after a cooldown = %+v, want still held", b)
	}
	for _, b := range []string{"", string(make([]byte, jobs.MaxPacingName+1)), "a\x00"} {
		wantErr(t, f.store.HoldBackend(f.ctx, b, true), jobs.ErrInvalid, "HoldBackend of a bad name")
	}
}

// Workers report themselves (StartedAt on the first report, SeenAt on
// each), are listed by name when seen since a time, and are asked to
// drain, which their next report learns, until it is undone; an unknown
// worker cannot be drained.
func testWorkers(t *testing.T, h Harness) {
	f := setup(t, h)
	if ws, err := f.store.Workers(f.ctx, time.Time{}); err != nil || len(ws) != 0 {
		t.Fatalf("Workers on a new store = %+v, %v", ws, err)
	}
	report := func(r jobs.WorkerReport) bool {
		t.Helper()
		d, err := f.store.ReportWorker(f.ctx, r)
		if err != nil {
			t.Fatalf("ReportWorker(%+v): %v", r, err)
		}
		return d
	}
	t0 := f.now()
	if report(jobs.WorkerReport{Worker: "w-b", Host: "h1", PID: 10}) {
		t.Error("a new worker is draining")
	}
	t1 := f.advance(time.Minute)
	report(jobs.WorkerReport{Worker: "w-a", Host: "h2", PID: 20, Running: 1})
	t2 := f.advance(time.Minute)
	report(jobs.WorkerReport{Worker: "w-b", Host: "h1", PID: 11, Running: 3})
	ws, err := f.store.Workers(f.ctx, time.Time{})
	want := []jobs.WorkerInfo{
		{Worker: "w-a", Host: "h2", PID: 20, Running: 1, StartedAt: t1, SeenAt: t1},
		{Worker: "w-b", Host: "h1", PID: 11, Running: 3, StartedAt: t0, SeenAt: t2},
	}
	if err != nil || !slices.Equal(ws, want) {
		t.Errorf("Workers = %+v, %v; want %+v", ws, err, want)
	}
	if ws, _ := f.store.Workers(f.ctx, t2); len(ws) != 1 || ws[0].Worker != "w-b" {
		t.Errorf("Workers seen since %v = %+v, want w-b alone", t2, ws)
	}
	got, err := f.store.DrainWorker(f.ctx, "w-a", true)
	want[0].Draining = true
	if err != nil || got != want[0] {
		t.Errorf("DrainWorker = %+v, %v; want %+v", got, err, want[0])
	}
	if !report(jobs.WorkerReport{Worker: "w-a", Host: "h2", PID: 20}) {
		t.Error("a drained worker's report says it is not draining")
	}
	if report(jobs.WorkerReport{Worker: "w-b", Host: "h1", PID: 11}) {
		t.Error("another worker is draining")
	}
	if got, err := f.store.DrainWorker(f.ctx, "w-a", false); err != nil || got.Draining {
		t.Errorf("DrainWorker(false) = %+v, %v", got, err)
	}
	if report(jobs.WorkerReport{Worker: "w-a", Host: "h2", PID: 20}) {
		t.Error("an undrained worker's report says it is draining")
	}
	_, err = f.store.DrainWorker(f.ctx, "nobody", true)
	wantErr(t, err, jobs.ErrNotFound, "DrainWorker of an unknown worker")
	for _, r := range []jobs.WorkerReport{{}, {Worker: " "}, {Worker: "w", PID: -1}, {Worker: "w", Running: -1},
		{Worker: "w\x00"}, {Worker: "w", Host: "h\x00"}} {
		_, err := f.store.ReportWorker(f.ctx, r)
		wantErr(t, err, jobs.ErrInvalid, "ReportWorker of a bad report")
	}
}
