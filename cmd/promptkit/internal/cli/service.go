package cli

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"go.yaml.in/yaml/v3"

	"github.com/promptkit/promptkit"
	"github.com/promptkit/promptkit/internal/metrics"
	"github.com/promptkit/promptkit/internal/openaiapi"
	"github.com/promptkit/promptkit/internal/simulate"
	"github.com/promptkit/promptkit/jobs"
	"github.com/promptkit/promptkit/jobs/batch"
	"github.com/promptkit/promptkit/jobs/quota"
	"github.com/promptkit/promptkit/jobs/worker"
	"github.com/promptkit/promptkit/server"
)

// serviceConfig is the `service:` section of promptkit.yaml; flags
// override it.
type serviceConfig struct {
	Addr              string        `yaml:"addr"`
	Database          string        `yaml:"database"`
	Workers           int           `yaml:"workers"`
	HeartbeatInterval time.Duration `yaml:"heartbeat_interval"`
	ReclaimAfter      time.Duration `yaml:"reclaim_after"`
	StuckAfter        time.Duration `yaml:"stuck_after"`
	JobTimeout        time.Duration `yaml:"job_timeout"`
	ShutdownGrace     time.Duration `yaml:"shutdown_grace"`
	// ArchiveAfter, when set, archives finished jobs this old.
	ArchiveAfter time.Duration `yaml:"archive_after"`
	// KeepProviderDetail keeps the provider's message of the attempt
	// that ended a run, redacted and cut to 500 bytes, in that attempt's
	// event (jobs show --verbose prints it). Off by default: a provider's
	// message can quote the prompt.
	KeepProviderDetail bool `yaml:"keep_provider_detail"`
	// BatchPriority is the priority of a batch line's job (0–100, lower
	// runs first): after interactive work by default.
	BatchPriority int `yaml:"batch_priority"`
	// MaxFileBytes caps an upload to /v1/files.
	MaxFileBytes int64 `yaml:"max_file_bytes"`
	// MaxBatchLines caps the requests of one batch (too_many_tasks
	// beyond): OpenAI's 50,000 by default.
	MaxBatchLines int `yaml:"max_batch_lines"`
	// MaxBodyBytes caps a request body, and a batch line's body alike:
	// a batch must not run what the endpoint would refuse.
	MaxBodyBytes int64 `yaml:"max_body_bytes"`
	// ChatTimeout is how long POST /v1/chat/completions waits for its
	// job before answering 504 (the job goes on).
	ChatTimeout time.Duration `yaml:"chat_timeout"`
	// MetricsAccess is who may read /metrics on addr: auth (an admin
	// token; none needed in local mode), open or off.
	MetricsAccess string `yaml:"metrics_access"`
	// MetricsAddr, when set, serves /metrics, open, on its own listener.
	MetricsAddr string `yaml:"metrics_addr"`
}

// defaultService is the service section when nothing is set: the worker
// package's defaults.
func defaultService() serviceConfig {
	return serviceConfig{
		Addr:              "127.0.0.1:8080",
		Workers:           worker.DefaultConcurrency,
		HeartbeatInterval: worker.DefaultHeartbeatInterval,
		ReclaimAfter:      jobs.DefaultReclaimAfter,
		StuckAfter:        jobs.DefaultStuckAfter,
		JobTimeout:        worker.DefaultJobTimeout,
		ShutdownGrace:     worker.DefaultShutdownGrace,
		BatchPriority:     jobs.DefaultBatchPriority,
		MaxFileBytes:      jobs.DefaultMaxFileBytes,
		MaxBatchLines:     batch.MaxLines,
		MaxBodyBytes:      server.DefaultMaxBodyBytes,
		ChatTimeout:       server.DefaultChatTimeout,
		MetricsAccess:     string(server.MetricsAuth),
	}
}

