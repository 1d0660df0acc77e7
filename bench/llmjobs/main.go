// Command llmjobs measures LLM jobs per second: the same jobs — one chat
// completion each against a local fake provider, the answer stored with
// the job's completion — run by River (github.com/riverqueue/river
// v0.51.2) with an openai-go worker, and by promptkit's worker runtime
// (jobs/worker, the loop `promptkit serve` runs), on the same SQLite file
// settings and on PostgreSQL.
//
//	cd bench && go run ./llmjobs -runs 3
//	cd bench && go run ./llmjobs -only promptkit -w 64 -latency 50ms -cpuprofile cpu.out
//
// PostgreSQL rows need PROMPTKIT_TEST_DATABASE_URL or -pg (a loopback
// URL); every trial gets a fresh schema, dropped afterwards (also those a
// killed earlier run left behind: schemas named lj_*), and every SQLite
// trial a fresh file.
//
// The two sides:
//
//   - River: a client whose worker calls Chat.Completions.New through
//     openai-go v3 (retries disabled with option.WithMaxRetries(0), as
//     promptkit runs with TransientRetries 0: a job's retries belong to the
//     queue, and the fake never fails anyway; its transport keeps W idle
//     connections, like promptkit's client, instead of the default 2 that
//     would churn connections at W = 64), records the answer with
//     river.RecordOutput and completes the job with river.JobCompleteTx in
//     a transaction of its own (pgx.Tx on riverpgxv5, *sql.Tx on
//     riversqlite), so the answer is written in the same UPDATE, in the
//     same transaction, as the completion. MaxWorkers W; FetchCooldown 1 ms
//     (River's minimum: the 100 ms default caps a W = 8 queue near 80
//     jobs/s). SQLite: database/sql with one connection, as riversqlite
//     advises.
//   - promptkit: jobs/worker with Concurrency W (BatchSize W), the engine
//     with one backend at the fake's URL and TransientRetries 0 (as
//     bench/e2e), its Info log line per job written to io.Discard; the
//     store is jobs/sqlitestore or jobs/pgstore with its defaults.
//
// Both sides use the driver's default pool (pgxpool: max(4, cores)
// connections). The provider is a providertest server answering after
// -latency, fresh for every trial, as are the openai-go client and the
// promptkit engine, so both start with a cold connection pool.
//
// What is timed: all N jobs are enqueued first (River InsertMany,
// promptkit EnqueueBatch, batches of 500), untimed. The clock starts
// when the enqueue is complete, right before the River client's or the
// worker's Start, and stops when the last job is reported done
// in-process (River's EventKindJobCompleted subscription; the worker's
// Observe callback with OutcomeSucceeded, told after the success is
// written). jobs/s = N / that time, so it includes each side's startup.
//
// N (-n) defaults to 1500 at latency 0 and, at latency L, to enough jobs
// to last -target (2 s) at the bound W/L: at latency L each job holds a
// worker for at least L, so W/L jobs/s is the bound no queue can beat;
// the latency rows show each side's percentage of it. With -latency 0
// the rows measure the queue and client overhead.
//
// Trials are interleaved round-robin over databases, W, latency and
// systems within each run (the system order reversed every other run) so
// machine noise spreads over all of them. -cpuprofile writes a CPU
// profile of the promptkit work phases only (from Start to the last
// success), merged with `go tool pprof -proto` over the trials; the
// profile also holds the fake provider, which serves in this process.
// Every trial has a deadline (-trial-timeout), so the program ends by
// itself; everything is on loopback.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/promptkit/promptkit/bench/internal/benchkit"
	"github.com/promptkit/promptkit/providertest"
)

const (
	dbSQLite   = "sqlite"
	dbPostgres = "postgres"

	sysRiver     = "river"
	sysPromptkit = "promptkit"

	// batch is the enqueue batch size of both sides.
	batch = 500
)

// trial is one cell of the matrix in one run.
type trial struct {
	db      string
	w       int
	latency time.Duration
	system  string
	n       int
}

