package server

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/promptkit/promptkit/internal/testkit"
	"github.com/promptkit/promptkit/internal/testkit/storekit"
	"github.com/promptkit/promptkit/jobs"
	"github.com/promptkit/promptkit/server/internal/admin"
)

// queue enqueues n prompts of org through the store, held an hour ahead so
// that they stay queued, and returns their job IDs.
func (e *env) queue(org string, n int, p jobs.EnqueueParams) []string {
	e.t.Helper()
	var ids []string
	for i := range n {
		p.OrgID, p.CreatedBy, p.Text = org, "u-"+org, fmt.Sprintf("%s prompt %d", org, i)
		p.AvailableAt = time.Now().Add(time.Hour)
		q, err := e.st.Enqueue(context.Background(), p)
		if err != nil {
			e.t.Fatal(err)
		}
		ids = append(ids, q.JobID)
	}
	return ids
}

func (e *env) adminJobs(token, query string) []string {
	e.t.Helper()
	r := e.call("GET", "/v1/admin/jobs?"+query, token, nil)
	if r.code != http.StatusOK {
		e.t.Fatalf("GET /v1/admin/jobs?%s: %d %s", query, r.code, r.body)
	}
	var l admin.JobList
	r.decode(e.t, &l)
	var ids []string
	for _, j := range l.Jobs {
		ids = append(ids, j.Job.ID)
	}
	return ids
}

// TestAdminScopes: a member is refused; an org's admin sees and acts on
// its own org only, and not on what orgs share; an operator token and
// local mode see every org.
func TestAdminScopes(t *testing.T) {
	e := setup(t)
	// Local mode, before any token: the operator's view.
	acme := e.queue("acme", 2, jobs.EnqueueParams{})
	beta := e.queue("beta", 1, jobs.EnqueueParams{})
	if got := e.adminJobs("", ""); len(got) != 3 {
		t.Fatalf("local mode sees %d jobs, want 3", len(got))
	}

	member := e.token("acme", "ann", jobs.RoleMember)
	boss := e.token("acme", "boss", jobs.RoleAdmin)
	op := e.token("ops", "olga", jobs.RoleOperator)
	for _, p := range []string{"/v1/admin/overview", "/v1/admin/jobs", "/v1/admin/tokens"} {
		if r := e.call("GET", p, member, nil); r.code != http.StatusForbidden {
			t.Errorf("member GET %s: %d, want 403", p, r.code)
		}
	}
	for _, who := range []struct {
		token    string
		operator bool
	}{{boss, false}, {op, true}} {
		var o admin.Overview
		e.call("GET", "/v1/admin/overview", who.token, nil).decode(t, &o)
		if o.Operator != who.operator {
			t.Errorf("overview: operator %v, want %v", o.Operator, who.operator)
		}
	}
	if got := e.adminJobs(boss, ""); !sameSet(got, acme) {
		t.Errorf("acme's admin sees %v, want acme's %v", got, acme)
	}
	if r := e.call("GET", "/v1/admin/jobs?org=beta", boss, nil); r.code != http.StatusForbidden {
		t.Errorf("acme's admin asking for beta's jobs: %d, want 403", r.code)
	}
	if r := e.call("GET", "/v1/admin/jobs/"+beta[0], boss, nil); r.code != http.StatusNotFound {
		t.Errorf("acme's admin reading beta's job: %d, want 404", r.code)
	}
	if r := e.call("POST", "/v1/admin/orgs/beta/pause", boss, nil); r.code != http.StatusForbidden {
		t.Errorf("acme's admin pausing beta: %d, want 403", r.code)
	}
	for _, p := range []string{"GET /v1/admin/backends", "GET /v1/admin/workers", "POST /v1/admin/backends/x/pause", "POST /v1/admin/workers/w/drain"} {
		method, path, _ := strings.Cut(p, " ")
		if r := e.call(method, path, boss, nil); r.code != http.StatusForbidden {
			t.Errorf("an org's admin: %s: %d, want 403", p, r.code)
		}
	}
	if r := e.call("POST", "/v1/admin/tokens", boss, map[string]any{"user": "x", "role": "operator"}); r.code != http.StatusForbidden {
		t.Errorf("an org's admin creating an operator: %d, want 403", r.code)
	}
	if got := e.adminJobs(op, ""); len(got) != 3 {
		t.Errorf("the operator sees %d jobs, want 3", len(got))
	}
	if got := e.adminJobs(op, "org=beta"); !sameSet(got, beta) {
		t.Errorf("the operator's ?org=beta: %v, want %v", got, beta)
	}
}

