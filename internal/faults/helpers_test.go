//go:build linux

package faults_test

// Helpers shared by the fault tests: the child worker process, stores,
// the fake provider's configuration, polling with a deadline, and the
// audit of a finished run (states, responses, event chains, provider
// calls).

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"go.uber.org/goleak"
	_ "modernc.org/sqlite" // the "sqlite" driver, to read tables directly

	"github.com/promptkit/promptkit"
	"github.com/promptkit/promptkit/internal/cli"
	"github.com/promptkit/promptkit/internal/pgtest"
	"github.com/promptkit/promptkit/jobs"
	"github.com/promptkit/promptkit/jobs/pgstore"
	"github.com/promptkit/promptkit/jobs/sqlitestore"
	"github.com/promptkit/promptkit/providertest"
)

// childEnv, when set, makes the test binary a `promptkit` process: its
// value is the JSON array of command-line arguments.
const childEnv = "PROMPTKIT_FAULTS_CHILD_ARGS"

// TestMain runs a child process when the parent asked for one, and
// otherwise the tests, failing the run if a goroutine outlives them (the
// children are processes, each reaped by the test that started it).
func TestMain(m *testing.M) {
	if raw, ok := os.LookupEnv(childEnv); ok {
		os.Exit(runChild(raw))
	}
	goleak.VerifyTestMain(m)
}

// runChild runs the promptkit command line with the parent's arguments
// until it ends or SIGTERM asks it to stop, as cmd/promptkit does.
func runChild(raw string) int {
	var args []string
	if err := json.Unmarshal([]byte(raw), &args); err != nil {
		fmt.Fprintf(os.Stderr, "faults child: %s: %v\n", childEnv, err)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	return cli.Run(ctx, args, os.Stdout, os.Stderr)
}

// proc is a child process: the test binary re-executed as a promptkit
// command, its output in a log file.
type proc struct {
	name string
	cmd  *exec.Cmd
	log  string
	done chan struct{} // closed once the process has been reaped
	err  error         // cmd.Wait's error, set before done closes
}

// startProc starts the promptkit command args as a child process named
// name, logging to a file in dir. The test's cleanup kills it if it is
// still running.
func startProc(t *testing.T, dir, name string, args []string) *proc {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatalf("os.Executable: %v", err)
	}
	enc, err := json.Marshal(args)
	if err != nil {
		t.Fatal(err)
	}
	p := &proc{name: name, log: filepath.Join(dir, name+".log"), done: make(chan struct{})}
	out, err := os.Create(p.log)
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close() // the child has its own descriptor
	p.cmd = exec.Command(exe, "-test.run=^$")
	p.cmd.Env = append(os.Environ(), childEnv+"="+string(enc))
	p.cmd.Stdout, p.cmd.Stderr = out, out // files: no copying goroutines
	// Should this test binary die, its workers die with it.
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	go func() { p.err = p.cmd.Wait(); close(p.done) }()
	t.Cleanup(func() { p.kill() })
	return p
}

// kill sends SIGKILL and waits until the process is reaped.
func (p *proc) kill() {
	select {
	case <-p.done:
		return
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.done
}

// stop sends SIGTERM (a graceful shutdown) and waits for the exit, for at
// most timeout, after which it kills the process. It returns the exit
// code, -1 for a process ended by a signal.
func (p *proc) stop(timeout time.Duration) (code int, err error) {
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(timeout):
		p.kill()
		return -1, fmt.Errorf("%s did not exit within %v of SIGTERM", p.name, timeout)
	}
	return p.cmd.ProcessState.ExitCode(), nil
}

// output returns the process's log.
func (p *proc) output() string {
	b, _ := os.ReadFile(p.log)
	return string(b)
}

// tail returns the last n lines of s.
func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// checkLogs fails the test for a panic or a data race in any of the logs.
func checkLogs(t *testing.T, procs []*proc) {
	t.Helper()
	for _, p := range procs {
		out := p.output()
		for _, bad := range []string{"panic:", "WARNING: DATA RACE", "fatal error:"} {
			if i := strings.Index(out, bad); i >= 0 {
				t.Errorf("%s: %q in its output:\n%s", p.name, bad, tail(out[i:], 40))
			}
		}
	}
}

