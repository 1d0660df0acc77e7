// Command scaleout measures whether the cost of a job stays flat as
// promptkit scales out over processes on one PostgreSQL: 1, 2 and 4
// processes (`promptkit serve`, plus `promptkit worker` processes), the
// same total number of slots split evenly between them, against a local
// fake provider (providertest) answering after -latency.
//
// Each trial gets a fresh schema in its own database (-database, created
// when missing, so that the database's commit counter counts this program
// alone: other users of the URL's database, a test suite for one, would
// otherwise add theirs). The processes start and report ready first; then
// the trial's clock starts and the program enqueues -n jobs straight into
// the store (jobs.Store.EnqueueBatch, 500 per transaction: the jobs are
// pre-enqueued, not submitted over HTTP, so what is measured is the queue
// and the workers, not the HTTP API), and waits until every job is
// terminal. Per trial:
//
//   - wall time, from the first enqueue to the last job terminal, and jobs/s;
//   - the CPU of every promptkit process (user+system, /proc/<pid>/stat,
//     ready → last job terminal), per job;
//   - the CPU of the PostgreSQL backends serving the trial, per job: the
//     processes' URL carries application_name=<trial schema>, and every
//     100 ms the program lists pg_stat_activity's backends with that name
//     (and autovacuum workers in the trial's database) and reads their
//     /proc/<pid>/stat; a backend's CPU counts from the trial's start, or
//     from its own start when it connected later. The enqueueing
//     connections carry the name too (enqueueing is part of a job's cost);
//     the program's own monitoring connections do not. Not counted: the
//     WAL writer, checkpointer and background writer, which serve every
//     database of the cluster;
//   - commits per job: pg_stat_database.xact_commit of the trial's
//     database after − before, read once every trial process has exited
//     (a backend reports its counters at exit), less the program's own
//     polling queries. It includes the processes' shutdown (a few commits
//     each) and the enqueue (one commit per 500 jobs).
//
// Before the clock starts, the ready processes sit idle for -idle, and
// their CPU (promptkit's and the backends') in that window is reported
// too: the cost of idle claim polls, LISTEN and the reclaim loop.
//
// The process counts are interleaved over -runs rounds; it prints min /
// median / max per count and the median CPU per job against the first
// count's (N = 1). With -per-process every process gets -slots slots
// instead of a share of them, which tells the cost of more processes
// from the cost of fewer slots per process.
//
//	cd bench && PROMPTKIT_TEST_DATABASE_URL=postgres://postgres@127.0.0.1:5432/test?sslmode=disable \
//	  go run ./scaleout -n 6000 -runs 5
//	cd bench && go run ./scaleout -n 6000 -runs 3 -per-process
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/promptkit/promptkit/bench/internal/benchkit"
	"github.com/promptkit/promptkit/bench/internal/pkbin"
	"github.com/promptkit/promptkit/jobs"
	"github.com/promptkit/promptkit/jobs/pgstore"
	"github.com/promptkit/promptkit/providertest"
)