// check refuses settings that cannot work together or cannot work at
// all. workers 0 is allowed: serve then runs no worker (an API-only
// node); the worker command refuses it.
func (sc serviceConfig) check() error {
	switch {
	case sc.Workers < 0:
		return usageError{fmt.Errorf("workers %d is negative (0: serve runs no worker)", sc.Workers)}
	case sc.HeartbeatInterval <= 0, sc.ReclaimAfter <= 0, sc.StuckAfter <= 0, sc.JobTimeout <= 0, sc.ChatTimeout <= 0:
		return usageError{fmt.Errorf("heartbeat_interval %v, reclaim_after %v, stuck_after %v, job_timeout %v and chat_timeout %v must all be above zero",
			sc.HeartbeatInterval, sc.ReclaimAfter, sc.StuckAfter, sc.JobTimeout, sc.ChatTimeout)}
	case sc.ShutdownGrace < 0:
		return usageError{fmt.Errorf("shutdown_grace %v is negative (0: hand running jobs back at once)", sc.ShutdownGrace)}
	case sc.ArchiveAfter < 0:
		return usageError{fmt.Errorf("archive_after %v is negative", sc.ArchiveAfter)}
	case sc.BatchPriority < jobs.MinPriority || sc.BatchPriority > jobs.MaxPriority:
		return usageError{fmt.Errorf("batch_priority %d: want %d–%d", sc.BatchPriority, jobs.MinPriority, jobs.MaxPriority)}
	case sc.MaxFileBytes <= 0:
		return usageError{fmt.Errorf("max_file_bytes %d must be above zero (default %d, 200 MB)", sc.MaxFileBytes, jobs.DefaultMaxFileBytes)}
	case sc.MaxBatchLines <= 0:
		return usageError{fmt.Errorf("max_batch_lines %d must be above zero (default %d)", sc.MaxBatchLines, batch.MaxLines)}
	case sc.MaxBodyBytes <= 0:
		return usageError{fmt.Errorf("max_body_bytes %d must be above zero (default %d, 1 MiB)", sc.MaxBodyBytes, server.DefaultMaxBodyBytes)}
	}
	if err := worker.CheckTimings(sc.HeartbeatInterval, sc.ReclaimAfter, sc.StuckAfter); err != nil {
		return usageError{err}
	}
	if _, err := server.ParseMetricsAccess(sc.MetricsAccess); err != nil {
		return usageError{fmt.Errorf("metrics_access %q: want auth, open or off", sc.MetricsAccess)}
	}
	return nil
}

// YAML decoding errors speak of Go types; yamlWords says the same of the
// user's keys and values.
var yamlWords = strings.NewReplacer(" into time.Duration", ": want a duration such as 30s",
	" into int64", ": want a whole number", " into int", ": want a whole number", " into string", ": want a string")

var yamlUnknownKey = regexp.MustCompile(`field (\S+) not found in type [\w.]+`)

// loadService reads the service section of the config file, if any, over
// the defaults. Unknown keys are errors naming the file.
func loadService(path string) (serviceConfig, error) {
	sc := defaultService()
	if path == "" {
		if _, err := os.Stat(defaultConfigFile); err != nil {
			return sc, nil
		}
		path = defaultConfigFile
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return sc, fmt.Errorf("config %s: %w", path, err)
	}
	var top map[string]yaml.Node
	if err := yaml.Unmarshal(data, &top); err != nil {
		return sc, usageError{fmt.Errorf("%s: %w", path, err)}
	}
	node, ok := top["service"]
	if !ok {
		return sc, nil
	}
	raw, err := yaml.Marshal(&node)
	if err != nil {
		return sc, err
	}
	dec := yaml.NewDecoder(bytes.NewReader(raw))
	dec.KnownFields(true)
	if err := dec.Decode(&sc); err != nil {
		var te *yaml.TypeError
		if errors.As(err, &te) {
			// "line 3: field databse not found in type cli.serviceConfig"
			// speaks of Go; say which key is wrong instead.
			var msgs []string
			for _, m := range te.Errors {
				msgs = append(msgs, yamlWords.Replace(yamlUnknownKey.ReplaceAllString(m, `unknown key "$1"`)))
			}
			err = errors.New(strings.Join(msgs, "; "))
		}
		return sc, usageError{fmt.Errorf("%s: service: %w", path, err)}
	}
	if err := sc.check(); err != nil {
		return sc, fmt.Errorf("%s: service: %w", path, err)
	}
	// A relative SQLite path in the file is relative to the file's folder,
	// like the file's other paths, wherever the command runs.
	if db := sqlitePath(sc.Database); sc.Database != "" && !isServerDB(sc.Database) && !filepath.IsAbs(db) {
		sc.Database = filepath.Join(filepath.Dir(path), db)
	}
	return sc, nil
}

