//go:build linux

package faults_test

// Helpers shared by the fault tests: the child worker process, stores,
// the fake provider's configuration, and the audit of a finished run
// (states, responses, event chains, provider calls). Waits are
// testkit.WaitFor and testkit.Until, woken by what signals a change.

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"
	_ "modernc.org/sqlite" // the "sqlite" driver, to read tables directly

	"github.com/promptkit/promptkit"
	"github.com/promptkit/promptkit/cmd/promptkit/internal/cli"
	"github.com/promptkit/promptkit/internal/testkit"
	"github.com/promptkit/promptkit/internal/testkit/enginekit"
	"github.com/promptkit/promptkit/internal/testkit/storekit"
	"github.com/promptkit/promptkit/jobs"
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
// command, its output kept in memory.
type proc struct {
	name string
	cmd  *exec.Cmd
	out  *testkit.Logs // stdout and stderr; each write signals its waits
	done chan struct{} // closed once the process has been reaped
	err  error         // cmd.Wait's error, set before done closes
}

// startProc starts the promptkit command args as a child process named
// name. The test's cleanup kills it if it is still running.
func startProc(t *testing.T, name string, args []string) *proc {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatalf("os.Executable: %v", err)
	}
	enc, err := json.Marshal(args)
	if err != nil {
		t.Fatal(err)
	}
	p := &proc{name: name, out: &testkit.Logs{}, done: make(chan struct{})}
	p.cmd = exec.Command(exe, "-test.run=^$")
	p.cmd.Env = append(os.Environ(), childEnv+"="+string(enc))
	// One writer for both: exec copies the child's output from one pipe
	// and Wait returns once the copy has reached the child's exit.
	p.cmd.Stdout, p.cmd.Stderr = p.out, p.out
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

// output returns the process's output so far.
func (p *proc) output() string { return p.out.String() }

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

// database is one job database a test runs on, with a store open on it.
type database struct {
	storekit.DB
	store jobs.Store
}

func (d *database) name() string { return string(d.Kind) }

// openDatabase opens a store on db, closed when the test ends.
func openDatabase(t *testing.T, db storekit.DB) *database {
	t.Helper()
	return &database{DB: db, store: db.Open(t, jobs.Options{})}
}

// openSQLite creates a SQLite database in dir.
func openSQLite(t *testing.T, dir string) *database {
	return openDatabase(t, storekit.DB{Kind: storekit.SQLite, DSN: filepath.Join(dir, "jobs.db")})
}

// openPostgresSchema opens a store on a fresh schema of the test database,
// or skips the test when there is none.
func openPostgresSchema(t *testing.T) *database { return openDatabase(t, storekit.Postgres.New(t)) }

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
// url, for in-process workers: the configuration writeConfig writes.
func newEngine(t *testing.T, url string) *promptkit.Engine {
	t.Helper()
	return enginekit.Provider(t, url, func(c *promptkit.Config) {
		c.Backends[0].Timeout = 20 * time.Second
		c.Profiles[0].Model = "faults-model"
	})
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

// counts returns the number of jobs per state.
func counts(ctx context.Context, st jobs.Store) (map[jobs.State]int, error) {
	m, err := st.Metrics(ctx, jobs.MetricsParams{})
	return m.Counts, err
}

// settled is a testkit.WaitFor condition: no job is queued or running, and want
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

// atLeast is a testkit.WaitFor condition: at least n jobs succeeded.
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
	rows, err := d.Responses(ctx)
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

// writeCompletion answers a chat completion of model faults-model with
// content and these token counts, as the tests' fake providers do.
func writeCompletion(w http.ResponseWriter, content string, prompt, completion int) {
	w.Header().Set("Content-Type", "application/json")
	b, _ := json.Marshal(map[string]any{
		"id": "c", "object": "chat.completion", "created": 1, "model": "faults-model",
		"choices": []any{map[string]any{"index": 0, "finish_reason": "stop",
			"message": map[string]any{"role": "assistant", "content": content}}},
		"usage": map[string]int{"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion},
	})
	_, _ = w.Write(b)
}