func main() {
	n := flag.Int("n", 6000, "jobs per trial")
	procs := flag.String("procs", "1,2,4", "process counts: serve plus N-1 worker processes")
	slots := flag.Int("slots", 64, "slots in all, split evenly between the processes (serve --workers, worker --workers)")
	perProcess := flag.Bool("per-process", false, "-slots is each process's, not the total")
	idle := flag.Duration("idle", 2*time.Second, "idle time before each trial's start, the processes ready and the queue empty; its CPU is reported (and lets their startup's statistics reach pg_stat_database)")
	latency := flag.Duration("latency", 50*time.Millisecond, "the fake provider's latency")
	runs := flag.Int("runs", 3, "rounds; each round runs every process count once")
	pg := flag.String("pg", os.Getenv("PROMPTKIT_TEST_DATABASE_URL"), "PostgreSQL URL (on this machine: its backends' CPU is read from /proc)")
	database := flag.String("database", "promptkit_scaleout", "database for the trials, created when missing (empty: the URL's own, whose commit counter then counts its other users too)")
	bin := flag.String("bin", "", "a promptkit binary to run (default: build cmd/promptkit of this tree)")
	keep := flag.Bool("keep", false, "keep the processes' logs")
	flag.Parse()

	if *pg == "" {
		fatal(errors.New("needs -pg or PROMPTKIT_TEST_DATABASE_URL"))
	}
	if !benchkit.Loopback(*pg) {
		fatal(errors.New("-pg must be a database on this machine: its backends' CPU is read from /proc"))
	}
	var ns []int
	for _, s := range benchkit.SplitList(*procs) {
		k, err := strconv.Atoi(s)
		if err != nil || k < 1 || k > *slots {
			fatal(fmt.Errorf("-procs %q: want counts from 1 to -slots", *procs))
		}
		ns = append(ns, k)
	}
	ctx := context.Background()

	// The monitoring connection stays on the URL's database: its own
	// queries commit there, not in the trials' database.
	mon, err := pgx.Connect(ctx, *pg)
	fatal(err)
	defer mon.Close(ctx)
	trialURL := *pg
	dbName := ""
	fatal(mon.QueryRow(ctx, "SELECT current_database()").Scan(&dbName))
	if *database != "" && *database != dbName {
		var exists bool
		fatal(mon.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)", *database).Scan(&exists))
		if !exists {
			_, err := mon.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{*database}.Sanitize())
			fatal(err)
		}
		trialURL, err = withDatabase(*pg, *database)
		fatal(err)
		dbName = *database
	}
	fatal(benchkit.DropLeftovers(ctx, trialURL, "scaleout"))

	if *bin == "" {
		b, cleanup, err := pkbin.Build()
		fatal(err)
		defer cleanup()
		*bin = b
	}
	srv := providertest.NewServer(providertest.WithMaxRecorded(1), providertest.WithLatency(*latency))
	defer srv.Close()
	dir, err := os.MkdirTemp("", "scaleout-")
	fatal(err)
	if *keep {
		fmt.Println("logs in", dir)
	} else {
		defer os.RemoveAll(dir)
	}
	cfgPath := filepath.Join(dir, "promptkit.yaml")
	fatal(os.WriteFile(cfgPath, []byte(fmt.Sprintf(
		"backends:\n  - id: fake\n    base_url: %s\nprofiles:\n  - {id: default, backend: fake, model: m}\n", srv.URL)), 0o600))

	var pgVersion string
	fatal(mon.QueryRow(ctx, "SHOW server_version").Scan(&pgVersion))
	fmt.Printf("scaleout: %s, %d cores, %s, PostgreSQL %s (database %s), %d jobs per trial, %d slots in all, provider latency %v, load average %s\n",
		time.Now().UTC().Format("2006-01-02 15:04 MST"), runtime.NumCPU(), runtime.Version(), pgVersion, dbName, *n, *slots, *latency, loadavg())

	results := map[int][]result{}
	for round := range *runs {
		for _, k := range ns {
			per := *slots / k
			if *perProcess {
				per = *slots
			}
			t := &trial{idle: *idle, bin: *bin, dir: dir, cfg: cfgPath, baseURL: trialURL, db: dbName, mon: mon, prov: srv, procs: k, slots: per, n: *n}
			r, err := t.run(ctx)
			if err != nil {
				fatal(fmt.Errorf("round %d, %d processes: %w", round+1, k, err))
			}
			fmt.Printf("round %d  %d proc × %2d slots  %6.2f s  %6.0f jobs/s  promptkit %.3f ms/job  postgres %.3f ms/job (%d backends)  %.2f commits/job  idle CPU promptkit %.1f%% postgres %.1f%%  failed %d  warnings %d  load %s\n",
				round+1, k, per, r.wall.Seconds(), r.jobsPerSec(), 1e3*r.pkCPU/float64(r.n), 1e3*r.pgCPU/float64(r.n), r.backends,
				float64(r.commits)/float64(r.n), 100*r.idlePK, 100*r.idlePG, r.failed, r.warnings, loadavg())
			results[k] = append(results[k], r)
		}
	}
	report(ns, results)
}

