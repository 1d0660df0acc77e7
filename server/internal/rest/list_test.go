package rest

import (
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/promptkit/promptkit/jobs"
	"github.com/promptkit/promptkit/server/internal/auth"
)

// list pages through GET /v1/prompts?query as id, limit at a time, and
// returns every entry in order.
func (f *fixture) list(id auth.Identity, query string, limit int) []PromptState {
	f.t.Helper()
	var out []PromptState
	cursor := ""
	for range 100 {
		var page PromptList
		f.ok(id, "GET", fmt.Sprintf("/v1/prompts?limit=%d&cursor=%s&%s", limit, url.QueryEscape(cursor), query), "", http.StatusOK, &page)
		// Only the last page is short: the store's page holds the
		// caller's prompts alone.
		if len(page.Prompts) > limit || (page.NextCursor != "" && len(page.Prompts) != limit) {
			f.t.Fatalf("a page of %d with cursor %q, limit %d", len(page.Prompts), page.NextCursor, limit)
		}
		out = append(out, page.Prompts...)
		if page.NextCursor == "" {
			return out
		}
		cursor = page.NextCursor
	}
	f.t.Fatal("the listing does not end")
	return nil
}

// promptIDs are the entries' prompt ids, in order.
func promptIDs(ps []PromptState) []string {
	out := make([]string, len(ps))
	for i, p := range ps {
		out[i] = p.PromptID
	}
	return out
}

// TestListPrompts: GET /v1/prompts pages through the caller's prompts,
// newest job first, each once (a retried prompt with its current job): a
// member's own, an admin's org's, never another org's; ?state= filters
// by the current job's state; each entry carries its prompt and, once
// succeeded, its answer, read with one batch read each per page; bad
// parameters are 400s.
func TestListPrompts(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	var anns []Submitted
	for i := range 5 {
		anns = append(anns, f.submit(ann, fmt.Sprintf(`{"text": "p%d"}`, i)))
		f.clk.Advance(time.Millisecond)
	}
	bobs := f.submit(bob, `{"text": "bob's"}`)
	f.clk.Advance(time.Millisecond)
	beas := f.submit(bea, `{"text": "bea's"}`)
	newestFirst := func(ss ...Submitted) []string {
		var ids []string
		for _, s := range slices.Backward(ss) {
			ids = append(ids, s.PromptID)
		}
		return ids
	}

	if got, want := promptIDs(f.list(ann, "", 2)), newestFirst(anns...); !slices.Equal(got, want) {
		t.Errorf("ann's listing:\n got %v\nwant %v", got, want)
	}
	if got, want := promptIDs(f.list(boss, "", 4)), newestFirst(append(slices.Clone(anns), bobs)...); !slices.Equal(got, want) {
		t.Errorf("boss's listing:\n got %v\nwant %v", got, want)
	}
	if got := promptIDs(f.list(bea, "", 10)); !slices.Equal(got, []string{beas.PromptID}) {
		t.Errorf("bea's listing: %v", got)
	}

	// Answer one, cancel and retry another: each shows once, as it is now.
	f.succeed(anns[0].JobID, "**zero**")
	f.ok(ann, "POST", "/v1/jobs/"+anns[1].JobID+"/cancel", "", http.StatusOK, nil)
	var re Submitted
	f.ok(ann, "POST", "/v1/prompts/"+anns[1].PromptID+"/retry", "", http.StatusAccepted, &re)
	f.st.Take()
	all := f.list(ann, "", 10)
	if n := f.st.Take(); n["ListJobs"] != 1 || n["GetPrompts"] != 1 || n["GetResponses"] != 1 || n["GetPrompt"] != 0 || n["GetResponse"] != 0 {
		t.Errorf("one page read %v; want one ListJobs, GetPrompts and GetResponses", n)
	}
	// The retry's job is the newest: its prompt comes first.
	if got, want := promptIDs(all), append([]string{anns[1].PromptID}, newestFirst(anns[0], anns[2], anns[3], anns[4])...); !slices.Equal(got, want) {
		t.Fatalf("after the retry:\n got %v\nwant %v", got, want)
	}
	for _, st := range all {
		i := slices.IndexFunc(anns, func(s Submitted) bool { return s.PromptID == st.PromptID })
		switch {
		case st.Prompt.ID != anns[i].PromptID || st.Prompt.Text != fmt.Sprintf("p%d", i) || st.Prompt.CreatedBy != "ann":
			t.Errorf("entry %d: prompt %+v", i, st.Prompt)
		case i == 0 && (st.Job.State != jobs.Succeeded || st.Answer == nil || st.Answer.Output != "**zero**" ||
			!strings.Contains(st.Answer.HTML, "<strong>zero</strong>")):
			t.Errorf("the answered entry: %+v %+v", st.Job, st.Answer)
		case i == 1 && (st.Job.ID != re.JobID || st.Job.State != jobs.Queued || st.Answer != nil):
			t.Errorf("the retried entry: %+v, want its new job %s", st.Job, re.JobID)
		case i > 1 && (st.Job.ID != anns[i].JobID || st.Answer != nil):
			t.Errorf("entry %d: %+v", i, st.Job)
		}
	}

	if got := promptIDs(f.list(ann, "state=succeeded", 10)); !slices.Equal(got, []string{anns[0].PromptID}) {
		t.Errorf("succeeded: %v", got)
	}
	if got := f.list(ann, "state=cancelled", 10); len(got) != 0 {
		t.Errorf("cancelled: %v (the cancelled job was superseded)", promptIDs(got))
	}
	f.st.Take()
	if got := f.list(ann, "state=failed", 10); len(got) != 0 {
		t.Errorf("failed: %v", promptIDs(got))
	}
	if n := f.st.Take(); n["GetPrompts"]+n["GetResponses"]+n["GetPrompt"]+n["GetResponse"] != 0 {
		t.Errorf("an empty page read %v", n)
	}

	for _, c := range []struct{ query, names string }{
		{"state=bogus", "state"}, {"limit=0", "limit"}, {"limit=x", "limit"},
		{fmt.Sprintf("limit=%d", jobs.MaxListLimit+1), "limit"}, {"cursor=!!", "cursor"},
	} {
		f.refused(ann, "GET", "/v1/prompts?"+c.query, "", http.StatusBadRequest, "invalid_request", c.names)
	}
}

