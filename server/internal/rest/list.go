package rest

import (
	"context"
	"net/http"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/promptkit/promptkit"
	"github.com/promptkit/promptkit/jobs"
	"github.com/promptkit/promptkit/server/internal/auth"
	"github.com/promptkit/promptkit/server/internal/httpapi"
)

// PromptList is a page of the caller's prompts.
type PromptList struct {
	Prompts []PromptState `json:"prompts"`
	// NextCursor continues the listing; empty on the last page.
	NextCursor string `json:"next_cursor,omitempty"`
}

// ListPrompts answers GET /v1/prompts.
func (a *API) ListPrompts(w http.ResponseWriter, r *http.Request) error {
	id := auth.Of(r)
	q := r.URL.Query()
	limit, err := httpapi.Limit(r, jobs.MaxListLimit)
	if err != nil {
		return err
	}
	page, err := a.Store.ListJobs(r.Context(), jobs.ListParams{
		JobFilter: jobs.JobFilter{OrgID: id.Org, CreatedBy: id.CreatedBy(), State: jobs.State(q.Get("state")), Current: true},
		After:     q.Get("cursor"), Limit: limit,
	})
	if err != nil {
		return httpapi.About("listing", err)
	}
	ps, err := a.states(r.Context(), id, page.Jobs)
	if err != nil {
		return httpapi.About("listing", err)
	}
	httpapi.WriteJSON(w, http.StatusOK, PromptList{Prompts: ps, NextCursor: page.Next})
	return nil
}

// states turns current jobs into prompt states, in their order, reading
// their prompts with one GetPrompts and the answers of the succeeded ones
// with one GetResponses. A job whose prompt is gone (archived between the
// reads) is left out, as is one the identity may not see (the jobs were
// already filtered by creator; this holds the prompt to the same rule as
// GET /v1/prompts/{id}); a succeeded job whose response is gone has no
// answer.
func (a *API) states(ctx context.Context, id auth.Identity, js []jobs.Job) ([]PromptState, error) {
	out := make([]PromptState, 0, len(js))
	if len(js) == 0 {
		return out, nil
	}
	pids := make([]string, 0, len(js))
	var rids []string
	for _, j := range js {
		pids = append(pids, j.PromptID)
		if j.State == jobs.Succeeded && j.ResponseID != "" {
			rids = append(rids, j.ResponseID)
		}
	}
	prompts, err := a.Store.GetPrompts(ctx, id.Org, pids)
	if err != nil {
		return nil, err
	}
	var resps map[string]jobs.Response
	if len(rids) > 0 {
		if resps, err = a.Store.GetResponses(ctx, id.Org, rids); err != nil {
			return nil, err
		}
	}
	for _, j := range js {
		p, ok := prompts[j.PromptID]
		if !ok || !id.Owns(p.OrgID, p.CreatedBy) {
			continue
		}
		st := PromptState{PromptID: j.PromptID, Prompt: p, Job: NewJobOut(j)}
		if resp, ok := resps[j.ResponseID]; ok && j.State == jobs.Succeeded {
			st.Answer = newAnswer(resp)
		}
		out = append(out, st)
	}
	return out, nil
}

// RecentPage is the answer of /v1/recent.
type RecentPage struct {
	Prompts []PromptState `json:"prompts"`
	// AsOf is the since of the next call.
	AsOf time.Time `json:"as_of"`
}

// Recent answers GET /v1/recent.
func (a *API) Recent(w http.ResponseWriter, r *http.Request) error {
	id := auth.Of(r)
	limit, err := httpapi.Limit(r, jobs.MaxListLimit)
	if err != nil {
		return err
	}
	var since time.Time
	if v := r.URL.Query().Get("since"); v != "" {
		t, err := time.Parse(time.RFC3339Nano, v)
		if err != nil {
			return httpapi.Invalid("since", "since must be an RFC 3339 time, such as the as_of of the previous call")
		}
		since = t
	}
	ch, err := a.Store.ChangesSince(r.Context(), jobs.ChangesParams{OrgID: id.Org, CreatedBy: id.CreatedBy(), Since: since, Limit: limit})
	if err != nil {
		return httpapi.About("recent", err)
	}
	// One entry per prompt, in change order, with its newest state: a
	// superseded job's retry is in the same change set.
	var current []jobs.Job
	at := map[string]int{}
	for _, j := range ch.Jobs {
		if j.State == jobs.Superseded {
			continue
		}
		if i, ok := at[j.PromptID]; ok {
			current[i] = j
			continue
		}
		at[j.PromptID] = len(current)
		current = append(current, j)
	}
	ps, err := a.states(r.Context(), id, current)
	if err != nil {
		return httpapi.About("recent", err)
	}
	httpapi.WriteJSON(w, http.StatusOK, RecentPage{Prompts: ps, AsOf: ch.AsOf.UTC()})
	return nil
}

// ProfileList is the body of GET /v1/profiles.
type ProfileList struct {
	Profiles []string `json:"profiles"`
	Default  string   `json:"default"`
	// Labels names each profile for people, by id: its configured label,
	// else one made from its id (ProfileLabel).
	Labels map[string]string `json:"labels"`
}

// Profiles answers GET /v1/profiles: the engine's profile ids, sorted,
// their labels, and the one a submission without a profile runs with
// ("" when that names no profile, or without an engine).
func (a *API) Profiles(w http.ResponseWriter, r *http.Request) error {
	out := ProfileList{Profiles: []string{}, Labels: map[string]string{}}
	if eng := a.Engine; eng != nil {
		out.Profiles = eng.Profiles()
		for _, id := range out.Profiles {
			p, _ := eng.Profile(id)
			out.Labels[id] = ProfileLabel(p)
		}
		// The engine resolves an empty ProfileID to its default; Prepare
		// does exactly that, with no I/O.
		if p, err := eng.Prepare(r.Context(), promptkit.RunRequest{Text: "?"}); err == nil {
			out.Default = p.ProfileID
		}
	}
	httpapi.WriteJSON(w, http.StatusOK, out)
	return nil
}

// ProfileLabel is a profile's name for people: its Label, or, without
// one, its id with dashes, underscores and dots as spaces and a capital
// first letter ("long-context" reads "Long context"). The id stays the
// value clients send.
func ProfileLabel(p promptkit.Profile) string {
	if l := strings.TrimSpace(p.Label); l != "" {
		return l
	}
	words := strings.Fields(strings.NewReplacer("-", " ", "_", " ", ".", " ").Replace(p.ID))
	if len(words) == 0 {
		return p.ID
	}
	s := strings.Join(words, " ")
	r, n := utf8.DecodeRuneInString(s)
	return string(unicode.ToUpper(r)) + s[n:]
}