type result struct {
	n, failed, warnings, backends int
	wall                          time.Duration
	pkCPU, pgCPU                  float64 // seconds
	idlePK, idlePG                float64 // CPU seconds per second while idle
	commits                       int64
}

func (r result) jobsPerSec() float64 { return float64(r.n) / r.wall.Seconds() }

type trial struct {
	idle                       time.Duration
	bin, dir, cfg, baseURL, db string
	mon                        *pgx.Conn
	prov                       *providertest.Server
	procs, slots, n            int
}

func (t *trial) run(ctx context.Context) (result, error) {
	schema, drop, err := benchkit.NewSchema(ctx, t.baseURL, "scaleout")
	if err != nil {
		return result{}, err
	}
	defer drop()
	dsn, err := benchkit.WithSearchPath(t.baseURL, schema)
	if err != nil {
		return result{}, err
	}
	// The promptkit processes' and the enqueuer's backends carry the
	// schema's name; the poller's does not.
	pollURL := dsn
	if dsn, err = withParam(dsn, "application_name", schema); err != nil {
		return result{}, err
	}
	if _, err := pgstore.Migrate(ctx, dsn); err != nil {
		return result{}, err
	}

	// The processes: serve first, then the workers, each ready before the
	// next starts.
	var cpus []func() float64
	var stops []func()
	var warns []func() int
	defer func() {
		for _, s := range stops {
			s()
		}
	}()
	s, err := pkbin.StartServe(t.bin, filepath.Join(t.dir, schema+"-serve.log"), 60*time.Second,
		"--config", t.cfg, "--database", dsn, "--addr", "127.0.0.1:0", "--workers", strconv.Itoa(t.slots))
	if err != nil {
		return result{}, err
	}
	cpus, warns = append(cpus, s.CPU), append(warns, s.Warnings)
	stops = append(stops, func() { s.Stop(30 * time.Second) })
	for i := 1; i < t.procs; i++ {
		w, err := pkbin.StartWorker(t.bin, filepath.Join(t.dir, fmt.Sprintf("%s-worker-%d.log", schema, i)), 60*time.Second,
			"--config", t.cfg, "--database", dsn, "--workers", strconv.Itoa(t.slots))
		if err != nil {
			return result{}, err
		}
		cpus, warns = append(cpus, w.CPU), append(warns, w.Warnings)
		stops = append(stops, func() { w.Stop(30 * time.Second) })
	}
	st, err := pgstore.Open(ctx, dsn, jobs.Options{})
	if err != nil {
		return result{}, err
	}
	stClosed := false
	defer func() {
		if !stClosed {
			st.Close()
		}
	}()
	poll, err := pgx.Connect(ctx, pollURL)
	if err != nil {
		return result{}, err
	}
	pollClosed := false
	defer func() {
		if !pollClosed {
			poll.Close(context.Background())
		}
	}()
	pollQueries := 0
	terminal := func() (int, int, error) {
		pollQueries++
		var done, ok int
		err := poll.QueryRow(ctx, `SELECT count(*) FILTER (WHERE state NOT IN ('queued', 'running')), count(*) FILTER (WHERE state = 'succeeded') FROM jobs`).Scan(&done, &ok)
		return done, ok, err
	}
	// Warm the poller's plan, then measure the idle processes, which also
	// lets their startup's statistics reach pg_stat_database (an idle
	// backend reports at most every second) before the counter is read.
	if _, _, err := terminal(); err != nil {
		return result{}, err
	}
	time.Sleep(500 * time.Millisecond)
	var r result
	{
		be := &backends{mon: t.mon, app: schema, db: t.db, cpu0: map[int]float64{}, last: map[int]float64{}}
		if err := be.sample(ctx, true); err != nil {
			return result{}, err
		}
		pk, t0 := 0.0, time.Now()
		for _, c := range cpus {
			pk -= c()
		}
		time.Sleep(t.idle)
		if err := be.sample(ctx, false); err != nil {
			return result{}, err
		}
		for _, c := range cpus {
			pk += c()
		}
		pg, _ := be.total()
		r.idlePK, r.idlePG = max(0, pk)/time.Since(t0).Seconds(), max(0, pg)/time.Since(t0).Seconds()
	}

	be := &backends{mon: t.mon, app: schema, db: t.db, cpu0: map[int]float64{}, last: map[int]float64{}}
	if err := be.sample(ctx, true); err != nil {
		return result{}, err
	}
	commits0, err := t.commits(ctx)
	if err != nil {
		return result{}, err
	}
	pollQueries = 0
	pk0 := make([]float64, len(cpus))
	for i, c := range cpus {
		pk0[i] = c()
	}

	start := time.Now()
	for i := 0; i < t.n; i += 500 {
		batch := make([]jobs.EnqueueParams, 0, 500)
		for j := i; j < min(i+500, t.n); j++ {
			batch = append(batch, jobs.EnqueueParams{Text: fmt.Sprintf("Say hello to job %d.", j)})
		}
		if _, err := st.EnqueueBatch(ctx, batch); err != nil {
			return result{}, err
		}
		if err := be.sample(ctx, false); err != nil {
			return result{}, err
		}
	}
	// Sample the backends every 100 ms; ask the jobs table only once the
	// provider has answered every job (its count costs the database
	// nothing), then every 20 ms.
	deadline := time.Now().Add(10 * time.Minute)
	for {
		if err := be.sample(ctx, false); err != nil {
			return result{}, err
		}
		if time.Now().After(deadline) {
			return result{}, errors.New("jobs not terminal within 10 minutes")
		}
		wait := 100 * time.Millisecond
		if t.prov.Count() >= t.n {
			done, ok, err := terminal()
			if err != nil {
				return result{}, err
			}
			if done >= t.n {
				r.wall = time.Since(start)
				r.failed = done - ok
				break
			}
			wait = 20 * time.Millisecond
		}
		time.Sleep(wait)
	}
	if err := be.sample(ctx, false); err != nil {
		return result{}, err
	}
	for i, c := range cpus {
		r.pkCPU += c() - pk0[i]
	}
	r.pgCPU, r.backends = be.total()
	r.n = t.n

	// Commits: every trial backend gone (a backend reports its counters
	// when it exits), then the counter again.
	for _, s := range stops {
		s()
	}
	stops = nil
	for _, w := range warns {
		r.warnings += w()
	}
	st.Close()
	stClosed = true
	poll.Close(ctx)
	pollClosed = true
	if err := be.waitGone(ctx, 10*time.Second); err != nil {
		return result{}, err
	}
	commits1, err := t.commits(ctx)
	if err != nil {
		return result{}, err
	}
	r.commits = commits1 - commits0 - int64(pollQueries)
	return r, nil
}

