// Command goodput measures how many of n calls succeed, how many extra
// provider calls they cost and how long they take, when c callers share a
// provider that allows only rate requests per second (a providertest
// server answering 429 with Retry-After: 1 past its limit). It compares
// promptkit configurations — the library in this process, and jobs run by
// two `promptkit worker` processes built from this tree — and the OpenAI
// Go SDK with its default retries, in one process, interleaving the
// configurations round-robin so machine noise spreads over all of them.
//
// Each configuration runs in two scenarios: a steady limit, and the limit
// halved once half the calls have succeeded, so the ideal time is
// (n/2)/rate + (n/2)/(rate/2). A third scenario, pool, compares the
// built-in client's idle pool sized from max_active with the old pool of
// 2 against a provider without a limit, where connection reuse, not the
// limit, bounds throughput.
//
//	cd bench && go run ./goodput -runs 3
//	cd bench && go run ./goodput -runs 1 -only headers -scenarios steady
//
// Everything listens and dials on loopback only, and every run has a
// deadline, so the program always ends by itself.
package main

import (
	"bytes"
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/promptkit/promptkit"
	"github.com/promptkit/promptkit/bench/internal/pkbin"
	"github.com/promptkit/promptkit/jobs"
	"github.com/promptkit/promptkit/jobs/pgstore"
	"github.com/promptkit/promptkit/jobs/sqlitestore"
	"github.com/promptkit/promptkit/providertest"
)

// caller performs one call; a nil error is a success.
type caller func(ctx context.Context, i int) error

// provider is one run's rate-limited fake, with the TCP connections it
// accepted counted, so the client's connection reuse shows.
type provider struct {
	*providertest.Handler
	URL   string
	conns atomic.Int64
	srv   *httptest.Server
}

func newProvider(rate int, headers bool, latency time.Duration) *provider {
	opts := []providertest.Option{
		providertest.WithLatency(latency),
		providertest.WithRateLimit(rate),
		providertest.WithRetryAfter("1"),
		providertest.WithMaxRecorded(1),
	}
	if headers {
		opts = append(opts, providertest.WithRateLimitHeaders())
	}
	p := &provider{Handler: providertest.NewHandler(opts...)}
	p.srv = httptest.NewUnstartedServer(p.Handler)
	p.srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			p.conns.Add(1)
		}
	}
	p.srv.Start()
	p.URL = p.srv.URL + "/v1"
	return p
}

func (p *provider) Close() { p.srv.Close() }

// env is what every run shares.
type env struct {
	n, c, rate int
	deadline   time.Duration
	bin        string // promptkit built from this tree, for the worker rows
	pgURL      string // PostgreSQL for the worker rows instead of SQLite
	slots      int    // --workers of each worker process
	procs      int    // worker processes
	// The pool scenario's calls and provider latency.
	poolN       int
	poolLatency time.Duration
}

// config is one way of calling the provider under test.
type config struct {
	Name string
	// Headers makes the provider send OpenAI's x-ratelimit-* headers.
	Headers bool
	// pool marks the idle-pool rows: they run only in the pool scenario,
	// and the others never do.
	pool bool
	// run makes e.n calls (or jobs) against p and reports how they went.
	run func(ctx context.Context, e env, p *provider) (outcome, error)
}

// outcome is what a run observed itself; the provider counts the calls.
type outcome struct {
	ok, failed int
	wall       time.Duration
	firstErr   string
	warnings   int    // WARN and ERROR lines the worker processes logged
	note       string // for the progress line
}

// scenario is how the provider's limit behaves during a run.
type scenario struct {
	Name string
	// halve sets the limit to rate/2 once n/2 calls have succeeded.
	halve bool
	// pool runs the idle-pool rows instead: poolN calls against a
	// provider without a limit, answering after poolLatency.
	pool bool
}