// result is a finished trial.
type result struct {
	trial
	run     int
	elapsed time.Duration
}

func (r result) rate() float64 { return float64(r.n) / r.elapsed.Seconds() }

type env struct {
	pgURL   string
	tmpDir  string
	timeout time.Duration
	// prof, when set, collects per-trial CPU profiles of the promptkit
	// work phases, merged at the end.
	profDir string
	profs   []string
}

func main() {
	dbs := flag.String("db", "", "databases, comma-separated: sqlite,postgres (default sqlite, plus postgres when a PostgreSQL URL is given)")
	ws := flag.String("w", "8,64", "worker concurrencies W, comma-separated")
	lats := flag.String("latency", "0,50ms", "provider latencies, comma-separated")
	only := flag.String("only", "river,promptkit", "systems, comma-separated: river, promptkit")
	runs := flag.Int("runs", 3, "runs, interleaved round-robin")
	n := flag.Int("n", 0, "jobs per trial (0: 1500 at latency 0, else enough for -target at the bound W/latency)")
	target := flag.Duration("target", 2*time.Second, "with -n 0 and a latency: the trial length at the bound W/latency")
	pgURL := flag.String("pg", os.Getenv("PROMPTKIT_TEST_DATABASE_URL"), "PostgreSQL URL (loopback; default PROMPTKIT_TEST_DATABASE_URL)")
	trialTimeout := flag.Duration("trial-timeout", time.Minute, "deadline of one trial")
	cpuProfile := flag.String("cpuprofile", "", "write a CPU profile of the promptkit work phases to this file")
	flag.Parse()

	var dbList []string
	if *dbs == "" {
		dbList = []string{dbSQLite}
		if *pgURL != "" {
			dbList = append(dbList, dbPostgres)
		}
	} else {
		dbList = benchkit.SplitList(*dbs)
	}
	for _, d := range dbList {
		if d != dbSQLite && d != dbPostgres {
			fatal(fmt.Errorf("unknown database %q in -db", d))
		}
	}
	if slices.Contains(dbList, dbPostgres) {
		if *pgURL == "" {
			fatal(errors.New("-db postgres needs -pg or PROMPTKIT_TEST_DATABASE_URL"))
		}
		if !benchkit.Loopback(*pgURL) {
			fatal(fmt.Errorf("-pg must point at loopback"))
		}
	}
	var wList []int
	for _, s := range benchkit.SplitList(*ws) {
		v, err := strconv.Atoi(s)
		if err != nil || v < 1 {
			fatal(fmt.Errorf("bad -w %q", *ws))
		}
		wList = append(wList, v)
	}
	var latList []time.Duration
	for _, s := range benchkit.SplitList(*lats) {
		if s == "0" {
			latList = append(latList, 0)
			continue
		}
		d, err := time.ParseDuration(s)
		if err != nil || d < 0 {
			fatal(fmt.Errorf("bad -latency %q", *lats))
		}
		latList = append(latList, d)
	}
	var systems []string
	for _, s := range benchkit.SplitList(*only) {
		s = strings.ToLower(s)
		if s != sysRiver && s != sysPromptkit {
			fatal(fmt.Errorf("unknown system %q in -only", s))
		}
		systems = append(systems, s)
	}
	if len(dbList) == 0 || len(wList) == 0 || len(latList) == 0 || len(systems) == 0 || *runs < 1 {
		fatal(errors.New("nothing to run"))
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	tmp, err := os.MkdirTemp("", "llmjobs-")
	fatal(err)
	defer os.RemoveAll(tmp)
	atExit = append(atExit, func() { os.RemoveAll(tmp) })
	e := &env{pgURL: *pgURL, tmpDir: tmp, timeout: *trialTimeout}
	if *cpuProfile != "" {
		e.profDir = filepath.Join(tmp, "prof")
		fatal(os.Mkdir(e.profDir, 0o700))
	}
	if slices.Contains(dbList, dbPostgres) {
		fatal(benchkit.DropLeftovers(ctx, e.pgURL, "lj_river", "lj_pk"))
	}

	jobsFor := func(w int, lat time.Duration) int {
		if *n > 0 {
			return *n
		}
		if lat == 0 {
			return 1500
		}
		return int(math.Ceil(target.Seconds() * float64(w) / lat.Seconds()))
	}

	fmt.Fprintf(os.Stderr, "llmjobs: %d cores, %s, %d runs\n", runtime.NumCPU(), runtime.Version(), *runs)
	var results []result
	for run := 1; run <= *runs; run++ {
		order := slices.Clone(systems)
		if run%2 == 0 {
			slices.Reverse(order)
		}
		for _, d := range dbList {
			for _, w := range wList {
				for _, lat := range latList {
					for _, s := range order {
						t := trial{db: d, w: w, latency: lat, system: s, n: jobsFor(w, lat)}
						el, err := e.runTrial(ctx, t)
						if err != nil {
							fatal(fmt.Errorf("run %d, %s on %s, W %d, latency %v: %w", run, s, d, w, lat, err))
						}
						r := result{trial: t, run: run, elapsed: el}
						results = append(results, r)
						fmt.Fprintf(os.Stderr, "run %d %-9s %-8s W %2d latency %-5v %5d jobs %6.2fs %7.0f jobs/s\n",
							run, s, d, w, lat, t.n, el.Seconds(), r.rate())
					}
				}
			}
		}
	}
	if *cpuProfile != "" {
		fatal(mergeProfiles(*cpuProfile, e.profs))
		fmt.Fprintf(os.Stderr, "llmjobs: CPU profile of %d promptkit work phases in %s\n", len(e.profs), *cpuProfile)
	}
	printReport(results, dbList, wList, latList, *runs)
}

// runTrial runs one trial under its deadline and returns the timed span.
func (e *env) runTrial(ctx context.Context, t trial) (time.Duration, error) {
	ctx, cancel := context.WithTimeout(ctx, e.timeout)
	defer cancel()
	srv := providertest.NewServer(providertest.WithLatency(t.latency), providertest.WithMaxRecorded(1))
	defer srv.Close()
	runtime.GC()
	var el time.Duration
	var err error
	switch t.system {
	case sysRiver:
		el, err = e.runRiver(ctx, t, srv.URL)
	case sysPromptkit:
		el, err = e.runPromptkit(ctx, t, srv.URL)
	}
	if err == nil {
		if st := srv.Stats(); st.Requests != t.n {
			err = fmt.Errorf("the provider saw %d requests for %d jobs", st.Requests, t.n)
		}
	}
	return el, err
}

// startProfile starts a CPU profile of one promptkit work phase when
// -cpuprofile is set; the returned function stops it.
func (e *env) startProfile() (func(), error) {
	if e.profDir == "" {
		return func() {}, nil
	}
	path := filepath.Join(e.profDir, fmt.Sprintf("pk-%03d.pprof", len(e.profs)))
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, err
	}
	e.profs = append(e.profs, path)
	return func() { pprof.StopCPUProfile(); f.Close() }, nil
}