func sameSet(a, b []string) bool {
	return slices.Equal(slices.Sorted(slices.Values(a)), slices.Sorted(slices.Values(b)))
}

// TestAdminFiltersAndBulk: the filters narrow the listing, a dry run
// counts without acting, and the action cancels exactly the matching
// jobs, each with an event naming the action and who asked; retrying by
// filter brings them back as new jobs.
func TestAdminFiltersAndBulk(t *testing.T) {
	onStores(t, jobs.Options{}, func(t *testing.T, e *env) {
		urgent := e.queue("acme", 2, jobs.EnqueueParams{Priority: new(5), Profile: "quick"})
		normal := e.queue("acme", 3, jobs.EnqueueParams{})
		beta := e.queue("beta", 2, jobs.EnqueueParams{Priority: new(5)})

		if got := e.adminJobs("", "org=acme&max_priority=10"); !sameSet(got, urgent) {
			t.Errorf("acme, priority ≤ 10: %v, want %v", got, urgent)
		}
		if got := e.adminJobs("", "profile=quick"); !sameSet(got, urgent) {
			t.Errorf("profile quick: %v, want %v", got, urgent)
		}
		if got := e.adminJobs("", "min_priority=50&state=queued"); !sameSet(got, normal) {
			t.Errorf("priority ≥ 50: %v, want %v", got, normal)
		}
		future := time.Now().Add(time.Hour).UTC().Format(time.RFC3339)
		if got := e.adminJobs("", "since="+future); len(got) != 0 {
			t.Errorf("created after an hour from now: %v", got)
		}
		for _, bad := range []string{"state=paused", "min_priority=x", "since=yesterday", "min_priority=200"} {
			if r := e.call("GET", "/v1/admin/jobs?"+bad, "", nil); r.code != http.StatusBadRequest {
				t.Errorf("?%s: %d, want 400", bad, r.code)
			}
		}

		// A bulk action needs a filter.
		if r := e.call("POST", "/v1/admin/jobs/cancel", "", map[string]any{"filter": map[string]any{}}); r.code != http.StatusBadRequest {
			t.Errorf("a bulk cancel without a filter: %d, want 400", r.code)
		}
		filter := map[string]any{"org": "acme"}
		var count admin.BulkCount
		e.call("POST", "/v1/admin/jobs/cancel", "", map[string]any{"filter": filter, "dry_run": true}).decode(t, &count)
		if count.Matched != 5 {
			t.Fatalf("dry run: %d match, want 5", count.Matched)
		}
		if got := e.adminJobs("", "state=queued"); len(got) != 7 {
			t.Fatalf("after the dry run %d jobs are queued, want 7: a dry run must change nothing", len(got))
		}
		var res jobs.BulkResult
		r := e.call("POST", "/v1/admin/jobs/cancel", "", map[string]any{"filter": filter})
		r.decode(t, &res)
		if res.Matched != 5 || res.Done != 5 || res.ID == "" {
			t.Fatalf("bulk cancel: %+v %s", res, r.body)
		}
		for _, id := range append(slices.Clone(urgent), normal...) {
			evs, err := e.st.JobEvents(context.Background(), "", id)
			if err != nil {
				t.Fatal(err)
			}
			last := evs[len(evs)-1]
			var data map[string]any
			_ = json.Unmarshal(last.Data, &data)
			if last.To != jobs.Cancelled || data["by"] != "local" || data["bulk"] != res.ID {
				t.Errorf("job %s: last event %+v (%s), want cancelled by local in bulk %s", id, last, last.Data, res.ID)
			}
		}
		if got := e.adminJobs("", "state=queued"); !sameSet(got, beta) {
			t.Errorf("queued after cancelling acme's: %v, want beta's %v", got, beta)
		}

		// Retry by filter: the cancelled jobs come back as new queued jobs.
		e.call("POST", "/v1/admin/jobs/retry", "", map[string]any{"filter": filter, "dry_run": true}).decode(t, &count)
		if count.Matched != 5 {
			t.Errorf("retry dry run: %d, want 5", count.Matched)
		}
		e.call("POST", "/v1/admin/jobs/retry", "", map[string]any{"filter": filter}).decode(t, &res)
		if res.Done != 5 {
			t.Errorf("bulk retry: %+v", res)
		}
		if got := e.adminJobs("", "org=acme&state=queued"); len(got) != 5 || slices.ContainsFunc(got, func(id string) bool { return slices.Contains(normal, id) }) {
			t.Errorf("acme's queued jobs after the retry: %v: want five new jobs", got)
		}
	})
}