// result is one run of one configuration in one scenario.
type result struct {
	Config      string  `json:"config"`
	Scenario    string  `json:"scenario"`
	Run         int     `json:"run"`
	Successes   int     `json:"successes"`
	Failures    int     `json:"failures"`
	Calls       int     `json:"provider_calls"`
	RateLimited int     `json:"rate_limited"`
	Conns       int     `json:"tcp_connections"`
	Warnings    int     `json:"worker_log_warnings,omitempty"`
	Note        string  `json:"note,omitempty"`
	WallSeconds float64 `json:"wall_seconds"`
	FirstError  string  `json:"first_error,omitempty"`
}

// summary aggregates the runs of one configuration in one scenario.
type summary struct {
	Config        string   `json:"config"`
	Scenario      string   `json:"scenario"`
	Runs          int      `json:"runs"`
	IdealSeconds  float64  `json:"ideal_seconds"`
	Successes     float64  `json:"successes_median"`
	Failures      float64  `json:"failures_median"`
	Calls         float64  `json:"provider_calls_median"`
	ExtraPercent  float64  `json:"extra_calls_percent_median"`
	RateLimited   float64  `json:"rate_limited_median"`
	Conns         float64  `json:"tcp_connections_median"`
	WallMin       float64  `json:"wall_seconds_min"`
	WallMedian    float64  `json:"wall_seconds_median"`
	WallMax       float64  `json:"wall_seconds_max"`
	WallOverIdeal float64  `json:"wall_over_ideal_median"`
	Results       []result `json:"results"`
}

