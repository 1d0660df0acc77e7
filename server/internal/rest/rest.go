// Package rest is promptkit's own API under /v1: prompts (submit, read,
// list, retry, wait), jobs (read with history, cancel), recent changes and
// profiles, in promptkit's JSON shapes (openapi.json describes them). Its
// handlers run on the httpapi pipeline as the identity auth resolved, and
// wait for jobs through the events hub.
package rest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"time"

	"github.com/promptkit/promptkit"
	"github.com/promptkit/promptkit/internal/problem"
	"github.com/promptkit/promptkit/jobs"
	"github.com/promptkit/promptkit/pktype"
	"github.com/promptkit/promptkit/server/internal/auth"
	"github.com/promptkit/promptkit/server/internal/httpapi"
	"github.com/promptkit/promptkit/server/internal/page"
	"github.com/promptkit/promptkit/server/internal/submit"
)

// API serves the REST resources.
type API struct {
	Store jobs.Store
	Auth  *auth.Auth
	// Jobs queues and waits for the jobs of requests.
	Jobs submit.Jobs
	// Engine lists the profiles; nil: none.
	Engine *promptkit.Engine
	// MaxBody caps a request body; MaxWait caps ?wait=.
	MaxBody int64
	MaxWait time.Duration
	Log     *slog.Logger
	// Now is the clock of GET /v1/usage's default end_time.
	Now func() time.Time
}

// Submitted is the 202 answer to a submission or a retry.
type Submitted struct {
	PromptID string     `json:"prompt_id"`
	JobID    string     `json:"job_id"`
	State    jobs.State `json:"state"`
}

// PromptView is a prompt with its current job, its answer (null until it
// has one) and every job it had, oldest first (retries supersede).
type PromptView struct {
	Prompt jobs.Prompt `json:"prompt"`
	Job    JobOut      `json:"job"`
	Answer *AnswerView `json:"answer"`
	Jobs   []JobOut    `json:"jobs"`
}

// JobOut is a job as the API shows it: when it has an error kind (it
// failed, or waits to try again after a failure), with that error in
// words for the person who asked — jobs.ErrorKind's Title and Advice, so
// the browser page and any other client word it as the CLI does.
type JobOut struct {
	jobs.Job
	ErrorTitle  string `json:"error_title,omitempty"`
	ErrorAdvice string `json:"error_advice,omitempty"`
}

// NewJobOut is j with its error in words.
func NewJobOut(j jobs.Job) JobOut {
	return JobOut{Job: j, ErrorTitle: j.ErrorKind.Title(), ErrorAdvice: j.ErrorKind.Advice()}
}

func jobsOut(js []jobs.Job) []JobOut {
	out := make([]JobOut, len(js))
	for i, j := range js {
		out[i] = NewJobOut(j)
	}
	return out
}

// PromptState is one prompt in a listing or in /v1/recent: the prompt,
// its current job and, when that job succeeded, its answer. A page of
// them costs three queries, whatever its size (states).
type PromptState struct {
	PromptID string      `json:"prompt_id"`
	Prompt   jobs.Prompt `json:"prompt"`
	Job      JobOut      `json:"job"`
	Answer   *AnswerView `json:"answer,omitempty"`
}

// AnswerView is a response as the API shows it: with its output rendered
// as safe HTML (page.Render), which the browser page shows.
type AnswerView struct {
	jobs.Response
	HTML string `json:"html"`
}

func newAnswer(r jobs.Response) *AnswerView { return &AnswerView{Response: r, HTML: page.Render(r)} }

// decodeSubmission turns a POST /v1/prompts body into normalized enqueue
// parameters (without org, user or key) and the request's fingerprint:
// the same submission always has the same hash, whatever its key order
// or spacing (the typed execution options encode canonically already).
func decodeSubmission(body []byte) (jobs.EnqueueParams, string, error) {
	// scheduled_for is read apart (the shallower field takes the key):
	// time.Time's own error quotes the value, and names no field.
	var req struct {
		jobs.Submission
		ScheduledFor json.RawMessage `json:"scheduled_for,omitempty"`
	}
	if err := httpapi.DecodeStrict(body, &req); err != nil {
		return jobs.EnqueueParams{}, "", err
	}
	if v := bytes.TrimSpace(req.ScheduledFor); len(v) > 0 && !bytes.Equal(v, []byte("null")) {
		var at time.Time
		if json.Unmarshal(v, &at) != nil {
			return jobs.EnqueueParams{}, "", &httpapi.Problem{Status: http.StatusBadRequest, Kind: problem.BadBody, Code: "invalid_json",
				Message: "field scheduled_for: expected an RFC 3339 time, such as 2026-12-07T15:04:05Z"}
		}
		req.Submission.ScheduledFor = &at
	}
	p, err := req.Submission.Params()
	if err != nil {
		return p, "", err
	}
	canon := p
	canon.Inputs = httpapi.CanonicalJSON(p.Inputs)
	hash, err := httpapi.Hash(canon)
	return p, hash, err
}