// TestAdminJobTimeline: a job's view places each provider call in time,
// with its status, backend, usage and cost.
func TestAdminJobTimeline(t *testing.T) {
	clk := testkit.NewClock(time.Date(2026, 12, 6, 9, 0, 0, 0, time.UTC))
	e := setupStore(t, storekit.SQLite.New(t).Open(t, jobs.Options{Now: clk.Now}))
	ctx := context.Background()
	sub := e.submit("", map[string]any{"text": "timeline"})
	js, err := e.st.Claim(ctx, jobs.ClaimParams{Worker: "w1", Limit: 1})
	if err != nil || len(js) != 1 || js[0].ID != sub.JobID {
		t.Fatalf("claim: %v %v", js, err)
	}
	claimed := clk.Now()
	// The first call: 5 ms waiting for capacity, 40 ms to a 429, reported
	// 100 ms after the claim.
	clk.Advance(100 * time.Millisecond)
	zero, cost := 0.0, 0.002
	rateLimited := jobs.AttemptEvent{JobAttempt: 1, Generation: 1, Attempt: 1, Dispatched: true, StatusCode: 429,
		Outcome: "error", Failure: "provider_status", CapacityWaitMS: 5, GenerationMS: 40, Backend: "b1", Model: "m", CostUSD: &zero}
	if err := e.st.AppendAttempt(ctx, jobs.AttemptParams{JobID: sub.JobID, Worker: "w1", Data: rateLimited.JSON()}); err != nil {
		t.Fatal(err)
	}
	// The retry: answered in 120 ms, reported a second after the claim.
	clk.Advance(900 * time.Millisecond)
	answered := jobs.AttemptEvent{JobAttempt: 1, Generation: 1, Attempt: 2, Dispatched: true, StatusCode: 200,
		Outcome: "success", GenerationMS: 120, Backend: "b2", Model: "m", CostUSD: &cost}
	if _, err := e.st.Succeed(ctx, jobs.SucceedParams{JobID: sub.JobID, Worker: "w1", Answer: jobs.Answer{Output: "done", Model: "m", Backend: "b2"},
		AttemptEvents: []json.RawMessage{answered.JSON()}}); err != nil {
		t.Fatal(err)
	}
	r := e.call("GET", "/v1/admin/jobs/"+sub.JobID, "", nil)
	if r.code != http.StatusOK {
		t.Fatalf("%d %s", r.code, r.body)
	}
	var v struct {
		Timeline []jobs.AttemptStep `json:"timeline"`
		Response *admin.Answer      `json:"response"`
		Cost     *float64           `json:"cost_usd"`
	}
	r.decode(t, &v)
	if len(v.Timeline) != 2 {
		t.Fatalf("timeline %+v, want 2 calls", v.Timeline)
	}
	first, second := v.Timeline[0], v.Timeline[1]
	if first.StatusCode != 429 || first.Backend != "b1" || second.StatusCode != 200 || second.Backend != "b2" {
		t.Errorf("timeline %+v", v.Timeline)
	}
	for _, c := range []struct {
		name      string
		got, want time.Time
	}{
		{"first started", first.StartedAt, claimed.Add(55 * time.Millisecond)},
		{"first ended", first.EndedAt, claimed.Add(100 * time.Millisecond)},
		{"second started", second.StartedAt, claimed.Add(880 * time.Millisecond)},
		{"second ended", second.EndedAt, claimed.Add(time.Second)},
	} {
		if !c.got.Equal(c.want) {
			t.Errorf("%s at %v, want %v", c.name, c.got, c.want)
		}
	}
	// Before the first: from the claim; before the second: the retry's
	// delay, from the end of the first.
	if first.WaitBeforeMS != 55 || second.WaitBeforeMS != 780 {
		t.Errorf("waits before the calls %d ms and %d ms, want 55 and 780", first.WaitBeforeMS, second.WaitBeforeMS)
	}
	if v.Response == nil || v.Response.Output != "done" || v.Response.HTML == "" || v.Cost == nil || *v.Cost != cost {
		t.Errorf("response %+v, cost %v", v.Response, v.Cost)
	}
}

// TestAdminQueueControl: pausing an org keeps its jobs queued while
// another org's run; pausing a backend holds it in the shared pacing;
// draining a worker is stored for it to find.
func TestAdminQueueControl(t *testing.T) {
	e := setup(t)
	ctx := context.Background()
	if r := e.call("POST", "/v1/admin/orgs/acme/pause", "", nil); r.code != http.StatusOK {
		t.Fatalf("pause acme: %d %s", r.code, r.body)
	}
	a := e.submit("", map[string]any{"text": "local's"}) // org default: not paused
	acme, err := e.st.Enqueue(ctx, jobs.EnqueueParams{OrgID: "acme", CreatedBy: "u", Text: "acme's"})
	if err != nil {
		t.Fatal(err)
	}
	js, err := e.st.Claim(ctx, jobs.ClaimParams{Worker: "w", Limit: 10})
	if err != nil || len(js) != 1 || js[0].ID != a.JobID {
		t.Fatalf("claim with acme paused: %v %v; want only %s", js, err, a.JobID)
	}
	var o admin.Overview
	e.call("GET", "/v1/admin/overview", "", nil).decode(t, &o)
	if i := slices.IndexFunc(o.Orgs, func(v admin.OrgView) bool { return v.OrgID == "acme" }); i < 0 || !o.Orgs[i].Paused || o.Orgs[i].Counts[jobs.Queued] != 1 {
		t.Errorf("overview orgs %+v: want acme paused with 1 queued", o.Orgs)
	}
	e.call("POST", "/v1/admin/orgs/acme/resume", "", nil)
	if js, err = e.st.Claim(ctx, jobs.ClaimParams{Worker: "w", Limit: 10}); err != nil || len(js) != 1 || js[0].ID != acme.JobID {
		t.Fatalf("claim after resuming acme: %v %v", js, err)
	}

	backend := ""
	for id := range e.eng.Pacing() {
		backend = id
	}
	if r := e.call("POST", "/v1/admin/backends/"+backend+"/pause", "", nil); r.code != http.StatusOK {
		t.Fatalf("pause %s: %d %s", backend, r.code, r.body)
	}
	if r := e.call("POST", "/v1/admin/backends/no-such/pause", "", nil); r.code != http.StatusNotFound {
		t.Errorf("pausing an unknown backend: %d, want 404", r.code)
	}
	var bl admin.BackendList
	e.call("GET", "/v1/admin/backends", "", nil).decode(t, &bl)
	if i := slices.IndexFunc(bl.Backends, func(b admin.BackendView) bool { return b.ID == backend }); i < 0 || !bl.Backends[i].Paused {
		t.Errorf("backends %+v: want %s paused", bl.Backends, backend)
	}
	// Cancelling the running job loses the call it may have made: the
	// ledger knows no backend for it, so it is counted apart.
	if _, err := e.st.Cancel(ctx, jobs.CancelParams{JobID: acme.JobID}); err != nil {
		t.Fatal(err)
	}
	e.call("POST", "/v1/admin/backends/"+backend+"/resume", "", nil)
	e.call("GET", "/v1/admin/backends", "", nil).decode(t, &bl)
	if i := slices.IndexFunc(bl.Backends, func(b admin.BackendView) bool { return b.ID == backend }); i < 0 || bl.Backends[i].Paused {
		t.Errorf("backends %+v: want %s resumed", bl.Backends, backend)
	}
	if bl.LostCalls != 1 || slices.ContainsFunc(bl.Backends, func(b admin.BackendView) bool { return b.ID == "" }) {
		t.Errorf("lost calls %d, backends %+v: want the lost call counted apart, with no backend named \"\"", bl.LostCalls, bl.Backends)
	}

	if _, err := e.st.ReportWorker(ctx, jobs.WorkerReport{Worker: "host/1/1", Host: "host", PID: 1, Running: 2}); err != nil {
		t.Fatal(err)
	}
	var wl admin.WorkerList
	e.call("GET", "/v1/admin/workers", "", nil).decode(t, &wl)
	if len(wl.Workers) != 1 || wl.Workers[0].Running != 2 || wl.Workers[0].Draining {
		t.Fatalf("workers %+v", wl.Workers)
	}
	if r := e.call("POST", "/v1/admin/workers/host%2F1%2F1/drain", "", nil); r.code != http.StatusOK {
		t.Fatalf("drain: %d %s", r.code, r.body)
	}
	if draining, err := e.st.ReportWorker(ctx, jobs.WorkerReport{Worker: "host/1/1", Host: "host", PID: 1}); err != nil || !draining {
		t.Errorf("the worker's next report: draining %v %v, want true", draining, err)
	}
	if r := e.call("POST", "/v1/admin/workers/nobody/drain", "", nil); r.code != http.StatusNotFound {
		t.Errorf("draining an unknown worker: %d, want 404", r.code)
	}
}