func main() {
	n := flag.Int("n", 1000, "calls (or jobs) per run")
	c := flag.Int("c", 64, "concurrent callers; the worker rows run -procs processes with c/procs slots each")
	procs := flag.Int("procs", 2, "worker processes in the jobs row")
	rate := flag.Int("rate", 100, "provider limit, requests per second")
	runs := flag.Int("runs", 3, "runs per configuration and scenario, interleaved round-robin")
	sdk := flag.Bool("sdk", true, "include the OpenAI Go SDK with its default retries")
	workers := flag.Bool("workers", true, "include jobs through worker processes (builds cmd/promptkit)")
	scen := flag.String("scenarios", "steady,halved,pool", "steady (a fixed limit), halved (the limit halves after n/2 successes), pool (the client's idle pool against a provider without a limit)")
	pg := flag.String("pg", "", "PostgreSQL URL for the worker rows (a fresh schema per run, dropped afterwards); default a SQLite file")
	asJSON := flag.Bool("json", false, "print JSON instead of a markdown table")
	deadline := flag.Duration("deadline", 5*time.Minute, "upper bound on one run")
	poolN := flag.Int("pool-n", 10000, "calls per run in the pool scenario")
	poolLatency := flag.Duration("pool-latency", 0, "provider latency in the pool scenario")
	only := flag.String("only", "", "run only the configurations whose name contains this")
	flag.Parse()
	if *n <= 1 || *c <= 0 || *rate <= 1 || *runs <= 0 || *procs <= 0 || *c%*procs != 0 {
		fatal(errors.New("-n and -rate must be above 1, -c, -runs and -procs positive, and -c a multiple of -procs"))
	}
	var scenarios []scenario
	for s := range strings.SplitSeq(*scen, ",") {
		switch s {
		case "steady":
			scenarios = append(scenarios, scenario{Name: "steady"})
		case "halved":
			scenarios = append(scenarios, scenario{Name: "halved", halve: true})
		case "pool":
			scenarios = append(scenarios, scenario{Name: "pool", pool: true})
		default:
			fatal(fmt.Errorf("unknown scenario %q", s))
		}
	}

	r := float64(*rate)
	configs := []config{
		{Name: "promptkit, no limit configured, learning off (pause only, before)", run: library(engineConfig(0, off, nil))},
		{Name: "promptkit, no limit configured, provider sends no headers", run: library(engineConfig(0, nil, nil))},
		{Name: "promptkit, no limit configured, provider sends OpenAI headers", Headers: true, run: library(engineConfig(0, nil, nil))},
		{Name: fmt.Sprintf("promptkit, requests_per_second %d (today's pacing)", *rate), run: library(engineConfig(r, nil, nil))},
		{Name: fmt.Sprintf("promptkit, idle pool sized from max_active (%d)", *c), pool: true, run: library(engineConfig(0, nil, nil))},
		{Name: "promptkit, max_idle_conns 2 (the old pool)", pool: true, run: library(engineConfig(0, nil, ptr(2)))},
	}
	if *workers {
		configs = append(configs, config{
			Name: fmt.Sprintf("promptkit jobs, %d worker processes × %d slots, no limit configured", *procs, *c / *procs),
			run:  jobsRun,
		})
	}
	if *sdk {
		configs = append([]config{{Name: "openai-go v3.102.0, default retries (2)", run: library(sdkConfig)}}, configs...)
	}
	if *only != "" {
		configs = slices.DeleteFunc(configs, func(c config) bool { return !strings.Contains(c.Name, *only) })
	}

	e := env{n: *n, c: *c, rate: *rate, deadline: *deadline, pgURL: *pg, procs: *procs, slots: *c / *procs, poolN: *poolN, poolLatency: *poolLatency}
	if slices.ContainsFunc(configs, func(c config) bool { return strings.Contains(c.Name, "worker processes") }) {
		bin, cleanup, err := pkbin.Build()
		fatal(err)
		defer cleanup()
		e.bin = bin
	}

	type key struct{ cfg, scen int }
	byKey := map[key][]result{}
	for run := 1; run <= *runs; run++ {
		for si, sc := range scenarios {
			for ci, cf := range configs {
				if cf.pool != sc.pool {
					continue
				}
				res, err := runOnce(e, cf, sc)
				if err != nil {
					fatal(fmt.Errorf("%s, %s: %w", cf.Name, sc.Name, err))
				}
				res.Run = run
				byKey[key{ci, si}] = append(byKey[key{ci, si}], res)
				fmt.Fprintf(os.Stderr, "run %d/%d %-6s %-80s ok %4d  fail %4d  calls %5d  429s %5d  conns %5d  warn %3d  %6.2fs  %s\n",
					run, *runs, sc.Name, cf.Name, res.Successes, res.Failures, res.Calls, res.RateLimited, res.Conns, res.Warnings, res.WallSeconds, res.Note)
			}
		}
	}

	var sums []summary
	for si, sc := range scenarios {
		for ci, cf := range configs {
			if rs := byKey[key{ci, si}]; len(rs) > 0 {
				sums = append(sums, summarize(cf.Name, sc, rs, ideal(e, sc), e.calls(sc)))
			}
		}
	}
	if *asJSON {
		enc := json.NewEncoder(os.Stdout)
		enc.SetIndent("", "  ")
		_ = enc.Encode(map[string]any{
			"n": *n, "concurrency": *c, "rate": *rate, "runs": *runs,
			"cores": runtime.NumCPU(), "go": runtime.Version(), "summaries": sums,
		})
		return
	}
	fmt.Printf("%d calls, concurrency %d, provider limit %d req/s (Retry-After: 1); %d runs each, %d cores, %s\n",
		*n, *c, *rate, *runs, runtime.NumCPU(), runtime.Version())
	for _, sc := range scenarios {
		rows := slices.DeleteFunc(slices.Clone(sums), func(s summary) bool { return s.Scenario != sc.Name })
		if len(rows) == 0 {
			continue
		}
		if sc.pool {
			fmt.Printf("\nIdle pool: %d calls, concurrency %d, a provider without a limit, latency %v\n\n", e.poolN, e.c, e.poolLatency)
			fmt.Println("| setup | failed | calls/s min | median | max | TCP connections |")
			fmt.Println("|---|---|---|---|---|---|")
			for _, s := range rows {
				fmt.Printf("| %s | %g | %.0f | %.0f | %.0f | %g |\n",
					s.Config, s.Failures, float64(e.poolN)/s.WallMax, float64(e.poolN)/s.WallMedian, float64(e.poolN)/s.WallMin, s.Conns)
			}
			continue
		}
		fmt.Printf("\n%s: ideal %.1f s\n\n", describe(sc, *rate), ideal(e, sc))
		fmt.Println("| setup | failed | extra calls | wall time / ideal | wall s min | median | max | 429s | TCP connections |")
		fmt.Println("|---|---|---|---|---|---|---|---|---|")
		for _, s := range rows {
			fmt.Printf("| %s | %g | %.1f %% | %.2f | %.2f | %.2f | %.2f | %g | %g |\n",
				s.Config, s.Failures, s.ExtraPercent, s.WallOverIdeal, s.WallMin, s.WallMedian, s.WallMax, s.RateLimited, s.Conns)
		}
	}
	for _, s := range sums {
		for _, r := range s.Results {
			if r.FirstError != "" {
				fmt.Printf("\nfirst error, %s, %s run %d: %s", s.Config, s.Scenario, r.Run, r.FirstError)
			}
		}
	}
	fmt.Println()
}

