// Command queuecmp puts promptkit's job store beside River
// (github.com/riverqueue/river v0.51.2) on the same PostgreSQL and on the
// same SQLite file settings, with the same trivial no-op work:
//
//   - bulk: insert N jobs in batches (River InsertMany, our EnqueueBatch),
//     then work them off with each worker count, timing both phases;
//   - steady state: P producers insert one job per transaction for a
//     fixed time while workers run; insert latency and insert → worker
//     start latency. On PostgreSQL it runs twice (-steady-cross): once
//     with producers and workers on one handle, once on two handles, each
//     with its own pool and LISTEN connection (River: an insert-only
//     client and a working one), as in two processes, where a job's
//     wake-up reaches the workers only through NOTIFY.
//
// Our store runs both twice: N independent claimers ("promptkit"), and
// one claimer feeding N workers ("promptkit-1claimer", the shape of
// jobs/worker and River's producer).
//
// Every trial gets a fresh PostgreSQL schema or a fresh SQLite file, and
// the systems, databases and worker counts are interleaved round-robin
// within each run so machine noise spreads over all of them.
//
//	cd bench && go run ./queuecmp -runs 3             # bulk + steady state
//	cd bench && go run ./queuecmp -runs 3 -skip-bulk  # steady state only
//
// Our side has no engine and no HTTP: N goroutines each loop Claim(Limit)
// → Succeed for every claimed job. River runs its own client with
// MaxWorkers N and FetchCooldown lowered to 1 ms (its minimum; the
// default is 100 ms). Everything is on loopback, every trial has a
// deadline, and schemas and files are removed afterwards (also those a
// killed earlier run left behind: schemas named qc_*).
package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"time"

	_ "modernc.org/sqlite"

	"github.com/promptkit/promptkit/bench/internal/benchkit"
)

const (
	dbPostgres = "postgres"
	dbSQLite   = "sqlite"
)

// system is one queue implementation.
type system interface {
	Name() string
	// Open makes a fresh, empty, migrated queue on db.
	Open(ctx context.Context, e *env, db string) (instance, error)
}

// instance is one fresh queue; Close removes its schema or file.
type instance interface {
	// Describe names the connection setup, for the report.
	Describe() string
	// Insert enqueues n no-op jobs in batches of batch.
	Insert(ctx context.Context, n, batch int) error
	// Work runs workers until n jobs have succeeded.
	Work(ctx context.Context, n, workers int) error
	Steady(ctx context.Context, p steadyParams) (steadyResult, error)
	Close() error
}

// env holds what every trial shares.
type env struct {
	pgURL  string
	tmpDir string
	opts   options
}

type options struct {
	Runs       int
	N          int
	Batch      int
	Workers    []int
	ClaimLimit int
	DBs        []string
	Systems    []string
	Steady     time.Duration
	Producers  int
	SteadyWork int
	Trial      time.Duration
	// SteadyCross adds, on PostgreSQL, steady-state trials whose producers
	// and workers use separate store handles (steadyParams.Cross).
	SteadyCross bool
}