// service is the service section of the config with --database applied:
// every command resolves the database the same way — the flag, then
// service.database, then promptkit.db — and validates the section the
// same way (unknown keys and bad values are errors).
func (g *globals) service() (serviceConfig, error) {
	sc, err := loadService(g.config)
	if err != nil {
		return sc, err
	}
	if g.database != "" {
		sc.Database = g.database
	}
	return sc, nil
}

// databaseName is the job database every command uses (see service).
func (g *globals) databaseName() (string, error) {
	sc, err := g.service()
	return sc.Database, err
}

// serviceFlags are the flags serve and worker share.
type serviceFlags struct {
	flags                               *pflag.FlagSet
	workers                             int
	heartbeat, reclaimAfter, stuckAfter time.Duration
	jobTimeout, grace, archiveAfter     time.Duration
}

func (f *serviceFlags) register(cmd *cobra.Command) {
	fl := cmd.Flags()
	f.flags = fl
	fl.IntVar(&f.workers, "workers", 0, "jobs run at once (default 4, or service.workers)")
	fl.DurationVar(&f.heartbeat, "heartbeat-interval", 0, "heartbeat of running jobs (default 30s)")
	fl.DurationVar(&f.reclaimAfter, "reclaim-after", 0, "heartbeat age that counts as a dead worker (default 4m)")
	fl.DurationVar(&f.stuckAfter, "stuck-after", 0, "run time after which a dead worker's job fails as stuck (default 15m)")
	fl.DurationVar(&f.jobTimeout, "job-timeout", 0, "bound on one job attempt (default 10m)")
	fl.DurationVar(&f.grace, "shutdown-grace", 0, "time running jobs get to finish at shutdown before they are handed back (default 10s; 0s: at once; a second Ctrl-C or SIGTERM also hands them back at once)")
	fl.DurationVar(&f.archiveAfter, "archive-after", 0, "archive finished jobs this old (default off; 720h is 30 days)")
}

// apply sets what the flags set, whatever the value: check refuses the
// impossible ones instead of their being taken for "not set".
func (f *serviceFlags) apply(sc *serviceConfig) {
	set := func(name string, dst *time.Duration, v time.Duration) {
		if f.flags.Changed(name) {
			*dst = v
		}
	}
	if f.flags.Changed("workers") {
		sc.Workers = f.workers
	}
	set("heartbeat-interval", &sc.HeartbeatInterval, f.heartbeat)
	set("reclaim-after", &sc.ReclaimAfter, f.reclaimAfter)
	set("stuck-after", &sc.StuckAfter, f.stuckAfter)
	set("job-timeout", &sc.JobTimeout, f.jobTimeout)
	set("shutdown-grace", &sc.ShutdownGrace, f.grace)
	set("archive-after", &sc.ArchiveAfter, f.archiveAfter)
}

// svc is what serve and worker share: settings, engine and store.
type svc struct {
	sc     serviceConfig
	engine *promptkit.Engine
	// models are the configured profiles' models: the metric labels a
	// job's model may become.
	models []string
	// metrics, when set (serve), measures the workers too.
	metrics *metrics.Metrics
	store   jobs.Store
	// notifier is the store's messaging, which the workers, the server
	// and the batch processor share: wake-ups and answer pieces.
	notifier jobs.Notifier
	// quotas enforces the stored limits' rates and budgets: at
	// submission (serve) and before each run (the workers), one cache
	// of the limits for both.
	quotas    *quota.Quotas
	simulated bool
	log       *slog.Logger
}

