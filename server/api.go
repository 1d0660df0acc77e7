package server

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/promptkit/promptkit/jobs"
	"github.com/promptkit/promptkit/jobs/worker"
)

// maxIdempotencyKey bounds the Idempotency-Key header.
const maxIdempotencyKey = 255

// decodeSubmission turns a POST /v1/prompts body into normalized enqueue
// parameters (without org, user or key) and the request's fingerprint:
// the same submission always has the same hash, whatever its key order
// or spacing.
func decodeSubmission(body []byte) (jobs.EnqueueParams, string, error) {
	var req jobs.Submission
	if err := decodeStrict(body, &req); err != nil {
		return jobs.EnqueueParams{}, "", err
	}
	p, err := req.Params()
	if err != nil {
		return p, "", err
	}
	// Canonical form: inputs and options re-encoded with sorted keys.
	canon := p
	canon.Inputs = canonicalJSON(p.Inputs)
	canon.ExecutionOptions = canonicalJSON(p.ExecutionOptions)
	b, err := json.Marshal(canon)
	if err != nil {
		return p, "", err
	}
	sum := sha256.Sum256(b)
	return p, hex.EncodeToString(sum[:]), nil
}

// canonicalJSON re-encodes a JSON value with sorted object keys.
func canonicalJSON(raw json.RawMessage) json.RawMessage {
	if len(raw) == 0 {
		return raw
	}
	var v any
	if json.Unmarshal(raw, &v) != nil {
		return raw
	}
	b, _ := json.Marshal(v)
	return b
}

// submitted is the 202 answer to a submission or a retry.
type submitted struct {
	PromptID string     `json:"prompt_id"`
	JobID    string     `json:"job_id"`
	State    jobs.State `json:"state"`
}

// promptView is a prompt with its current job, its answer (null until it
// has one) and every job it had, oldest first (retries supersede).
type promptView struct {
	Prompt jobs.Prompt `json:"prompt"`
	Job    jobs.Job    `json:"job"`
	Answer *answerView `json:"answer"`
	Jobs   []jobs.Job  `json:"jobs"`
}

// promptState is one prompt in a listing or in /v1/recent: the prompt,
// its current job and, when that job succeeded, its answer. A page of
// them costs three queries, whatever its size (states).
type promptState struct {
	PromptID string      `json:"prompt_id"`
	Prompt   jobs.Prompt `json:"prompt"`
	Job      jobs.Job    `json:"job"`
	Answer   *answerView `json:"answer,omitempty"`
}

// answerView is a response as the API shows it: with its output rendered
// as safe HTML (renderAnswer, page.go), which the browser page shows.
type answerView struct {
	jobs.Response
	HTML string `json:"html"`
}

func (s *Server) submit(w http.ResponseWriter, r *http.Request) {
	id := identityOf(r)
	wait, ok := s.waitParam(w, r)
	if !ok {
		return
	}
	key := r.Header.Get("Idempotency-Key")
	if len(key) > maxIdempotencyKey {
		writeError(w, http.StatusBadRequest, "invalid_request", "Idempotency-Key is longer than 255 bytes")
		return
	}
	var raw json.RawMessage
	if !s.decode(w, r, &raw, false) {
		return
	}
	p, hash, err := decodeSubmission(raw)
	if err != nil {
		if errors.Is(err, jobs.ErrInvalid) {
			writeError(w, http.StatusBadRequest, "invalid_request", jobs.InvalidMessage(err))
		} else {
			writeError(w, http.StatusBadRequest, "invalid_json", err.Error())
		}
		return
	}
	if !s.takeSubmission(w, id) {
		return
	}
	if s.cfg.Engine != nil {
		if err := worker.Check(r.Context(), s.cfg.Engine, p); err != nil {
			s.failure(w, r, "submission", err)
			return
		}
	}
	p.OrgID, p.CreatedBy, p.ReferenceUser = id.org, id.user, id.createdBy()
	if key != "" {
		// The user is part of the fingerprint: another member reusing a
		// key gets a conflict, never someone else's ids.
		p.IdempotencyKey, p.RequestHash = key, fingerprint(id.user, hash)
	}
	e, err := s.st.Enqueue(r.Context(), p)
	if err != nil {
		s.failure(w, r, "submission", err)
		return
	}
	s.log.Debug("prompt submitted", "prompt_id", e.PromptID, "job_id", e.JobID, "org", id.org, "existing", e.Existing)
	s.answerSubmitted(w, r, id, submitted{PromptID: e.PromptID, JobID: e.JobID, State: e.State}, wait)
}

