// Command memory measures the resident memory of `promptkit serve`, built
// from this tree, from /proc/<pid>/status (VmRSS now, VmHWM the peak of
// the process), on SQLite and PostgreSQL, in these scenarios:
//
//   - idle: started on an empty database and left alone for -settle,
//     with --workers 0 (API only) and with --workers W;
//   - queued: -n jobs (100,000) enqueued into the database through the
//     store (EnqueueBatch, batches of 1000, org "default", user "local":
//     what local mode submits as) before serve starts with --workers 0,
//     so nothing can run them; measured after -settle, then after each of
//     GET /metrics, GET /v1/prompts and GET /v1/recent (the row is the
//     last sample, the note has each);
//   - working: serve restarted with --workers W against a zero-latency
//     providertest server in this process, working the queued jobs off;
//     VmRSS sampled every 250 ms until every job is terminal, or
//     -work-deadline (75 s, to keep the program near five minutes on 2
//     cores) passes: the row then says how many were done;
//     the row shows the final VmRSS, the peak (VmHWM) and jobs/s;
//   - streams: serve started (--workers W, idle) on a fresh, empty
//     database of the same kind, with -streams (2,000) GET /v1/events
//     connections held open (and read) by this program; the row
//     shows VmRSS with them open, the peak, the growth over the same
//     process before they opened (per stream) and serve's open files;
//   - streams with a burst: -burst (200) more jobs enqueued and run by
//     that serve while the streams stay open, so every transition goes
//     to every stream (all jobs are the local identity's); sampled every
//     250 ms, the row shows VmRSS after the burst, the peak and jobs/s.
//
// Each serve is a fresh process, so its VmHWM is the peak of that
// scenario alone. The heap columns are serve's own go_memstats (heap in
// use, which includes garbage not yet collected, and the Go runtime's
// total obtained from the OS) read from its /metrics right after the RSS
// sample; serve has no pprof endpoint, so that is the finest view
// available from outside.
//
//	cd bench && go run ./memory
//	cd bench && go run ./memory -db sqlite -n 20000
//
// PostgreSQL rows need PROMPTKIT_TEST_DATABASE_URL or -pg (loopback); each
// database gets a fresh schema (SQLite: a fresh file), dropped afterwards.
// This program raises its own open-file limit to the hard limit with
// setrlimit, and serve inherits it (Go programs raise their soft limit
// to the hard one themselves as well). Everything is on loopback, and
// every phase has a deadline, so the program ends by itself.
package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
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
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/promptkit/promptkit/bench/internal/pkbin"
	"github.com/promptkit/promptkit/jobs"
	"github.com/promptkit/promptkit/jobs/pgstore"
	"github.com/promptkit/promptkit/jobs/sqlitestore"
	"github.com/promptkit/promptkit/providertest"
)

type options struct {
	n, workers, streams, burst int
	settle, deadline           time.Duration
	pgURL                      string
	bin                        string
}

// row is one line of the report.
type row struct {
	scenario, db string
	rss, peak    int64 // KiB
	heap, sys    int64 // bytes, from serve's /metrics; -1 unknown
	jobsPerSec   float64
	note         string
}