// recent polls GET /v1/recent as id, since since (zero: none).
func (f *fixture) recent(id auth.Identity, since time.Time) RecentPage {
	f.t.Helper()
	target := "/v1/recent"
	if !since.IsZero() {
		target += "?since=" + url.QueryEscape(since.Format(time.RFC3339Nano))
	}
	var p RecentPage
	f.ok(id, "GET", target, "", http.StatusOK, &p)
	if p.AsOf.IsZero() || p.AsOf.Location() != time.UTC {
		f.t.Fatalf("as_of %v, want a UTC time", p.AsOf)
	}
	return p
}

// TestRecent: GET /v1/recent gives the caller's prompts that changed
// since since, each once with its current job (a retry included) and
// its answer, and as_of, the since of the next poll: a poll from it sees
// each later change and nothing older. A member sees its own, an admin
// its org's; a bad since or limit is a 400.
func TestRecent(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	a := f.submit(ann, `{"text": "a"}`)
	b := f.submit(bob, `{"text": "b"}`)
	f.submit(bea, `{"text": "c"}`)
	f.clk.Advance(time.Second)

	rec := f.recent(ann, time.Time{})
	if got := promptIDs(rec.Prompts); !slices.Equal(got, []string{a.PromptID}) || rec.Prompts[0].Prompt.Text != "a" {
		t.Fatalf("ann's first poll: %v", got)
	}
	if got := promptIDs(f.recent(boss, time.Time{}).Prompts); !slices.Equal(got, []string{a.PromptID, b.PromptID}) {
		t.Errorf("boss's first poll: %v", got)
	}
	f.clk.Advance(time.Second)
	if got := f.recent(ann, rec.AsOf).Prompts; len(got) != 0 {
		t.Fatalf("nothing changed, yet: %v", promptIDs(got))
	}

	f.succeed(a.JobID, "answer a")
	f.clk.Advance(time.Second)
	rec = f.recent(ann, rec.AsOf)
	if len(rec.Prompts) != 1 || rec.Prompts[0].PromptID != a.PromptID || rec.Prompts[0].Job.State != jobs.Succeeded ||
		rec.Prompts[0].Answer == nil || rec.Prompts[0].Answer.Output != "answer a" {
		t.Fatalf("after the answer: %+v", rec.Prompts)
	}

	var re Submitted
	f.ok(ann, "POST", "/v1/prompts/"+a.PromptID+"/retry", "", http.StatusAccepted, &re)
	f.clk.Advance(time.Second)
	rec = f.recent(ann, rec.AsOf)
	if len(rec.Prompts) != 1 || rec.Prompts[0].Job.ID != re.JobID || rec.Prompts[0].Job.State != jobs.Queued || rec.Prompts[0].Answer != nil {
		t.Fatalf("after the retry: %+v, want %s once, queued", rec.Prompts, re.JobID)
	}
	for _, c := range []struct{ query, names string }{{"since=yesterday", "since"}, {"limit=-1", "limit"}} {
		f.refused(ann, "GET", "/v1/recent?"+c.query, "", http.StatusBadRequest, "invalid_request", c.names)
	}
}