// Submit answers POST /v1/prompts.
func (a *API) Submit(w http.ResponseWriter, r *http.Request) error {
	id := auth.Of(r)
	wait, err := httpapi.Wait(r, a.MaxWait)
	if err != nil {
		return err
	}
	key, err := httpapi.IdempotencyKey(r)
	if err != nil {
		return err
	}
	body, err := httpapi.ReadBody(w, r, a.MaxBody)
	if err != nil {
		return err
	}
	p, hash, err := decodeSubmission(body)
	if err != nil {
		return err
	}
	e, err := a.Jobs.Admit(r.Context(), id, p, key, hash, "submission", wait > 0)
	if err != nil {
		return err
	}
	a.Log.Debug("prompt submitted", "prompt_id", e.PromptID, "job_id", e.JobID, "org", id.Org, "existing", e.Existing)
	return a.answerSubmitted(w, r, id, e, wait)
}

// answerSubmitted answers 202 with the ids, or, with a wait, holds the
// request until the job is terminal (200 with the prompt and its answer)
// or the wait ends (202). The ids are headers too, sent before the wait
// when the client asks (httpapi.EarlyHints).
func (a *API) answerSubmitted(w http.ResponseWriter, r *http.Request, id auth.Identity, e submit.Admitted, wait time.Duration) error {
	sub := Submitted{PromptID: e.PromptID, JobID: e.JobID, State: e.State}
	httpapi.SetIDs(w, sub.PromptID, sub.JobID)
	if wait > 0 && !sub.State.Terminal() {
		httpapi.EarlyHints(w, r)
		_ = http.NewResponseController(w).SetWriteDeadline(time.Now().Add(wait + 10*time.Second))
		j, err := a.Jobs.AwaitJob(r.Context(), id.Org, e, sub.JobID, wait)
		if err != nil {
			return httpapi.About("waiting", err)
		}
		sub.State = j.State
	}
	if !sub.State.Terminal() {
		httpapi.WriteJSON(w, http.StatusAccepted, sub)
		return nil
	}
	if wait > 0 && sub.State != jobs.Succeeded {
		// The job spent its attempts (or was cancelled): asking again as
		// it is makes another job, not a better answer.
		w.Header().Set("X-Should-Retry", "false")
	}
	v, err := a.promptView(r.Context(), id, sub.PromptID)
	if err != nil {
		return httpapi.About("prompt", err)
	}
	httpapi.WriteJSON(w, http.StatusOK, v)
	return nil
}

// promptView reads a prompt the identity may see, with its jobs and
// answer.
func (a *API) promptView(ctx context.Context, id auth.Identity, promptID string) (PromptView, error) {
	p, err := a.Store.GetPrompt(ctx, id.Org, promptID)
	if err != nil {
		return PromptView{}, err
	}
	if !id.Owns(p.OrgID, p.CreatedBy) {
		return PromptView{}, jobs.ErrNotFound
	}
	js, err := a.Store.PromptJobs(ctx, id.Org, promptID)
	if err != nil {
		return PromptView{}, err
	}
	if len(js) == 0 {
		return PromptView{}, jobs.ErrNotFound // archived between the reads
	}
	v := PromptView{Prompt: p, Job: NewJobOut(js[len(js)-1]), Jobs: jobsOut(js)}
	v.Answer, err = a.answer(ctx, id.Org, v.Job.Job)
	return v, err
}

