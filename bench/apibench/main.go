// Command apibench measures the job service's HTTP face (package server)
// under load, on SQLite and PostgreSQL, while workers run jobs against a
// slow provider:
//
//   - submit: POST /v1/prompts latency (p50, p99, max) with -clients
//     concurrent clients, each submitting in a closed loop and pausing
//     -think after every answer (0: back to back), -n requests per run in
//     all, without a token (-auth local: the loopback local identity) or
//     with a bearer token (-auth token). Workers (-workers slots) run the
//     jobs against a providertest server that takes -latency per call, so
//     the queue keeps growing while clients submit.
//   - sse: delivery latency of GET /v1/events, from just after Enqueue
//     returns in this process (the commit is done) to the moment each of
//     -sse-clients connected clients has parsed the job's "queued" event.
//     -sse-n prompts are enqueued one per -sse-interval, through the
//     server's own store handle ("same": the in-process notification) and
//     through a second handle on the same database ("other": what another
//     process sees; SQLite's data_version watch, PostgreSQL's LISTEN).
//     A client whose stream the server ends (a subscriber that fell
//     behind) reconnects with Last-Event-ID; the run counts those.
//
// Each run of each configuration gets a fresh SQLite file or PostgreSQL
// schema, a fresh server and fresh workers; the tables give min / median
// / max over runs of each run's percentiles.
//
//	cd bench && go run ./apibench -runs 3
//
// PostgreSQL rows need PROMPTKIT_TEST_DATABASE_URL (each run uses a fresh
// schema, dropped afterwards). Everything runs on loopback and stops by
// itself.
package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"flag"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/promptkit/promptkit"
	"github.com/promptkit/promptkit/jobs"
	"github.com/promptkit/promptkit/jobs/pgstore"
	"github.com/promptkit/promptkit/jobs/sqlitestore"
	"github.com/promptkit/promptkit/jobs/worker"
	"github.com/promptkit/promptkit/providertest"
	"github.com/promptkit/promptkit/server"
)

// opts are the command's flags.
type opts struct {
	runs        int
	n           int
	clients     []int
	thinks      []time.Duration
	auths       []string
	workers     int
	latency     time.Duration
	sseClients  int
	sseN        int
	sseInterval time.Duration
	sseVia      []string
	only        string
}

// db opens a fresh store and can open a second handle on it.
type db struct {
	name string
	open func(ctx context.Context) (st jobs.Store, reopen func() (jobs.Store, error), cleanup func(), err error)
}

