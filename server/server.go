// Package server is the job service's network face. Server binds the
// address, lists every route (routes.go) and wires the concerns that
// answer them, each a package under server/internal:
//
//   - rest: promptkit's own API under /v1 (prompts, jobs, recent,
//     profiles), described by openapi.json;
//   - admin: the operator's API under /v1/admin (the queue's counts,
//     jobs by filter with their attempt timelines, bulk cancel and retry,
//     backends, pause and resume, workers and their drain, tokens);
//   - frontdoor: the OpenAI-compatible API (chat completions, responses,
//     embeddings, models, files, batches), in OpenAI's shapes;
//   - events: the one reader of the event log, the event stream (GET
//     /v1/events, Server-Sent Events) and the wake-ups of every wait;
//   - submit: how a request becomes a job (budget, admission check,
//     idempotency, enqueue) and how the server waits for it;
//   - auth: who a request acts as (tokens, local mode and its guard
//     against web pages), the submission budget and stream tickets;
//   - page: the browser page at /, the operator's dashboard at
//     /dashboard, and the page's safe Markdown renderer;
//   - httpapi: the one pipeline under all of them (body, JSON, one
//     classification of failures with promptkit's and OpenAI's encoders,
//     the SSE writer).
//
// Health probes, Prometheus metrics and the OpenAPI document are served
// here. The CLI's serve command wires the server to a store and an
// engine; workers run beside it.
//
// Every /v1 request acts as an identity: the org, user and role of its
// bearer token or, when no token exists and the server listens on a
// loopback address (or was told InsecureNoAuth), the local identity (org
// "default", user "local", admin; an operator in /v1/admin). A member
// acts on its own prompts, an admin on its org's; another org's IDs
// answer 404. An operator token acts as an admin of its org, and in
// /v1/admin on every org.
package server

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/promptkit/promptkit"
	"github.com/promptkit/promptkit/jobs"
	"github.com/promptkit/promptkit/jobs/quota"
	"github.com/promptkit/promptkit/server/internal/admin"
	"github.com/promptkit/promptkit/server/internal/auth"
	"github.com/promptkit/promptkit/server/internal/events"
	"github.com/promptkit/promptkit/server/internal/frontdoor"
	"github.com/promptkit/promptkit/server/internal/httpapi"
	"github.com/promptkit/promptkit/server/internal/rest"
	"github.com/promptkit/promptkit/server/internal/submit"
)

// The identity of requests without a token in loopback mode. The CLI's
// submit and jobs commands use the same, so the shell and the API see the
// same prompts.
const (
	LocalOrg  = auth.LocalOrg
	LocalUser = auth.LocalUser
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
	DefaultChatTimeout      = frontdoor.DefaultChatTimeout
	DefaultRepeatWindow     = frontdoor.DefaultRepeatWindow
	defaultSSEBuffer        = 256
	defaultReadHeaderTimout = 10 * time.Second
)

// OrgSubmitFactor is the default share of an org's tokens together: this
// many tokens' submission rate and burst (Config.OrgSubmitRate).
const OrgSubmitFactor = 5

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
	// Notifier carries the store's wake-ups (event streams, waits) and
	// running jobs' answer pieces (streamed answers): a stream gets the
	// pieces workers publish to this Notifier, or, on PostgreSQL, to
	// another process's on the database. Defaults to Store.Notifier().
	Notifier jobs.Notifier
	// Engine lists the profiles and resolves the models requests name.
	// Optional: without it no model is known.
	Engine *promptkit.Engine
	// Check refuses at submission what a worker could not run (an unknown
	// prompt or profile, inputs that fail the schema); the CLI wires the
	// same check into the batch processor. Optional: without it only the
	// store's rules apply.
	Check jobs.CheckFunc
	// RunNow, when set, runs a job whose answer a request waits for (a
	// chat completion, a submission with ?wait=) at once in a free slot of
	// this process's worker, stored claimed by it, instead of through the
	// queue: the interactive fast path (worker.Worker.RunNow is the one
	// the CLI wires). Optional: without it every job is queued.
	RunNow jobs.RunNowFunc
	// Quotas, when set, enforces the organisations' and tokens' stored
	// limits at submission: requests and tokens per minute and the daily
	// and monthly budgets, 429 beyond (docs/budgets.md). The CLI shares
	// one with the process's worker (worker.Config.Budget). Optional:
	// without it no limit is enforced here.
	Quotas *quota.Quotas
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
	// OrgSubmitRate and OrgSubmitBurst are the same for all the tokens of
	// one org together, so that an org with many tokens cannot take more
	// than this. Zero: OrgSubmitFactor times SubmitRate and SubmitBurst
	// (100 a second with bursts of 500); negative rate, or SubmitRate
	// negative and this zero: no limit.
	OrgSubmitRate  float64
	OrgSubmitBurst int
	// fair bounds the other resources orgs and tokens share (stream
	// tickets, event streams, token creation); zero fields take the
	// defaults. Tests make them small.
	fair fairShares
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
	// RepeatWindow is how long after its job succeeded a chat completion
	// sent without an Idempotency-Key still answers an SDK's retry of the
	// same request from the same caller with that job, instead of running
	// it again (an SDK retries without a key: docs/openai.md). Zero:
	// DefaultRepeatWindow (5 minutes); negative: requests are never
	// coalesced. The store's clock measures it.
	RepeatWindow time.Duration
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
	// Now is the clock of rate limits, stream tickets, the token check and
	// GET /v1/usage's default end.
	// Defaults to time.Now.
	Now func() time.Time
}