// mergeProfiles writes the merge of the per-trial profiles to out.
func mergeProfiles(out string, profs []string) error {
	if len(profs) == 0 {
		return errors.New("-cpuprofile: no promptkit trial ran")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	args := append([]string{"tool", "pprof", "-proto", "-output", out}, profs...)
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Stderr = os.Stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("go tool pprof -proto: %w", err)
	}
	return nil
}

// newSQLiteFile names a fresh database file in a directory of its own;
// remove deletes the directory with the -wal and -shm files.
func (e *env) newSQLiteFile(prefix string) (string, func(), error) {
	dir, err := os.MkdirTemp(e.tmpDir, prefix+"-")
	if err != nil {
		return "", nil, err
	}
	return filepath.Join(dir, "jobs.db"), func() { os.RemoveAll(dir) }, nil
}

// depVersion is the version of module path in this binary's build info.
func depVersion(path string) string {
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, d := range bi.Deps {
			if d.Path == path {
				return d.Version
			}
		}
	}
	return "?"
}

// summary is min, median and max of sorted rates.
type summary struct{ min, med, max float64 }

func summarize(xs []float64) (summary, bool) {
	if len(xs) == 0 {
		return summary{}, false
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	med := s[len(s)/2]
	if len(s)%2 == 0 {
		med = (s[len(s)/2-1] + s[len(s)/2]) / 2
	}
	return summary{s[0], med, s[len(s)-1]}, true
}

func printReport(results []result, dbs []string, ws []int, lats []time.Duration, runs int) {
	fmt.Printf("%s UTC, %d cores, %s, River %s, openai-go %s; %d runs per row, interleaved; jobs/s = N / (enqueue complete → last job done)\n\n",
		time.Now().UTC().Format("2006-01-02 15:04"), runtime.NumCPU(), runtime.Version(),
		depVersion("github.com/riverqueue/river"), depVersion("github.com/openai/openai-go/v3"), runs)
	fmt.Println("River: MaxWorkers W, FetchCooldown 1 ms, openai-go with retries off (WithMaxRetries(0)), answer via RecordOutput + JobCompleteTx in the worker's own transaction. promptkit: jobs/worker Concurrency W, engine TransientRetries 0. Both: default pools; a fresh database, provider and client per trial.")
	fmt.Println()
	fmt.Println("| database | W | latency | N | River jobs/s min | median | max | promptkit jobs/s min | median | max | promptkit / River (medians) | bound W/latency | River % of bound | promptkit % of bound |")
	fmt.Println("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
	dash := "–"
	for _, d := range dbs {
		for _, w := range ws {
			for _, lat := range lats {
				rates := map[string][]float64{}
				n := 0
				for _, r := range results {
					if r.db == d && r.w == w && r.latency == lat {
						rates[r.system] = append(rates[r.system], r.rate())
						n = r.n
					}
				}
				cells := func(s summary, ok bool) string {
					if !ok {
						return dash + " | " + dash + " | " + dash
					}
					return fmt.Sprintf("%.0f | %.0f | %.0f", s.min, s.med, s.max)
				}
				rv, rok := summarize(rates[sysRiver])
				pk, pok := summarize(rates[sysPromptkit])
				ratio := dash
				if rok && pok {
					ratio = fmt.Sprintf("%.2f", pk.med/rv.med)
				}
				bound, rpct, ppct := dash, dash, dash
				if lat > 0 {
					b := float64(w) / lat.Seconds()
					bound = fmt.Sprintf("%.0f", b)
					if rok {
						rpct = fmt.Sprintf("%.0f %%", 100*rv.med/b)
					}
					if pok {
						ppct = fmt.Sprintf("%.0f %%", 100*pk.med/b)
					}
				}
				fmt.Printf("| %s | %d | %v | %d | %s | %s | %s | %s | %s | %s |\n",
					d, w, latString(lat), n, cells(rv, rok), cells(pk, pok), ratio, bound, rpct, ppct)
			}
		}
	}
}

func latString(d time.Duration) string {
	if d == 0 {
		return "0"
	}
	return d.String()
}

// atExit holds what fatal removes before exiting (os.Exit skips
// deferred calls): the temporary directory.
var atExit []func()

func fatal(err error) {
	if err == nil {
		return
	}
	if errors.Is(err, context.Canceled) {
		fmt.Fprintln(os.Stderr, "llmjobs: interrupted")
	} else {
		fmt.Fprintln(os.Stderr, "llmjobs:", err)
	}
	for i := len(atExit) - 1; i >= 0; i-- {
		atExit[i]()
	}
	os.Exit(1)
}

// searchPath is benchkit.WithSearchPath, fatal on a URL that does not
// parse.
func searchPath(raw, schema string) string {
	u, err := benchkit.WithSearchPath(raw, schema)
	if err != nil {
		fatal(err)
	}
	return u
}

// dropLogged runs a schema's drop, reporting a failure: the run goes on.
func dropLogged(drop func() error) {
	if err := drop(); err != nil {
		fmt.Fprintln(os.Stderr, "llmjobs: drop schema:", err)
	}
}
