package admin_test

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/promptkit/promptkit/jobs"
	"github.com/promptkit/promptkit/pktype"
	"github.com/promptkit/promptkit/server/internal/admin"
)

func rowIDs(l admin.JobList) []string {
	var ids []string
	for _, r := range l.Jobs {
		ids = append(ids, r.Job.ID)
	}
	return slices.Sorted(slices.Values(ids))
}

func sorted(ids ...string) []string { return slices.Sorted(slices.Values(ids)) }

// TestListJobsPagesAndSummaries: the listing pages with ?limit= and
// ?cursor= through every job exactly once; each row carries its prompt's
// profile and a summary: the text cut at 120 characters (runes, not bytes)
// with an ellipsis, a chat's last message, or the named prompt.
func TestListJobsPagesAndSummaries(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	long := strings.Repeat("é", 130)
	text := f.enqueue("acme", "ann", jobs.EnqueueParams{Text: long, Profile: "quick"})
	f.clk.Advance(1)
	chat := f.enqueue("acme", "ann", jobs.EnqueueParams{Chat: &jobs.ChatRequest{Messages: []pktype.Message{
		{Role: "system", Content: "be brief"}, {Role: "user", Content: "the last word"}}}})
	f.clk.Advance(1)
	named := f.enqueue("acme", "ann", jobs.EnqueueParams{PromptRef: "greeting"})

	var seen []string
	cursor := ""
	pages := 0
	for {
		var l admin.JobList
		f.ok(&operator, "GET", "/v1/admin/jobs?limit=2&cursor="+cursor, nil, http.StatusOK, &l)
		pages++
		if len(l.Jobs) > 2 {
			t.Fatalf("page %d has %d rows, over ?limit=2", pages, len(l.Jobs))
		}
		for _, r := range l.Jobs {
			seen = append(seen, r.Job.ID)
			switch r.Job.ID {
			case text.JobID:
				want := strings.Repeat("é", 120) + "…"
				if r.Summary != want || r.Profile != "quick" {
					t.Errorf("the long text's row: summary %q (%d runes), profile %q; want 120 runes and an ellipsis, quick",
						r.Summary, utf8.RuneCountInString(r.Summary), r.Profile)
				}
			case chat.JobID:
				if r.Summary != "the last word" {
					t.Errorf("the chat's summary %q, want its last message", r.Summary)
				}
			case named.JobID:
				if r.Summary != "prompt greeting" {
					t.Errorf("the named prompt's summary %q, want %q", r.Summary, "prompt greeting")
				}
			}
		}
		if l.NextCursor == "" {
			break
		}
		if pages > 3 {
			t.Fatalf("still paging after %d pages: %v", pages, seen)
		}
		cursor = l.NextCursor
	}
	if pages != 2 || !slices.Equal(sorted(seen...), sorted(text.JobID, chat.JobID, named.JobID)) {
		t.Errorf("%d pages listing %v; want 2 pages listing each job once", pages, seen)
	}
}

// TestListJobsScopeAndFilters: an admin lists its own org without naming
// it, and is refused another's; ?user= and ?batch= narrow the listing.
func TestListJobsScopeAndFilters(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ann := f.enqueue("acme", "ann", jobs.EnqueueParams{})
	bob := f.enqueue("acme", "bob", jobs.EnqueueParams{})
	beta := f.enqueue("beta", "bea", jobs.EnqueueParams{})

	var l admin.JobList
	f.ok(&boss, "GET", "/v1/admin/jobs", nil, http.StatusOK, &l)
	if got := rowIDs(l); !slices.Equal(got, sorted(ann.JobID, bob.JobID)) {
		t.Errorf("acme's admin lists %v, want acme's two jobs", got)
	}
	f.refused(&boss, "GET", "/v1/admin/jobs?org=beta", nil, http.StatusForbidden, "forbidden", "own org")
	f.ok(&boss, "GET", "/v1/admin/jobs?user=bob", nil, http.StatusOK, &l)
	if got := rowIDs(l); !slices.Equal(got, []string{bob.JobID}) {
		t.Errorf("?user=bob lists %v, want %s", got, bob.JobID)
	}
	f.ok(&operator, "GET", "/v1/admin/jobs", nil, http.StatusOK, &l)
	if got := rowIDs(l); !slices.Equal(got, sorted(ann.JobID, bob.JobID, beta.JobID)) {
		t.Errorf("the operator lists %v, want every org's job", got)
	}
	f.ok(&operator, "GET", "/v1/admin/jobs?batch=batch_none", nil, http.StatusOK, &l)
	if len(l.Jobs) != 0 || l.Jobs == nil {
		t.Errorf("?batch= of no batch: %+v, want an empty list", l.Jobs)
	}
}