func main() {
	var o options
	dbs := flag.String("db", "", "databases: sqlite,postgres (default sqlite, plus postgres when a PostgreSQL URL is given)")
	flag.IntVar(&o.n, "n", 100000, "queued jobs")
	flag.IntVar(&o.workers, "workers", 64, "serve --workers in the working, idle and streams scenarios")
	flag.IntVar(&o.streams, "streams", 2000, "open GET /v1/events streams")
	flag.IntVar(&o.burst, "burst", 200, "jobs run while the streams are open (0: none)")
	flag.DurationVar(&o.settle, "settle", 2*time.Second, "wait after serve is ready before an idle sample")
	flag.DurationVar(&o.deadline, "work-deadline", 75*time.Second, "upper bound on working the jobs off, per database")
	flag.StringVar(&o.pgURL, "pg", os.Getenv("PROMPTKIT_TEST_DATABASE_URL"), "PostgreSQL URL (loopback; default PROMPTKIT_TEST_DATABASE_URL)")
	flag.Parse()
	var dbList []string
	if *dbs == "" {
		dbList = []string{"sqlite"}
		if o.pgURL != "" {
			dbList = append(dbList, "postgres")
		}
	} else {
		for _, d := range strings.Split(*dbs, ",") {
			if d = strings.TrimSpace(d); d != "sqlite" && d != "postgres" {
				fatal(fmt.Errorf("unknown database %q", d))
			}
			dbList = append(dbList, strings.TrimSpace(d))
		}
	}
	if slices.Contains(dbList, "postgres") {
		if o.pgURL == "" {
			fatal(errors.New("-db postgres needs -pg or PROMPTKIT_TEST_DATABASE_URL"))
		}
		if u, err := url.Parse(o.pgURL); err != nil || !isLoopback(u.Hostname()) {
			fatal(errors.New("-pg must point at loopback"))
		}
	}
	limit := raiseFileLimit()

	bin, cleanup, err := pkbin.Build()
	fatal(err)
	defer cleanup()
	atExit = append(atExit, cleanup)
	o.bin = bin

	srv := providertest.NewServer(providertest.WithMaxRecorded(1))
	defer srv.Close()
	tmp, err := os.MkdirTemp("", "pk-memory-")
	fatal(err)
	defer os.RemoveAll(tmp)
	atExit = append(atExit, func() { os.RemoveAll(tmp) })
	cfg := filepath.Join(tmp, "promptkit.yaml")
	fatal(os.WriteFile(cfg, []byte(fmt.Sprintf("backends:\n  - id: fake\n    base_url: %s\nprofiles:\n  - {id: default, backend: fake, model: m}\n", srv.URL)), 0o600))

	fmt.Fprintf(os.Stderr, "memory: %d cores, %s, open-file limit %d\n", runtime.NumCPU(), runtime.Version(), limit)
	var rows []row
	for _, d := range dbList {
		rs, err := runDB(o, d, tmp, cfg)
		rows = append(rows, rs...)
		if err != nil {
			printReport(o, rows, limit)
			fatal(fmt.Errorf("%s: %w", d, err))
		}
	}
	printReport(o, rows, limit)
}

func printReport(o options, rows []row, limit uint64) {
	fmt.Printf("%s UTC, %d cores, %s; promptkit serve built from this tree; %d queued jobs, --workers %d, %d streams; open-file limit %d (serve inherits it)\n\n",
		time.Now().UTC().Format("2006-01-02 15:04"), runtime.NumCPU(), runtime.Version(), o.n, o.workers, o.streams, limit)
	fmt.Println("| scenario | database | RSS MiB | peak (VmHWM) MiB | Go heap in use MiB | Go runtime from OS MiB | jobs/s | note |")
	fmt.Println("|---|---|---|---|---|---|---|---|")
	mib := func(kib int64) string { return fmt.Sprintf("%.1f", float64(kib)/1024) }
	bmib := func(b int64) string {
		if b < 0 {
			return "–"
		}
		return fmt.Sprintf("%.1f", float64(b)/(1<<20))
	}
	for _, r := range rows {
		jps := "–"
		if r.jobsPerSec > 0 {
			jps = fmt.Sprintf("%.0f", r.jobsPerSec)
		}
		fmt.Printf("| %s | %s | %s | %s | %s | %s | %s | %s |\n", r.scenario, r.db, mib(r.rss), mib(r.peak), bmib(r.heap), bmib(r.sys), jps, r.note)
	}
}

// raiseFileLimit sets this process's soft open-file limit to the hard
// one, for the streams and for serve, which inherits it.
func raiseFileLimit() uint64 {
	var l syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &l); err != nil {
		fatal(err)
	}
	l.Cur = l.Max
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &l); err != nil {
		fatal(err)
	}
	return l.Cur
}

// database is one fresh job database: the --database argument for serve,
// and a store handle of this program's own.
type database struct {
	arg     string
	store   jobs.Store
	cleanup func()
}

