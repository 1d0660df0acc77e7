// Package metrics exposes the Prometheus metrics of `promptkit serve`: the
// queue (jobs by state, read from the store on each scrape), spend and
// tokens per org and model (the usage ledger's totals, read at most once
// a UsageInterval), the workers
// (claims, waits, run times, settlements), the provider calls (answers by
// status class, and the OpenTelemetry GenAI client metrics
// gen_ai.client.operation.duration and gen_ai.client.token.usage in
// Prometheus form), the HTTP API, Server-Sent Events clients, and the Go
// runtime and process.
//
// Metrics live on their own registry, so embedding programs' global
// metrics never mix in. Label values come only from fixed sets (states,
// outcomes, status classes, failure kinds, pacing sources), operator
// configuration (model names listed in Options.Models, backend IDs,
// ServeMux patterns, the org IDs tokens are created for) or status codes:
// never from prompt text, answers, error messages or IDs, which would leak
// data and explode cardinality.
package metrics

import (
	"cmp"
	"context"
	"log/slog"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/promptkit/promptkit"
	"github.com/promptkit/promptkit/jobs"
	"github.com/promptkit/promptkit/jobs/worker"
	"github.com/promptkit/promptkit/pktype"
)

// DefaultScrapeTimeout bounds the store calls of one scrape.
const DefaultScrapeTimeout = 5 * time.Second

// OtherModel stands for a requested model not listed in Options.Models
// (OpenTelemetry's name for an out-of-set value).
const OtherModel = "_OTHER"

// operationChat is gen_ai.operation.name for chat completions, the only
// operation the engine performs.
const operationChat = "chat"

// Options configure Metrics. Zero values take the defaults.
type Options struct {
	// Now is the clock. Defaults to time.Now.
	Now func() time.Time
	// ScrapeTimeout bounds the store calls made on each scrape (the job
	// counts and the health check, made at once). Defaults to
	// DefaultScrapeTimeout.
	ScrapeTimeout time.Duration
	// Models are the model names reported as gen_ai_request_model: the
	// configured profiles' models. A job may request any model, and an
	// arbitrary string must not become a label value, so other models are
	// reported as OtherModel.
	Models []string
	// Logger receives the store errors met while scraping. Defaults to
	// slog.Default().
	Logger *slog.Logger
	// Pacing, when set, is read on each scrape for the backends' pacing
	// gauges: pass the engine's Engine.Pacing.
	Pacing func() map[string]promptkit.Pacing
	// UsageInterval is how long the usage ledger's totals (spend and
	// tokens per org and model) serve scrapes before the ledger is read
	// again. Defaults to DefaultUsageInterval.
	UsageInterval time.Duration
}

// Metrics holds the service's metrics. Its methods are safe for concurrent
// use; the Observe and SSEClients methods do nothing on a nil *Metrics, so
// a server with metrics off can call them unconditionally.
type Metrics struct {
	reg     *prometheus.Registry
	handler http.Handler
	models  map[string]bool

	queueWait   prometheus.Histogram
	runDuration *prometheus.HistogramVec
	attempts    prometheus.Counter
	retries     prometheus.Counter
	settled     *prometheus.CounterVec

	providerAnswers *prometheus.CounterVec
	opDuration      *prometheus.HistogramVec
	tokenUsage      *prometheus.HistogramVec

	sseClients   prometheus.Gauge
	httpRequests *prometheus.CounterVec
	httpDuration *prometheus.HistogramVec
}

// Bucket boundaries. The GenAI and HTTP ones are OpenTelemetry's
// recommendations for those instruments.
var (
	genAIDurationBuckets = []float64{0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92}
	genAITokenBuckets    = []float64{1, 4, 16, 64, 256, 1024, 4096, 16384, 65536, 262144, 1048576, 4194304, 16777216, 67108864}
	httpDurationBuckets  = []float64{0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10}
	// A job may wait from milliseconds (idle workers) to hours (a
	// backlog, or scheduled work), and run up to the job timeout (10m by
	// default).
	queueWaitBuckets   = []float64{0.01, 0.05, 0.1, 0.5, 1, 5, 10, 30, 60, 300, 900, 3600, 14400}
	runDurationBuckets = []float64{0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600}
)