// TestListJobsBadQuery: each malformed parameter is a 400 naming it.
func TestListJobsBadQuery(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	for query, param := range map[string]string{
		"state=paused":     "state",
		"min_priority=x":   "min_priority",
		"max_priority=1.5": "max_priority",
		"since=yesterday":  "since",
		"until=2030-01-02": "until",
		"limit=0":          "limit",
		"limit=x":          "limit",
		"limit=100000":     "limit",
	} {
		f.refused(&operator, "GET", "/v1/admin/jobs?"+query, nil, http.StatusBadRequest, "invalid_request", param)
	}
}

// TestGetJob: a job's view holds the thread its prompt continues (each
// earlier turn with its answer), its answer rendered as HTML, and empty
// lists, not null, where there is nothing; an unknown job, or another
// org's for an admin, is a 404.
func TestGetJob(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	first := f.enqueue("acme", "ann", jobs.EnqueueParams{Text: "first question"})
	f.succeed(first.JobID, "first **answer**")
	f.clk.Advance(1)
	second := f.enqueue("acme", "ann", jobs.EnqueueParams{Text: "second question", ParentID: first.PromptID})

	r := f.call(&boss, "GET", "/v1/admin/jobs/"+second.JobID, nil)
	if r.Code != http.StatusOK {
		t.Fatalf("GET the second job: %d %s", r.Code, r.Body)
	}
	var v admin.JobView
	r.Decode(t, &v)
	if v.Job.ID != second.JobID || v.Prompt.Text != "second question" || v.Response != nil {
		t.Errorf("second job's view: job %s, prompt %q, response %+v", v.Job.ID, v.Prompt.Text, v.Response)
	}
	if len(v.Thread) != 1 || v.Thread[0].PromptID != first.PromptID || v.Thread[0].Text != "first question" ||
		v.Thread[0].Answer != "first **answer**" || !v.Thread[0].Answered {
		t.Errorf("thread %+v, want the first turn with its answer", v.Thread)
	}

	var raw map[string]json.RawMessage
	f.ok(&operator, "GET", "/v1/admin/jobs/"+first.JobID, nil, http.StatusOK, &raw)
	if string(raw["thread"]) != "[]" {
		t.Errorf("the first job's thread is %s, want []", raw["thread"])
	}
	f.ok(&operator, "GET", "/v1/admin/jobs/"+first.JobID, nil, http.StatusOK, &v)
	if v.Response == nil || v.Response.Output != "first **answer**" || !strings.Contains(v.Response.HTML, "<strong>answer</strong>") {
		t.Errorf("the first job's response %+v, want its output and HTML with <strong>", v.Response)
	}
	if len(v.Timeline) != 0 {
		t.Errorf("timeline %+v of a job that recorded no call", v.Timeline)
	}

	beta := f.enqueue("beta", "bea", jobs.EnqueueParams{})
	f.refused(&boss, "GET", "/v1/admin/jobs/"+beta.JobID, nil, http.StatusNotFound, "not_found")
	f.refused(&operator, "GET", "/v1/admin/jobs/job_nope", nil, http.StatusNotFound, "not_found")
}

