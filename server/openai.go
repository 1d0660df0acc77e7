package server

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/promptkit/promptkit"
	"github.com/promptkit/promptkit/internal/openaiapi"
	"github.com/promptkit/promptkit/jobs"
	"github.com/promptkit/promptkit/jobs/worker"
)

// The OpenAI-compatible front door: POST /v1/chat/completions, GET
// /v1/models, /v1/files and /v1/batches in OpenAI's shapes (see
// internal/openaiapi and docs/openai.md), so an OpenAI SDK with only its
// base URL changed gets durable, retried, paced execution. Every answer
// of these routes, errors included, is in OpenAI's format.

// Defaults of the OpenAI-compatible routes.
const (
	DefaultChatTimeout = 10 * time.Minute
	// jobRateLimitRetryAfter is the Retry-After of a 429 for a job that
	// failed on the provider's rate limit: a failed job keeps no provider
	// Retry-After, and this is the least a worker itself waits after a
	// rate limit without one.
	jobRateLimitRetryAfter = 60 * time.Second
)

// Headers of POST /v1/chat/completions.
const (
	headerPromptID = "X-Promptkit-Prompt-Id"
	headerJobID    = "X-Promptkit-Job-Id"
	headerPriority = "X-Promptkit-Priority"
	// headerMaxAttempts sets the job's attempt budget, as max_attempts
	// does on POST /v1/prompts: 1 fails the request at the first provider
	// failure instead of retrying it as a job.
	headerMaxAttempts = "X-Promptkit-Max-Attempts"
)

// openaiRoutes registers the OpenAI-compatible routes.
func (s *Server) openaiRoutes(handle func(pattern string, h http.HandlerFunc, auth bool)) {
	s.oaPatterns = map[string]bool{}
	route := func(pattern string, h http.HandlerFunc) {
		s.oaPatterns[pattern] = true
		handle(pattern, s.authenticateOpenAI(h).ServeHTTP, false)
	}
	route("POST /v1/chat/completions", s.chatCompletions)
	route("GET /v1/models", s.listModels)
	route("GET /v1/models/{id}", s.getModel)
	route("POST /v1/files", s.uploadFile)
	route("GET /v1/files", s.listFiles)
	route("GET /v1/files/{id}", s.getFile)
	route("GET /v1/files/{id}/content", s.fileContent)
	route("DELETE /v1/files/{id}", s.deleteFile)
	route("POST /v1/batches", s.createBatch)
	route("GET /v1/batches", s.listBatches)
	route("GET /v1/batches/{id}", s.getBatch)
	route("POST /v1/batches/{id}/cancel", s.cancelBatch)
}

// oaError answers an error in OpenAI's shape.
func oaError(w http.ResponseWriter, status int, typ, param, code, msg string) {
	writeJSON(w, status, openaiapi.NewError(msg, typ, param, code))
}

// oaInternal answers 500 in OpenAI's shape and logs the cause.
func (s *Server) oaInternal(w http.ResponseWriter, r *http.Request, what string, err error) {
	s.log.Error("request failed", "route", r.Pattern, "op", what, "err", err)
	oaError(w, http.StatusInternalServerError, openaiapi.TypeAPI, "", "internal_error", "The server had an error while processing the request.")
}

// oaFailure maps a store or engine error to an OpenAI error answer.
func (s *Server) oaFailure(w http.ResponseWriter, r *http.Request, what string, err error) {
	switch {
	case errors.Is(err, jobs.ErrNotFound):
		oaError(w, http.StatusNotFound, openaiapi.TypeInvalidRequest, "", "not_found", "No such "+what+".")
	case errors.Is(err, jobs.ErrIdempotencyConflict):
		oaError(w, http.StatusUnprocessableEntity, openaiapi.TypeInvalidRequest, "", "idempotency_conflict",
			"The Idempotency-Key was used with a different request.")
	case errors.Is(err, jobs.ErrInvalid),
		errors.Is(err, promptkit.ErrInvalidRequest),
		errors.Is(err, promptkit.ErrPromptNotFound),
		errors.Is(err, promptkit.ErrProfileNotFound):
		oaError(w, http.StatusBadRequest, openaiapi.TypeInvalidRequest, invalidField(err), "invalid_request", jobs.InvalidMessage(err))
	default:
		s.oaInternal(w, r, what, err)
	}
}

// oaBody reads a JSON request body up to MaxBodyBytes (413 beyond).
func (s *Server) oaBody(w http.ResponseWriter, r *http.Request) ([]byte, bool) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, s.cfg.MaxBodyBytes))
	if err != nil {
		if tooBig, ok := errors.AsType[*http.MaxBytesError](err); ok {
			oaError(w, http.StatusRequestEntityTooLarge, openaiapi.TypeInvalidRequest, "", "request_too_large",
				fmt.Sprintf("The body is over %d bytes.", tooBig.Limit))
			return nil, false
		}
		oaError(w, http.StatusBadRequest, openaiapi.TypeInvalidRequest, "", "invalid_body", "The body could not be read.")
		return nil, false
	}
	return body, true
}

// oaTake spends one of the identity's submissions, or answers 429.
func (s *Server) oaTake(w http.ResponseWriter, id identity) bool {
	ok, delay := s.limits.allow(id.key)
	if !ok {
		w.Header().Set("Retry-After", retryAfter(delay))
		oaError(w, http.StatusTooManyRequests, openaiapi.TypeRateLimit, "", "rate_limit_exceeded",
			"Too many requests from this token; retry after the Retry-After delay.")
	}
	return ok
}

func (s *Server) chatTimeout() time.Duration {
	return cmp.Or(max(s.cfg.ChatTimeout, 0), DefaultChatTimeout)
}

// chatCompletions answers POST /v1/chat/completions: the request becomes
// a job, and the answer is its outcome once the job is terminal.
func (s *Server) chatCompletions(w http.ResponseWriter, r *http.Request) {
	id := identityOf(r)
	var prio *int
	if v := r.Header.Get(headerPriority); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < jobs.MinPriority || n > jobs.MaxPriority {
			oaError(w, http.StatusBadRequest, openaiapi.TypeInvalidRequest, headerPriority, "invalid_value",
				fmt.Sprintf("%s must be an integer from %d (first) to %d (last).", headerPriority, jobs.MinPriority, jobs.MaxPriority))
			return
		}
		prio = &n
	}
	attempts := 0
	if v := r.Header.Get(headerMaxAttempts); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || jobs.CheckMaxAttempts(n) != nil {
			oaError(w, http.StatusBadRequest, openaiapi.TypeInvalidRequest, headerMaxAttempts, "invalid_value",
				fmt.Sprintf("%s must be an integer from 1 to %d.", headerMaxAttempts, jobs.MaxMaxAttempts))
			return
		}
		attempts = n
	}
	key := r.Header.Get("Idempotency-Key")
	if len(key) > maxIdempotencyKey {
		oaError(w, http.StatusBadRequest, openaiapi.TypeInvalidRequest, "Idempotency-Key", "invalid_value",
			"Idempotency-Key is longer than 255 bytes.")
		return
	}
	body, ok := s.oaBody(w, r)
	if !ok {
		return
	}
	params, err := openaiapi.DecodeChat(body)
	if re, ok := errors.AsType[*openaiapi.RequestError](err); ok {
		writeJSON(w, http.StatusBadRequest, re.Body())
		return
	} else if err != nil {
		s.oaInternal(w, r, "decoding", err)
		return
	}
	target, ok := openaiapi.ResolveOr(s.cfg.Engine, params.Model, s.cfg.FallbackProfile)
	if !ok {
		oaError(w, http.StatusNotFound, openaiapi.TypeInvalidRequest, "model", "model_not_found",
			"The model does not exist: name a profile or a model of a configured backend (see GET /v1/models).")
		return
	}
	if !s.oaTake(w, id) {
		return
	}
	chat := params.Chat
	p := jobs.EnqueueParams{
		OrgID: id.org, CreatedBy: id.user, Chat: &chat, Profile: target.Profile,
		ExecutionOptions: target.Options.JSON(), Priority: prio, MaxAttempts: attempts,
	}
	if s.cfg.Engine != nil {
		if err := worker.Check(r.Context(), s.cfg.Engine, p); err != nil {
			s.oaFailure(w, r, "chat completion", err)
			return
		}
	}
	if key != "" {
		// The user is part of the fingerprint, as for POST /v1/prompts.
		p.IdempotencyKey, p.RequestHash = key, fingerprint(id.user, chatHash(params))
	}
	e, err := s.st.Enqueue(r.Context(), p)
	if err != nil {
		s.oaFailure(w, r, "chat completion", err)
		return
	}
	s.log.Debug("chat completion queued", "prompt_id", e.PromptID, "job_id", e.JobID, "org", id.org, "existing", e.Existing)
	w.Header().Set(headerPromptID, e.PromptID)
	w.Header().Set(headerJobID, e.JobID)
	// The answer may come far later than the server's write timeout.
	deadline := time.Now().Add(s.chatTimeout())
	_ = http.NewResponseController(w).SetWriteDeadline(deadline.Add(10 * time.Second))
	if params.Stream {
		s.streamChat(w, r, id, e, params.IncludeUsage, deadline)
		return
	}
	j, err := s.awaitJob(r.Context(), id.org, e.PromptID, e.JobID, deadline, nil)
	if errors.Is(err, context.Canceled) {
		return // the client left; the job goes on
	}
	if err != nil {
		s.oaFailure(w, r, "chat completion", err)
		return
	}
	status, v, err := s.chatOutcome(r.Context(), id, j)
	if err != nil {
		s.oaInternal(w, r, "chat completion", err)
		return
	}
	if status == http.StatusTooManyRequests {
		w.Header().Set("Retry-After", retryAfter(jobRateLimitRetryAfter))
	}
	writeJSON(w, status, v)
}