func describe(sc scenario, rate int) string {
	if sc.halve {
		return fmt.Sprintf("Limit halved to %d req/s after half the calls succeeded", rate/2)
	}
	return fmt.Sprintf("Steady limit of %d req/s", rate)
}

// calls is how many calls a run of sc makes.
func (e env) calls(sc scenario) int {
	if sc.pool {
		return e.poolN
	}
	return e.n
}

// ideal is the time a client that never exceeds the limit, and never
// leaves it unused, would take; 0 without a limit.
func ideal(e env, sc scenario) float64 {
	switch {
	case sc.pool:
		return 0
	case !sc.halve:
		return float64(e.n) / float64(e.rate)
	}
	first := e.n / 2
	return float64(first)/float64(e.rate) + float64(e.n-first)/float64(e.rate/2)
}

func fatal(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, "goodput:", err)
		os.Exit(1)
	}
}

// runOnce starts a fresh provider, so every run begins with an unused
// window, and runs one configuration against it.
func runOnce(e env, cf config, sc scenario) (result, error) {
	e.n = e.calls(sc)
	var p *provider
	if sc.pool {
		p = newProvider(0, cf.Headers, e.poolLatency)
	} else {
		p = newProvider(e.rate, cf.Headers, 0)
	}
	defer p.Close()
	ctx, cancel := context.WithTimeout(context.Background(), e.deadline)
	defer cancel()

	// The halving watches the provider's own count of answered calls, so
	// it works the same for callers in this process and for workers.
	var watch sync.WaitGroup
	if sc.halve {
		watchCtx, stop := context.WithCancel(ctx)
		defer func() { stop(); watch.Wait() }()
		watch.Go(func() {
			t := time.NewTicker(time.Millisecond)
			defer t.Stop()
			for {
				select {
				case <-watchCtx.Done():
					return
				case <-t.C:
				}
				if p.Stats().Defaults >= e.n/2 {
					p.SetRateLimit(e.rate / 2)
					return
				}
			}
		})
	}

	out, err := cf.run(ctx, e, p)
	if err != nil {
		return result{}, err
	}
	if ctx.Err() != nil {
		return result{}, fmt.Errorf("run exceeded -deadline %v", e.deadline)
	}
	st := p.Stats()
	return result{
		Config:      cf.Name,
		Scenario:    sc.Name,
		Successes:   out.ok,
		Failures:    out.failed,
		Calls:       st.Requests,
		RateLimited: st.RateLimited,
		Conns:       int(p.conns.Load()),
		Warnings:    out.warnings,
		Note:        out.note,
		WallSeconds: out.wall.Seconds(),
		FirstError:  out.firstErr,
	}, nil
}

