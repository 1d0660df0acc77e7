package admin_test

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/promptkit/promptkit/jobs"
	"github.com/promptkit/promptkit/server/internal/admin"
)

func orgIDs(o admin.Overview) []string {
	var ids []string
	for _, v := range o.Orgs {
		ids = append(ids, v.OrgID)
	}
	return ids
}

// TestOverview: the overview counts every state in the caller's scope,
// its finished jobs over the window (?window=, default 15 minutes), and
// lists the orgs by ID with whether each is paused, a paused org with no
// job included; an admin sees its own org only, and a bad window is a
// 400 naming it.
func TestOverview(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	done := f.enqueue("acme", "ann", jobs.EnqueueParams{})
	f.succeed(done.JobID, "ok")
	f.enqueue("acme", "ann", jobs.EnqueueParams{})
	f.enqueue("beta", "bea", jobs.EnqueueParams{})
	if _, err := f.st.PauseOrg(ctx, "gamma", true); err != nil {
		t.Fatal(err)
	}
	now := f.clk.Advance(20 * time.Minute) // the success is older than the default window

	var o admin.Overview
	f.ok(&operator, "GET", "/v1/admin/overview", nil, http.StatusOK, &o)
	if !o.Operator || !o.AsOf.Equal(now) || o.WindowSeconds != 900 {
		t.Errorf("overview: operator %v, as of %v, window %d s; want true, %v, 900", o.Operator, o.AsOf, o.WindowSeconds, now)
	}
	if o.Counts[jobs.Queued] != 2 || o.Counts[jobs.Succeeded] != 1 || o.Finished != 0 {
		t.Errorf("counts %v, finished %d; want 2 queued, 1 succeeded, none finished in 15 minutes", o.Counts, o.Finished)
	}
	if got := orgIDs(o); !slices.Equal(got, []string{"acme", "beta", "gamma"}) {
		t.Errorf("orgs %v, want acme, beta, gamma", got)
	}
	for _, v := range o.Orgs {
		if v.Paused != (v.OrgID == "gamma") {
			t.Errorf("org %s paused %v", v.OrgID, v.Paused)
		}
		if v.OrgID == "acme" && (v.Counts[jobs.Queued] != 1 || v.Counts[jobs.Succeeded] != 1) {
			t.Errorf("acme's counts %v, want 1 queued and 1 succeeded", v.Counts)
		}
	}
	f.ok(&operator, "GET", "/v1/admin/overview?window=1h", nil, http.StatusOK, &o)
	if o.WindowSeconds != 3600 || o.Finished != 1 {
		t.Errorf("?window=1h: window %d s, finished %d; want 3600 and the success", o.WindowSeconds, o.Finished)
	}

	f.ok(&boss, "GET", "/v1/admin/overview", nil, http.StatusOK, &o)
	if o.Operator || o.Counts[jobs.Queued] != 1 || !slices.Equal(orgIDs(o), []string{"acme"}) {
		t.Errorf("acme's admin: operator %v, counts %v, orgs %v; want acme's alone", o.Operator, o.Counts, orgIDs(o))
	}
	f.refused(&boss, "GET", "/v1/admin/overview?org=beta", nil, http.StatusForbidden, "forbidden")
	for _, w := range []string{"30s", "721h", "soon", "-1h"} {
		f.refused(&operator, "GET", "/v1/admin/overview?window="+w, nil, http.StatusBadRequest, "invalid_request", "window")
	}
}

