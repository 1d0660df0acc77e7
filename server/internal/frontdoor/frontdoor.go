// Package frontdoor is the OpenAI-compatible API: POST
// /v1/chat/completions, /v1/responses (responses.go), POST /v1/embeddings,
// GET /v1/models, /v1/files and /v1/batches in OpenAI's shapes (internal/openaiapi is the wire
// format, docs/openai.md the contract), so an OpenAI SDK with only its
// base URL changed gets durable, retried, paced execution: every request
// is a job, but an embedding, answered at once (embeddings.go). Its handlers
// run on the httpapi pipeline in the OpenAI dialect, so every answer,
// errors included, is in OpenAI's format.
package frontdoor

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net/http"
	"strconv"
	"time"

	"github.com/promptkit/promptkit"
	"github.com/promptkit/promptkit/internal/openaiapi"
	"github.com/promptkit/promptkit/jobs"
	"github.com/promptkit/promptkit/server/internal/auth"
	"github.com/promptkit/promptkit/server/internal/httpapi"
	"github.com/promptkit/promptkit/server/internal/submit"
)

// Defaults of the OpenAI-compatible routes.
const (
	DefaultChatTimeout = 10 * time.Minute
	// DefaultRepeatWindow is how long after its job finished a chat
	// request without an Idempotency-Key still finds that job when the
	// same caller sends it again (see API.RepeatWindow). An SDK retries a
	// failed attempt after at most 60 s (Retry-After, capped by the
	// SDKs; 8 s of backoff without one), and that attempt failed no
	// earlier than the job finished (else it would have had the answer):
	// five minutes covers every retry with room for slow networks, and
	// is still short beside a person or a program asking the same thing
	// again on purpose.
	DefaultRepeatWindow = 5 * time.Minute
	// jobRateLimitRetryAfter is the Retry-After of a 429 for a job that
	// failed on the provider's rate limit: a failed job keeps no provider
	// Retry-After, and this is the least a worker itself waits after a
	// rate limit without one.
	jobRateLimitRetryAfter = 60 * time.Second
)

// Headers of POST /v1/chat/completions.
const (
	headerPromptID = httpapi.HeaderPromptID
	headerJobID    = httpapi.HeaderJobID
	headerPriority = "X-Promptkit-Priority"
	// headerRetryCount is the attempt number OpenAI's SDKs (and every
	// Stainless-made SDK) send: 0 on a call's first attempt, 1 and up on
	// their retries.
	headerRetryCount = "X-Stainless-Retry-Count"
	// headerMaxAttempts sets the job's attempt budget, as max_attempts
	// does on POST /v1/prompts: 1 fails the request at the first provider
	// failure instead of retrying it as a job.
	headerMaxAttempts = "X-Promptkit-Max-Attempts"
	// headerTimeout is how long the client waits for the answer, in
	// seconds, as OpenAI's SDKs (and every Stainless-made SDK) send it.
	headerTimeout = "X-Stainless-Timeout"
)

// waitShare is the part of the time a client says it waits (its
// timeout, else the chat timeout) that the job's attempts and backoffs
// may take: the rest is for the answer's way back and the client's own
// clock, so that the client gets promptkit's answer, not its timeout.
const waitShare = 0.9