// New returns the metrics of a service whose jobs are in st, on a new
// registry that also holds the Go runtime and process collectors.
func New(st jobs.Store, opts Options) *Metrics {
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.ScrapeTimeout <= 0 {
		opts.ScrapeTimeout = DefaultScrapeTimeout
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.UsageInterval <= 0 {
		opts.UsageInterval = DefaultUsageInterval
	}
	m := &Metrics{reg: prometheus.NewRegistry(), models: map[string]bool{}}
	for _, name := range opts.Models {
		m.models[name] = true
	}
	m.queueWait = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "promptkit_job_queue_wait_seconds",
		Help:    "Time a job was available (created, or its scheduled time reached) before a worker claimed it.",
		Buckets: queueWaitBuckets,
	})
	m.runDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "promptkit_job_run_duration_seconds",
		Help:    "Time a job attempt took on a worker, from the start of its execution to its result, by settlement outcome.",
		Buckets: runDurationBuckets,
	}, []string{"outcome"})
	m.attempts = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "promptkit_job_attempts_total",
		Help: "Job attempts started: claims by this process's workers.",
	})
	m.retries = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "promptkit_job_retries_total",
		Help: "Jobs put back in the queue after a retryable failure, spending an attempt.",
	})
	m.settled = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "promptkit_jobs_settled_total",
		Help: "Job attempts settled by this process's workers, by outcome: succeeded, failed, retried, handed_back, discarded (no longer claimed: cancelled or reclaimed), write_failed.",
	}, []string{"outcome"})
	m.providerAnswers = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "promptkit_provider_responses_total",
		Help: "Provider calls by answer: status class 2xx, 4xx (other than 429), 429, 5xx, other, or transport (no HTTP answer: connection error, timeout, cancellation) or none (a client without HTTP succeeded).",
	}, []string{"status_class"})
	m.opDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "gen_ai_client_operation_duration_seconds",
		Help:    "GenAI operation duration: one provider call, dispatch through response decoding (OpenTelemetry gen_ai.client.operation.duration). error_type is empty on success.",
		Buckets: genAIDurationBuckets,
	}, []string{"gen_ai_operation_name", "gen_ai_request_model", "error_type"})
	m.tokenUsage = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "gen_ai_client_token_usage",
		Help:    "Tokens used per provider call, as the provider reported them; calls that did not report a count are not recorded (OpenTelemetry gen_ai.client.token.usage).",
		Buckets: genAITokenBuckets,
	}, []string{"gen_ai_operation_name", "gen_ai_request_model", "gen_ai_token_type"})
	m.sseClients = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "promptkit_sse_clients",
		Help: "Connected Server-Sent Events clients.",
	})
	m.httpRequests = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "promptkit_http_requests_total",
		Help: "HTTP requests served, by route (the ServeMux pattern) and status code.",
	}, []string{"route", "code"})
	m.httpDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "promptkit_http_request_duration_seconds",
		Help:    "HTTP request duration by route (the ServeMux pattern); a Server-Sent Events stream counts its whole connection.",
		Buckets: httpDurationBuckets,
	}, []string{"route"})

	// Series that exist from the start, so rate() and absent-series alerts
	// work before the first event.
	for _, o := range worker.Outcomes() {
		m.settled.WithLabelValues(o)
	}
	for _, c := range statusClasses {
		m.providerAnswers.WithLabelValues(c)
	}

	m.reg.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		newJobsCollector(st, opts.Now, opts.ScrapeTimeout, opts.Logger),
		newUsageCollector(st, opts, m.modelLabel),
		m.queueWait, m.runDuration, m.attempts, m.retries, m.settled,
		m.providerAnswers, m.opDuration, m.tokenUsage,
		m.sseClients, m.httpRequests, m.httpDuration,
	)
	if opts.Pacing != nil {
		m.reg.MustRegister(newPacingCollector(opts.Pacing, opts.Now))
	}
	// ContinueOnError: a collector's error must not cost the whole scrape.
	m.handler = promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError})
	return m
}