// logLine matches a warning or error of the text log handler.
var logLine = regexp.MustCompile(`level=(WARN|ERROR) msg=("(?:[^"\\]|\\.)*"|\S+)`)

// logSummary counts the warnings and errors in logs by level and message,
// e.g. `WARN "claim failed":3`.
func logSummary(logs ...string) string {
	n := map[string]int{}
	for _, l := range logs {
		for _, m := range logLine.FindAllStringSubmatch(l, -1) {
			msg := m[2]
			if !strings.HasPrefix(msg, `"`) {
				msg = strconv.Quote(msg)
			}
			n[m[1]+" "+msg]++
		}
	}
	return sortedCounts(n)
}

// logBuf is a log sink for in-process workers: kept in memory, searched
// and shown when a test fails.
type logBuf struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *logBuf) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *logBuf) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

// count is how many log lines contain s.
func (l *logBuf) count(s string) int { return strings.Count(l.String(), s) }

// logger returns a logger writing to l.
func (l *logBuf) logger() *slog.Logger { return slog.New(slog.NewTextHandler(l, nil)) }

// database is one job database a test runs on.
type database struct {
	name  string
	dsn   string // what `promptkit --database` and the Open functions take
	store jobs.Store
	// responses counts the rows of the responses table per job, read
	// straight from the table.
	responses func(ctx context.Context) (map[string]int, error)
}

// openSQLite creates a SQLite database in dir.
func openSQLite(t *testing.T, dir string) *database {
	t.Helper()
	path := filepath.Join(dir, "jobs.db")
	st, err := sqlitestore.Open(t.Context(), path, jobs.Options{})
	if err != nil {
		t.Fatalf("sqlitestore.Open: %v", err)
	}
	t.Cleanup(func() { st.Close() })
	return &database{name: "sqlite", dsn: path, store: st, responses: func(ctx context.Context) (map[string]int, error) {
		db, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(10000)&_pragma=query_only(1)")
		if err != nil {
			return nil, err
		}
		defer db.Close()
		rows, err := db.QueryContext(ctx, `SELECT job_id, COUNT(*) FROM responses GROUP BY job_id`)
		if err != nil {
			return nil, err
		}
		return scanCounts(rows.Next, rows.Scan, rows.Err)
	}}
}

// openPostgres opens a store on dsn, a PostgreSQL URL.
func openPostgres(t *testing.T, dsn string) *database {
	t.Helper()
	st, err := pgstore.Open(t.Context(), dsn, jobs.Options{})
	if err != nil {
		t.Fatalf("pgstore.Open: %v", err)
	}
	t.Cleanup(func() { st.Close() })
	return &database{name: "postgres", dsn: dsn, store: st, responses: func(ctx context.Context) (map[string]int, error) {
		conn, err := pgx.Connect(ctx, dsn)
		if err != nil {
			return nil, err
		}
		defer conn.Close(context.Background())
		rows, err := conn.Query(ctx, `SELECT job_id::text, COUNT(*) FROM responses GROUP BY job_id`)
		if err != nil {
			return nil, err
		}
		defer rows.Close()
		return scanCounts(rows.Next, rows.Scan, rows.Err)
	}}
}

// openPostgresSchema opens a store on a fresh schema of the test database,
// or skips the test when there is none.
func openPostgresSchema(t *testing.T) *database { return openPostgres(t, pgtest.Schema(t)) }

func scanCounts(next func() bool, scan func(...any) error, rerr func() error) (map[string]int, error) {
	out := map[string]int{}
	for next() {
		var id string
		var n int
		if err := scan(&id, &n); err != nil {
			return nil, err
		}
		out[id] = n
	}
	return out, rerr()
}