func openService(cmd *cobra.Command, g *globals, f *serviceFlags) (*svc, error) {
	sc, err := g.service()
	if err != nil {
		return nil, err
	}
	f.apply(&sc)
	if err := sc.check(); err != nil {
		return nil, err
	}
	cfg, simulated, err := loadConfig(g.config, "")
	if err != nil {
		return nil, err
	}
	log := slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), nil))
	if simulated {
		log.Warn(simulate.Notice)
	}
	eng, err := promptkit.New(cfg)
	if err != nil {
		return nil, err
	}
	st, err := openStoreWaiting(cmd.Context(), sc.Database, jobs.Options{}, log)
	if err != nil {
		return nil, err
	}
	var models []string
	for _, p := range cfg.Profiles {
		models = append(models, p.Model)
	}
	return &svc{sc: sc, engine: eng, models: models, store: st, notifier: st.Notifier(), quotas: quota.New(quota.Config{Store: st}), simulated: simulated, log: log}, nil
}

func (rt *svc) worker(name string, batch int, ceiling *int) (*worker.Worker, error) {
	return worker.New(worker.Config{
		Store: rt.store, Notifier: rt.notifier, Engine: rt.engine, Name: name,
		Concurrency: rt.sc.Workers, BatchSize: batch, PriorityCeiling: ceiling,
		HeartbeatInterval: rt.sc.HeartbeatInterval, JobTimeout: rt.sc.JobTimeout,
		ShutdownGrace: workerGrace(rt.sc.ShutdownGrace), Logger: rt.log, KeepProviderDetail: rt.sc.KeepProviderDetail,
		Observe: rt.metrics.ObserveJob, Observer: rt.metrics.Observer(), Budget: rt.quotas.JobCalls(rt.sc.JobTimeout),
	})
}

// workerGrace is worker.Config.ShutdownGrace for the service's
// shutdown_grace. The library's meaning is the one: a zero duration in a
// Config is "not set, take the default" (10s), a negative grace is none.
// A setting of the CLI is never "not set" — a flag or key not given
// holds the library's default — so shutdown_grace: 0s is a grace of
// zero, which the library spells negative: running jobs are handed back
// at once. check refuses a negative setting.
func workerGrace(d time.Duration) time.Duration {
	if d == 0 {
		return -1
	}
	return d
}

func (rt *svc) reclaimer() (*worker.Reclaimer, error) {
	return worker.NewReclaimer(worker.ReclaimerConfig{Store: rt.store, ReclaimAfter: rt.sc.ReclaimAfter, StuckAfter: rt.sc.StuckAfter,
		HeartbeatInterval: rt.sc.HeartbeatInterval, Logger: rt.log})
}

// batches is serve's batch processor: a line's model resolves as in
// POST /v1/chat/completions, and a line the engine could not run fails
// the batch's validation, as such a request would be refused.
func (rt *svc) batches() (*batch.Processor, error) {
	return batch.New(batch.Config{
		Store:    rt.store,
		Notifier: rt.notifier,
		// The batches API is OpenAI's: its lines are in OpenAI's format.
		Codec: openaiapi.BatchCodec{},
		Resolve: func(model string) (jobs.Target, bool) {
			return jobs.Resolve(rt.engine, model, rt.fallbackProfile())
		},
		Check:        rt.check,
		MaxBodyBytes: rt.sc.MaxBodyBytes,
		MaxLines:     rt.sc.MaxBatchLines,
		Logger:       rt.log,
	})
}

// fallbackProfile is the profile that answers any model with the
// built-in simulated backend ("" otherwise: an unknown model is a 404).
func (rt *svc) fallbackProfile() string {
	if !rt.simulated {
		return ""
	}
	return simulate.ProfileID
}

// check refuses what this service's workers could not run (an unknown
// prompt or profile, inputs failing the schema, a backend that does not
// serve the model): the one admission check of the API and the batch
// processor.
func (rt *svc) check(ctx context.Context, p jobs.EnqueueParams) error {
	return worker.Check(ctx, rt.engine, p)
}