// Handler serves the metrics in the Prometheus exposition format, for
// GET /metrics.
func (m *Metrics) Handler() http.Handler { return m.handler }

// ObserveJob records a worker's claim or settlement; pass it as
// worker.Config.Observe.
func (m *Metrics) ObserveJob(e worker.JobEvent) {
	if m == nil {
		return
	}
	if e.Claimed {
		m.attempts.Inc()
		m.queueWait.Observe(e.Waited.Seconds())
		return
	}
	out := outcomeLabel(e.Outcome)
	m.settled.WithLabelValues(out).Inc()
	m.runDuration.WithLabelValues(out).Observe(e.Ran.Seconds())
	if out == worker.OutcomeRetried {
		m.retries.Inc()
	}
}

// Observer returns the engine observer that records provider calls; pass
// it as worker.Config.Observer (or RunRequest.Observer). Only dispatched
// attempts count: an attempt interrupted while waiting for a backend
// permit never reached the provider. Nil on a nil *Metrics.
func (m *Metrics) Observer() pktype.ExecutionObserver {
	if m == nil {
		return nil
	}
	return m.observe
}

func (m *Metrics) observe(ev pktype.ExecutionEvent) {
	if ev.Kind != pktype.ExecutionAttempt || !ev.Dispatched {
		return
	}
	model := m.modelLabel(ev.Model)
	m.providerAnswers.WithLabelValues(statusClass(ev.StatusCode, ev.Failure)).Inc()
	m.opDuration.WithLabelValues(operationChat, model, errorType(ev)).Observe(ev.GenerationDuration.Seconds())
	// Only counts the provider reported: an unknown count is not zero.
	if c := ev.Usage.PromptTokens; c.Known {
		m.tokenUsage.WithLabelValues(operationChat, model, "input").Observe(float64(c.Value))
	}
	if c := ev.Usage.CompletionTokens; c.Known {
		m.tokenUsage.WithLabelValues(operationChat, model, "output").Observe(float64(c.Value))
	}
}

// ObserveHTTP records one served request. route must be the ServeMux
// pattern that matched (http.Request.Pattern, e.g. "POST /v1/prompts";
// empty for an unmatched request), never the raw path: IDs in paths would
// explode cardinality.
func (m *Metrics) ObserveHTTP(route string, code int, d time.Duration) {
	if m == nil {
		return
	}
	if route == "" {
		route = "unmatched"
	}
	c := "other"
	if code >= 100 && code <= 599 {
		c = strconv.Itoa(code)
	}
	m.httpRequests.WithLabelValues(route, c).Inc()
	m.httpDuration.WithLabelValues(route).Observe(d.Seconds())
}

// SSEClients adds delta to the connected Server-Sent Events clients: +1
// when a stream opens, -1 when it closes.
func (m *Metrics) SSEClients(delta int) {
	if m == nil {
		return
	}
	m.sseClients.Add(float64(delta))
}

// modelLabel keeps configured model names and hides the rest.
func (m *Metrics) modelLabel(model string) string {
	if model == "" || m.models[model] {
		return model
	}
	return OtherModel
}

// outcomeLabel keeps the worker's outcomes; anything else (a future
// outcome this package does not know yet) is "other".
func outcomeLabel(o string) string {
	for _, known := range worker.Outcomes() {
		if o == known {
			return o
		}
	}
	return "other"
}

// statusClasses are the values of status_class.
var statusClasses = []string{"2xx", "4xx", "429", "5xx", "other", "transport", "none"}

// statusClass classifies a provider call's answer. 429 stands apart from
// 4xx because rate limiting is what operators watch for.
func statusClass(code int, failure pktype.ExecutionFailureKind) string {
	switch {
	case code == 0 && failure != pktype.ExecutionFailureNone:
		return "transport"
	case code == 0:
		return "none"
	case code == 429:
		return "429"
	case code >= 200 && code <= 299:
		return "2xx"
	case code >= 400 && code <= 499:
		return "4xx"
	case code >= 500 && code <= 599:
		return "5xx"
	}
	return "other"
}