func openDB(ctx context.Context, o options, kind, tmp string) (*database, error) {
	if kind == "sqlite" {
		dir, err := os.MkdirTemp(tmp, "sqlite-")
		if err != nil {
			return nil, err
		}
		path := filepath.Join(dir, "jobs.db")
		st, err := sqlitestore.Open(ctx, path, jobs.Options{})
		if err != nil {
			return nil, err
		}
		return &database{arg: path, store: st, cleanup: func() { st.Close(); os.RemoveAll(dir) }}, nil
	}
	var b [6]byte
	_, _ = rand.Read(b[:])
	schema := "mem_" + hex.EncodeToString(b[:])
	conn, err := pgx.Connect(ctx, o.pgURL)
	if err != nil {
		return nil, err
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "CREATE SCHEMA "+schema); err != nil {
		return nil, err
	}
	u, _ := url.Parse(o.pgURL)
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	dsn := u.String()
	drop := func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if c, err := pgx.Connect(ctx, o.pgURL); err == nil {
			_, _ = c.Exec(ctx, "DROP SCHEMA "+schema+" CASCADE")
			_ = c.Close(ctx)
		}
	}
	st, err := pgstore.Open(ctx, dsn, jobs.Options{})
	if err != nil {
		drop()
		return nil, err
	}
	return &database{arg: dsn, store: st, cleanup: func() { st.Close(); drop() }}, nil
}

func runDB(o options, kind, tmp, cfg string) ([]row, error) {
	ctx, cancel := context.WithTimeout(context.Background(), o.deadline+3*time.Minute)
	defer cancel()
	db, err := openDB(ctx, o, kind, tmp)
	if err != nil {
		return nil, err
	}
	defer db.cleanup()
	var rows []row
	add := func(r row) {
		r.db = kind
		rows = append(rows, r)
		fmt.Fprintf(os.Stderr, "%-8s %-40s RSS %7.1f MiB  peak %7.1f MiB  heap %7.1f MiB  %s\n", kind, r.scenario,
			float64(r.rss)/1024, float64(r.peak)/1024, float64(r.heap)/(1<<20), r.note)
	}

	// (a) idle, API only and with workers.
	for _, w := range []int{0, o.workers} {
		s, err := startServe(ctx, o, tmp, cfg, db.arg, w)
		if err != nil {
			return rows, err
		}
		time.Sleep(o.settle)
		r := s.sample(ctx)
		r.scenario = fmt.Sprintf("idle, --workers %d", w)
		if err := s.stop(); err != nil {
			return rows, err
		}
		add(r)
	}

	// (b) queued, nothing to run them.
	t0 := time.Now()
	if err := enqueue(ctx, db.store, o.n); err != nil {
		return rows, err
	}
	fmt.Fprintf(os.Stderr, "%-8s enqueued %d jobs in %.1fs\n", kind, o.n, time.Since(t0).Seconds())
	s, err := startServe(ctx, o, tmp, cfg, db.arg, 0)
	if err != nil {
		return rows, err
	}
	time.Sleep(o.settle)
	r := s.sample(ctx)
	steps := []string{fmt.Sprintf("VmRSS after start %.1f MiB", float64(r.rss)/1024)}
	for _, path := range []string{"/metrics", "/v1/prompts", "/v1/recent"} {
		if err := s.get(ctx, path); err != nil {
			s.stop()
			return rows, fmt.Errorf("GET %s: %w", path, err)
		}
		time.Sleep(300 * time.Millisecond)
		r = s.sample(ctx)
		steps = append(steps, fmt.Sprintf("after GET %s %.1f MiB (heap %.1f)", path, float64(r.rss)/1024, float64(r.heap)/(1<<20)))
	}
	r.scenario = fmt.Sprintf("%d queued, --workers 0", o.n)
	r.note = strings.Join(steps, "; ")
	if err := s.stop(); err != nil {
		return rows, err
	}
	add(r)

	// (c) working them off.
	wr, err := workOff(ctx, o, tmp, cfg, db)
	if err != nil {
		return rows, err
	}
	add(wr)

	// (d) open event streams.
	// A fresh database: jobs left by -work-deadline would run during it.
	sdb, err := openDB(ctx, o, kind, tmp)
	if err != nil {
		return rows, err
	}
	defer sdb.cleanup()
	srs, err := streams(ctx, o, tmp, cfg, sdb)
	for _, r := range srs {
		add(r)
	}
	if err != nil {
		return rows, err
	}
	return rows, nil
}