// library runs e.n calls from e.c goroutines in this process.
// setup's finish releases what the caller holds and returns a note for
// the progress line, such as the rate the pacer ended with.
func library(setup func(baseURL string, c int) (call caller, finish func() string, err error)) func(context.Context, env, *provider) (outcome, error) {
	return func(ctx context.Context, e env, p *provider) (outcome, error) {
		call, finish, err := setup(p.URL, e.c)
		if err != nil {
			return outcome{}, err
		}
		var next, ok, fail atomic.Int64
		var firstErr atomic.Value
		var wg sync.WaitGroup
		start := time.Now()
		for range e.c {
			wg.Go(func() {
				for {
					i := int(next.Add(1)) - 1
					if i >= e.n {
						return
					}
					if err := call(ctx, i); err != nil {
						fail.Add(1)
						firstErr.CompareAndSwap(nil, err.Error())
					} else {
						ok.Add(1)
					}
				}
			})
		}
		wg.Wait()
		out := outcome{ok: int(ok.Load()), failed: int(fail.Load()), wall: time.Since(start)}
		out.firstErr, _ = firstErr.Load().(string)
		out.note = finish()
		return out, nil
	}
}

// off is a setting turned off.
var off = ptr(false)

// engineConfig returns a promptkit configuration using the built-in HTTP
// client, as an application that configures nothing gets it. MaxActive is
// the caller concurrency c: it never binds (each of the c callers has at
// most one attempt in flight), so the rows differ in retry, pause,
// learning and pacing policy, not in permit queueing. learn nil keeps the
// default (learning on); idle nil keeps the default idle pool.
func engineConfig(rps float64, learn *bool, idle *int) func(string, int) (caller, func() string, error) {
	return func(baseURL string, c int) (caller, func() string, error) {
		b := promptkit.Backend{ID: "limited", BaseURL: baseURL, MaxActive: c, RequestsPerSecond: rps, LearnRate: learn}
		if idle != nil {
			b.MaxIdleConns = *idle
		}
		eng, err := promptkit.New(promptkit.Config{
			Backends: []promptkit.Backend{b},
			Profiles: []promptkit.Profile{{ID: "default", Backend: "limited", Model: "m"}},
		})
		if err != nil {
			return nil, nil, err
		}
		call := func(ctx context.Context, i int) error {
			res, err := eng.Run(ctx, promptkit.RunRequest{Text: fmt.Sprintf("Say hello to caller %d.", i)})
			if err == nil && res.Text == "" {
				err = errors.New("empty reply")
			}
			return err
		}
		finish := func() string {
			p := eng.Pacing()["limited"]
			return fmt.Sprintf("pacing %.1f/s (%s)", p.RequestsPerSecond, cmp.Or(p.Source, "none"))
		}
		return call, finish, nil
	}
}

// sdkConfig calls the same server through the OpenAI Go SDK with its
// default retry policy (2 retries, Retry-After honoured, no shared pause).
// Its transport keeps c idle connections: the default keeps 2, and the
// churn would fill the loopback port range with TIME_WAIT sockets.
func sdkConfig(baseURL string, c int) (caller, func() string, error) {
	tr := &http.Transport{MaxIdleConns: c, MaxIdleConnsPerHost: c, IdleConnTimeout: 30 * time.Second}
	cl := openai.NewClient(option.WithBaseURL(baseURL), option.WithAPIKey("x"), option.WithHTTPClient(&http.Client{Transport: tr}))
	return func(ctx context.Context, i int) error {
		res, err := cl.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{
			Model:    "m",
			Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage(fmt.Sprintf("Say hello to caller %d.", i))},
		})
		if err == nil && (len(res.Choices) == 0 || res.Choices[0].Message.Content == "") {
			err = errors.New("empty reply")
		}
		return err
	}, func() string { tr.CloseIdleConnections(); return "" }, nil
}

