// Package admin is the operator's API under /v1/admin, which the dashboard
// (/dashboard, server/internal/page) reads: the queue's counts by state and
// organisation, jobs by filter with each attempt placed in time, bulk
// cancel and retry, batches, backends with their pacing and recent calls,
// pause and resume of a backend or an organisation's queue, workers and
// their drain, and tokens.
//
// Every route needs an admin. An org's admin sees and acts on its own org
// only; an operator (an operator token, or the local identity) on every
// org, and only an operator acts on what the orgs share: backends and
// workers.
package admin

import (
	"cmp"
	"log/slog"
	"net/http"
	"slices"
	"time"

	"github.com/promptkit/promptkit"
	"github.com/promptkit/promptkit/jobs"
	"github.com/promptkit/promptkit/server/internal/auth"
	"github.com/promptkit/promptkit/server/internal/httpapi"
)

// API serves /v1/admin.
type API struct {
	Store jobs.Store
	// Engine says which backends and profiles exist and how each backend
	// is paced now; nil: none known.
	Engine  *promptkit.Engine
	MaxBody int64
	Log     *slog.Logger
	Now     func() time.Time
}

// Window is how far back the overview's failures and the backends'
// recent calls look, unless ?window= says otherwise.
const Window = 15 * time.Minute

// WorkersSeen is how recently a worker must have reported to be listed.
const WorkersSeen = 10 * time.Minute

var (
	notAdmin = &httpapi.Problem{Status: http.StatusForbidden, Code: "forbidden",
		Message: "the operator's API needs an admin or operator token"}
	notOperator = &httpapi.Problem{Status: http.StatusForbidden, Code: "forbidden",
		Message: "backends and workers are shared by every org: this needs an operator token"}
	otherOrg = &httpapi.Problem{Status: http.StatusForbidden, Code: "forbidden",
		Message: "an admin token acts on its own org only"}
)

// scope is the org an admin request may see: its own, or "" (every org)
// for an operator. A member is refused.
func scope(r *http.Request) (auth.Identity, string, error) {
	id := auth.Of(r)
	switch {
	case id.Operator():
		return id, "", nil
	case id.Role.Admin():
		return id, id.Org, nil
	}
	return id, "", notAdmin
}

// orgScope narrows a request's scope to org when one is named: an admin
// may name only its own.
func orgScope(scopeOrg, org string) (string, error) {
	if org == "" {
		return scopeOrg, nil
	}
	if scopeOrg != "" && org != scopeOrg {
		return "", otherOrg
	}
	return org, nil
}

// queryOrg is the org a listing reads: ?org= within the request's scope,
// or the whole scope.
func queryOrg(r *http.Request) (string, error) {
	_, scopeOrg, err := scope(r)
	if err != nil {
		return "", err
	}
	return orgScope(scopeOrg, r.URL.Query().Get("org"))
}

// operator refuses any identity but an operator's.
func operator(r *http.Request) (auth.Identity, error) {
	id := auth.Of(r)
	if !id.Operator() {
		return id, notOperator
	}
	return id, nil
}

// actor names who acted, in the audit data of the jobs a bulk action
// changes: the token's ID, or "local".
func actor(id auth.Identity) string {
	if t := id.TokenID(); t != "" {
		return "token:" + t
	}
	return "local"
}

// window parses ?window= (a Go duration, 1m–30d; empty: Window).
func window(r *http.Request) (time.Duration, error) {
	v := r.URL.Query().Get("window")
	if v == "" {
		return Window, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < time.Minute || d > 30*24*time.Hour {
		return 0, httpapi.Invalid("window", "window must be a duration from 1m to 720h, such as 15m")
	}
	return d, nil
}

// Overview is the queue at a glance: GET /v1/admin/overview.
type Overview struct {
	AsOf          time.Time `json:"as_of"`
	WindowSeconds int64     `json:"window_seconds"`
	// Counts has every state; Finished, ErrorRate and the latencies cover
	// the window.
	Counts     map[jobs.State]int         `json:"counts"`
	Finished   int                        `json:"finished"`
	ErrorRate  map[jobs.ErrorKind]float64 `json:"error_rate"`
	LatencyP50 time.Duration              `json:"latency_p50_ns"`
	LatencyP95 time.Duration              `json:"latency_p95_ns"`
	// Operator says whether the caller sees every org and the backends
	// and workers they share (an operator token, or local mode), or only
	// its own org (an admin token).
	Operator bool `json:"operator"`
	// Orgs are the orgs with jobs, by ID, and whether their queue is
	// paused.
	Orgs []OrgView `json:"orgs"`
}

// OrgView is one org's jobs by state.
type OrgView struct {
	jobs.OrgCounts
	Paused bool `json:"paused"`
}

// Overview answers GET /v1/admin/overview (?org= narrows it, as it does
// the listings).
func (a *API) Overview(w http.ResponseWriter, r *http.Request) error {
	org, err := queryOrg(r)
	if err != nil {
		return err
	}
	id := auth.Of(r)
	win, err := window(r)
	if err != nil {
		return err
	}
	now := a.Now()
	m, err := a.Store.Metrics(r.Context(), jobs.MetricsParams{OrgID: org, Since: now.Add(-win), ByOrg: true})
	if err != nil {
		return httpapi.About("overview", err)
	}
	paused, err := a.pausedOrgs(r)
	if err != nil {
		return httpapi.About("overview", err)
	}
	out := Overview{AsOf: now.UTC(), Operator: id.Operator(), WindowSeconds: int64(win / time.Second), Counts: m.Counts, Finished: m.Finished,
		ErrorRate: m.ErrorRate, LatencyP50: m.LatencyP50, LatencyP95: m.LatencyP95, Orgs: []OrgView{}}
	seen := map[string]bool{}
	for _, c := range m.OrgCounts {
		seen[c.OrgID] = true
		out.Orgs = append(out.Orgs, OrgView{OrgCounts: c, Paused: paused[c.OrgID]})
	}
	// A paused org with no job left still shows, so it can be resumed.
	for o := range paused {
		if !seen[o] && (org == "" || o == org) {
			out.Orgs = append(out.Orgs, OrgView{OrgCounts: jobs.NewOrgCounts(o), Paused: true})
		}
	}
	slices.SortFunc(out.Orgs, func(x, y OrgView) int { return cmp.Compare(x.OrgID, y.OrgID) })
	httpapi.WriteJSON(w, http.StatusOK, out)
	return nil
}

// pausedOrgs are the orgs whose queue is paused.
func (a *API) pausedOrgs(r *http.Request) (map[string]bool, error) {
	ls, err := a.Store.Limits(r.Context())
	if err != nil {
		return nil, err
	}
	out := map[string]bool{}
	for _, l := range ls {
		if l.Scope == jobs.LimitOrg && l.Paused {
			out[l.Subject] = true
		}
	}
	return out, nil
}