func enqueue(ctx context.Context, st jobs.Store, n int) error {
	const batch = 1000
	ps := make([]jobs.EnqueueParams, 0, batch)
	for i := 0; i < n; i += batch {
		ps = ps[:0]
		for j := i; j < min(i+batch, n); j++ {
			ps = append(ps, jobs.EnqueueParams{OrgID: "default", CreatedBy: "local", Text: fmt.Sprintf("Say hello to job %d.", j)})
		}
		if _, err := st.EnqueueBatch(ctx, ps); err != nil {
			return err
		}
	}
	return nil
}

func workOff(ctx context.Context, o options, tmp, cfg string, db *database) (row, error) {
	s, err := startServe(ctx, o, tmp, cfg, db.arg, o.workers)
	if err != nil {
		return row{}, err
	}
	defer s.stop()
	start := time.Now()
	deadline := start.Add(o.deadline)
	var maxRSS int64
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	lastPoll := time.Time{}
	done := 0
	for {
		select {
		case <-ctx.Done():
			return row{}, ctx.Err()
		case <-s.exited:
			return row{}, fmt.Errorf("serve exited:\n%s", s.tail())
		case <-tick.C:
		}
		rss, _, err := procStatus(s.pid())
		if err != nil {
			return row{}, err
		}
		maxRSS = max(maxRSS, rss)
		// The job count every second: a Metrics query is not free.
		if time.Since(lastPoll) >= time.Second || done >= o.n {
			lastPoll = time.Now()
			m, err := db.store.Metrics(ctx, jobs.MetricsParams{Since: time.Now()})
			if err != nil {
				return row{}, err
			}
			done = 0
			for st, k := range m.Counts {
				if st.Terminal() {
					done += k
				}
			}
			if m.Counts[jobs.Failed] > 0 {
				return row{}, fmt.Errorf("%d jobs failed:\n%s", m.Counts[jobs.Failed], s.tail())
			}
		}
		if done >= o.n || time.Now().After(deadline) {
			break
		}
	}
	elapsed := time.Since(start)
	r := s.sample(ctx)
	r.scenario = fmt.Sprintf("working %d off, --workers %d", o.n, o.workers)
	r.jobsPerSec = float64(done) / elapsed.Seconds()
	r.note = fmt.Sprintf("RSS is the final sample; highest 250 ms sample %.1f MiB; %d jobs in %.1fs", float64(maxRSS)/1024, done, elapsed.Seconds())
	if done < o.n {
		r.note += fmt.Sprintf(" (stopped by -work-deadline: %d of %d)", done, o.n)
	}
	return r, nil
}