func main() {
	var o opts
	var clients, thinks, auths, dbFlag, via, cpuProfile string
	var limit time.Duration
	flag.IntVar(&o.runs, "runs", 3, "runs per configuration")
	flag.IntVar(&o.n, "n", 4000, "POST /v1/prompts requests per submit run (all clients together)")
	flag.StringVar(&clients, "clients", "50,200", "concurrent submitting clients, comma-separated")
	flag.StringVar(&thinks, "think", "0,100ms", "each client's pause between its requests, comma-separated (0: back to back)")
	flag.StringVar(&auths, "auth", "local,token", "how submissions authenticate, comma-separated: local (no token: loopback local mode) or token (a bearer token)")
	flag.IntVar(&o.workers, "workers", 64, "worker concurrency (0: no worker)")
	flag.DurationVar(&o.latency, "latency", 2*time.Second, "provider latency per call")
	flag.IntVar(&o.sseClients, "sse-clients", 100, "connected GET /v1/events clients")
	flag.IntVar(&o.sseN, "sse-n", 500, "prompts enqueued per SSE run")
	flag.DurationVar(&o.sseInterval, "sse-interval", 10*time.Millisecond, "interval between SSE-run enqueues")
	flag.StringVar(&via, "sse-via", "same,other", "SSE enqueue handles: same (the server's store), other (a second handle)")
	flag.StringVar(&dbFlag, "db", "both", "sqlite, postgres or both")
	flag.StringVar(&o.only, "only", "", "submit or sse: run one phase only")
	flag.DurationVar(&limit, "timeout", 20*time.Minute, "give up (exit 1) after this long")
	flag.StringVar(&cpuProfile, "cpuprofile", "", "write a CPU profile of the whole run to this file")
	flag.Parse()
	var err error
	o.clients, err = ints(clients)
	must(err)
	for _, f := range strings.Split(thinks, ",") {
		d, err := time.ParseDuration(strings.TrimSpace(f))
		if err != nil || d < 0 {
			must(fmt.Errorf("-think: %q is not a duration", f))
		}
		o.thinks = append(o.thinks, d)
	}
	o.auths = strings.Split(auths, ",")
	for _, a := range o.auths {
		if a != "local" && a != "token" {
			must(fmt.Errorf("-auth: %q is neither local nor token", a))
		}
	}
	o.sseVia = strings.Split(via, ",")
	for _, v := range o.sseVia {
		if v != "same" && v != "other" {
			must(fmt.Errorf("-sse-via: %q is neither same nor other", v))
		}
	}
	if o.only != "" && o.only != "submit" && o.only != "sse" {
		must(fmt.Errorf("-only: %q is neither submit nor sse", o.only))
	}

	var dbs []db
	pgURL := os.Getenv("PROMPTKIT_TEST_DATABASE_URL")
	switch dbFlag {
	case "sqlite", "postgres", "both":
	default:
		must(fmt.Errorf("-db: %q is not sqlite, postgres or both", dbFlag))
	}
	if dbFlag != "postgres" {
		dbs = append(dbs, db{"sqlite", openSQLite})
	}
	if dbFlag != "sqlite" {
		if pgURL == "" {
			fmt.Println("PostgreSQL skipped: PROMPTKIT_TEST_DATABASE_URL is not set.")
		} else {
			dbs = append(dbs, db{"postgres", openPostgres(pgURL)})
		}
	}
	if len(dbs) == 0 {
		return
	}

	time.AfterFunc(limit, func() {
		fmt.Fprintf(os.Stderr, "apibench: gave up after -timeout %v\n", limit)
		os.Exit(1)
	})
	if cpuProfile != "" {
		f, err := os.Create(cpuProfile)
		must(err)
		must(pprof.StartCPUProfile(f))
		defer func() { pprof.StopCPUProfile(); f.Close() }()
	}

	ctx := context.Background()
	prov := providertest.NewServer(providertest.WithLatency(o.latency), providertest.WithMaxRecorded(1))
	defer prov.Close()
	retries := 0
	provTransport := &http.Transport{MaxIdleConns: o.workers, MaxIdleConnsPerHost: o.workers, IdleConnTimeout: 30 * time.Second}
	defer provTransport.CloseIdleConnections()
	eng, err := promptkit.New(promptkit.Config{
		Backends:         []promptkit.Backend{{ID: "fake", BaseURL: prov.URL}},
		Profiles:         []promptkit.Profile{{ID: "default", Backend: "fake", Model: "m"}},
		TransientRetries: &retries,
		HTTPClient:       &http.Client{Transport: provTransport},
	})
	must(err)

	fmt.Printf("apibench: %s, %d cores, %s; provider latency %v, %d worker slots, %d runs\n\n",
		time.Now().Format("2006-01-02 15:04 MST"), runtime.NumCPU(), runtime.Version(), o.latency, o.workers, o.runs)
	began, loadStart, goroutines := time.Now(), loadavg(), runtime.NumGoroutine()

	var subs []submitResult
	var sses []sseResult
	// Runs are the outer loop, so slow drifts of the machine spread over
	// every configuration; the database order alternates between runs.
	for r := 0; r < o.runs; r++ {
		order := slices.Clone(dbs)
		if r%2 == 1 {
			slices.Reverse(order)
		}
		for _, d := range order {
			if o.only != "sse" {
				for _, auth := range o.auths {
					for _, think := range o.thinks {
						for _, c := range o.clients {
							res := runSubmit(ctx, d, eng, o, c, think, auth)
							res.run = r
							subs = append(subs, res)
							fmt.Fprintf(os.Stderr, "run %d %s submit auth=%s c=%d think=%v: %s\n", r+1, d.name, auth, c, think, res.line())
						}
					}
				}
			}
			if o.only != "submit" {
				for _, v := range o.sseVia {
					res := runSSE(ctx, d, eng, o, v)
					res.run = r
					sses = append(sses, res)
					fmt.Fprintf(os.Stderr, "run %d %s sse via %s: %s\n", r+1, d.name, v, res.line())
				}
			}
		}
	}
	if len(subs) > 0 {
		reportSubmit(o, dbs, subs)
	}
	if len(sses) > 0 {
		reportSSE(o, dbs, sses)
	}
	prov.Close()
	provTransport.CloseIdleConnections()
	time.Sleep(100 * time.Millisecond)
	fmt.Printf("goroutines before the first run %d, after the last %d\n", goroutines, runtime.NumGoroutine())
	fmt.Printf("wall time %v; load average at start %s, at end %s\n", time.Since(began).Round(time.Second), loadStart, loadavg())
}