// loop is the lifecycle every background loop shares (see
// internal/lifecycle): the worker, the reclaimer, the archiver and the
// batch processor.
type loop interface {
	Start(ctx context.Context) error
	Stop(ctx context.Context) error
}

// background starts the maintenance loops of a long-running process —
// the reclaim loop, the archiver with archive_after, and the loops given
// (serve's batch processor) — and stops each when ctx ends, as the worker
// starts its graceful stop; wg is done once they have all stopped.
func (rt *svc) background(ctx context.Context, wg *sync.WaitGroup, more ...loop) error {
	r, err := rt.reclaimer()
	if err != nil {
		return err
	}
	loops := append([]loop{r}, more...)
	if rt.sc.ArchiveAfter > 0 {
		a, err := worker.NewArchiver(worker.ArchiverConfig{Store: rt.store, After: rt.sc.ArchiveAfter, Logger: rt.log})
		if err != nil {
			return err
		}
		loops = append(loops, a)
	}
	stop := context.WithoutCancel(ctx)
	for i, l := range loops {
		if err := l.Start(ctx); err != nil {
			for _, started := range loops[:i] {
				_ = started.Stop(stop)
			}
			return err
		}
	}
	for _, l := range loops {
		wg.Go(func() {
			<-ctx.Done()
			_ = l.Stop(stop)
		})
	}
	return nil
}

// runUntilDone starts the worker l, waits for ctx to end and stops l,
// waiting for it (a worker's Stop is bounded by its shutdown grace). A
// second signal (see onSignals) ends the stop's context: the worker then
// hands its running jobs back at once, and runUntilDone waits only for
// that hand-back.
func runUntilDone(ctx context.Context, l loop, log *slog.Logger) error {
	if err := l.Start(ctx); err != nil {
		return err
	}
	<-ctx.Done()
	stop, canHurry, release := stopContext(ctx)
	defer release()
	if canHurry {
		log.Info("stopping: running jobs get the shutdown grace to finish; a second Ctrl-C (SIGINT or SIGTERM) hands them back to the queue at once")
	}
	err := l.Stop(stop)
	if stop.Err() == nil {
		return err
	}
	// The worker's Stop returns at once when its context ends, while the
	// hand-back it started goes on; wait for that (store writes, no
	// provider call), so the process exits with the jobs back in the
	// queue.
	log.Info("second signal: handing running jobs back to the queue now")
	if err := l.Stop(context.WithoutCancel(ctx)); err != nil {
		return fmt.Errorf("hand running jobs back: %w", err)
	}
	return nil
}