// jobsRun enqueues e.n jobs into a fresh database, starts e.procs
// `promptkit worker` processes with e.slots slots each, and waits until
// every job is terminal. The wall time runs from the workers' start, so it
// includes their startup.
func jobsRun(ctx context.Context, e env, p *provider) (outcome, error) {
	dir, err := os.MkdirTemp("", "goodput-jobs-")
	if err != nil {
		return outcome{}, err
	}
	defer os.RemoveAll(dir)
	cfgPath := filepath.Join(dir, "promptkit.yaml")
	cfg := fmt.Sprintf("backends:\n  - id: limited\n    base_url: %s\nprofiles:\n  - {id: default, backend: limited, model: m}\n", p.URL)
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o600); err != nil {
		return outcome{}, err
	}
	st, database, cleanup, err := openStore(ctx, dir, e.pgURL)
	if err != nil {
		return outcome{}, err
	}
	defer cleanup()
	for i := 0; i < e.n; i += 500 {
		batch := make([]jobs.EnqueueParams, 0, 500)
		for j := i; j < min(i+500, e.n); j++ {
			batch = append(batch, jobs.EnqueueParams{Text: fmt.Sprintf("Say hello to job %d.", j)})
		}
		if _, err := st.EnqueueBatch(ctx, batch); err != nil {
			return outcome{}, err
		}
	}

	start := time.Now()
	var procs []*workerProc
	defer func() {
		for _, w := range procs {
			w.stop()
		}
	}()
	for i := range e.procs {
		w, err := startWorker(e.bin, dir, i, cfgPath, database, e.slots)
		if err != nil {
			return outcome{}, err
		}
		procs = append(procs, w)
	}

	// Poll the store: a benchmark's measurement loop, 20 ms apart, well
	// below the run's 10 s scale.
	t := time.NewTicker(20 * time.Millisecond)
	defer t.Stop()
	for {
		m, err := st.Metrics(ctx, jobs.MetricsParams{Since: start})
		if err != nil {
			return outcome{}, err
		}
		done := 0
		for s, k := range m.Counts {
			if s.Terminal() {
				done += k
			}
		}
		if done >= e.n {
			out := outcome{ok: m.Counts[jobs.Succeeded], failed: done - m.Counts[jobs.Succeeded], wall: time.Since(start)}
			for _, w := range procs {
				w.stop()
				out.warnings += w.warnings()
			}
			procs = nil
			if out.failed > 0 {
				out.firstErr = fmt.Sprintf("%d jobs failed; error rate by kind %v", out.failed, m.ErrorRate)
			}
			return out, nil
		}
		for _, w := range procs {
			select {
			case <-w.done:
				return outcome{}, fmt.Errorf("worker %d exited early:\n%s", w.index, w.tail())
			default:
			}
		}
		select {
		case <-ctx.Done():
			return outcome{}, fmt.Errorf("jobs not terminal by the deadline: %d of %d", done, e.n)
		case <-t.C:
		}
	}
}

// openStore opens a fresh job database: a SQLite file in dir, or a fresh
// schema in PostgreSQL. It returns the store, the --database argument for
// the workers and a cleanup.
func openStore(ctx context.Context, dir, pgURL string) (jobs.Store, string, func(), error) {
	if pgURL == "" {
		path := filepath.Join(dir, "jobs.db")
		st, err := sqlitestore.Open(ctx, path, jobs.Options{})
		if err != nil {
			return nil, "", nil, err
		}
		return st, path, func() { st.Close() }, nil
	}
	var b [6]byte
	_, _ = rand.Read(b[:])
	schema := "goodput_" + hex.EncodeToString(b[:])
	conn, err := pgx.Connect(ctx, pgURL)
	if err != nil {
		return nil, "", nil, err
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "CREATE SCHEMA "+schema); err != nil {
		return nil, "", nil, err
	}
	u, err := url.Parse(pgURL)
	if err != nil {
		return nil, "", nil, err
	}
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	dsn := u.String()
	drop := func() {
		// A fresh context: the run's may have ended.
		c, err := pgx.Connect(context.Background(), pgURL)
		if err == nil {
			_, _ = c.Exec(context.Background(), "DROP SCHEMA "+schema+" CASCADE")
			_ = c.Close(context.Background())
		}
	}
	st, err := pgstore.Open(ctx, dsn, jobs.Options{})
	if err != nil {
		drop()
		return nil, "", nil, err
	}
	return st, dsn, func() { st.Close(); drop() }, nil
}

