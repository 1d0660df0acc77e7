package server

import (
	"context"
	_ "embed"
	"net/http"
	"time"

	"github.com/promptkit/promptkit"
)

// openAPI is the API's OpenAPI 3.1 document. The tests check every route
// against it and every answer of the API tests against its schemas.
//
//go:embed openapi.json
var openAPI []byte

// routes builds the handler. Every /v1 route needs an identity.
func (s *Server) routes() http.Handler {
	mux := http.NewServeMux()
	s.mux = mux
	handle := func(pattern string, h http.HandlerFunc, auth bool) {
		var next http.Handler = h
		if auth {
			next = s.authenticate(next)
		}
		mux.Handle(pattern, s.instrument(pattern, next))
		s.patterns = append(s.patterns, pattern)
	}
	handle("POST /v1/prompts", s.submit, true)
	handle("GET /v1/prompts", s.listPrompts, true)
	handle("GET /v1/prompts/{id}", s.getPrompt, true)
	handle("POST /v1/prompts/{id}/retry", s.retryPrompt, true)
	handle("GET /v1/jobs/{id}", s.getJob, true)
	handle("POST /v1/jobs/{id}/cancel", s.cancelJob, true)
	handle("GET /v1/recent", s.recent, true)
	// The event stream also accepts a stream ticket (auth.go) instead of
	// a bearer token: EventSource cannot send one.
	tickets := newTickets(s.cfg.Now)
	handle("POST /v1/events/ticket", s.issueTicket(tickets), true)
	handle("GET /v1/events", s.authenticateStream(tickets, http.HandlerFunc(s.events)).ServeHTTP, false)
	handle("GET /v1/profiles", s.profiles, true)
	handle("GET /healthz", s.healthz, false)
	handle("GET /readyz", s.readyz, false)
	handle("GET /openapi.json", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(openAPI)
	}, false)
	// /metrics as Config.MetricsAccess says (metrics_access.go).
	s.metricsRoutes(handle)
	// The OpenAI-compatible front door (openai.go).
	s.openaiRoutes(handle)
	// The browser page (page.go): / and its static files.
	s.pageRoutes(handle)
	return s.guardLocal(mux)
}

// profileList is the body of GET /v1/profiles.
type profileList struct {
	Profiles []string `json:"profiles"`
	Default  string   `json:"default"`
}

// profiles answers GET /v1/profiles: the engine's profile ids, sorted,
// and the one a submission without a profile runs with ("" when that
// names no profile, or without an engine).
func (s *Server) profiles(w http.ResponseWriter, r *http.Request) {
	out := profileList{Profiles: []string{}}
	if eng := s.cfg.Engine; eng != nil {
		out.Profiles = eng.Profiles()
		// The engine resolves an empty ProfileID to its default; Prepare
		// does exactly that, with no I/O.
		if p, err := eng.Prepare(r.Context(), promptkit.RunRequest{Text: "?"}); err == nil {
			out.Default = p.ProfileID
		}
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) healthz(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
}

// readyz answers 200 when the database answers and its schema is current.
func (s *Server) readyz(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
	defer cancel()
	if err := s.st.Check(ctx); err != nil {
		s.log.Warn("not ready", "err", err)
		writeJSON(w, http.StatusServiceUnavailable, map[string]string{"status": "unavailable"})
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"status": "ready"})
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
	if !r.wrote {
		r.code, r.wrote = code, true
	}
	r.ResponseWriter.WriteHeader(code)
}

func (r *statusRecorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }
