package server

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/promptkit/promptkit/server/internal/auth"
	"github.com/promptkit/promptkit/server/internal/httpapi"
)

// MetricsAccess says who may read GET /metrics on the API's address. The
// metrics are the whole deployment's (every org's job counts, every
// route's traffic), so once tokens exist they are an operator's.
type MetricsAccess string

// The values of MetricsAccess.
const (
	// MetricsAuth, the default, needs an admin token, as the org-wide
	// routes do: 401 without a valid token, 403 for a member's. In local
	// mode (no token exists, loopback) requests act as the local admin,
	// so the metrics are open there until the first token is created.
	// While the database is down, a token that read them within the last
	// auth.OutageTTL still does, as local mode does; any other request is
	// a 503 (auth.Auth.RequireCached).
	MetricsAuth MetricsAccess = "auth"
	// MetricsOpen serves them to anyone who reaches the address.
	MetricsOpen MetricsAccess = "open"
	// MetricsOff does not serve them on the API's address (404); see
	// Config.MetricsAddr for a listener of their own.
	MetricsOff MetricsAccess = "off"
)

// ParseMetricsAccess checks a configured value; "" is MetricsAuth.
func ParseMetricsAccess(s string) (MetricsAccess, error) {
	switch a := MetricsAccess(s); a {
	case "":
		return MetricsAuth, nil
	case MetricsAuth, MetricsOpen, MetricsOff:
		return a, nil
	}
	return "", fmt.Errorf("metrics access %q: want auth, open or off", s)
}

// metricsRoutes serves GET /metrics on the API's address as
// Config.MetricsAccess says.
func (s *Server) metricsRoutes(mux *http.ServeMux) {
	if s.cfg.Metrics == nil {
		return
	}
	h := s.cfg.Metrics.Handler()
	switch s.cfg.MetricsAccess {
	case MetricsOpen:
		s.handle(mux, metricsPattern, httpapi.REST, h)
	case MetricsAuth:
		// RequireCached: the metrics must answer while the database is
		// down, promptkit_store_up 0 being then their news.
		s.handle(mux, metricsPattern, httpapi.REST, s.auth.RequireCached(httpapi.REST, adminOnly(h)))
	}
}

const metricsPattern = "GET /metrics"

// adminOnly refuses an identity that is not an admin: a member sees its
// own prompts only, and the metrics count everyone's.
func adminOnly(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !auth.Of(r).Role.Admin() {
			httpapi.REST.Write(w, &httpapi.Problem{Status: http.StatusForbidden, Code: "forbidden", Message: "the metrics need an admin token"})
			return
		}
		next.ServeHTTP(w, r)
	})
}

// metricsListener serves GET /metrics, open, on Config.MetricsAddr.
type metricsListener struct {
	ln   net.Listener
	http *http.Server
	done chan struct{}
}

// openMetrics binds Config.MetricsAddr, when set, and serves the metrics
// there in the background; nil without one.
func (s *Server) openMetrics() (*metricsListener, error) {
	if s.cfg.MetricsAddr == "" {
		return nil, nil
	}
	ln, err := net.Listen("tcp", s.cfg.MetricsAddr)
	if err != nil {
		return nil, fmt.Errorf("server: metrics address: %w", err)
	}
	mux := http.NewServeMux()
	mux.Handle(metricsPattern, s.instrument(metricsPattern, s.cfg.Metrics.Handler()))
	m := &metricsListener{ln: ln, done: make(chan struct{}), http: &http.Server{
		Handler:           mux,
		ReadHeaderTimeout: defaultReadHeaderTimout,
		ReadTimeout:       30 * time.Second,
		WriteTimeout:      30 * time.Second,
		IdleTimeout:       120 * time.Second,
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelDebug),
	}}
	go func() {
		defer close(m.done)
		_ = m.http.Serve(ln)
	}()
	return m, nil
}

// close stops the metrics listener, letting a scrape in flight finish
// (up to DefaultShutdownTimeout). Closing a nil one does nothing.
func (m *metricsListener) close() error {
	if m == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), DefaultShutdownTimeout)
	defer cancel()
	err := m.http.Shutdown(ctx)
	<-m.done
	return err
}

// MetricsURL is the base URL of the metrics listener (Config.MetricsAddr,
// once Open bound it), e.g. "http://127.0.0.1:9090"; "" without one.
func (s *Server) MetricsURL() string {
	if s.metricsLn == nil {
		return ""
	}
	return "http://" + s.metricsLn.ln.Addr().String()
}
