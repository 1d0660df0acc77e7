package server

import (
	"context"
	_ "embed"
	"net/http"
	"time"

	"github.com/promptkit/promptkit/server/internal/auth"
	"github.com/promptkit/promptkit/server/internal/httpapi"
	"github.com/promptkit/promptkit/server/internal/page"
)

// openAPI is the API's OpenAPI 3.1 document. The tests check every route
// against it and every answer of the API tests against its schemas.
//
//go:embed openapi.json
var openAPI []byte

// routes builds the handler: every route the server answers is listed
// here, with the dialect its errors take and whether it needs an
// identity. The local-mode guard goes around all of them.
func (s *Server) routes() http.Handler {
	mux := http.NewServeMux()
	s.mux = mux
	s.dialects = map[string]httpapi.Dialect{}
	// route registers h for pattern: on the pipeline in dialect d and,
	// unless open, as the identity the request proves, its query free of
	// NUL bytes (httpapi.CheckQuery). The open routes read no parameter.
	route := func(pattern string, d httpapi.Dialect, h httpapi.HandlerFunc, open bool) {
		var next http.Handler = d.Handler(s.log, h)
		if !open {
			next = d.RefuseNUL(routeParams(pattern), s.auth.Require(d, next))
		}
		s.handle(mux, pattern, d, next)
	}
	rest, openai := httpapi.REST, httpapi.OpenAI
	const open = true

	// promptkit's API (server/internal/rest).
	route("POST /v1/prompts", rest, s.rest.Submit, !open)
	route("GET /v1/prompts", rest, s.rest.ListPrompts, !open)
	route("GET /v1/prompts/{id}", rest, s.rest.GetPrompt, !open)
	route("POST /v1/prompts/{id}/retry", rest, s.rest.RetryPrompt, !open)
	route("GET /v1/jobs/{id}", rest, s.rest.GetJob, !open)
	route("POST /v1/jobs/{id}/cancel", rest, s.rest.CancelJob, !open)
	route("GET /v1/recent", rest, s.rest.Recent, !open)
	route("GET /v1/profiles", rest, s.rest.Profiles, !open)
	route("GET /v1/usage", rest, s.rest.Usage, !open)
	// The event stream also accepts a stream ticket instead of a bearer
	// token: EventSource cannot send one.
	route("POST /v1/events/ticket", rest, s.auth.IssueTicket, !open)
	s.handle(mux, "GET /v1/events", rest, rest.RefuseNUL(routeParams("GET /v1/events"), s.auth.RequireStream(rest.Handler(s.log, s.hub.Stream))))

	// The operator's API (server/internal/admin), which the dashboard reads.
	route("GET /v1/admin/overview", rest, s.admin.Overview, !open)
	route("GET /v1/admin/jobs", rest, s.admin.ListJobs, !open)
	route("GET /v1/admin/jobs/{id}", rest, s.admin.GetJob, !open)
	route("POST /v1/admin/jobs/cancel", rest, s.admin.CancelJobs, !open)
	route("POST /v1/admin/jobs/retry", rest, s.admin.RetryJobs, !open)
	route("GET /v1/admin/batches", rest, s.admin.Batches, !open)
	route("GET /v1/admin/backends", rest, s.admin.Backends, !open)
	route("POST /v1/admin/backends/{id}/pause", rest, s.admin.PauseBackend, !open)
	route("POST /v1/admin/backends/{id}/resume", rest, s.admin.ResumeBackend, !open)
	route("POST /v1/admin/orgs/{id}/pause", rest, s.admin.PauseOrg, !open)
	route("POST /v1/admin/orgs/{id}/resume", rest, s.admin.ResumeOrg, !open)
	route("GET /v1/admin/workers", rest, s.admin.Workers, !open)
	route("POST /v1/admin/workers/{id}/drain", rest, s.admin.DrainWorker, !open)
	route("POST /v1/admin/workers/{id}/undrain", rest, s.admin.UndrainWorker, !open)
	route("GET /v1/admin/tokens", rest, s.admin.Tokens, !open)
	route("POST /v1/admin/tokens", rest, s.auth.LimitTokenCreation(s.admin.CreateToken), !open)
	route("POST /v1/admin/tokens/{id}/revoke", rest, s.admin.RevokeToken, !open)

	// The OpenAI-compatible front door (server/internal/frontdoor).
	route("POST /v1/chat/completions", openai, s.openai.Chat, !open)
	route("POST /v1/embeddings", openai, s.openai.Embeddings, !open)
	route("GET /v1/models", openai, s.openai.ListModels, !open)
	route("GET /v1/models/{id}", openai, s.openai.GetModel, !open)
	route("POST /v1/files", openai, s.openai.UploadFile, !open)
	route("GET /v1/files", openai, s.openai.ListFiles, !open)
	route("GET /v1/files/{id}", openai, s.openai.GetFile, !open)
	route("GET /v1/files/{id}/content", openai, s.openai.FileContent, !open)
	route("DELETE /v1/files/{id}", openai, s.openai.DeleteFile, !open)
	route("POST /v1/batches", openai, s.openai.CreateBatch, !open)
	route("GET /v1/batches", openai, s.openai.ListBatches, !open)
	route("GET /v1/batches/{id}", openai, s.openai.GetBatch, !open)
	route("POST /v1/batches/{id}/cancel", openai, s.openai.CancelBatch, !open)
	route("POST /v1/responses", openai, s.openai.CreateResponse, !open)
	route("GET /v1/responses/{id}", openai, s.openai.GetResponse, !open)
	route("DELETE /v1/responses/{id}", openai, s.openai.DeleteResponse, !open)
	route("POST /v1/responses/{id}/cancel", openai, s.openai.CancelResponse, !open)
	route("GET /v1/responses/{id}/input_items", openai, s.openai.ListInputItems, !open)

	// Probes and the API document tell nothing and change nothing: they
	// answer whatever the Host (exempt from the local-mode guard).
	route(healthzPattern, rest, s.healthz, open)
	route(readyzPattern, rest, s.readyz, open)
	route(openAPIPattern, rest, serveOpenAPI, open)
	// /metrics as Config.MetricsAccess says (metrics_access.go).
	s.metricsRoutes(mux)
	// The browser page (server/internal/page): / and its static files.
	pg := page.Page{LocalMode: s.auth.LocalMode, Log: s.log}
	route(page.IndexPattern, rest, pg.Index, open)
	route(page.DashboardPattern, rest, pg.Dashboard, open)
	s.handle(mux, page.AssetPattern, rest, http.HandlerFunc(page.Asset))
	// Last: whatever the routes above leave under /v1 (unknown.go).
	s.unknownRoutes(mux)

	return s.auth.Guard(mux, func(r *http.Request) auth.Route {
		_, pattern := mux.Handler(r)
		return auth.Route{Pattern: pattern, Dialect: s.dialects[pattern], Exempt: exemptFromGuard[pattern]}
	})
}