// TestBulkActsInTheAdminsOrg: an admin's bulk action acts on its own
// org's jobs only, whatever the filter, records the admin's token as who
// acted, and naming another org is refused without acting; the dry run
// counts the same jobs and changes none. Retrying brings the cancelled
// jobs back as new queued jobs of the same prompts.
func TestBulkActsInTheAdminsOrg(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	acme := []jobs.Enqueued{f.enqueue("acme", "ann", jobs.EnqueueParams{}), f.enqueue("acme", "bob", jobs.EnqueueParams{})}
	beta := f.enqueue("beta", "bea", jobs.EnqueueParams{})
	queued := map[string]any{"filter": map[string]any{"state": "queued"}}

	f.refused(&boss, "POST", "/v1/admin/jobs/cancel", map[string]any{"filter": map[string]any{"org": "beta"}},
		http.StatusForbidden, "forbidden")
	var n admin.BulkCount
	f.ok(&boss, "POST", "/v1/admin/jobs/cancel", map[string]any{"filter": map[string]any{"state": "queued"}, "dry_run": true}, http.StatusOK, &n)
	if n.Matched != 2 || !n.DryRun {
		t.Errorf("the admin's dry run: %+v, want 2 matched", n)
	}
	for _, e := range append(acme, beta) {
		if j := f.job(e.JobID); j.State != jobs.Queued {
			t.Fatalf("job %s is %s after a dry run and a refusal, want queued", e.JobID, j.State)
		}
	}

	var res jobs.BulkResult
	f.ok(&boss, "POST", "/v1/admin/jobs/cancel", queued, http.StatusOK, &res)
	if res.Matched != 2 || res.Done != 2 || res.ID == "" {
		t.Fatalf("the admin's bulk cancel: %+v, want 2 of acme's done", res)
	}
	for _, e := range acme {
		evs, err := f.st.JobEvents(ctx, "", e.JobID)
		if err != nil {
			t.Fatal(err)
		}
		last := evs[len(evs)-1]
		var data map[string]any
		_ = json.Unmarshal(last.Data, &data)
		if last.To != jobs.Cancelled || data["by"] != "token:tok_boss" || data["bulk"] != res.ID {
			t.Errorf("job %s: last event to %s with %s, want cancelled by token:tok_boss in bulk %s", e.JobID, last.To, last.Data, res.ID)
		}
	}
	if j := f.job(beta.JobID); j.State != jobs.Queued {
		t.Errorf("beta's job is %s after acme's admin cancelled queued jobs, want queued", j.State)
	}
	if !f.logs.Contains("bulk action") || !f.logs.Contains("by=token:tok_boss") {
		t.Errorf("log %q: want the bulk action and who acted", f.logs.String())
	}

	f.ok(&boss, "POST", "/v1/admin/jobs/retry", map[string]any{"filter": map[string]any{"state": "cancelled"}}, http.StatusOK, &res)
	if res.Matched != 2 || res.Done != 2 {
		t.Fatalf("the admin's bulk retry: %+v, want 2 done", res)
	}
	for _, e := range acme {
		js, err := f.st.PromptJobs(ctx, "acme", e.PromptID)
		if err != nil || len(js) != 2 || js[1].State != jobs.Queued || js[1].ID == e.JobID {
			t.Errorf("prompt %s after the retry: %+v %v, want a new queued job", e.PromptID, js, err)
		}
	}
}

// TestBulkBadInput: a bulk action with a body that is not JSON, with an
// unknown field, over the body limit, without a filter or with a bad
// filter field is refused with the problem naming what is wrong, and
// acts on nothing.
func TestBulkBadInput(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	q := f.enqueue("acme", "ann", jobs.EnqueueParams{})
	for _, c := range []struct {
		body   any
		status int
		code   string
		words  []string
	}{
		{"not json", http.StatusBadRequest, "invalid_json", nil},
		{`{"filter": {"state": "queued"}, "everything": true}`, http.StatusBadRequest, "invalid_json", []string{"everything"}},
		{`{"filter": {"state": "queued"}, "pad": "` + strings.Repeat("x", maxBody) + `"}`, http.StatusRequestEntityTooLarge, "too_large", nil},
		{map[string]any{}, http.StatusBadRequest, "invalid_request", []string{"filter"}},
		{map[string]any{"filter": map[string]any{}}, http.StatusBadRequest, "invalid_request", []string{"filter"}},
		{map[string]any{"filter": map[string]any{"state": "asleep"}}, http.StatusBadRequest, "invalid_request", []string{"state"}},
		{map[string]any{"filter": map[string]any{"since": "last week"}}, http.StatusBadRequest, "invalid_request", []string{"since"}},
	} {
		for _, path := range []string{"/v1/admin/jobs/cancel", "/v1/admin/jobs/retry"} {
			f.refused(&operator, "POST", path, c.body, c.status, c.code, c.words...)
		}
	}
	if j := f.job(q.JobID); j.State != jobs.Queued {
		t.Errorf("the job is %s after refused bulk actions, want queued", j.State)
	}
}