// TestAdminTokens: a token created on the dashboard works at once, is
// listed without its secret, and is refused once revoked.
func TestAdminTokens(t *testing.T) {
	e := setup(t)
	op := e.token("ops", "olga", jobs.RoleOperator)
	r := e.call("POST", "/v1/admin/tokens", op, map[string]any{"org": "acme", "user": "ann"})
	if r.code != http.StatusCreated {
		t.Fatalf("create: %d %s", r.code, r.body)
	}
	var c admin.CreatedToken
	r.decode(t, &c)
	if c.Role != jobs.RoleMember || c.OrgID != "acme" || c.Secret == "" {
		t.Fatalf("created %+v", c)
	}
	if r := e.call("GET", "/v1/prompts", c.Secret, nil); r.code != http.StatusOK {
		t.Fatalf("the new token: %d", r.code)
	}
	r = e.call("GET", "/v1/admin/tokens?org=acme", op, nil)
	if strings.Contains(string(r.body), c.Secret) {
		t.Fatal("the listing shows a secret")
	}
	var l admin.TokenList
	r.decode(t, &l)
	if len(l.Tokens) != 1 || l.Tokens[0].ID != c.ID {
		t.Fatalf("acme's tokens %+v", l.Tokens)
	}
	boss := e.token("beta", "boss", jobs.RoleAdmin)
	if r := e.call("POST", "/v1/admin/tokens/"+c.ID+"/revoke", boss, nil); r.code != http.StatusNotFound {
		t.Errorf("beta's admin revoking acme's token: %d, want 404", r.code)
	}
	if r := e.call("POST", "/v1/admin/tokens/"+c.ID+"/revoke", op, nil); r.code != http.StatusOK {
		t.Fatalf("revoke: %d %s", r.code, r.body)
	}
	if r := e.call("GET", "/v1/prompts", c.Secret, nil); r.code != http.StatusUnauthorized {
		t.Errorf("the revoked token: %d, want 401", r.code)
	}
}
