package admin

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/promptkit/promptkit/jobs"
	"github.com/promptkit/promptkit/server/internal/httpapi"
	"github.com/promptkit/promptkit/server/internal/page"
)

// Filter selects jobs: the query parameters of GET /v1/admin/jobs, and
// the "filter" of a bulk action. Every field set must match.
type Filter struct {
	State   string `json:"state,omitempty"`
	Org     string `json:"org,omitempty"`
	User    string `json:"user,omitempty"`
	Profile string `json:"profile,omitempty"`
	Backend string `json:"backend,omitempty"`
	// MinPriority and MaxPriority bound the priority, inclusive.
	MinPriority *int `json:"min_priority,omitempty"`
	MaxPriority *int `json:"max_priority,omitempty"`
	// Since and Until bound the creation time (RFC 3339): at or after
	// Since, before Until.
	Since string `json:"since,omitempty"`
	Until string `json:"until,omitempty"`
	Batch string `json:"batch,omitempty"`
}

// filterFromQuery reads a Filter from query parameters of the same names.
func filterFromQuery(q url.Values) (Filter, error) {
	f := Filter{State: q.Get("state"), Org: q.Get("org"), User: q.Get("user"), Profile: q.Get("profile"),
		Backend: q.Get("backend"), Since: q.Get("since"), Until: q.Get("until"), Batch: q.Get("batch")}
	for name, dst := range map[string]**int{"min_priority": &f.MinPriority, "max_priority": &f.MaxPriority} {
		if v := q.Get(name); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil {
				return f, httpapi.Invalid(name, name+" must be an integer from 0 to 100")
			}
			*dst = &n
		}
	}
	return f, nil
}

// jobFilter is f as the store takes it, within the org scope allows.
func (f Filter) jobFilter(scopeOrg string) (jobs.JobFilter, error) {
	org, err := orgScope(scopeOrg, f.Org)
	if err != nil {
		return jobs.JobFilter{}, err
	}
	out := jobs.JobFilter{OrgID: org, CreatedBy: f.User, State: jobs.State(f.State), Profile: f.Profile,
		Backend: f.Backend, MinPriority: f.MinPriority, MaxPriority: f.MaxPriority, BatchID: f.Batch}
	if f.State != "" && !out.State.Valid() {
		return out, httpapi.Invalid("state", "state must be one of queued, running, succeeded, failed, cancelled, superseded")
	}
	for name, v := range map[string]struct {
		s   string
		dst *time.Time
	}{"since": {f.Since, &out.Since}, "until": {f.Until, &out.Until}} {
		if v.s == "" {
			continue
		}
		t, err := time.Parse(time.RFC3339Nano, v.s)
		if err != nil {
			return out, httpapi.Invalid(name, name+" must be an RFC 3339 time, such as 2026-01-02T15:04:05Z")
		}
		*v.dst = t
	}
	return out, nil
}

// JobRow is one job of a listing, with what the list shows of its prompt.
type JobRow struct {
	Job     jobs.Job `json:"job"`
	Profile string   `json:"profile"`
	BatchID string   `json:"batch_id,omitempty"`
	// Summary is the prompt's start: its text, its last chat message, or
	// its named prompt.
	Summary string `json:"summary"`
}

// JobList is a page of GET /v1/admin/jobs.
type JobList struct {
	Jobs []JobRow `json:"jobs"`
	// NextCursor continues the listing; empty on the last page.
	NextCursor string `json:"next_cursor,omitempty"`
}

// summaryRunes is how much of a prompt a listing shows.
const summaryRunes = 120

func summary(p jobs.Prompt) string {
	s := p.Text
	switch {
	case p.Chat != nil && len(p.Chat.Messages) > 0:
		s = p.Chat.Messages[len(p.Chat.Messages)-1].Content
	case p.PromptRef != "":
		s = "prompt " + p.PromptRef
	case p.Embedding != nil:
		s = "(embedding)"
	}
	if utf8.RuneCountInString(s) > summaryRunes {
		r := []rune(s)
		s = string(r[:summaryRunes]) + "…"
	}
	return s
}

// ListJobs answers GET /v1/admin/jobs: jobs matching the filter, newest
// first, a page at a time (?cursor=, ?limit=).
func (a *API) ListJobs(w http.ResponseWriter, r *http.Request) error {
	_, org, err := scope(r)
	if err != nil {
		return err
	}
	q := r.URL.Query()
	f, err := filterFromQuery(q)
	if err != nil {
		return err
	}
	jf, err := f.jobFilter(org)
	if err != nil {
		return err
	}
	limit, err := httpapi.Limit(r, jobs.MaxListLimit)
	if err != nil {
		return err
	}
	page, err := a.Store.ListJobs(r.Context(), jobs.ListParams{JobFilter: jf, After: q.Get("cursor"), Limit: limit})
	if err != nil {
		return httpapi.About("listing", err)
	}
	ids := make([]string, 0, len(page.Jobs))
	for _, j := range page.Jobs {
		ids = append(ids, j.PromptID)
	}
	prompts := map[string]jobs.Prompt{}
	if len(ids) > 0 {
		if prompts, err = a.Store.GetPrompts(r.Context(), org, ids); err != nil {
			return httpapi.About("listing", err)
		}
	}
	out := JobList{Jobs: make([]JobRow, 0, len(page.Jobs)), NextCursor: page.Next}
	for _, j := range page.Jobs {
		p := prompts[j.PromptID] // gone (archived meanwhile): the job alone
		out.Jobs = append(out.Jobs, JobRow{Job: j, Profile: p.Profile, BatchID: p.BatchID, Summary: summary(p)})
	}
	httpapi.WriteJSON(w, http.StatusOK, out)
	return nil
}