func (t *trial) commits(ctx context.Context) (int64, error) {
	// A fresh snapshot of the statistics, not the one this transaction
	// (the monitoring connection's) may have cached.
	if _, err := t.mon.Exec(ctx, "SELECT pg_stat_clear_snapshot()"); err != nil {
		return 0, err
	}
	var c int64
	err := t.mon.QueryRow(ctx, "SELECT xact_commit FROM pg_stat_database WHERE datname = $1", t.db).Scan(&c)
	return c, err
}

// backends follows the CPU of the PostgreSQL backends serving a trial.
type backends struct {
	mon        *pgx.Conn
	app, db    string
	cpu0, last map[int]float64 // per pid: CPU when first seen in the trial (0: connected since) and when last read
}

// sample lists the trial's backends and reads their CPU; first: the
// trial's start, whose CPU so far is not the trial's.
func (b *backends) sample(ctx context.Context, first bool) error {
	rows, err := b.mon.Query(ctx, `SELECT pid FROM pg_stat_activity
		WHERE application_name = $1 OR (backend_type = 'autovacuum worker' AND datname = $2)`, b.app, b.db)
	if err != nil {
		return err
	}
	pids, err := pgx.CollectRows(rows, pgx.RowTo[int32])
	if err != nil {
		return err
	}
	for _, p := range pids {
		pid := int(p)
		c := pkbin.ProcCPU(pid)
		if c == 0 {
			continue // gone since the listing
		}
		if _, ok := b.cpu0[pid]; !ok {
			if first {
				b.cpu0[pid] = c
			} else {
				b.cpu0[pid] = 0
			}
		}
		b.last[pid] = c
	}
	return nil
}