// errorType is OpenTelemetry's error.type of a provider call: empty on
// success, the HTTP status code for a provider status error, else the
// failure kind (from the fixed set; anything else is "other").
func errorType(ev pktype.ExecutionEvent) string {
	switch f := ev.Failure; f {
	case pktype.ExecutionFailureNone:
		return ""
	case pktype.ExecutionFailureProviderStatus:
		if ev.StatusCode >= 100 && ev.StatusCode <= 599 {
			return strconv.Itoa(ev.StatusCode)
		}
		return string(f)
	case pktype.ExecutionFailureCanceled, pktype.ExecutionFailureDeadline, pktype.ExecutionFailureTransport,
		pktype.ExecutionFailureMalformed, pktype.ExecutionFailureCapacity, pktype.ExecutionFailureInvalidConfig,
		pktype.ExecutionFailureInvalidRequest, pktype.ExecutionFailurePromptNotFound, pktype.ExecutionFailureProfileNotFound,
		pktype.ExecutionFailurePromptRender, pktype.ExecutionFailureValidation, pktype.ExecutionFailureGeneration:
		return string(f)
	}
	return string(pktype.ExecutionFailureOther)
}

// jobsCollector reports the jobs in each state, read from the store on
// each scrape: the store is shared by every process of a deployment, so
// only it knows the queue.
type jobsCollector struct {
	st      jobs.Store
	now     func() time.Time
	timeout time.Duration
	log     *slog.Logger
	jobs    *prometheus.Desc
	up      *prometheus.Desc
	// checkDown and countDown make a failure warn once per outage, not
	// once per scrape.
	checkDown, countDown outage
}

// outage remembers whether a repeated operation is failing, so that it
// warns when it starts failing and tells when it recovers.
type outage struct{ failing atomic.Bool }

func (o *outage) report(log *slog.Logger, what string, err error) {
	switch {
	case err != nil && !o.failing.Swap(true):
		log.Warn("metrics: "+what+" failed; reported once until it recovers", "err", err)
	case err == nil && o.failing.Swap(false):
		log.Info("metrics: " + what + " recovered")
	}
}

func newJobsCollector(st jobs.Store, now func() time.Time, timeout time.Duration, log *slog.Logger) *jobsCollector {
	return &jobsCollector{
		st: st, now: now, timeout: timeout, log: log,
		jobs: prometheus.NewDesc("promptkit_jobs", "Jobs in each state, across the deployment (read from the store at scrape time).", []string{"state"}, nil),
		up: prometheus.NewDesc("promptkit_store_up",
			"1 if the store passed its health check in this scrape's time (it answers, its schema is current and it accepts writes: what /readyz asks), else 0. promptkit_jobs is absent when the job count query failed.", nil, nil),
	}
}

// Describe implements prometheus.Collector.
func (c *jobsCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.jobs
	ch <- c.up
}

// Collect implements prometheus.Collector. store_up is the store's
// Check, as readiness uses: a store that still answers reads while its
// writes fail (a full disk, a read-only replica) is down, and the count
// query alone would not show it. When the count query fails or is slow,
// it reports no job counts rather than stale or zero ones, which would
// look like an empty queue. Neither fails the scrape: the other metrics
// still matter most when the database is in trouble.
func (c *jobsCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
	defer cancel()
	// At once, so that a slow one does not spend the other's time.
	var checkErr error
	checked := make(chan struct{})
	go func() {
		defer close(checked)
		checkErr = c.st.Check(ctx)
	}()
	// Since: now keeps the store's latency window empty: only the counts
	// are wanted here.
	m, err := c.st.Metrics(ctx, jobs.MetricsParams{Since: c.now()})
	<-checked
	up := 1.0
	if checkErr != nil {
		up = 0
	}
	c.checkDown.report(c.log, "store check", checkErr)
	c.countDown.report(c.log, "counting jobs", err)
	ch <- prometheus.MustNewConstMetric(c.up, prometheus.GaugeValue, up)
	if err != nil {
		return
	}
	for state, n := range m.Counts {
		if state.Valid() {
			ch <- prometheus.MustNewConstMetric(c.jobs, prometheus.GaugeValue, float64(n), string(state))
		}
	}
}