// JobView is GET /v1/admin/jobs/{id}: the job's details, the thread its
// prompt continues, and its attempts placed in time.
type JobView struct {
	jobs.JobDetails
	// Response is the answer with its output rendered as safe HTML, as
	// the prompt API shows it.
	Response *Answer            `json:"response,omitempty"`
	Thread   []Turn             `json:"thread"`
	Timeline []jobs.AttemptStep `json:"timeline"`
}

// Answer is a response with its output rendered (page.Render).
type Answer struct {
	jobs.Response
	HTML string `json:"html"`
}

// Turn is one earlier prompt of the thread, oldest first, with its answer.
type Turn struct {
	PromptID string `json:"prompt_id"`
	Text     string `json:"text"`
	Answer   string `json:"answer,omitempty"`
	Answered bool   `json:"answered"`
}

// threadDepth is how many earlier turns a job's view shows.
const threadDepth = 20

// GetJob answers GET /v1/admin/jobs/{id}.
func (a *API) GetJob(w http.ResponseWriter, r *http.Request) error {
	_, org, err := scope(r)
	if err != nil {
		return err
	}
	d, err := jobs.LoadJobDetails(r.Context(), a.Store, org, r.PathValue("id"))
	if err != nil {
		return httpapi.About("job", err)
	}
	thread, err := a.Store.Thread(r.Context(), jobs.ThreadParams{OrgID: org, PromptID: d.Prompt.ID, Depth: threadDepth})
	if err != nil {
		return httpapi.About("job", err)
	}
	v := JobView{JobDetails: d, Thread: make([]Turn, 0, len(thread)), Timeline: jobs.Timeline(d.Events)}
	if d.Response != nil {
		v.Response = &Answer{Response: *d.Response, HTML: page.Render(*d.Response)}
	}
	for _, t := range thread {
		v.Thread = append(v.Thread, Turn{PromptID: t.PromptID, Text: t.Text, Answer: t.Answer, Answered: t.Answered})
	}
	httpapi.WriteJSON(w, http.StatusOK, v)
	return nil
}

// BulkRequest is the body of POST /v1/admin/jobs/cancel and /retry.
type BulkRequest struct {
	Filter Filter `json:"filter"`
	// DryRun counts the jobs the action would act on, and changes nothing.
	DryRun bool `json:"dry_run,omitempty"`
}

// BulkCount answers a dry run.
type BulkCount struct {
	Matched int  `json:"matched"`
	DryRun  bool `json:"dry_run"`
}

// CancelJobs answers POST /v1/admin/jobs/cancel.
func (a *API) CancelJobs(w http.ResponseWriter, r *http.Request) error {
	return a.bulk(w, r, jobs.CountCancellable, jobs.CancelMatching)
}

// RetryJobs answers POST /v1/admin/jobs/retry.
func (a *API) RetryJobs(w http.ResponseWriter, r *http.Request) error {
	return a.bulk(w, r, jobs.CountRetryable, jobs.RetryMatching)
}

func (a *API) bulk(w http.ResponseWriter, r *http.Request,
	count func(ctx context.Context, st jobs.Store, f jobs.JobFilter) (int, error),
	act func(ctx context.Context, st jobs.Store, p jobs.BulkParams) (jobs.BulkResult, error)) error {
	id, org, err := scope(r)
	if err != nil {
		return err
	}
	var req BulkRequest
	if err := httpapi.ReadJSON(w, r, a.MaxBody, &req, false); err != nil {
		return err
	}
	if req.Filter == (Filter{}) {
		return httpapi.Invalid("filter", "a bulk action needs a filter: name at least one of its fields")
	}
	jf, err := req.Filter.jobFilter(org)
	if err != nil {
		return err
	}
	if req.DryRun {
		n, err := count(r.Context(), a.Store, jf)
		if err != nil {
			return httpapi.About("bulk action", err)
		}
		httpapi.WriteJSON(w, http.StatusOK, BulkCount{Matched: n, DryRun: true})
		return nil
	}
	res, err := act(r.Context(), a.Store, jobs.BulkParams{Filter: jf, By: actor(id)})
	if err != nil {
		return httpapi.About("bulk action", err)
	}
	a.Log.Info("bulk action", "path", r.URL.Path, "bulk", res.ID, "by", actor(id), "matched", res.Matched, "done", res.Done)
	httpapi.WriteJSON(w, http.StatusOK, res)
	return nil
}