// answer reads a succeeded job's response; nil for any other job.
func (a *API) answer(ctx context.Context, org string, j jobs.Job) (*AnswerView, error) {
	if j.State != jobs.Succeeded || j.ResponseID == "" {
		return nil, nil
	}
	resp, err := a.Store.GetResponse(ctx, org, j.ResponseID)
	if errors.Is(err, jobs.ErrNotFound) {
		return nil, nil // archived since
	}
	if err != nil {
		return nil, err
	}
	return newAnswer(resp), nil
}

// GetPrompt answers GET /v1/prompts/{id}.
func (a *API) GetPrompt(w http.ResponseWriter, r *http.Request) error {
	v, err := a.promptView(r.Context(), auth.Of(r), r.PathValue("id"))
	if err != nil {
		return httpapi.About("prompt", err)
	}
	httpapi.WriteJSON(w, http.StatusOK, v)
	return nil
}

// ownedJob reads a job the identity may see.
func (a *API) ownedJob(ctx context.Context, id auth.Identity, jobID string) (jobs.Job, error) {
	j, err := a.Store.GetJob(ctx, id.Org, jobID)
	if err != nil {
		return j, err
	}
	if !id.Owns(j.OrgID, j.CreatedBy) {
		return jobs.Job{}, jobs.ErrNotFound
	}
	return j, nil
}

// JobView is a job and its events, in order, with what its provider
// calls cost (jobs.JobCost): null when any call's cost is unknown.
type JobView struct {
	Job    JobOut       `json:"job"`
	Events []jobs.Event `json:"events"`
	Cost   pktype.Cost  `json:"cost_usd"`
}

// GetJob answers GET /v1/jobs/{id}.
func (a *API) GetJob(w http.ResponseWriter, r *http.Request) error {
	id := auth.Of(r)
	j, err := a.ownedJob(r.Context(), id, r.PathValue("id"))
	if err != nil {
		return httpapi.About("job", err)
	}
	evs, err := a.Store.JobEvents(r.Context(), id.Org, j.ID)
	if err != nil {
		return httpapi.About("job", err)
	}
	httpapi.WriteJSON(w, http.StatusOK, JobView{Job: NewJobOut(j), Events: httpapi.NonNil(evs), Cost: jobs.JobCost(evs)})
	return nil
}

// CancelJob answers POST /v1/jobs/{id}/cancel.
func (a *API) CancelJob(w http.ResponseWriter, r *http.Request) error {
	id := auth.Of(r)
	j, err := a.ownedJob(r.Context(), id, r.PathValue("id"))
	if err != nil {
		return httpapi.About("job", err)
	}
	j, err = a.Store.Cancel(r.Context(), jobs.CancelParams{OrgID: id.Org, JobID: j.ID})
	if err != nil {
		return httpapi.About("cancel", err)
	}
	a.Log.Info("job cancelled", "job_id", j.ID, "prompt_id", j.PromptID, "org", id.Org)
	httpapi.WriteJSON(w, http.StatusOK, struct {
		Job JobOut `json:"job"`
	}{NewJobOut(j)})
	return nil
}

// RetryRequest is the optional body of POST /v1/prompts/{id}/retry.
type RetryRequest struct {
	Priority *int `json:"priority,omitempty"`
}

// RetryPrompt answers POST /v1/prompts/{id}/retry.
func (a *API) RetryPrompt(w http.ResponseWriter, r *http.Request) error {
	id := auth.Of(r)
	var req RetryRequest
	if err := httpapi.ReadJSON(w, r, a.MaxBody, &req, true); err != nil {
		return err
	}
	v, err := a.promptView(r.Context(), id, r.PathValue("id"))
	if err != nil {
		return httpapi.About("prompt", err)
	}
	admitted, err := a.Jobs.Take(r.Context(), id)
	if err != nil {
		return err
	}
	j, err := a.Store.Retry(r.Context(), jobs.RetryParams{OrgID: id.Org, JobID: v.Job.ID, Priority: req.Priority})
	if err != nil {
		_ = admitted.Release(context.WithoutCancel(r.Context())) // no job: the request does not count
		return httpapi.About("retry", err)
	}
	a.Log.Info("prompt retried", "prompt_id", j.PromptID, "job_id", j.ID, "supersedes", j.Supersedes, "org", id.Org)
	httpapi.WriteJSON(w, http.StatusAccepted, Submitted{PromptID: j.PromptID, JobID: j.ID, State: j.State})
	return nil
}