// TestBatches: the batches of the scope, newest first, a page at a time:
// ?limit= pages and next_cursor continues; an admin sees its own org's
// only and is refused another's.
func TestBatches(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	batch := func(org string) string {
		t.Helper()
		in, err := f.st.CreateFile(ctx, jobs.CreateFileParams{OrgID: org, CreatedBy: "u", Purpose: "batch", Filename: "in.jsonl",
			Content: strings.NewReader("{}\n")})
		if err != nil {
			t.Fatal(err)
		}
		b, err := f.st.CreateBatch(ctx, jobs.CreateBatchParams{OrgID: org, CreatedBy: "u", InputFileID: in.ID,
			Endpoint: "/v1/chat/completions", CompletionWindow: "24h", Window: 24 * time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		f.clk.Advance(time.Second)
		return b.ID
	}
	a1, a2, b1, a3 := batch("acme"), batch("acme"), batch("beta"), batch("acme")

	var all []string
	cursor, pages := "", 0
	for {
		var l admin.BatchList
		f.ok(&operator, "GET", "/v1/admin/batches?limit=3&cursor="+cursor, nil, http.StatusOK, &l)
		pages++
		for _, b := range l.Batches {
			all = append(all, b.ID)
		}
		if l.NextCursor == "" || pages > 2 {
			break
		}
		cursor = l.NextCursor
	}
	if want := []string{a3, b1, a2, a1}; pages != 2 || !slices.Equal(all, want) {
		t.Errorf("the operator's pages: %d listing %v, want 2 listing %v", pages, all, want)
	}
	var l admin.BatchList
	f.ok(&boss, "GET", "/v1/admin/batches", nil, http.StatusOK, &l)
	var got []string
	for _, b := range l.Batches {
		got = append(got, b.ID)
	}
	if want := []string{a3, a2, a1}; !slices.Equal(got, want) || l.NextCursor != "" {
		t.Errorf("acme's admin lists %v (next %q), want %v", got, l.NextCursor, want)
	}
	f.refused(&boss, "GET", "/v1/admin/batches?org=beta", nil, http.StatusForbidden, "forbidden")
	f.refused(&operator, "GET", "/v1/admin/batches?limit=-1", nil, http.StatusBadRequest, "invalid_request", "limit")
}

// TestPauseOrgAsAdmin: an org's admin pauses and resumes its own org's
// queue (the store then claims none of its jobs, and another org's still
// run), is refused another org's, and the log names the admin's token.
func TestPauseOrgAsAdmin(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	acme := f.enqueue("acme", "ann", jobs.EnqueueParams{})
	beta := f.enqueue("beta", "bea", jobs.EnqueueParams{})

	var p admin.Paused
	f.ok(&boss, "POST", "/v1/admin/orgs/acme/pause", nil, http.StatusOK, &p)
	if p != (admin.Paused{ID: "acme", Paused: true}) {
		t.Errorf("pause answered %+v", p)
	}
	if !f.logs.Contains("org queue paused") || !f.logs.Contains("by=token:tok_boss") {
		t.Errorf("log %q: want the pause and who paused", f.logs.String())
	}
	f.refused(&boss, "POST", "/v1/admin/orgs/beta/pause", nil, http.StatusForbidden, "forbidden", "own org")
	js, err := f.st.Claim(ctx, jobs.ClaimParams{Worker: "w", Limit: 10})
	if err != nil || len(js) != 1 || js[0].ID != beta.JobID {
		t.Fatalf("claim with acme paused: %+v %v, want beta's job alone", js, err)
	}
	f.ok(&boss, "POST", "/v1/admin/orgs/acme/resume", nil, http.StatusOK, &p)
	if p != (admin.Paused{ID: "acme", Paused: false}) {
		t.Errorf("resume answered %+v", p)
	}
	js, err = f.st.Claim(ctx, jobs.ClaimParams{Worker: "w", Limit: 10})
	if err != nil || len(js) != 1 || js[0].ID != acme.JobID {
		t.Fatalf("claim after the resume: %+v %v, want acme's job", js, err)
	}
}

// TestBackendHolds: an operator's pause of a backend is stored as a hold
// the listing shows (with the backend's window), and the resume lifts it;
// a bad window is a 400 naming it.
func TestBackendHolds(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	held := func() map[string]bool {
		t.Helper()
		bs, err := f.st.SyncPacing(ctx, jobs.PacingSyncParams{})
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]bool{}
		for _, b := range bs {
			out[b.Backend] = b.Held
		}
		return out
	}
	var p admin.Paused
	f.ok(&operator, "POST", "/v1/admin/backends/b1/pause", nil, http.StatusOK, &p)
	if p != (admin.Paused{ID: "b1", Paused: true}) || !held()["b1"] {
		t.Fatalf("pause answered %+v, holds %v; want b1 held", p, held())
	}
	if !f.logs.Contains("backend paused by an operator") || !f.logs.Contains("by=token:tok_olga") {
		t.Errorf("log %q: want the pause and who paused", f.logs.String())
	}
	var l admin.BackendList
	f.ok(&operator, "GET", "/v1/admin/backends?window=1h", nil, http.StatusOK, &l)
	if l.WindowSeconds != 3600 || len(l.Backends) != 1 || l.Backends[0].ID != "b1" || !l.Backends[0].Paused || l.Backends[0].Recent.Backend != "b1" {
		t.Errorf("backends %+v, want b1 paused over an hour", l)
	}
	f.ok(&operator, "POST", "/v1/admin/backends/b1/resume", nil, http.StatusOK, &p)
	if p != (admin.Paused{ID: "b1", Paused: false}) || held()["b1"] {
		t.Fatalf("resume answered %+v, holds %v; want b1 free", p, held())
	}
	f.ok(&operator, "GET", "/v1/admin/backends", nil, http.StatusOK, &l)
	if slices.ContainsFunc(l.Backends, func(b admin.BackendView) bool { return b.Paused }) {
		t.Errorf("backends %+v after the resume, want none paused", l.Backends)
	}
	f.refused(&operator, "GET", "/v1/admin/backends?window=1s", nil, http.StatusBadRequest, "invalid_request", "window")
}

// TestWorkers: the listing holds the workers seen in the last ten
// minutes (on the API's clock); drain and undrain are stored for the
// worker's next report; an unknown worker is a 404.
func TestWorkers(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	report := func(name string) bool {
		t.Helper()
		draining, err := f.st.ReportWorker(ctx, jobs.WorkerReport{Worker: name, Host: "h", PID: 7, Running: 1})
		if err != nil {
			t.Fatal(err)
		}
		return draining
	}
	report("w-old")
	f.clk.Advance(admin.WorkersSeen + time.Minute)
	report("w-new")

	var wl admin.WorkerList
	f.ok(&operator, "GET", "/v1/admin/workers", nil, http.StatusOK, &wl)
	if len(wl.Workers) != 1 || wl.Workers[0].Worker != "w-new" || wl.Workers[0].Running != 1 {
		t.Fatalf("workers %+v, want w-new alone", wl.Workers)
	}
	var info jobs.WorkerInfo
	f.ok(&operator, "POST", "/v1/admin/workers/w-new/drain", nil, http.StatusOK, &info)
	if info.Worker != "w-new" || !info.Draining || !report("w-new") {
		t.Errorf("drain answered %+v; want w-new draining, and told so on its next report", info)
	}
	f.ok(&operator, "POST", "/v1/admin/workers/w-new/undrain", nil, http.StatusOK, &info)
	if info.Draining || report("w-new") {
		t.Errorf("undrain answered %+v; want w-new no longer draining", info)
	}
	f.refused(&operator, "POST", "/v1/admin/workers/nobody/drain", nil, http.StatusNotFound, "not_found")
}