// env is one configuration's running service: a fresh store, the server
// on loopback and a worker against the slow provider.
type env struct {
	st      jobs.Store
	reopen  func() (jobs.Store, error)
	srv     *server.Server
	log     *countingHandler
	w       *worker.Worker // nil with no workers
	cleanup func()
}

func start(ctx context.Context, d db, eng *promptkit.Engine, workers int) *env {
	st, reopen, cleanup, err := d.open(ctx)
	must(err)
	e := &env{st: st, reopen: reopen, cleanup: cleanup, log: &countingHandler{}}
	logger := slog.New(e.log)
	e.srv, err = server.New(server.Config{
		Store: st, Engine: eng, Addr: "127.0.0.1:0", SubmitRate: -1, Logger: logger,
		// The admission check serve wires (see cmd/promptkit/internal/cli).
		Check: func(ctx context.Context, p jobs.EnqueueParams) error { return worker.Check(ctx, eng, p) },
	})
	must(err)
	must(e.srv.Open(ctx))
	if workers == 0 {
		return e
	}
	e.w, err = worker.New(worker.Config{
		Store: st, Engine: eng, Concurrency: workers, ShutdownGrace: -1, Logger: logger,
	})
	must(err)
	must(e.w.Start(ctx))
	return e
}

// counts are the store's job counts by state.
func (e *env) counts(ctx context.Context) map[jobs.State]int {
	m, err := e.st.Metrics(ctx, jobs.MetricsParams{Since: time.Now()})
	if err != nil {
		return nil
	}
	return m.Counts
}

func (e *env) stop() {
	if e.w != nil {
		must(e.w.Stop(context.Background())) // no grace: running jobs are handed back at once
	}
	t := time.Now()
	must(e.srv.Close())
	if d := time.Since(t); d > time.Second {
		fmt.Fprintf(os.Stderr, "apibench: server Close took %v\n", d.Round(time.Millisecond))
	}
	e.cleanup()
}

// loadavg is the 1, 5 and 15 minute load averages, when Linux tells
// them: other work on a shared machine shows up here.
func loadavg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}

// countingHandler counts the log records at Warn and above that the
// server and worker emit, and keeps the first few messages.
type countingHandler struct {
	mu    sync.Mutex
	warns int
	first []string
}

func (h *countingHandler) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelWarn }
func (h *countingHandler) Handle(_ context.Context, r slog.Record) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.warns++
	if len(h.first) < 3 {
		msg := r.Message
		r.Attrs(func(a slog.Attr) bool { msg += " " + a.String(); return true })
		h.first = append(h.first, msg)
	}
	return nil
}
func (h *countingHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *countingHandler) WithGroup(string) slog.Handler      { return h }

func (h *countingHandler) summary() (int, []string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.warns, slices.Clone(h.first)
}