func streams(ctx context.Context, o options, tmp, cfg string, db *database) ([]row, error) {
	s, err := startServe(ctx, o, tmp, cfg, db.arg, o.workers)
	if err != nil {
		return nil, err
	}
	defer s.stop()
	time.Sleep(o.settle)
	before := s.sample(ctx)

	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	tr := &http.Transport{MaxIdleConnsPerHost: -1, DisableCompression: true}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr}
	var opened, failed, closed, received atomic.Int64
	var firstErr atomic.Value
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	sem := make(chan struct{}, 50) // dial at most 50 at a time
	for range o.streams {
		sem <- struct{}{}
		wg.Go(func() {
			req, _ := http.NewRequestWithContext(sctx, http.MethodGet, s.url+"/v1/events", nil)
			req.Header.Set("Accept", "text/event-stream")
			resp, err := client.Do(req)
			if err == nil && resp.StatusCode != http.StatusOK {
				b, _ := io.ReadAll(io.LimitReader(resp.Body, 500))
				resp.Body.Close()
				err = fmt.Errorf("%s: %s", resp.Status, b)
			}
			var br *bufio.Reader
			if err == nil {
				br = bufio.NewReaderSize(resp.Body, 512)
				_, err = br.ReadString('\n') // ": promptkit events"
			}
			<-sem
			if err != nil {
				failed.Add(1)
				firstErr.CompareAndSwap(nil, err.Error())
				if resp != nil {
					resp.Body.Close()
				}
				return
			}
			opened.Add(1)
			defer resp.Body.Close()
			buf := make([]byte, 512)
			for {
				n, err := br.Read(buf)
				received.Add(int64(n))
				if err != nil {
					break
				}
			}
			closed.Add(1)
		})
	}
	for opened.Load()+failed.Load() < int64(o.streams) {
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-s.exited:
			return nil, fmt.Errorf("serve exited:\n%s", s.tail())
		case <-time.After(50 * time.Millisecond):
		}
	}
	time.Sleep(o.settle)
	r := s.sample(ctx)
	fds := countFDs(s.pid())
	r.scenario = fmt.Sprintf("%d open event streams, --workers %d", o.streams, o.workers)
	r.note = fmt.Sprintf("%d open, %d failed; +%.1f MiB over the same process before (%.1f KiB a stream); serve has %d open files, limit %s",
		opened.Load(), failed.Load(), float64(r.rss-before.rss)/1024, float64(r.rss-before.rss)/float64(max(opened.Load(), 1)), fds, fileLimit(s.pid()))
	if e, ok := firstErr.Load().(string); ok {
		r.note += "; first error: " + e
	}
	rows := []row{r}

	// The same streams while a burst of jobs runs: every transition goes
	// to every stream (all jobs are the local identity's).
	if o.burst > 0 {
		b0 := received.Load()
		t0 := time.Now()
		if err := enqueue(ctx, db.store, o.burst); err != nil {
			return rows, err
		}
		var maxRSS int64
		for {
			rss, _, err := procStatus(s.pid())
			if err != nil {
				return rows, err
			}
			maxRSS = max(maxRSS, rss)
			m, err := db.store.Metrics(ctx, jobs.MetricsParams{Since: time.Now()})
			if err != nil {
				return rows, err
			}
			if m.Counts[jobs.Queued] == 0 && m.Counts[jobs.Running] == 0 {
				break
			}
			select {
			case <-ctx.Done():
				return rows, ctx.Err()
			case <-s.exited:
				return rows, fmt.Errorf("serve exited:\n%s", s.tail())
			case <-time.After(250 * time.Millisecond):
			}
		}
		el := time.Since(t0)
		time.Sleep(o.settle)
		rb := s.sample(ctx)
		rb.scenario = fmt.Sprintf("%d open event streams, %d jobs run", o.streams, o.burst)
		rb.jobsPerSec = float64(o.burst) / el.Seconds()
		rb.note = fmt.Sprintf("after the burst (%.1fs); highest 250 ms sample %.1f MiB; the streams received %.1f MiB; %d streams still open",
			el.Seconds(), float64(maxRSS)/1024, float64(received.Load()-b0)/(1<<20), opened.Load()-closed.Load())
		rows = append(rows, rb)
	}
	cancel()
	return rows, nil
}

// serve is a running `promptkit serve`.
type serve struct {
	cmd    *exec.Cmd
	url    string
	log    string
	exited chan struct{}
}

func startServe(ctx context.Context, o options, tmp, cfg, dbArg string, workers int) (*serve, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	logf, err := os.CreateTemp(tmp, "serve-*.log")
	if err != nil {
		return nil, err
	}
	defer logf.Close()
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	s := &serve{url: "http://" + addr, log: logf.Name(), exited: make(chan struct{})}
	s.cmd = exec.Command(o.bin, "serve", "--config", cfg, "--database", dbArg, "--addr", addr,
		"--workers", strconv.Itoa(workers), "--metrics-access", "open", "--submit-rate", "-1")
	s.cmd.Dir = tmp
	s.cmd.Stdout, s.cmd.Stderr = logf, logf
	if err := s.cmd.Start(); err != nil {
		return nil, err
	}
	go func() { _ = s.cmd.Wait(); close(s.exited) }()
	ready := time.Now().Add(60 * time.Second)
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, s.url+"/readyz", nil)
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return s, nil
			}
		}
		select {
		case <-s.exited:
			return nil, fmt.Errorf("serve exited at start:\n%s", s.tail())
		case <-ctx.Done():
			s.stop()
			return nil, ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(ready) {
			s.stop()
			return nil, fmt.Errorf("serve not ready in 60s:\n%s", s.tail())
		}
	}
}