// fairShares are the bounds of Config.fair: each of these pools is
// bounded in all, per org and per token (docs/api.md, "Fair shares").
type fairShares struct {
	tickets auth.Shares
	streams auth.Shares
	tokens  auth.TokenLimits
}

func (c Config) withDefaults() (Config, error) {
	if c.Store == nil {
		return c, errors.New("server: Config.Store is required")
	}
	if c.MaxBodyBytes < 0 || c.MaxWait < 0 || c.KeepAlive < 0 || c.PollInterval < 0 || c.TokenRecheck < 0 || c.SubmitBurst < 0 || c.OrgSubmitBurst < 0 {
		return c, errors.New("server: Config.MaxBodyBytes, MaxWait, KeepAlive, PollInterval, TokenRecheck, SubmitBurst and OrgSubmitBurst must not be negative")
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
	if c.OrgSubmitRate == 0 {
		c.OrgSubmitRate = -1 // no limit per token: none per org either
		if c.SubmitRate > 0 {
			c.OrgSubmitRate = OrgSubmitFactor * c.SubmitRate
		}
	}
	c.OrgSubmitBurst = cmp.Or(c.OrgSubmitBurst, OrgSubmitFactor*c.SubmitBurst)
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
	auth    *auth.Auth
	hub     *events.Hub
	rest    *rest.API
	admin   *admin.API
	openai  *frontdoor.API
	handler http.Handler
	// mux, patterns and dialects are the routes served (for the OpenAPI
	// test) and the error shape of each.
	mux      *http.ServeMux
	patterns []string
	dialects map[string]httpapi.Dialect

	ln        net.Listener
	http      *http.Server
	metricsLn *metricsListener

	// serving ends at Close: event streams and waiting requests end or
	// answer at once, before the HTTP server's own drain (which would
	// otherwise wait on them forever).
	serving    context.Context
	endServing context.CancelFunc
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
	s.serving, s.endServing = context.WithCancel(context.Background())
	s.auth = auth.New(auth.Config{Store: cfg.Store, Addr: cfg.Addr, InsecureNoAuth: cfg.InsecureNoAuth,
		SubmitRate: cfg.SubmitRate, SubmitBurst: cfg.SubmitBurst, OrgSubmitRate: cfg.OrgSubmitRate, OrgSubmitBurst: cfg.OrgSubmitBurst,
		Tickets: cfg.fair.tickets, Tokens: cfg.fair.tokens, Now: cfg.Now, Log: cfg.Logger})
	hub := events.Config{Store: cfg.Store, Notifier: cfg.Notifier, Poll: cfg.PollInterval, Recheck: cfg.TokenRecheck, KeepAlive: cfg.KeepAlive,
		Buffer: cfg.sseBuffer, Streams: cfg.fair.streams, Valid: s.auth.Valid, Closing: s.serving.Done(), Log: cfg.Logger}
	if cfg.Metrics != nil {
		hub.Clients = cfg.Metrics.SSEClients
	}
	s.hub = events.New(hub)
	work := submit.Jobs{Store: cfg.Store, Auth: s.auth, Hub: s.hub, Check: cfg.Check, Serving: s.serving, RunNow: cfg.RunNow,
		Quotas: cfg.Quotas}
	s.rest = &rest.API{Store: cfg.Store, Auth: s.auth, Jobs: work, Engine: cfg.Engine,
		MaxBody: cfg.MaxBodyBytes, MaxWait: cfg.MaxWait, Log: cfg.Logger, Now: cfg.Now}
	s.admin = &admin.API{Store: cfg.Store, Engine: cfg.Engine, MaxBody: cfg.MaxBodyBytes, Log: cfg.Logger, Now: cfg.Now}
	s.openai = &frontdoor.API{Store: cfg.Store, Notifier: cfg.Notifier, Jobs: work, Engine: cfg.Engine,
		FallbackProfile: cfg.FallbackProfile, MaxBody: cfg.MaxBodyBytes, MaxFile: cfg.MaxFileBytes,
		ChatTimeout: cfg.ChatTimeout, RepeatWindow: cfg.RepeatWindow, MaxWait: cfg.MaxWait, KeepAlive: cfg.KeepAlive, BatchPriority: cfg.BatchPriority,
		Log: cfg.Logger}
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
	loopback := isLoopback(ln.Addr())
	s.auth.SetLoopback(loopback)
	if !loopback && !s.cfg.InsecureNoAuth {
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
	if err := s.hub.Start(ctx); err != nil {
		ln.Close()
		return fmt.Errorf("server: starting the event reader: %w", err)
	}
	if s.metricsLn, err = s.openMetrics(); err != nil {
		_ = s.hub.Stop(ctx)
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
// Whether a token exists is read at most once a second: a token created
// by another process takes effect within that time, or at once when a
// request presents it; a request with an unknown or revoked token makes
// the next call look again.
func (s *Server) LocalMode(ctx context.Context) (bool, error) { return s.auth.LocalMode(ctx) }

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
		s.endServing()
		if s.http != nil {
			ctx, cancel := context.WithTimeout(context.Background(), DefaultShutdownTimeout)
			defer cancel()
			s.closeErr = s.http.Shutdown(ctx)
		}
		s.closeErr = errors.Join(s.closeErr, s.metricsLn.close())
		s.closeErr = errors.Join(s.closeErr, s.hub.Stop(context.Background()))
		s.bg.Wait()
	})
	return s.closeErr
}

func isLoopback(a net.Addr) bool {
	tcp, ok := a.(*net.TCPAddr)
	return ok && tcp.IP.IsLoopback()
}