// clientFor returns an HTTP client that keeps up to c idle connections
// to the server, so requests reuse connections instead of measuring
// connection setup.
func clientFor(c int) (*http.Client, *http.Transport) {
	tr := &http.Transport{
		MaxIdleConns: c, MaxIdleConnsPerHost: c, IdleConnTimeout: 90 * time.Second,
		DisableCompression: true,
	}
	return &http.Client{Transport: tr}, tr
}

// pct returns the p-th percentile (nearest rank) of sorted.
func pct(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(float64(len(sorted))*p/100+0.999999) - 1
	return sorted[max(0, min(i, len(sorted)-1))]
}

// spread is min / median / max of one figure over runs.
func spread(vs []float64, format func(float64) string) string {
	if len(vs) == 0 {
		return "–"
	}
	s := slices.Clone(vs)
	slices.Sort(s)
	return format(s[0]) + " / " + format(s[len(s)/2]) + " / " + format(s[len(s)-1])
}

// thousands formats a whole number with thousands separators.
func thousands(v float64) string {
	s := strconv.FormatFloat(v, 'f', 0, 64)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

func median(vs []float64) float64 {
	s := slices.Clone(vs)
	slices.Sort(s)
	return s[len(s)/2]
}

func ms(v float64) string         { return strconv.FormatFloat(v, 'f', 1, 64) }
func msd(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func ints(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			return nil, fmt.Errorf("%q is not a positive number", f)
		}
		out = append(out, n)
	}
	return out, nil
}

func openSQLite(ctx context.Context) (jobs.Store, func() (jobs.Store, error), func(), error) {
	dir, err := os.MkdirTemp("", "promptkit-apibench-")
	if err != nil {
		return nil, nil, nil, err
	}
	path := filepath.Join(dir, "jobs.db")
	st, err := sqlitestore.Open(ctx, path, jobs.Options{})
	if err != nil {
		os.RemoveAll(dir)
		return nil, nil, nil, err
	}
	reopen := func() (jobs.Store, error) { return sqlitestore.Open(ctx, path, jobs.Options{}) }
	return st, reopen, func() { st.Close(); os.RemoveAll(dir) }, nil
}

func openPostgres(base string) func(ctx context.Context) (jobs.Store, func() (jobs.Store, error), func(), error) {
	return func(ctx context.Context) (jobs.Store, func() (jobs.Store, error), func(), error) {
		var b [6]byte
		_, _ = rand.Read(b[:])
		schema := "apibench_" + hex.EncodeToString(b[:])
		conn, err := pgx.Connect(ctx, base)
		if err != nil {
			return nil, nil, nil, err
		}
		defer conn.Close(ctx)
		if _, err := conn.Exec(ctx, "CREATE SCHEMA "+schema); err != nil {
			return nil, nil, nil, err
		}
		drop := func() {
			if c, err := pgx.Connect(ctx, base); err == nil {
				_, _ = c.Exec(ctx, "DROP SCHEMA "+schema+" CASCADE")
				c.Close(ctx)
			}
		}
		u, _ := url.Parse(base)
		q := u.Query()
		q.Set("search_path", schema)
		u.RawQuery = q.Encode()
		dsn := u.String()
		st, err := pgstore.Open(ctx, dsn, jobs.Options{})
		if err != nil {
			drop()
			return nil, nil, nil, err
		}
		reopen := func() (jobs.Store, error) { return pgstore.Open(ctx, dsn, jobs.Options{}) }
		return st, reopen, func() { st.Close(); drop() }, nil
	}
}

// counter is a concurrent count by key.
type counter struct {
	mu sync.Mutex
	m  map[string]int
}

func (c *counter) add(k string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = map[string]int{}
	}
	c.m[k]++
}

func (c *counter) String() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.m) == 0 {
		return "none"
	}
	keys := make([]string, 0, len(c.m))
	for k := range c.m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var b strings.Builder
	for i, k := range keys {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%s ×%d", k, c.m[k])
	}
	return b.String()
}

func must(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, "apibench:", err)
		os.Exit(1)
	}
}