func (s *serve) pid() int { return s.cmd.Process.Pid }

// stop ends serve with SIGINT (SIGKILL after 30 s).
func (s *serve) stop() error {
	select {
	case <-s.exited:
		return nil
	default:
	}
	_ = s.cmd.Process.Signal(os.Interrupt)
	select {
	case <-s.exited:
		return nil
	case <-time.After(30 * time.Second):
		_ = s.cmd.Process.Kill()
		<-s.exited
		return fmt.Errorf("serve did not stop in 30s after SIGINT:\n%s", s.tail())
	}
}

// sample reads VmRSS and VmHWM, and the Go heap from /metrics.
func (s *serve) sample(ctx context.Context) row {
	rss, hwm, err := procStatus(s.pid())
	if err != nil {
		fatal(err)
	}
	heap, sys := s.goMem(ctx)
	// /metrics made serve allocate a little: VmRSS is read first.
	return row{rss: rss, peak: hwm, heap: heap, sys: sys}
}

// goMem reads go_memstats_heap_inuse_bytes and go_memstats_sys_bytes.
func (s *serve) goMem(ctx context.Context) (heap, sys int64) {
	heap, sys = -1, -1
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, s.url+"/metrics", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		for _, m := range []struct {
			name string
			dst  *int64
		}{{"go_memstats_heap_inuse_bytes ", &heap}, {"go_memstats_sys_bytes ", &sys}} {
			if v, ok := strings.CutPrefix(line, m.name); ok {
				if f, err := strconv.ParseFloat(strings.TrimSpace(v), 64); err == nil {
					*m.dst = int64(f)
				}
			}
		}
	}
	return
}

func (s *serve) get(ctx context.Context, path string) error {
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, s.url+path, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	n, _ := io.Copy(io.Discard, resp.Body)
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s (%d bytes)", resp.Status, n)
	}
	return nil
}

func (s *serve) tail() string {
	b, _ := os.ReadFile(s.log)
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-20):], "\n")
}

// procStatus returns VmRSS and VmHWM of pid, in KiB.
func procStatus(pid int) (rss, hwm int64, err error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, 0, err
	}
	for line := range bytes.SplitSeq(b, []byte("\n")) {
		for _, f := range []struct {
			key string
			dst *int64
		}{{"VmRSS:", &rss}, {"VmHWM:", &hwm}} {
			if v, ok := bytes.CutPrefix(line, []byte(f.key)); ok {
				fs := strings.Fields(string(v))
				if len(fs) > 0 {
					*f.dst, _ = strconv.ParseInt(fs[0], 10, 64)
				}
			}
		}
	}
	return rss, hwm, nil
}

// fileLimit is the soft open-file limit of pid, from /proc/<pid>/limits.
func fileLimit(pid int) string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/limits", pid))
	if err != nil {
		return "?"
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "Max open files"); ok {
			if fs := strings.Fields(v); len(fs) > 0 {
				return fs[0]
			}
		}
	}
	return "?"
}

func countFDs(pid int) int {
	es, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		return -1
	}
	return len(es)
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func isLoopback(h string) bool {
	return h == "localhost" || h == "::1" || strings.HasPrefix(h, "127.")
}

// atExit holds what fatal removes before exiting (os.Exit skips
// deferred calls): temporary directories.
var atExit []func()

func fatal(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, "memory:", err)
		for i := len(atExit) - 1; i >= 0; i-- {
			atExit[i]()
		}
		os.Exit(1)
	}
}