func (b *backends) total() (cpu float64, n int) {
	for pid, c := range b.last {
		cpu += c - b.cpu0[pid]
	}
	return cpu, len(b.last)
}

func (b *backends) waitGone(ctx context.Context, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		var k int
		if err := b.mon.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE application_name = $1`, b.app).Scan(&k); err != nil {
			return err
		}
		if k == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%d backends of the trial still connected after %v", k, timeout)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func report(ns []int, results map[int][]result) {
	type stat struct{ min, med, max float64 }
	of := func(rs []result, f func(result) float64) stat {
		v := make([]float64, len(rs))
		for i, r := range rs {
			v[i] = f(r)
		}
		slices.Sort(v)
		k := len(v)
		med := v[k/2]
		if k%2 == 0 {
			med = (v[k/2-1] + v[k/2]) / 2
		}
		return stat{v[0], med, v[k-1]}
	}
	f3 := func(s stat, format string) string {
		return fmt.Sprintf(format+" / "+format+" / "+format, s.min, s.med, s.max)
	}
	perJob := func(sel func(result) float64) func(result) float64 {
		return func(r result) float64 { return 1e3 * sel(r) / float64(r.n) }
	}
	pk := perJob(func(r result) float64 { return r.pkCPU })
	pgc := perJob(func(r result) float64 { return r.pgCPU })
	tot := perJob(func(r result) float64 { return r.pkCPU + r.pgCPU })
	base := results[ns[0]]
	fmt.Printf("\nmin / median / max over %d rounds; CPU in ms per job; ratio: median CPU per job against %d process(es)\n\n", len(base), ns[0])
	fmt.Println("| processes | wall s | jobs/s | promptkit CPU/job | PostgreSQL CPU/job | total CPU/job | commits/job | ratio promptkit | PostgreSQL | total | idle CPU, % of a core: promptkit + PostgreSQL |")
	fmt.Println("|---|---|---|---|---|---|---|---|---|---|---|")
	for _, k := range ns {
		rs := results[k]
		fmt.Printf("| %d | %s | %s | %s | %s | %s | %s | %.2f× | %.2f× | %.2f× | %.1f + %.1f |\n", k,
			f3(of(rs, func(r result) float64 { return r.wall.Seconds() }), "%.2f"),
			f3(of(rs, result.jobsPerSec), "%.0f"),
			f3(of(rs, pk), "%.3f"), f3(of(rs, pgc), "%.3f"), f3(of(rs, tot), "%.3f"),
			f3(of(rs, func(r result) float64 { return float64(r.commits) / float64(r.n) }), "%.2f"),
			of(rs, pk).med/of(base, pk).med, of(rs, pgc).med/of(base, pgc).med, of(rs, tot).med/of(base, tot).med,
			of(rs, func(r result) float64 { return 100 * r.idlePK }).med, of(rs, func(r result) float64 { return 100 * r.idlePG }).med)
	}
	fmt.Printf("\nload average at the end: %s\n", loadavg())
}

// withDatabase returns the URL raw naming database db instead.
func withDatabase(raw, db string) (string, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return "", err
	}
	u.Path, u.RawPath = "/"+db, ""
	return u.String(), nil
}

// withParam returns the URL raw with the query parameter key set.
func withParam(raw, key, value string) (string, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return "", err
	}
	q := u.Query()
	q.Set(key, value)
	u.RawQuery = q.Encode()
	return u.String(), nil
}

func loadavg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}

func fatal(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, "scaleout:", err)
		os.Exit(1)
	}
}