// API serves the OpenAI-compatible routes.
type API struct {
	Store jobs.Store
	// Notifier relays running jobs' answer pieces to streams and wakes a
	// batch's ?wait=. Defaults to Store.Notifier().
	Notifier jobs.Notifier
	// Jobs queues and waits for the jobs of requests.
	Jobs submit.Jobs
	// Engine resolves models; nil: none is known.
	Engine *promptkit.Engine
	// FallbackProfile runs a model that names nothing (see
	// server.Config.FallbackProfile).
	FallbackProfile string
	// MaxBody caps a JSON body, MaxFile an upload.
	MaxBody, MaxFile int64
	// ChatTimeout bounds a chat completion's wait, MaxWait ?wait=.
	ChatTimeout, MaxWait time.Duration
	// RepeatWindow is how long after its job succeeded a chat request
	// without an Idempotency-Key is answered by that job when the same
	// caller retries it (repeatGrace); zero: DefaultRepeatWindow;
	// negative: such requests are never coalesced.
	RepeatWindow time.Duration
	// KeepAlive is the interval of keep-alive comments on a stream.
	KeepAlive time.Duration
	// BatchPriority is the priority of batch lines; nil: the default.
	BatchPriority *int
	Log           *slog.Logger
	// Now and Wait are the clock a batch's ?wait= spaces its reads by;
	// nil: time.Now and a timer. Tests inject a testkit.Clock's.
	Now  func() time.Time
	Wait func(ctx context.Context, d time.Duration) error
}

// notifier is a.Notifier or, unset, the store's: asked for only when
// needed, so that building an API calls nothing on its store.
func (a *API) notifier() jobs.Notifier {
	if a.Notifier != nil {
		return a.Notifier
	}
	return a.Store.Notifier()
}

func (a *API) now() time.Time {
	if a.Now != nil {
		return a.Now()
	}
	return time.Now()
}