// handle registers next for pattern, measured under its pattern.
func (s *Server) handle(mux *http.ServeMux, pattern string, d httpapi.Dialect, next http.Handler) {
	mux.Handle(pattern, s.instrument(pattern, next))
	s.patterns = append(s.patterns, pattern)
	s.dialects[pattern] = d
}

const (
	healthzPattern = "GET /healthz"
	readyzPattern  = "GET /readyz"
	openAPIPattern = "GET /openapi.json"
)

// exemptFromGuard are the routes that tell nothing and change nothing
// (an unknown route's 404 or 405 tells only what /openapi.json does).
var exemptFromGuard = map[string]bool{healthzPattern: true, readyzPattern: true, openAPIPattern: true,
	v1TreePattern: true, v1RootPattern: true}

func serveOpenAPI(w http.ResponseWriter, _ *http.Request) error {
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(openAPI)
	return nil
}

func (s *Server) healthz(w http.ResponseWriter, _ *http.Request) error {
	httpapi.WriteJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	return nil
}

// readyz answers 200 when the database answers and its schema is current.
func (s *Server) readyz(w http.ResponseWriter, r *http.Request) error {
	ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
	defer cancel()
	if err := s.st.Check(ctx); err != nil {
		s.log.Warn("not ready", "err", err)
		httpapi.WriteJSON(w, http.StatusServiceUnavailable, map[string]string{"status": "unavailable"})
		return nil
	}
	httpapi.WriteJSON(w, http.StatusOK, map[string]string{"status": "ready"})
	return nil
}

// instrument measures each request under its route pattern (never its
// path, which holds ids).
func (s *Server) instrument(pattern string, next http.Handler) http.Handler {
	if s.cfg.Metrics == nil {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		rec := &statusRecorder{ResponseWriter: w, code: http.StatusOK}
		next.ServeHTTP(rec, r)
		s.cfg.Metrics.ObserveHTTP(pattern, rec.code, time.Since(start))
	})
}

// statusRecorder remembers the status code; Unwrap keeps Flush and write
// deadlines reachable through http.ResponseController.
type statusRecorder struct {
	http.ResponseWriter
	code  int
	wrote bool
}

func (r *statusRecorder) WriteHeader(code int) {
	if !r.wrote && code >= 200 { // a 1xx (103 Early Hints) precedes the answer
		r.code, r.wrote = code, true
	}
	r.ResponseWriter.WriteHeader(code)
}

func (r *statusRecorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }
