// Package server is the job service's network face: the REST API under
// /v1, Server-Sent Events, token authentication and tenancy, health
// endpoints, Prometheus metrics and the OpenAPI document. The CLI's serve
// command wires it to a store and an engine; workers run beside it.
//
// Every /v1 request acts as an identity: the org, user and role of its
// bearer token or, when no token exists and the server listens on a
// loopback address (or was told InsecureNoAuth), the local identity (org
// "default", user "local", admin). A member acts on its own prompts, an
// admin on its org's; another org's IDs answer 404.
package server

import (
	"cmp"
	"context"
	_ "embed"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/promptkit/promptkit"
	"github.com/promptkit/promptkit/jobs"
)

// The identity of requests without a token in loopback mode. The CLI's
// submit and jobs commands use the same, so the shell and the API see the
// same prompts.
const (
	LocalOrg  = "default"
	LocalUser = "local"
)

// Defaults of Config.
const (
	DefaultMaxBodyBytes     = 1 << 20
	DefaultMaxWait          = 60 * time.Second
	DefaultKeepAlive        = 15 * time.Second
	DefaultPollInterval     = time.Second
	DefaultTokenRecheck     = 2 * time.Second
	DefaultSubmitRate       = 20
	DefaultSubmitBurst      = 100
	DefaultShutdownTimeout  = 5 * time.Second
	defaultSSEBuffer        = 256
	defaultReadHeaderTimout = 10 * time.Second
)

// Metrics receives what the server measures. internal/metrics implements
// it; nil measures nothing.
type Metrics interface {
	ObserveHTTP(route string, code int, d time.Duration)
	SSEClients(delta int)
	Handler() http.Handler
}

// Config configures a Server.
type Config struct {
	// Store holds the jobs. Required.
	Store jobs.Store
	// Engine checks submissions (unknown prompt or profile, inputs that
	// fail the schema) the way a worker would run them. Optional: without
	// it only the store's rules apply.
	Engine *promptkit.Engine
	// Addr is the listen address. Defaults to "127.0.0.1:8080"; ":0"
	// picks a free port (see Server.Addr).
	Addr string
	// InsecureNoAuth lets a server on a non-loopback address accept
	// requests without a token while no token exists.
	InsecureNoAuth bool
	// SubmitRate is how many submissions per second one identity may make,
	// with bursts of SubmitBurst. Defaults to 20 and 100; negative: no
	// limit.
	SubmitRate  float64
	SubmitBurst int
	// MaxBodyBytes caps a request body (413 beyond). Defaults to 1 MiB.
	MaxBodyBytes int64
	// MaxWait caps ?wait=. Defaults to 60s.
	MaxWait time.Duration
	// KeepAlive is the interval of the comment line on an idle event
	// stream. Defaults to 15s.
	KeepAlive time.Duration
	// PollInterval is how often the event reader looks for new events
	// without a notification. Defaults to 1s.
	PollInterval time.Duration
	// TokenRecheck is how often an open event stream looks whether its
	// token was revoked (in any process on the database); a revoked
	// token's streams end then. Defaults to 2s.
	TokenRecheck time.Duration
	// sseBuffer is an event stream's live buffer; tests make it small.
	sseBuffer int
	// ChatTimeout is how long POST /v1/chat/completions waits for its
	// job before answering 504 (the job goes on; GET /v1/prompts/{id}
	// has its answer). Zero or less: DefaultChatTimeout (10 minutes).
	ChatTimeout time.Duration
	// MaxFileBytes caps an upload to POST /v1/files (413 beyond). Zero or
	// less: jobs.DefaultMaxFileBytes (200 MB).
	MaxFileBytes int64
	// BatchPriority is the job priority (0–100) of a batch's lines. Nil:
	// jobs.DefaultBatchPriority (90), after interactive work.
	BatchPriority *int
	// FallbackProfile, when set, runs a chat request or batch line whose
	// model names no profile or backend model on this profile instead of
	// answering 404. serve sets it only with the built-in simulated
	// backend, so that an unmodified OpenAI SDK program (model
	// "gpt-4o-mini", say) works on a fresh machine.
	FallbackProfile string
	// Metrics, when set, is served at /metrics and told about requests.
	Metrics Metrics
	// MetricsAccess says who may read /metrics on Addr (metrics_access.go):
	// MetricsAuth (the default: an admin token, or local mode), MetricsOpen
	// or MetricsOff.
	MetricsAccess MetricsAccess
	// MetricsAddr, when set, is a listener of its own serving /metrics
	// only, open to whoever reaches it (a scraper on a private network),
	// whatever MetricsAccess says. Needs Metrics.
	MetricsAddr string
	// Logger receives operational messages (ids, never prompt or answer
	// text). Defaults to slog.Default().
	Logger *slog.Logger
	// Now is the clock of rate limits, stream tickets and the token check.
	// Defaults to time.Now.
	Now func() time.Time
}

func (c Config) withDefaults() (Config, error) {
	if c.Store == nil {
		return c, errors.New("server: Config.Store is required")
	}
	if c.MaxBodyBytes < 0 || c.MaxWait < 0 || c.KeepAlive < 0 || c.PollInterval < 0 || c.TokenRecheck < 0 || c.SubmitBurst < 0 {
		return c, errors.New("server: Config.MaxBodyBytes, MaxWait, KeepAlive, PollInterval, TokenRecheck and SubmitBurst must not be negative")
	}
	var err error
	if c.MetricsAccess, err = ParseMetricsAccess(string(c.MetricsAccess)); err != nil {
		return c, fmt.Errorf("server: Config.MetricsAccess: %w", err)
	}
	if c.MetricsAddr != "" && c.Metrics == nil {
		return c, errors.New("server: Config.MetricsAddr needs Config.Metrics")
	}
	c.Addr = cmp.Or(c.Addr, "127.0.0.1:8080")
	c.MaxBodyBytes = cmp.Or(c.MaxBodyBytes, DefaultMaxBodyBytes)
	c.MaxWait = cmp.Or(c.MaxWait, DefaultMaxWait)
	c.KeepAlive = cmp.Or(c.KeepAlive, DefaultKeepAlive)
	c.PollInterval = cmp.Or(c.PollInterval, DefaultPollInterval)
	c.TokenRecheck = cmp.Or(c.TokenRecheck, DefaultTokenRecheck)
	c.sseBuffer = cmp.Or(c.sseBuffer, defaultSSEBuffer)
	c.SubmitRate = cmp.Or(c.SubmitRate, DefaultSubmitRate)
	c.SubmitBurst = cmp.Or(c.SubmitBurst, DefaultSubmitBurst)
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	return c, nil
}

// Server serves the API. Open starts it, Close stops it.
type Server struct {
	cfg     Config
	st      jobs.Store
	log     *slog.Logger
	limits  *limiter
	handler http.Handler
	// mux and patterns are the routes served, for the OpenAPI test.
	mux      *http.ServeMux
	patterns []string
	// oaPatterns are the front door's routes, which answer in OpenAI's
	// error shape.
	oaPatterns map[string]bool

	// loopback is set by Open: requests without a token may act as the
	// local identity only on a loopback listener (or with InsecureNoAuth).
	loopback  bool
	hasTokens atomic.Pointer[tokensSeen]
	ln        net.Listener
	http      *http.Server
	metricsLn *metricsListener
	hub       *hub

	// streams ends event streams and waits at Close, before the HTTP
	// server's own drain (which would otherwise wait on them forever).
	streams    context.Context
	endStreams context.CancelFunc
	bg         sync.WaitGroup
	closeOnce  sync.Once
	closeErr   error
}

// New checks cfg and builds a Server; nothing runs until Open.
func New(cfg Config) (*Server, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	s := &Server{cfg: cfg, st: cfg.Store, log: cfg.Logger}
	s.limits = newLimiter(cfg.SubmitRate, cfg.SubmitBurst, cfg.Now)
	s.streams, s.endStreams = context.WithCancel(context.Background())
	s.hub = newHub(cfg.Store, cfg.PollInterval, cfg.TokenRecheck, s.valid, cfg.Logger)
	s.handler = s.routes()
	return s, nil
}

// Open binds the listener and starts serving in the background: when it
// returns, Addr is known and requests are answered. It refuses a
// non-loopback address while no token exists, unless InsecureNoAuth.
func (s *Server) Open(ctx context.Context) error {
	ln, err := net.Listen("tcp", s.cfg.Addr)
	if err != nil {
		return fmt.Errorf("server: %w", err)
	}
	s.loopback = isLoopback(ln.Addr())
	if !s.loopback && !s.cfg.InsecureNoAuth {
		has, err := s.st.HasTokens(ctx)
		if err != nil {
			ln.Close()
			return fmt.Errorf("server: checking for tokens: %w", err)
		}
		if !has {
			ln.Close()
			return fmt.Errorf("server: %w", ErrNoAuth)
		}
	}
	if err := s.hub.start(ctx); err != nil {
		ln.Close()
		return fmt.Errorf("server: starting the event reader: %w", err)
	}
	if s.metricsLn, err = s.openMetrics(); err != nil {
		s.hub.stop()
		ln.Close()
		return err
	}
	s.ln = ln
	s.http = &http.Server{
		Handler:           s.handler,
		ReadHeaderTimeout: defaultReadHeaderTimout,
		ReadTimeout:       30 * time.Second,
		// Event streams and ?wait= extend their own write deadline.
		WriteTimeout: 30 * time.Second,
		IdleTimeout:  120 * time.Second,
		ErrorLog:     slog.NewLogLogger(s.log.Handler(), slog.LevelDebug),
	}
	s.bg.Go(func() { _ = s.http.Serve(ln) })
	return nil
}

// ErrNoAuth is Open's refusal to serve a non-loopback address with no
// token and no InsecureNoAuth.
var ErrNoAuth = errors.New("no API token exists and the address is not loopback: create one with `promptkit tokens create`, or pass --insecure-no-auth")

// LocalMode reports whether requests without a token are accepted as the
// local identity right now (no token exists and the address allows it).
// Whether a token exists is read at most once per tokensTTL: a token
// created by another process takes effect within that time, or at once
// when a request presents it; a request with an unknown or revoked token
// makes the next call look again.
func (s *Server) LocalMode(ctx context.Context) (bool, error) {
	if !s.loopback && !s.cfg.InsecureNoAuth {
		return false, nil
	}
	now := s.cfg.Now()
	if c := s.hasTokens.Load(); c != nil && now.Before(c.until) && !now.Before(c.at) {
		return !c.has, nil
	}
	has, err := s.st.HasTokens(ctx)
	if err != nil {
		return false, err
	}
	s.sawTokens(has)
	return !has, nil
}

// sawTokens records whether a token exists, for LocalMode to trust for
// tokensTTL.
func (s *Server) sawTokens(has bool) {
	now := s.cfg.Now()
	s.hasTokens.Store(&tokensSeen{has: has, at: now, until: now.Add(tokensTTL)})
}

// tokensTTL is how long LocalMode trusts its last look at the tokens: the
// look is a query, and in local mode every request needs the answer.
const tokensTTL = time.Second

// tokensSeen is LocalMode's last look: whether a token existed, read at
// at, trusted until until.
type tokensSeen struct {
	has       bool
	at, until time.Time
}

// Addr is the address Open bound, e.g. "127.0.0.1:43121".
func (s *Server) Addr() string {
	if s.ln == nil {
		return ""
	}
	return s.ln.Addr().String()
}

// URL is the base URL of the server, e.g. "http://127.0.0.1:43121".
func (s *Server) URL() string { return "http://" + s.Addr() }

// Close stops accepting connections, ends event streams and waiting
// requests cleanly, lets other requests finish (up to 5s), and stops the
// event reader. Closing twice is safe.
func (s *Server) Close() error {
	s.closeOnce.Do(func() {
		s.endStreams()
		if s.http != nil {
			ctx, cancel := context.WithTimeout(context.Background(), DefaultShutdownTimeout)
			defer cancel()
			s.closeErr = s.http.Shutdown(ctx)
		}
		s.closeErr = errors.Join(s.closeErr, s.metricsLn.close())
		s.hub.stop()
		s.bg.Wait()
	})
	return s.closeErr
}

func isLoopback(a net.Addr) bool {
	tcp, ok := a.(*net.TCPAddr)
	return ok && tcp.IP.IsLoopback()
}
