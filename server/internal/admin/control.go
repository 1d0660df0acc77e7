package admin

import (
	"cmp"
	"net/http"
	"slices"
	"time"

	"github.com/promptkit/promptkit/jobs"
	"github.com/promptkit/promptkit/server/internal/httpapi"
)

// BackendView is one backend as GET /v1/admin/backends shows it: how it is
// paced now (as this server's engine follows it, shared with the other
// processes on the database), whether an operator paused it, and its
// provider calls in the window (from the usage ledger, every process's).
type BackendView struct {
	ID string `json:"id"`
	// Paused: an operator paused it (POST …/pause): no new call goes to
	// it, and jobs that only it can run stay queued.
	Paused bool `json:"paused"`
	// RateLimitedUntil is the end of a pause the provider asked for
	// (Retry-After); CooldownUntil the end of a cooldown after failures
	// (docs/routing.md). Absent: none.
	RateLimitedUntil time.Time `json:"rate_limited_until,omitzero"`
	CooldownUntil    time.Time `json:"cooldown_until,omitzero"`
	Unwell           bool      `json:"unwell"`
	// RequestsPerSecond is the rate in force (0: unpaced), and Source
	// where it comes from: "configured", "429" (learned from 429s),
	// "headers" (the provider's rate-limit headers) or "" (unpaced).
	RequestsPerSecond float64 `json:"requests_per_second"`
	TokensPerMinute   float64 `json:"tokens_per_minute"`
	Source            string  `json:"source"`
	// Processes present on it, and their demand: calls in flight on it or
	// waiting for it, summed over every process on the database.
	Processes int `json:"processes"`
	InFlight  int `json:"in_flight"`
	// Recent is its calls in the window.
	Recent jobs.BackendActivity `json:"recent"`
}

// BackendList is GET /v1/admin/backends.
type BackendList struct {
	WindowSeconds int64         `json:"window_seconds"`
	Backends      []BackendView `json:"backends"`
	// LostCalls counts the calls of the window lost with a worker (or a
	// cancelled running job): the ledger does not know their backend.
	LostCalls int `json:"lost_calls"`
}