func newServeCmd(g *globals) *cobra.Command {
	var f serviceFlags
	var addr, metricsAccess, metricsAddr string
	var insecure bool
	var submitRate, orgSubmitRate float64
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Run the job service: the HTTP API, a worker pool, the batch processor and the reclaim loop",
		Long: `Run the job service: the HTTP API (/v1, Server-Sent Events at /v1/events,
/metrics, /openapi.json, /healthz, /readyz), a pool of workers executing
queued jobs through the engine, the batch processor that drives OpenAI-style
batches (/v1/batches; see promptkit batches), and the reclaim loop for jobs
whose worker died. With no flags it listens on 127.0.0.1:8080, uses
promptkit.db in the working directory and, when no backend is configured,
the built-in simulated backend.

Until an API token exists (promptkit tokens create), requests need none and
act as org "default", user "local" — the identity submit uses too. That is
allowed only on a loopback address, unless --insecure-no-auth. Once one
exists, /metrics needs an admin token too, unless --metrics-access open;
--metrics-addr serves it, open, on an address of its own.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			rt, err := openService(cmd, g, &f)
			if err != nil {
				return err
			}
			defer rt.store.Close()
			if addr != "" {
				rt.sc.Addr = addr
			}
			if cmd.Flags().Changed("metrics-access") {
				rt.sc.MetricsAccess = metricsAccess
			}
			if cmd.Flags().Changed("metrics-addr") {
				rt.sc.MetricsAddr = metricsAddr
			}
			access, err := server.ParseMetricsAccess(rt.sc.MetricsAccess)
			if err != nil {
				return usageError{fmt.Errorf("--metrics-access %q: want auth, open or off", rt.sc.MetricsAccess)}
			}
			rt.metrics = metrics.New(rt.store, metrics.Options{Models: rt.models, Logger: rt.log, Pacing: rt.engine.Pacing})
			var w *worker.Worker
			var runNow jobs.RunNowFunc
			if rt.sc.Workers > 0 {
				if w, err = rt.worker("", 0, nil); err != nil {
					return err
				}
				runNow = w.RunNow
			}
			ctx := cmd.Context()
			srv, err := server.New(server.Config{
				Store: rt.store, Notifier: rt.notifier, Engine: rt.engine, Check: rt.check, Addr: rt.sc.Addr,
				InsecureNoAuth: insecure, SubmitRate: submitRate, OrgSubmitRate: orgSubmitRate, Logger: rt.log, Metrics: rt.metrics,
				BatchPriority: &rt.sc.BatchPriority, MaxFileBytes: rt.sc.MaxFileBytes, MaxBodyBytes: rt.sc.MaxBodyBytes,
				ChatTimeout: rt.sc.ChatTimeout, FallbackProfile: rt.fallbackProfile(),
				MetricsAccess: access, MetricsAddr: rt.sc.MetricsAddr, RunNow: runNow, Quotas: rt.quotas,
			})
			if err != nil {
				return err
			}
			if err := srv.Open(ctx); err != nil {
				return err
			}
			defer srv.Close()
			if w != nil {
				rt.log.Info("promptkit serve listening", "addr", srv.URL(), "database", displayDB(rt.sc.Database), "workers", rt.sc.Workers, "worker", w.Name())
			} else {
				rt.log.Info("promptkit serve listening, API only: workers 0, so jobs run on other processes' workers", "addr", srv.URL(), "database", displayDB(rt.sc.Database))
			}
			rt.log.Info("open " + srv.URL() + "/ in a browser to ask and watch prompts; the API is under /v1 (docs/api.md)")
			if u := srv.MetricsURL(); u != "" {
				rt.log.Info("metrics served without a token", "url", u+"/metrics")
			}
			if local, err := srv.LocalMode(ctx); err == nil && local {
				rt.log.Info(`no API token exists: requests need none and act as org "default", user "local"`)
			}

			bp, err := rt.batches()
			if err != nil {
				return err
			}
			var wg sync.WaitGroup
			if err := rt.background(ctx, &wg, bp); err != nil {
				return err
			}
			stopSharing := rt.sharePacing(ctx, &wg)
			if w != nil {
				err = runUntilDone(ctx, w, rt.log)
			} else {
				<-ctx.Done()
			}
			stopSharing()
			rt.log.Info("shutting down")
			// The worker has handed its jobs back; now end streams and
			// drain requests.
			closeErr := srv.Close()
			wg.Wait()
			return errors.Join(err, closeErr)
		},
	}
	f.register(cmd)
	fl := cmd.Flags()
	fl.StringVar(&addr, "addr", "", `listen address (default "127.0.0.1:8080", or service.addr)`)
	fl.BoolVar(&insecure, "insecure-no-auth", false, "accept requests without a token on a non-loopback address while no token exists")
	fl.Float64Var(&submitRate, "submit-rate", server.DefaultSubmitRate, "submissions per second per token (bursts of 100); negative: no limit")
	fl.Float64Var(&orgSubmitRate, "org-submit-rate", 0, "submissions per second per org, all its tokens together (bursts of 500); 0: 5 times --submit-rate; negative: no limit")
	fl.StringVar(&metricsAccess, "metrics-access", "", `who may read /metrics on --addr: auth (an admin token; none in local mode), open, off (default "auth", or service.metrics_access)`)
	fl.StringVar(&metricsAddr, "metrics-addr", "", "also serve /metrics, open to anyone who reaches it, on this address (e.g. a private 10.0.0.5:9090)")
	return cmd
}

func displayDB(dsn string) string {
	if scheme, _, ok := strings.Cut(dsn, "://"); ok && isServerDB(dsn) {
		return scheme // the URL may hold a password
	}
	return sqlitePath(dsn)
}

func newWorkerCmd(g *globals) *cobra.Command {
	var f serviceFlags
	var once bool
	var batch, ceiling int
	var metricsAddr string
	cmd := &cobra.Command{
		Use:   "worker",
		Short: "Execute queued jobs (long-running, or one batch with --once for cron)",
		Long: `Execute queued jobs: claim them from the database, run them through the
engine, store their answers. Run as many worker processes (and serve
processes) on one database as you like, on one host or many.

The processes on one database pace each provider as one: a Retry-After
one of them receives pauses the backend in all of them, the rate learned
from 429s is the provider's, shared through the database, and each
process dispatches its part of it (and of requests_per_second and
tokens_per_minute, which are limits of the provider, not of each
process), in proportion to its callers waiting for the backend. The
hosts' clocks must agree to well under a second (NTP).
promptkit jobs metrics shows the shared state; --metrics-addr serves
this process's /metrics (promptkit_backend_learned_rate,
promptkit_backend_pacing_share, promptkit_backend_pause_seconds, and the
workers' and provider calls' metrics). See docs/retries.md.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if once && metricsAddr != "" {
				return usageError{errors.New("--metrics-addr serves a long-running worker's metrics; not with --once")}
			}
			rt, err := openService(cmd, g, &f)
			if err != nil {
				return err
			}
			defer rt.store.Close()
			if rt.sc.Workers == 0 {
				return usageError{errors.New("workers 0: a worker needs at least one slot (serve --workers 0 runs the API only)")}
			}
			var ceil *int
			if cmd.Flags().Changed("priority-ceiling") {
				if ceiling < 0 || ceiling > 100 {
					return usageError{errors.New("--priority-ceiling must be 0–100")}
				}
				ceil = &ceiling
			}
			if metricsAddr != "" {
				rt.metrics = metrics.New(rt.store, metrics.Options{Models: rt.models, Logger: rt.log, Pacing: rt.engine.Pacing})
				ln, err := rt.metrics.Listen(metricsAddr, rt.log)
				if err != nil {
					return err
				}
				defer ln.Close()
				rt.log.Info("metrics served without a token", "url", ln.URL()+"/metrics")
			}
			w, err := rt.worker("", batch, ceil)
			if err != nil {
				return err
			}
			if once {
				r, err := rt.reclaimer()
				if err != nil {
					return err
				}
				if _, err := r.Sweep(cmd.Context()); err != nil {
					rt.log.Warn("reclaim failed", "err", err)
				}
				n, err := w.RunOnce(cmd.Context())
				rt.log.Info("worker --once done", "claimed", n)
				return err
			}
			rt.log.Info("worker running", "worker", w.Name(), "database", displayDB(rt.sc.Database), "workers", rt.sc.Workers)
			// Drained (promptkit workers drain), the process exits once its
			// running jobs are over: as on a signal, with nothing to hand
			// back.
			ctx, stopWorker := context.WithCancel(cmd.Context())
			defer stopWorker()
			go func() {
				select {
				case <-w.Drained():
					rt.log.Info("drained: no running jobs; exiting", "worker", w.Name())
					stopWorker()
				case <-ctx.Done():
				}
			}()
			var wg sync.WaitGroup
			if err := rt.background(ctx, &wg); err != nil {
				return err
			}
			stopSharing := rt.sharePacing(ctx, &wg)
			err = runUntilDone(ctx, w, rt.log)
			stopSharing()
			wg.Wait()
			return err
		},
	}
	f.register(cmd)
	cmd.Flags().BoolVar(&once, "once", false, "claim one batch, run it, exit")
	cmd.Flags().IntVar(&batch, "batch-size", 0, "jobs claimed at once (default: --workers)")
	cmd.Flags().IntVar(&ceiling, "priority-ceiling", 100, "only jobs with priority <= N")
	cmd.Flags().StringVar(&metricsAddr, "metrics-addr", "", "serve /metrics, open to anyone who reaches it, on this address (e.g. 127.0.0.1:9091)")
	return cmd
}