// pacingCollector reports what each backend's pacer follows, read from
// the engine on each scrape.
type pacingCollector struct {
	pacing    func() map[string]promptkit.Pacing
	now       func() time.Time
	rate      *prometheus.Desc
	budget    *prometheus.Desc
	share     *prometheus.Desc
	processes *prometheus.Desc
	pause     *prometheus.Desc
	cooldown  *prometheus.Desc
}

func newPacingCollector(pacing func() map[string]promptkit.Pacing, now func() time.Time) *pacingCollector {
	return &pacingCollector{
		pacing: pacing,
		now:    now,
		rate: prometheus.NewDesc("promptkit_backend_learned_rate",
			"Requests per second a backend's pacer follows now, by where it comes from: configured, 429 (learned from rate-limit answers), headers (the provider's rate-limit headers govern; then 0 unless a rate applies too) or none (0: unpaced). Shared between processes (promptkit_backend_pacing_processes present), it is the provider-wide rate, the same in every process, of which this process dispatches promptkit_backend_pacing_share.",
			[]string{"backend", "source"}, nil),
		budget: prometheus.NewDesc("promptkit_backend_rate_budget_remaining",
			"What a backend's provider rate-limit headers leave before their reset, less what is in flight, by budget: requests or tokens. Absent when the provider sends no such header.",
			[]string{"backend", "budget"}, nil),
		share: prometheus.NewDesc("promptkit_backend_pacing_share",
			"The part of a backend's provider-wide rates this process dispatches: its demand (callers waiting for the backend or in flight on it) over the demand of every process present on it. Absent when the process does not share its pacing.",
			[]string{"backend"}, nil),
		processes: prometheus.NewDesc("promptkit_backend_pacing_processes",
			"Processes sharing a backend's pacing that have callers on it, this one included. Absent when the process does not share its pacing.",
			[]string{"backend"}, nil),
		pause: prometheus.NewDesc("promptkit_backend_pause_seconds",
			"Seconds left of a backend's pause: a provider's Retry-After, received by this process or, shared, by another; 0 when not paused.",
			[]string{"backend"}, nil),
		cooldown: prometheus.NewDesc("promptkit_backend_cooldown_seconds",
			"Seconds left of a backend's cooldown: model groups avoid it after it failed as unwell (5xx, timeout, transport failure, 429 after every retry), here or, shared, in another process; 0 when not cooling down.",
			[]string{"backend"}, nil),
	}
}

func (c *pacingCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.rate
	ch <- c.budget
	ch <- c.share
	ch <- c.processes
	ch <- c.pause
	ch <- c.cooldown
}

func (c *pacingCollector) Collect(ch chan<- prometheus.Metric) {
	now := c.now()
	for id, p := range c.pacing() {
		ch <- prometheus.MustNewConstMetric(c.rate, prometheus.GaugeValue, p.RequestsPerSecond, id, cmp.Or(p.Source, "none"))
		ch <- prometheus.MustNewConstMetric(c.pause, prometheus.GaugeValue, max(p.PausedUntil.Sub(now).Seconds(), 0), id)
		ch <- prometheus.MustNewConstMetric(c.cooldown, prometheus.GaugeValue, max(p.CooldownUntil.Sub(now).Seconds(), 0), id)
		if p.Shared {
			ch <- prometheus.MustNewConstMetric(c.share, prometheus.GaugeValue, p.Share, id)
			ch <- prometheus.MustNewConstMetric(c.processes, prometheus.GaugeValue, float64(p.Processes), id)
		}
		if p.Requests.Known {
			ch <- prometheus.MustNewConstMetric(c.budget, prometheus.GaugeValue, float64(p.Requests.Remaining), id, "requests")
		}
		if p.Tokens.Known {
			ch <- prometheus.MustNewConstMetric(c.budget, prometheus.GaugeValue, float64(p.Tokens.Remaining), id, "tokens")
		}
	}
}