// Backends answers GET /v1/admin/backends.
func (a *API) Backends(w http.ResponseWriter, r *http.Request) error {
	if _, err := operator(r); err != nil {
		return err
	}
	win, err := window(r)
	if err != nil {
		return err
	}
	ctx := r.Context()
	shared, err := a.Store.SyncPacing(ctx, jobs.PacingSyncParams{})
	if err != nil {
		return httpapi.About("backends", err)
	}
	activity, err := a.Store.BackendActivity(ctx, a.Now().Add(-win))
	if err != nil {
		return httpapi.About("backends", err)
	}
	views := map[string]*BackendView{}
	view := func(id string) *BackendView {
		v, ok := views[id]
		if !ok {
			v = &BackendView{ID: id, Recent: jobs.BackendActivity{Backend: id}}
			views[id] = v
		}
		return v
	}
	if a.Engine != nil {
		for id, p := range a.Engine.Pacing() {
			v := view(id)
			v.RequestsPerSecond, v.TokensPerMinute, v.Source = p.RequestsPerSecond, p.TokensPerMinute, p.Source
			v.RateLimitedUntil, v.CooldownUntil, v.Unwell = p.PausedUntil, p.CooldownUntil, p.Unwell
		}
	}
	now := a.Now()
	// The store is where holds live: this engine's copy may lag it.
	for _, s := range shared {
		v := view(s.Backend)
		v.Paused = s.Held
		if s.PauseUntil.After(now) {
			v.RateLimitedUntil = later(v.RateLimitedUntil, s.PauseUntil)
		}
		if s.CooldownUntil.After(now) {
			v.CooldownUntil = later(v.CooldownUntil, s.CooldownUntil)
		}
		v.Processes = len(s.Peers)
		for _, p := range s.Peers {
			v.InFlight += p.Demand
		}
	}
	out := BackendList{WindowSeconds: int64(win / time.Second)}
	for _, b := range activity {
		if b.Backend == "" {
			out.LostCalls = b.Calls
			continue
		}
		view(b.Backend).Recent = b
	}
	out.Backends = make([]BackendView, 0, len(views))
	for _, v := range views {
		if !v.RateLimitedUntil.After(now) {
			v.RateLimitedUntil = time.Time{}
		}
		if !v.CooldownUntil.After(now) {
			v.CooldownUntil = time.Time{}
		}
		out.Backends = append(out.Backends, *v)
	}
	slices.SortFunc(out.Backends, func(x, y BackendView) int { return cmp.Compare(x.ID, y.ID) })
	httpapi.WriteJSON(w, http.StatusOK, out)
	return nil
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// Paused is the answer of a pause or resume.
type Paused struct {
	ID     string `json:"id"`
	Paused bool   `json:"paused"`
}

// PauseBackend answers POST /v1/admin/backends/{id}/pause.
func (a *API) PauseBackend(w http.ResponseWriter, r *http.Request) error {
	return a.holdBackend(w, r, true)
}

// ResumeBackend answers POST /v1/admin/backends/{id}/resume.
func (a *API) ResumeBackend(w http.ResponseWriter, r *http.Request) error {
	return a.holdBackend(w, r, false)
}

func (a *API) holdBackend(w http.ResponseWriter, r *http.Request, held bool) error {
	id, err := operator(r)
	if err != nil {
		return err
	}
	b := r.PathValue("id")
	if a.Engine != nil {
		if _, ok := a.Engine.Pacing()[b]; !ok {
			return httpapi.NotFound("backend")
		}
	}
	if err := a.Store.HoldBackend(r.Context(), b, held); err != nil {
		return httpapi.About("backend", err)
	}
	a.Log.Info("backend paused by an operator", "backend", b, "paused", held, "by", actor(id))
	httpapi.WriteJSON(w, http.StatusOK, Paused{ID: b, Paused: held})
	return nil
}

// PauseOrg answers POST /v1/admin/orgs/{id}/pause: the org's queued jobs
// stay queued, its running jobs finish.
func (a *API) PauseOrg(w http.ResponseWriter, r *http.Request) error { return a.pauseOrg(w, r, true) }

// ResumeOrg answers POST /v1/admin/orgs/{id}/resume.
func (a *API) ResumeOrg(w http.ResponseWriter, r *http.Request) error { return a.pauseOrg(w, r, false) }

func (a *API) pauseOrg(w http.ResponseWriter, r *http.Request, paused bool) error {
	id, scopeOrg, err := scope(r)
	if err != nil {
		return err
	}
	org, err := orgScope(scopeOrg, r.PathValue("id"))
	if err != nil {
		return err
	}
	if _, err := a.Store.PauseOrg(r.Context(), org, paused); err != nil {
		return httpapi.About("org", err)
	}
	a.Log.Info("org queue paused by an operator", "org", org, "paused", paused, "by", actor(id))
	httpapi.WriteJSON(w, http.StatusOK, Paused{ID: org, Paused: paused})
	return nil
}

// WorkerList is GET /v1/admin/workers: the workers seen lately.
type WorkerList struct {
	Workers []jobs.WorkerInfo `json:"workers"`
}

// Workers answers GET /v1/admin/workers.
func (a *API) Workers(w http.ResponseWriter, r *http.Request) error {
	if _, err := operator(r); err != nil {
		return err
	}
	ws, err := a.Store.Workers(r.Context(), a.Now().Add(-WorkersSeen))
	if err != nil {
		return httpapi.About("workers", err)
	}
	httpapi.WriteJSON(w, http.StatusOK, WorkerList{Workers: httpapi.NonNil(ws)})
	return nil
}

// DrainWorker answers POST /v1/admin/workers/{id}/drain: the worker claims
// nothing more and finishes what it runs (`promptkit worker` then exits).
func (a *API) DrainWorker(w http.ResponseWriter, r *http.Request) error { return a.drain(w, r, true) }

// UndrainWorker answers POST /v1/admin/workers/{id}/undrain.
func (a *API) UndrainWorker(w http.ResponseWriter, r *http.Request) error {
	return a.drain(w, r, false)
}

func (a *API) drain(w http.ResponseWriter, r *http.Request, drain bool) error {
	id, err := operator(r)
	if err != nil {
		return err
	}
	info, err := a.Store.DrainWorker(r.Context(), r.PathValue("id"), drain)
	if err != nil {
		return httpapi.About("worker", err)
	}
	a.Log.Info("worker drain set by an operator", "worker", info.Worker, "draining", drain, "by", actor(id))
	httpapi.WriteJSON(w, http.StatusOK, info)
	return nil
}