// workerProc is a running `promptkit worker`.
type workerProc struct {
	index int
	cmd   *exec.Cmd
	log   string
	done  chan struct{}
}

func startWorker(bin, dir string, index int, cfgPath, database string, slots int) (*workerProc, error) {
	w := &workerProc{index: index, log: filepath.Join(dir, "worker-"+strconv.Itoa(index)+".log"), done: make(chan struct{})}
	logf, err := os.Create(w.log)
	if err != nil {
		return nil, err
	}
	defer logf.Close()
	w.cmd = exec.Command(bin, "worker", "--config", cfgPath, "--database", database, "--workers", strconv.Itoa(slots))
	w.cmd.Stdout, w.cmd.Stderr = logf, logf
	if err := w.cmd.Start(); err != nil {
		return nil, err
	}
	// Owned by w: it ends when the process does, which stop ensures.
	go func() { _ = w.cmd.Wait(); close(w.done) }()
	return w, nil
}

// stop ends the worker with SIGTERM (SIGKILL after 20 s).
func (w *workerProc) stop() {
	_ = w.cmd.Process.Signal(os.Interrupt)
	select {
	case <-w.done:
	case <-time.After(20 * time.Second):
		_ = w.cmd.Process.Kill()
		<-w.done
	}
}

// warnings counts the worker's WARN and ERROR log lines.
func (w *workerProc) warnings() int {
	b, _ := os.ReadFile(w.log)
	return bytes.Count(b, []byte("level=WARN")) + bytes.Count(b, []byte("level=ERROR"))
}

func (w *workerProc) tail() string {
	b, _ := os.ReadFile(w.log)
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-20):], "\n")
}

func summarize(name string, sc scenario, rs []result, ideal float64, n int) summary {
	col := func(f func(result) float64) []float64 {
		out := make([]float64, len(rs))
		for i, r := range rs {
			out[i] = f(r)
		}
		slices.Sort(out)
		return out
	}
	wall := col(func(r result) float64 { return r.WallSeconds })
	calls := median(col(func(r result) float64 { return float64(r.Calls) }))
	return summary{
		Config:        name,
		Scenario:      sc.Name,
		Runs:          len(rs),
		IdealSeconds:  ideal,
		Successes:     median(col(func(r result) float64 { return float64(r.Successes) })),
		Failures:      median(col(func(r result) float64 { return float64(r.Failures) })),
		Calls:         calls,
		ExtraPercent:  100 * (calls - float64(n)) / float64(n),
		RateLimited:   median(col(func(r result) float64 { return float64(r.RateLimited) })),
		Conns:         median(col(func(r result) float64 { return float64(r.Conns) })),
		WallMin:       wall[0],
		WallMedian:    median(wall),
		WallMax:       wall[len(wall)-1],
		WallOverIdeal: median(wall) / ideal,
		Results:       rs,
	}
}

// median of sorted values; the mean of the middle two for an even count.
func median(sorted []float64) float64 {
	k := len(sorted)
	if k%2 == 1 {
		return sorted[k/2]
	}
	return (sorted[k/2-1] + sorted[k/2]) / 2
}

func ptr[T any](v T) *T { return &v }