func main() {
	var o options
	pgURL := flag.String("pg", cmp.Or(os.Getenv("PROMPTKIT_TEST_DATABASE_URL"), "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"), "PostgreSQL URL (loopback)")
	flag.IntVar(&o.Runs, "runs", 3, "runs, interleaved round-robin")
	flag.IntVar(&o.N, "n", 20000, "jobs per bulk trial")
	flag.IntVar(&o.Batch, "batch", 1000, "insert batch size")
	workers := flag.String("workers", "10,100", "worker counts for the bulk work-off")
	flag.IntVar(&o.ClaimLimit, "claim-limit", 10, "promptkit: Claim Limit per worker loop")
	dbs := flag.String("db", "postgres,sqlite", "databases")
	systems := flag.String("only", "River,promptkit,promptkit-1claimer", "systems (promptkit-1claimer: one claimer feeding the workers, the shape of jobs/worker)")
	flag.DurationVar(&o.Steady, "steady", 10*time.Second, "steady-state duration per trial (0: skip)")
	flag.IntVar(&o.Producers, "producers", 8, "steady-state producers")
	flag.IntVar(&o.SteadyWork, "steady-workers", 100, "steady-state workers")
	flag.BoolVar(&o.SteadyCross, "steady-cross", true, "PostgreSQL: also run the steady state with producers and workers on separate store handles (pools, LISTEN connections), as across processes")
	flag.DurationVar(&o.Trial, "trial-timeout", 3*time.Minute, "deadline of one trial")
	skipBulk := flag.Bool("skip-bulk", false, "steady state only")
	jsonOut := flag.Bool("json", false, "print results as JSON")
	cpuProfile := flag.String("cpuprofile", "", "write a CPU profile of the whole program")
	flag.Parse()
	for _, w := range strings.Split(*workers, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(w))
		if err != nil || n < 1 {
			fatal(fmt.Errorf("bad -workers %q", *workers))
		}
		o.Workers = append(o.Workers, n)
	}
	o.DBs = benchkit.SplitList(*dbs)
	o.Systems = benchkit.SplitList(*systems)
	if *skipBulk {
		o.Workers = nil
	}

	if !benchkit.Loopback(*pgURL) && slices.Contains(o.DBs, dbPostgres) {
		fatal(fmt.Errorf("-pg must point at loopback: %s", *pgURL))
	}
	if err := run(o, *pgURL, *jsonOut, *cpuProfile); err != nil {
		fatal(err)
	}
}