// writeConfig writes a promptkit.yaml whose only backend is the fake
// provider at url, with a default profile, and returns its path.
func writeConfig(t *testing.T, dir, url string) string {
	t.Helper()
	path := filepath.Join(dir, "promptkit.yaml")
	cfg := fmt.Sprintf(`backends:
  - id: fake
    base_url: %s
    timeout: 20s
profiles:
  - id: default
    backend: fake
    model: faults-model
`, url)
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// newEngine returns an engine whose only backend is the fake provider at
// url, for in-process workers.
func newEngine(t *testing.T, url string) *promptkit.Engine {
	t.Helper()
	eng, err := promptkit.New(promptkit.Config{
		Backends: []promptkit.Backend{{ID: "fake", BaseURL: url, Timeout: 20 * time.Second}},
		Profiles: []promptkit.Profile{{ID: "default", Backend: "fake", Model: "faults-model"}},
	})
	if err != nil {
		t.Fatalf("promptkit.New: %v", err)
	}
	return eng
}

// maxAttempts is every test job's attempt budget: high enough that a job
// interrupted by several faults in a row still succeeds, so a job that
// fails shows a fault the service did not absorb.
const maxAttempts = 10

// jobText is the text of job i: unique, so provider requests can be
// traced to their job.
func jobText(i int) string { return fmt.Sprintf("faults job %05d", i) }

// enqueueJobs enqueues n ad-hoc jobs (numbered from first) directly
// through the store and returns their IDs and a map from job text to ID.
func enqueueJobs(t *testing.T, ctx context.Context, st jobs.Store, first, n int, byText map[string]string) []string {
	t.Helper()
	ps := make([]jobs.EnqueueParams, n)
	for i := range ps {
		ps[i] = jobs.EnqueueParams{OrgID: "org", CreatedBy: "faults", Text: jobText(first + i), MaxAttempts: maxAttempts}
	}
	got, err := st.EnqueueBatch(ctx, ps)
	if err != nil {
		t.Fatalf("EnqueueBatch: %v", err)
	}
	ids := make([]string, len(got))
	for i, e := range got {
		ids[i] = e.JobID
		byText[ps[i].Text] = e.JobID
	}
	return ids
}

// pollEvery is how often conditions are checked.
const pollEvery = 50 * time.Millisecond

// poll checks cond every pollEvery until it holds or timeout passes, and
// reports whether it held.
func poll(timeout time.Duration, cond func() bool) bool {
	end := time.Now().Add(timeout)
	for {
		if cond() {
			return true
		}
		if time.Now().After(end) {
			return false
		}
		time.Sleep(pollEvery)
	}
}

// waitFor polls cond until it holds, and fails the test with what and
// cond's last status when timeout passes first.
func waitFor(t *testing.T, timeout time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	var status string
	if !poll(timeout, func() bool {
		var ok bool
		ok, status = cond()
		return ok
	}) {
		t.Fatalf("timed out after %v waiting for %s; last: %s", timeout, what, status)
	}
}

// counts returns the number of jobs per state.
func counts(ctx context.Context, st jobs.Store) (map[jobs.State]int, error) {
	m, err := st.Metrics(ctx, jobs.MetricsParams{})
	return m.Counts, err
}

// settled is a waitFor condition: no job is queued or running, and want
// jobs exist.
func settled(ctx context.Context, st jobs.Store, want int) func() (bool, string) {
	return func() (bool, string) {
		c, err := counts(ctx, st)
		if err != nil {
			return false, err.Error()
		}
		total := 0
		for _, n := range c {
			total += n
		}
		return total == want && c[jobs.Queued]+c[jobs.Running] == 0, fmt.Sprint(c)
	}
}

// atLeast is a waitFor condition: at least n jobs succeeded.
func atLeast(ctx context.Context, st jobs.Store, n int) func() (bool, string) {
	return func() (bool, string) {
		c, err := counts(ctx, st)
		if err != nil {
			return false, err.Error()
		}
		return c[jobs.Succeeded] >= n, fmt.Sprint(c)
	}
}

// chain is what a job's event log says about it.
type chain struct {
	// attempts counts attempt events: provider calls whose outcome a
	// worker recorded.
	attempts int
	// interrupted counts reclaims: transitions running → queued or failed
	// with error_kind worker_crash or stuck, each an attempt whose worker
	// was lost, possibly mid-call.
	interrupted int
}

// checkChain checks that j's events form a gap-free path through the state
// machine: the first is → queued, each later transition starts where the
// previous one ended and is an allowed edge, attempts happen only while
// running, sequence numbers increase, and the path ends at j's state.
func checkChain(j jobs.Job, evs []jobs.Event) (chain, error) {
	var c chain
	var state jobs.State
	for i, ev := range evs {
		if i > 0 && ev.Seq <= evs[i-1].Seq {
			return c, fmt.Errorf("event %d: seq %d after %d", i, ev.Seq, evs[i-1].Seq)
		}
		switch ev.Type {
		case jobs.EventTransition:
			switch {
			case i == 0 && (ev.From != "" || ev.To != jobs.Queued):
				return c, fmt.Errorf("first event is %q → %q, want → queued", ev.From, ev.To)
			case i > 0 && ev.From != state:
				return c, fmt.Errorf("event %d: transition %s → %s after the job reached %s: a gap", i, ev.From, ev.To, state)
			case i > 0 && !jobs.CanTransition(ev.From, ev.To):
				return c, fmt.Errorf("event %d: illegal transition %s → %s", i, ev.From, ev.To)
			}
			if ev.From == jobs.Running && (ev.To == jobs.Queued || ev.To == jobs.Failed) {
				var d jobs.TransitionData
				if err := json.Unmarshal(ev.Data, &d); err != nil {
					return c, fmt.Errorf("event %d: data %s: %v", i, ev.Data, err)
				}
				if d.ErrorKind == jobs.KindWorkerCrash || d.ErrorKind == jobs.KindStuck {
					c.interrupted++
				}
			}
			state = ev.To
		case jobs.EventAttempt:
			if state != jobs.Running {
				return c, fmt.Errorf("event %d: an attempt while the job is %q", i, state)
			}
			c.attempts++
		default:
			return c, fmt.Errorf("event %d: unknown type %q", i, ev.Type)
		}
	}
	if state != j.State {
		return c, fmt.Errorf("events end at %q but the job is %s", state, j.State)
	}
	return c, nil
}

// audit is what a finished run left in the database.
type audit struct {
	jobs      int
	succeeded int
	// others are the jobs that did not succeed: "state/kind" → count.
	others map[string]int
	// attempts and interrupted are summed over the jobs (see chain).
	attempts, interrupted int
	// responses counts response rows; duplicates those beyond one per job.
	responses, duplicates int
}

// errorList reports up to limit errors of a kind, then counts the rest.
type errorList struct {
	t     *testing.T
	limit int
	n     int
}

func (e *errorList) add(format string, args ...any) {
	e.t.Helper()
	e.n++
	if e.n <= e.limit {
		e.t.Errorf(format, args...)
	}
}

func (e *errorList) done(what string) {
	e.t.Helper()
	if e.n > e.limit {
		e.t.Errorf("… and %d more %s", e.n-e.limit, what)
	}
}

// auditJobs checks every job in ids: terminal and succeeded, exactly one
// response row (and GetResponse finds it) for a succeeded job and none
// otherwise, a gap-free event chain. It returns the figures.
func auditJobs(t *testing.T, ctx context.Context, d *database, ids []string) audit {
	t.Helper()
	rows, err := d.responses(ctx)
	if err != nil {
		t.Fatalf("counting responses: %v", err)
	}
	a := audit{jobs: len(ids), others: map[string]int{}}
	errs := &errorList{t: t, limit: 10}
	known := map[string]bool{}
	for _, id := range ids {
		known[id] = true
		j, err := d.store.GetJob(ctx, "", id)
		if err != nil {
			t.Fatalf("GetJob %s: %v", id, err)
		}
		evs, err := d.store.JobEvents(ctx, "", id)
		if err != nil {
			t.Fatalf("JobEvents %s: %v", id, err)
		}
		c, err := checkChain(j, evs)
		if err != nil {
			errs.add("job %s: event chain: %v", id, err)
		}
		a.attempts += c.attempts
		a.interrupted += c.interrupted
		a.responses += rows[id]
		a.duplicates += max(rows[id]-1, 0)
		if j.State != jobs.Succeeded {
			a.others[fmt.Sprintf("%s/%s", j.State, j.ErrorKind)]++
			errs.add("job %s is %s (kind %q, attempt %d): %s", id, j.State, j.ErrorKind, j.Attempt, j.ErrorMessage)
			if rows[id] != 0 {
				errs.add("job %s is %s but has %d response rows", id, j.State, rows[id])
			}
			continue
		}
		a.succeeded++
		if rows[id] != 1 {
			errs.add("job %s succeeded with %d response rows, want 1", id, rows[id])
		}
		want := jobs.ResponseID(j.PromptID, j.ID)
		if j.ResponseID != want {
			errs.add("job %s: response_id %q, want %q", id, j.ResponseID, want)
		}
		if r, err := d.store.GetResponse(ctx, "", want); err != nil {
			errs.add("job %s: GetResponse: %v", id, err)
		} else if r.JobID != id || r.Output == "" {
			errs.add("job %s: response of job %q with output %q", id, r.JobID, r.Output)
		}
	}
	for id, n := range rows {
		if !known[id] {
			errs.add("%d response rows for job %s, which the test did not enqueue", n, id)
		}
	}
	errs.done("job problems")
	return a
}

// calls is what the fake provider saw.
type calls struct {
	total int
	// cancelled counts calls whose client went away while the provider
	// was still answering (a worker killed mid-call).
	cancelled int
	// perJob counts arrivals per job ID.
	perJob map[string]int
}

// providerCalls reads the fake provider's counters and traces each
// request to its job by its text.
func providerCalls(t *testing.T, srv *providertest.Server, byText map[string]string) calls {
	t.Helper()
	st := srv.Stats()
	c := calls{total: st.Requests, cancelled: st.Canceled, perJob: map[string]int{}}
	for _, r := range srv.Requests() {
		var text string
		for _, m := range r.Messages {
			if m.Role == "user" {
				text = m.Content
			}
		}
		id, ok := byText[text]
		if !ok {
			t.Errorf("provider request with user text %q belongs to no job", text)
			continue
		}
		c.perJob[id]++
	}
	return c
}

// completed counts calls the provider answered.
func (c calls) completed() int { return c.total - c.cancelled }

// histogram renders how many jobs made how many calls, e.g. "1:290 2:10".
func (c calls) histogram(ids []string) string {
	h := map[int]int{}
	for _, id := range ids {
		h[c.perJob[id]]++
	}
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(h)) {
		parts = append(parts, fmt.Sprintf("%d:%d", k, h[k]))
	}
	return strings.Join(parts, " ")
}

// checkCalls checks the provider calls against the event log: every
// recorded attempt was a call, and every call was recorded, or belongs to
// an attempt whose worker was lost (a reclaim).
func checkCalls(t *testing.T, c calls, a audit) {
	t.Helper()
	if c.total < a.attempts {
		t.Errorf("provider saw %d calls but the event log records %d attempts", c.total, a.attempts)
	}
	if c.total > a.attempts+a.interrupted {
		t.Errorf("provider saw %d calls, more than %d recorded attempts + %d interrupted attempts: calls nobody accounts for",
			c.total, a.attempts, a.interrupted)
	}
}

// sortedCounts renders a count map in a stable order.
func sortedCounts[K ~string](m map[K]int) string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		if m[k] != 0 {
			parts = append(parts, fmt.Sprintf("%s:%d", k, m[k]))
		}
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, " ")
}

// errorsMention reports whether err's text contains any of words,
// ignoring case.
func errorsMention(err error, words ...string) bool {
	if err == nil {
		return false
	}
	s := strings.ToLower(err.Error())
	return slices.ContainsFunc(words, func(w string) bool { return strings.Contains(s, w) })
}