func fingerprint(user, hash string) string {
	sum := sha256.Sum256([]byte(user + "\x00" + hash))
	return hex.EncodeToString(sum[:])
}

// takeSubmission spends one of the identity's submissions, or answers 429.
func (s *Server) takeSubmission(w http.ResponseWriter, id identity) bool {
	ok, delay := s.limits.allow(id.key)
	if !ok {
		w.Header().Set("Retry-After", retryAfter(delay))
		writeError(w, http.StatusTooManyRequests, "rate_limited", "too many submissions; retry after the Retry-After delay")
	}
	return ok
}

// waitParam parses ?wait= (a Go duration, at most MaxWait).
func (s *Server) waitParam(w http.ResponseWriter, r *http.Request) (time.Duration, bool) {
	d, ok := s.parseWait(r)
	if !ok {
		writeError(w, http.StatusBadRequest, "invalid_request", errWaitParam)
	}
	return d, ok
}

const errWaitParam = "wait must be a duration such as 30s"

// parseWait reads ?wait= (a Go duration, at most MaxWait; none: 0).
func (s *Server) parseWait(r *http.Request) (time.Duration, bool) {
	v := r.URL.Query().Get("wait")
	if v == "" {
		return 0, true
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < 0 {
		return 0, false
	}
	return min(d, s.cfg.MaxWait), true
}

// answerSubmitted answers 202 with the ids, or, with a wait, holds the
// request until the job is terminal (200 with the prompt and its answer)
// or the wait ends (202).
func (s *Server) answerSubmitted(w http.ResponseWriter, r *http.Request, id identity, sub submitted, wait time.Duration) {
	if wait > 0 && !sub.State.Terminal() {
		_ = http.NewResponseController(w).SetWriteDeadline(time.Now().Add(wait + 10*time.Second))
		j, err := s.waitTerminal(r.Context(), id.org, sub.JobID, wait)
		if errors.Is(err, context.Canceled) {
			return // the client left
		}
		if err != nil {
			s.failure(w, r, "waiting", err)
			return
		}
		sub.State = j.State
	}
	if !sub.State.Terminal() {
		writeJSON(w, http.StatusAccepted, sub)
		return
	}
	v, err := s.promptView(r.Context(), id, sub.PromptID)
	if err != nil {
		s.failure(w, r, "prompt", err)
		return
	}
	writeJSON(w, http.StatusOK, v)
}

// waitTerminal returns the job as it is once terminal, or when the
// wait, the request or the server ends. The event reader wakes it; each
// wake re-reads the job, so a missed or coalesced event costs nothing.
func (s *Server) waitTerminal(ctx context.Context, org, jobID string, wait time.Duration) (jobs.Job, error) {
	sub, _ := s.hub.subscribe(func(e jobs.Event) bool { return e.JobID == jobID }, 1, nil)
	defer s.hub.unsubscribe(sub)
	timer := time.NewTimer(wait)
	defer timer.Stop()
	for {
		j, err := s.st.GetJob(ctx, org, jobID)
		if err != nil {
			return jobs.Job{}, err
		}
		if j.State.Terminal() {
			return j, nil
		}
		select {
		case <-sub.live:
		case <-sub.behind: // more than one event: look once, for all
			s.hub.resume(sub)
		case <-timer.C:
			// A last look: the job may have ended just now.
			return s.st.GetJob(ctx, org, jobID)
		case <-ctx.Done():
			return j, ctx.Err()
		case <-s.streams.Done():
			return s.st.GetJob(ctx, org, jobID)
		}
	}
}

// promptView reads a prompt the identity may see, with its jobs and
// answer.
func (s *Server) promptView(ctx context.Context, id identity, promptID string) (promptView, error) {
	p, err := s.st.GetPrompt(ctx, id.org, promptID)
	if err != nil {
		return promptView{}, err
	}
	if !id.owns(p.OrgID, p.CreatedBy) {
		return promptView{}, jobs.ErrNotFound
	}
	js, err := s.st.PromptJobs(ctx, id.org, promptID)
	if err != nil {
		return promptView{}, err
	}
	if len(js) == 0 {
		return promptView{}, jobs.ErrNotFound // archived between the reads
	}
	v := promptView{Prompt: p, Job: js[len(js)-1], Jobs: js}
	v.Answer, err = s.answer(ctx, id.org, v.Job)
	return v, err
}

// answer reads a succeeded job's response; nil for any other job.
func (s *Server) answer(ctx context.Context, org string, j jobs.Job) (*answerView, error) {
	if j.State != jobs.Succeeded || j.ResponseID == "" {
		return nil, nil
	}
	resp, err := s.st.GetResponse(ctx, org, j.ResponseID)
	if errors.Is(err, jobs.ErrNotFound) {
		return nil, nil // archived since
	}
	if err != nil {
		return nil, err
	}
	return &answerView{Response: resp, HTML: renderAnswer(resp)}, nil
}

func (s *Server) getPrompt(w http.ResponseWriter, r *http.Request) {
	v, err := s.promptView(r.Context(), identityOf(r), r.PathValue("id"))
	if err != nil {
		s.failure(w, r, "prompt", err)
		return
	}
	writeJSON(w, http.StatusOK, v)
}

// ownedJob reads a job the identity may see.
func (s *Server) ownedJob(ctx context.Context, id identity, jobID string) (jobs.Job, error) {
	j, err := s.st.GetJob(ctx, id.org, jobID)
	if err != nil {
		return j, err
	}
	if !id.owns(j.OrgID, j.CreatedBy) {
		return jobs.Job{}, jobs.ErrNotFound
	}
	return j, nil
}

// jobView is a job and its events, in order.
type jobView struct {
	Job    jobs.Job     `json:"job"`
	Events []jobs.Event `json:"events"`
}

func (s *Server) getJob(w http.ResponseWriter, r *http.Request) {
	id := identityOf(r)
	j, err := s.ownedJob(r.Context(), id, r.PathValue("id"))
	if err != nil {
		s.failure(w, r, "job", err)
		return
	}
	evs, err := s.st.JobEvents(r.Context(), id.org, j.ID)
	if err != nil {
		s.failure(w, r, "job", err)
		return
	}
	writeJSON(w, http.StatusOK, jobView{Job: j, Events: nonNil(evs)})
}

func (s *Server) cancelJob(w http.ResponseWriter, r *http.Request) {
	id := identityOf(r)
	j, err := s.ownedJob(r.Context(), id, r.PathValue("id"))
	if err != nil {
		s.failure(w, r, "job", err)
		return
	}
	j, err = s.st.Cancel(r.Context(), jobs.CancelParams{OrgID: id.org, JobID: j.ID})
	if err != nil {
		s.failure(w, r, "cancel", err)
		return
	}
	s.log.Info("job cancelled", "job_id", j.ID, "prompt_id", j.PromptID, "org", id.org)
	writeJSON(w, http.StatusOK, struct {
		Job jobs.Job `json:"job"`
	}{j})
}

// retryRequest is the optional body of POST /v1/prompts/{id}/retry.
type retryRequest struct {
	Priority *int `json:"priority,omitempty"`
}

func (s *Server) retryPrompt(w http.ResponseWriter, r *http.Request) {
	id := identityOf(r)
	var req retryRequest
	if !s.decode(w, r, &req, true) {
		return
	}
	v, err := s.promptView(r.Context(), id, r.PathValue("id"))
	if err != nil {
		s.failure(w, r, "prompt", err)
		return
	}
	if !s.takeSubmission(w, id) {
		return
	}
	j, err := s.st.Retry(r.Context(), jobs.RetryParams{OrgID: id.org, JobID: v.Job.ID, Priority: req.Priority})
	if err != nil {
		s.failure(w, r, "retry", err)
		return
	}
	s.log.Info("prompt retried", "prompt_id", j.PromptID, "job_id", j.ID, "supersedes", j.Supersedes, "org", id.org)
	writeJSON(w, http.StatusAccepted, submitted{PromptID: j.PromptID, JobID: j.ID, State: j.State})
}

// promptList is a page of the caller's prompts.
type promptList struct {
	Prompts []promptState `json:"prompts"`
	// NextCursor continues the listing; empty on the last page.
	NextCursor string `json:"next_cursor,omitempty"`
}

func (s *Server) listPrompts(w http.ResponseWriter, r *http.Request) {
	id := identityOf(r)
	q := r.URL.Query()
	limit, ok := limitParam(w, q.Get("limit"))
	if !ok {
		return
	}
	page, err := s.st.ListJobs(r.Context(), jobs.ListParams{
		OrgID: id.org, CreatedBy: id.createdBy(), State: jobs.State(q.Get("state")),
		After: q.Get("cursor"), Limit: limit, Current: true,
	})
	if err != nil {
		s.failure(w, r, "listing", err)
		return
	}
	ps, err := s.states(r.Context(), id, page.Jobs)
	if err != nil {
		s.failure(w, r, "listing", err)
		return
	}
	writeJSON(w, http.StatusOK, promptList{Prompts: ps, NextCursor: page.Next})
}

// states turns current jobs into prompt states, in their order, reading
// their prompts with one GetPrompts and the answers of the succeeded ones
// with one GetResponses. A job whose prompt is gone (archived between the
// reads) is left out, as is one the identity may not see (the jobs were
// already filtered by creator; this holds the prompt to the same rule as
// GET /v1/prompts/{id}); a succeeded job whose response is gone has no
// answer.
func (s *Server) states(ctx context.Context, id identity, js []jobs.Job) ([]promptState, error) {
	out := make([]promptState, 0, len(js))
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
	prompts, err := s.st.GetPrompts(ctx, id.org, pids)
	if err != nil {
		return nil, err
	}
	var resps map[string]jobs.Response
	if len(rids) > 0 {
		if resps, err = s.st.GetResponses(ctx, id.org, rids); err != nil {
			return nil, err
		}
	}
	for _, j := range js {
		p, ok := prompts[j.PromptID]
		if !ok || !id.owns(p.OrgID, p.CreatedBy) {
			continue
		}
		st := promptState{PromptID: j.PromptID, Prompt: p, Job: j}
		if resp, ok := resps[j.ResponseID]; ok && j.State == jobs.Succeeded {
			st.Answer = &answerView{Response: resp, HTML: renderAnswer(resp)}
		}
		out = append(out, st)
	}
	return out, nil
}

// limitParam parses ?limit= (empty: the store's default).
func limitParam(w http.ResponseWriter, v string) (int, bool) {
	if v == "" {
		return 0, true
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > jobs.MaxListLimit {
		writeError(w, http.StatusBadRequest, "invalid_request", "limit must be 1–"+strconv.Itoa(jobs.MaxListLimit))
		return 0, false
	}
	return n, true
}

// recent is the answer of /v1/recent.
type recent struct {
	Prompts []promptState `json:"prompts"`
	// AsOf is the since of the next call.
	AsOf time.Time `json:"as_of"`
}

func (s *Server) recent(w http.ResponseWriter, r *http.Request) {
	id := identityOf(r)
	q := r.URL.Query()
	limit, ok := limitParam(w, q.Get("limit"))
	if !ok {
		return
	}
	var since time.Time
	if v := q.Get("since"); v != "" {
		t, err := time.Parse(time.RFC3339Nano, v)
		if err != nil {
			writeError(w, http.StatusBadRequest, "invalid_request", "since must be an RFC 3339 time, such as the as_of of the previous call")
			return
		}
		since = t
	}
	ch, err := s.st.ChangesSince(r.Context(), jobs.ChangesParams{OrgID: id.org, CreatedBy: id.createdBy(), Since: since, Limit: limit})
	if err != nil {
		s.failure(w, r, "recent", err)
		return
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
	ps, err := s.states(r.Context(), id, current)
	if err != nil {
		s.failure(w, r, "recent", err)
		return
	}
	writeJSON(w, http.StatusOK, recent{Prompts: ps, AsOf: ch.AsOf.UTC()})
}

func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}