// chatHash fingerprints a chat request for its Idempotency-Key: the model
// and the conversation with its parameters. How the answer is delivered
// (stream, include_usage) is left out, so a streamed retry of a plain
// request finds the same job.
func chatHash(p openaiapi.ChatParams) string {
	c := p.Chat
	c.Schema = canonicalJSON(c.Schema)
	b, _ := json.Marshal(struct {
		Model string           `json:"model"`
		Chat  jobs.ChatRequest `json:"chat"`
	}{p.Model, c}) // cannot fail: strings, numbers and valid JSON
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// awaitJob waits until the prompt's current job is terminal, the
// deadline passes or the server closes, and returns the job as it then
// is. A job superseded by a retry is followed to its retry. With tick,
// it wakes at every KeepAlive to call it, and stops when tick fails.
func (s *Server) awaitJob(ctx context.Context, org, promptID, jobID string, deadline time.Time, tick func() error) (jobs.Job, error) {
	for {
		wait := time.Until(deadline)
		if tick != nil {
			wait = min(wait, s.cfg.KeepAlive)
		}
		j, err := s.waitTerminal(ctx, org, jobID, max(wait, 0))
		if err != nil {
			return jobs.Job{}, err
		}
		if j.State == jobs.Superseded {
			js, err := s.st.PromptJobs(ctx, org, promptID)
			if err != nil {
				return jobs.Job{}, err
			}
			if len(js) == 0 {
				return jobs.Job{}, jobs.ErrNotFound // archived meanwhile
			}
			jobID = js[len(js)-1].ID
			continue
		}
		if j.State.Terminal() || !time.Now().Before(deadline) || s.streams.Err() != nil {
			return j, nil // as waitTerminal last read it
		}
		if tick != nil {
			if err := tick(); err != nil {
				return jobs.Job{}, err
			}
		}
	}
}

// chatOutcome is the answer for a chat job as awaitJob left it: its
// completion, its error, or (not terminal) a 504 after the chat timeout or
// a 503 when the server is closing.
func (s *Server) chatOutcome(ctx context.Context, id identity, j jobs.Job) (int, any, error) {
	switch {
	case j.State == jobs.Succeeded:
		resp, err := s.st.GetResponse(ctx, id.org, j.ResponseID)
		if errors.Is(err, jobs.ErrNotFound) {
			return http.StatusInternalServerError, openaiapi.NewError("The answer is no longer stored.", openaiapi.TypeAPI, "", "response_unavailable"), nil
		}
		if err != nil {
			return 0, nil, err
		}
		return http.StatusOK, openaiapi.Completion(j, resp), nil
	case j.State.Terminal():
		status, body := openaiapi.JobError(j)
		return status, body, nil
	case s.streams.Err() != nil:
		return http.StatusServiceUnavailable, openaiapi.NewError(
			"The server is shutting down; the request is queued as prompt "+j.PromptID+": repeat it with the same Idempotency-Key, or fetch GET /v1/prompts/"+j.PromptID+".",
			openaiapi.TypeServer, "", "server_shutting_down"), nil
	}
	return http.StatusGatewayTimeout, openaiapi.NewError(
		"The answer took longer than the server waits; the job goes on: fetch GET /v1/prompts/"+j.PromptID+" for it.",
		openaiapi.TypeServer, "", "timeout"), nil
}

// streamChat answers with Server-Sent Events: the headers at once,
// keep-alive comments while the job runs, then the finished answer as
// chat.completion.chunk events and data: [DONE]. A failure after the
// headers is one data: {"error": {...}} event, which OpenAI's SDKs raise.
func (s *Server) streamChat(w http.ResponseWriter, r *http.Request, id identity, e jobs.Enqueued, includeUsage bool, deadline time.Time) {
	rc := http.NewResponseController(w)
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	if rc.Flush() != nil {
		return
	}
	event := func(v any) error {
		b, err := json.Marshal(v)
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(w, "data: %s\n\n", b)
		return err
	}
	gone := false // a write failed: the client left
	keepAlive := func() error {
		_, err := io.WriteString(w, ": keep-alive\n\n")
		if err == nil {
			err = rc.Flush()
		}
		gone = err != nil
		return err
	}
	j, err := s.awaitJob(r.Context(), id.org, e.PromptID, e.JobID, deadline, keepAlive)
	if gone || r.Context().Err() != nil {
		return // the client left; the job goes on
	}
	var status int
	var v any
	if err == nil {
		status, v, err = s.chatOutcome(r.Context(), id, j)
	}
	if err != nil {
		s.log.Error("request failed", "route", r.Pattern, "op", "chat completion stream", "err", err)
		_ = event(openaiapi.NewError("The server had an error while processing the request.", openaiapi.TypeAPI, "", "internal_error"))
		_ = rc.Flush()
		return
	}
	c, ok := v.(openaiapi.ChatCompletion)
	if status != http.StatusOK || !ok {
		_ = event(v)
		_ = rc.Flush()
		return
	}
	for _, ch := range openaiapi.Chunks(c, includeUsage) {
		if event(ch) != nil {
			return
		}
	}
	_, _ = io.WriteString(w, "data: [DONE]\n\n")
	_ = rc.Flush()
}

// modelList is the body of GET /v1/models.
type modelList struct {
	Object string            `json:"object"`
	Data   []openaiapi.Model `json:"data"`
}

func (s *Server) listModels(w http.ResponseWriter, _ *http.Request) {
	out := modelList{Object: "list", Data: []openaiapi.Model{}}
	for _, m := range openaiapi.Models(s.cfg.Engine) {
		out.Data = append(out.Data, openaiapi.NewModel(m))
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) getModel(w http.ResponseWriter, r *http.Request) {
	m := r.PathValue("id")
	if _, ok := openaiapi.ResolveOr(s.cfg.Engine, m, s.cfg.FallbackProfile); !ok {
		oaError(w, http.StatusNotFound, openaiapi.TypeInvalidRequest, "model", "model_not_found",
			"The model does not exist: name a profile or a model of a configured backend (see GET /v1/models).")
		return
	}
	writeJSON(w, http.StatusOK, openaiapi.NewModel(m))
}