// wait pauses for d, or until ctx ends.
func (a *API) wait(ctx context.Context, d time.Duration) {
	if a.Wait != nil {
		_ = a.Wait(ctx, d)
		return
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}

// resolve is the target of a request's model, or a 404 problem.
func (a *API) resolve(model string) (jobs.Target, error) {
	var r jobs.ModelResolver
	if a.Engine != nil {
		r = a.Engine
	}
	t, ok := jobs.Resolve(r, model, a.FallbackProfile)
	if !ok {
		return t, &httpapi.Problem{Status: http.StatusNotFound, Code: "model_not_found", Param: "model",
			Message: "The model does not exist: name a profile or a model of a configured backend (see GET /v1/models)."}
	}
	return t, nil
}

// headerInt parses an integer header from lo to hi; absent: 0.
func headerInt(r *http.Request, name string, lo, hi int, msg string) (int, error) {
	v := r.Header.Get(name)
	if v == "" {
		return 0, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < lo || n > hi {
		return 0, httpapi.OpenAIInvalid(name, "invalid_value", msg)
	}
	return n, nil
}

// Chat answers POST /v1/chat/completions: the request becomes a job, and
// the answer is its outcome once the job is terminal.
func (a *API) Chat(w http.ResponseWriter, r *http.Request) error {
	id := auth.Of(r)
	var prio *int
	if r.Header.Get(headerPriority) != "" {
		n, err := headerInt(r, headerPriority, jobs.MinPriority, jobs.MaxPriority,
			fmt.Sprintf("%s must be an integer from %d (first) to %d (last).", headerPriority, jobs.MinPriority, jobs.MaxPriority))
		if err != nil {
			return err
		}
		prio = &n
	}
	attempts, err := headerInt(r, headerMaxAttempts, 1, jobs.MaxMaxAttempts,
		fmt.Sprintf("%s must be an integer from 1 to %d.", headerMaxAttempts, jobs.MaxMaxAttempts))
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
	params, err := openaiapi.DecodeChat(body)
	if err != nil {
		return httpapi.About("decoding", err)
	}
	target, err := a.resolve(params.Model)
	if err != nil {
		return err
	}
	chat := params.Chat
	opts := target.Options
	opts.Stream = params.Stream // the worker publishes the answer's pieces
	opts.Deadline = a.clientDeadline(r)
	p, err := jobs.EnqueueParams{
		OrgID: id.Org, CreatedBy: id.User, Chat: &chat, Profile: target.Profile,
		ExecutionOptions: opts, Priority: prio, MaxAttempts: attempts,
	}.Normalize()
	if err != nil {
		return httpapi.About("chat completion", err)
	}
	hash := chatHash(params)
	var coalesced bool
	key, coalesced = a.sameRequest(r, id, key, hash, &p)
	e, err := a.Jobs.Admit(r.Context(), id, p, key, hash, "chat completion", true)
	if err != nil {
		return err
	}
	a.Log.Debug("chat completion queued", "prompt_id", e.PromptID, "job_id", e.JobID, "org", id.Org,
		"existing", e.Existing, "coalesced", coalesced)
	httpapi.SetIDs(w, e.PromptID, e.JobID)
	// The answer may come far later than the server's write timeout.
	deadline := time.Now().Add(a.chatTimeout())
	_ = http.NewResponseController(w).SetWriteDeadline(deadline.Add(10 * time.Second))
	if params.Stream {
		// A worker may have started the job already: the store replays a
		// job's first pieces to a reader that comes late.
		pieces := a.notifier().SubscribeDeltas(r.Context(), e.JobID)
		a.streamChat(w, r, id, e, params, pieces, deadline) // its headers go at once
		return nil
	}
	httpapi.EarlyHints(w, r)
	j, err := a.awaitJob(r.Context(), id.Org, e, deadline)
	if err != nil {
		return httpapi.About("chat completion", err)
	}
	status, v, err := a.chatOutcome(r.Context(), id, j)
	if err != nil {
		return httpapi.About("chat completion", err)
	}
	writeOutcome(w, j, status, v)
	return nil
}

// writeOutcome writes the answer of a request that waited for job j. A
// job that ended without an answer has spent the attempts promptkit
// makes: its error says so to the client's SDK (x-should-retry: false,
// which OpenAI's SDKs honour), so that one call of the SDK is one job, not
// one per SDK attempt. A rate-limited job's 429 carries a Retry-After.
func writeOutcome(w http.ResponseWriter, j jobs.Job, status int, v any) {
	if j.State.Terminal() && j.State != jobs.Succeeded {
		w.Header().Set("X-Should-Retry", "false")
	}
	if status == http.StatusTooManyRequests {
		w.Header().Set("Retry-After", httpapi.RetryAfter(jobRateLimitRetryAfter))
	}
	httpapi.WriteJSON(w, status, v)
}

// sameRequest gives a request without an Idempotency-Key (key "") the key
// that lets a retry of it find its job (submit.SameRequestKey: the same
// request from the same caller). Only a request that says it is a retry
// (X-Stainless-Retry-Count 1 and up, as OpenAI's SDKs send it) joins a
// job: the first attempt's while it is queued or running, or up to
// RepeatWindow after it succeeded. Any other request is a new sample,
// whatever it repeats (two identical requests at once at temperature 1
// are two answers), and only takes the key for its own retries (KeyFresh).
// A negative RepeatWindow turns this off. It returns the key and whether
// it is derived.
func (a *API) sameRequest(r *http.Request, id auth.Identity, key, hash string, p *jobs.EnqueueParams) (string, bool) {
	if key != "" || a.RepeatWindow < 0 {
		return key, false
	}
	p.KeyExpires = true
	if n, err := strconv.Atoi(r.Header.Get(headerRetryCount)); err == nil && n > 0 {
		p.KeyGrace = cmp.Or(a.RepeatWindow, DefaultRepeatWindow)
	} else {
		p.KeyFresh = true
	}
	return submit.SameRequestKey(id, hash), true
}

// clientDeadline is when the client of a request it waits for stops
// waiting: waitShare of its X-Stainless-Timeout (seconds), or of the chat
// timeout when it sends none or a longer one (the chat timeout ends the
// wait anyway). The job makes no attempt, and waits no backoff, past it
// (jobs.ExecutionOptions.Deadline).
func (a *API) clientDeadline(r *http.Request) *time.Time {
	wait := a.chatTimeout()
	if secs, err := strconv.ParseFloat(r.Header.Get(headerTimeout), 64); err == nil && secs > 0 && !math.IsInf(secs, 0) {
		wait = min(wait, time.Duration(secs*float64(time.Second)))
	}
	d := time.Now().Add(time.Duration(float64(wait) * waitShare))
	return &d
}

func (a *API) chatTimeout() time.Duration {
	return cmp.Or(max(a.ChatTimeout, 0), DefaultChatTimeout)
}

// chatHash fingerprints a chat request for its Idempotency-Key: the model
// and the conversation with its parameters. How the answer is delivered
// (stream, include_usage) is left out, so a streamed retry of a plain
// request finds the same job.
func chatHash(p openaiapi.ChatParams) string {
	c := p.Chat
	c.Schema = httpapi.CanonicalJSON(c.Schema)
	h, _ := httpapi.Hash(struct {
		Model string           `json:"model"`
		Chat  jobs.ChatRequest `json:"chat"`
	}{p.Model, c}) // cannot fail: strings, numbers and valid JSON
	return h
}

// awaitJob waits until the prompt's current job is terminal, the
// deadline passes or the server closes, and returns the job as it then
// is.
func (a *API) awaitJob(ctx context.Context, org string, e submit.Admitted, deadline time.Time) (jobs.Job, error) {
	jobID := e.JobID
	for {
		j, err := a.Jobs.AwaitJob(ctx, org, e, jobID, max(time.Until(deadline), 0))
		if err != nil {
			return jobs.Job{}, err
		}
		if j.State.Terminal() || !time.Now().Before(deadline) || a.Jobs.Serving.Err() != nil {
			return j, nil
		}
		jobID = j.ID // perhaps a retry's
	}
}

// chatOutcome is the answer for a chat job as awaitJob left it: its
// completion, its error, or (not terminal) a 504 after the chat timeout or
// a 503 when the server is closing.
func (a *API) chatOutcome(ctx context.Context, id auth.Identity, j jobs.Job) (int, any, error) {
	switch {
	case j.State == jobs.Succeeded:
		resp, err := a.Store.GetResponse(ctx, id.Org, j.ResponseID)
		if errors.Is(err, jobs.ErrNotFound) {
			return http.StatusInternalServerError, openaiapi.NewError("The answer is no longer stored.", openaiapi.TypeAPI, "", "response_unavailable"), nil
		}
		if err != nil {
			return 0, nil, err
		}
		return http.StatusOK, openaiapi.CompletionJSON(j, resp), nil
	case j.State.Terminal():
		status, body := openaiapi.JobError(j)
		return status, body, nil
	case a.Jobs.Serving.Err() != nil:
		return http.StatusServiceUnavailable, openaiapi.NewError(
			"The server is shutting down; the request is queued as prompt "+j.PromptID+": repeat it (with the same Idempotency-Key, if it had one) to wait for it again, or fetch GET /v1/prompts/"+j.PromptID+".",
			openaiapi.TypeServer, "", "server_shutting_down"), nil
	}
	return http.StatusGatewayTimeout, openaiapi.NewError(
		"The answer took longer than the server waits; the job goes on: fetch GET /v1/prompts/"+j.PromptID+" for it.",
		openaiapi.TypeServer, "", "timeout"), nil
}

// ModelList is the body of GET /v1/models.
type ModelList struct {
	Object string            `json:"object"`
	Data   []openaiapi.Model `json:"data"`
}

// ListModels answers GET /v1/models.
func (a *API) ListModels(w http.ResponseWriter, _ *http.Request) error {
	out := ModelList{Object: "list", Data: []openaiapi.Model{}}
	for _, m := range a.Engine.Models() {
		out.Data = append(out.Data, openaiapi.NewModel(m))
	}
	httpapi.WriteJSON(w, http.StatusOK, out)
	return nil
}

// GetModel answers GET /v1/models/{id}.
func (a *API) GetModel(w http.ResponseWriter, r *http.Request) error {
	m := r.PathValue("id")
	if _, err := a.resolve(m); err != nil {
		return err
	}
	httpapi.WriteJSON(w, http.StatusOK, openaiapi.NewModel(m))
	return nil
}