func run(o options, pgURL string, jsonOut bool, cpuProfile string) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	tmp, err := os.MkdirTemp("", "queuecmp-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	e := &env{pgURL: pgURL, tmpDir: tmp, opts: o}
	if slices.Contains(o.DBs, dbPostgres) {
		if err := benchkit.DropLeftovers(ctx, e.pgURL, "qc_river", "qc_pk"); err != nil {
			return fmt.Errorf("PostgreSQL: %w", err)
		}
	}
	if cpuProfile != "" {
		f, err := os.Create(cpuProfile)
		if err != nil {
			return err
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer func() { pprof.StopCPUProfile(); f.Close() }()
	}

	var all []system
	for _, s := range []system{riverSystem{}, promptkitSystem{}, promptkitSystem{dispatch: true}} {
		if slices.ContainsFunc(o.Systems, func(n string) bool { return strings.EqualFold(n, s.Name()) }) {
			all = append(all, s)
		}
	}
	rep := report{Date: time.Now().Format("2006-01-02"), Cores: runtime.NumCPU(), GoVersion: runtime.Version(), Options: o, Setups: map[string]string{}}
	fmt.Fprintf(os.Stderr, "queuecmp: %d cores, %s, %d runs\n", rep.Cores, rep.GoVersion, o.Runs)
	for run := 1; run <= o.Runs; run++ {
		order := slices.Clone(all)
		if run%2 == 0 {
			slices.Reverse(order) // alternate who goes first
		}
		for _, db := range o.DBs {
			for _, w := range o.Workers {
				for _, s := range order {
					t, err := bulkTrial(ctx, e, s, db, w, run, rep.Setups)
					if err != nil {
						return fmt.Errorf("run %d, %s on %s, %d workers: %w", run, s.Name(), db, w, err)
					}
					fmt.Fprintf(os.Stderr, "run %d %-9s %-8s workers %3d: insert %8.0f jobs/s  work %8.0f jobs/s\n", run, s.Name(), db, w, t.InsertJPS, t.WorkJPS)
					rep.Bulk = append(rep.Bulk, t)
				}
			}
			if o.Steady > 0 {
				crosses := []bool{false}
				if o.SteadyCross && db == dbPostgres {
					crosses = append(crosses, true)
				}
				for _, cross := range crosses {
					for _, s := range order {
						t, err := steadyTrial(ctx, e, s, db, run, cross)
						if err != nil {
							return fmt.Errorf("run %d, steady (cross %t), %s on %s: %w", run, cross, s.Name(), db, err)
						}
						fmt.Fprintf(os.Stderr, "run %d %-9s %-8s steady%s: %6.0f inserts/s  insert p50 %6.2f p99 %6.2f ms  start p50 %6.2f p99 %6.2f ms  not started %d\n",
							run, s.Name(), db, map[bool]string{true: " cross", false: ""}[cross], t.InsertJPS, t.InsertP50, t.InsertP99, t.StartP50, t.StartP99, t.NotStarted)
						rep.Steady = append(rep.Steady, t)
					}
				}
			}
		}
	}
	if jsonOut {
		enc := json.NewEncoder(os.Stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(rep)
	}
	rep.markdown(os.Stdout, all)
	return nil
}

type bulkResult struct {
	DB        string  `json:"db"`
	System    string  `json:"system"`
	Workers   int     `json:"workers"`
	Run       int     `json:"run"`
	InsertJPS float64 `json:"insert_jobs_per_s"`
	WorkJPS   float64 `json:"work_jobs_per_s"`
}

type steadyTrialResult struct {
	DB     string `json:"db"`
	System string `json:"system"`
	Run    int    `json:"run"`
	// Cross: producers and workers on separate handles (steadyParams.Cross).
	Cross bool `json:"cross"`
	steadyResult
}

func bulkTrial(ctx context.Context, e *env, s system, db string, workers, run int, setups map[string]string) (bulkResult, error) {
	ctx, cancel := context.WithTimeout(ctx, e.opts.Trial)
	defer cancel()
	inst, err := s.Open(ctx, e, db)
	if err != nil {
		return bulkResult{}, err
	}
	defer closeInstance(inst)
	setups[s.Name()+" on "+db] = inst.Describe()
	runtime.GC()
	t0 := time.Now()
	if err := inst.Insert(ctx, e.opts.N, e.opts.Batch); err != nil {
		return bulkResult{}, fmt.Errorf("insert: %w", err)
	}
	ins := time.Since(t0)
	runtime.GC()
	t1 := time.Now()
	if err := inst.Work(ctx, e.opts.N, workers); err != nil {
		return bulkResult{}, fmt.Errorf("work: %w", err)
	}
	work := time.Since(t1)
	return bulkResult{DB: db, System: s.Name(), Workers: workers, Run: run,
		InsertJPS: float64(e.opts.N) / ins.Seconds(), WorkJPS: float64(e.opts.N) / work.Seconds()}, nil
}

func steadyTrial(ctx context.Context, e *env, s system, db string, run int, cross bool) (steadyTrialResult, error) {
	ctx, cancel := context.WithTimeout(ctx, e.opts.Trial)
	defer cancel()
	inst, err := s.Open(ctx, e, db)
	if err != nil {
		return steadyTrialResult{}, err
	}
	defer closeInstance(inst)
	runtime.GC()
	r, err := inst.Steady(ctx, steadyParams{Producers: e.opts.Producers, Workers: e.opts.SteadyWork, Duration: e.opts.Steady,
		Drain: 30 * time.Second, Cross: cross})
	return steadyTrialResult{DB: db, System: s.Name(), Run: run, Cross: cross, steadyResult: r}, err
}

func closeInstance(inst instance) {
	if err := inst.Close(); err != nil {
		fmt.Fprintln(os.Stderr, "queuecmp: cleanup:", err)
	}
}

// newSQLiteFile names a fresh database file; remove deletes it with its
// -wal and -shm companions.
func (e *env) newSQLiteFile(prefix string) (string, func() error, error) {
	dir, err := os.MkdirTemp(e.tmpDir, prefix+"-")
	if err != nil {
		return "", nil, err
	}
	return filepath.Join(dir, "queue.db"), func() error { return os.RemoveAll(dir) }, nil
}

func fatal(err error) {
	if errors.Is(err, context.Canceled) {
		fmt.Fprintln(os.Stderr, "queuecmp: interrupted")
	} else {
		fmt.Fprintln(os.Stderr, "queuecmp:", err)
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
