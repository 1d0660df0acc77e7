//go:build linux

package faults_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/promptkit/promptkit/internal/testkit"
	"github.com/promptkit/promptkit/internal/testkit/storekit"
	"github.com/promptkit/promptkit/jobs/worker"
	"github.com/promptkit/promptkit/providertest"
)

// The restart test's shape. The outage outlasts reclaim-after: every
// running job's heartbeat is older than reclaim_after when the database
// comes back, yet a worker holding a finished answer keeps retrying its
// write until the database answers, and the reclaim loop waits for live
// workers' heartbeats before it sweeps — so no answer is thrown away.
const (
	restartJobs         = 200
	restartConcurrency  = 4
	restartLatency      = 50 * time.Millisecond
	restartHeartbeat    = time.Second
	restartReclaimAfter = 3 * time.Second
	// restartOutage is the least the database stays down.
	restartOutage = restartReclaimAfter + 2*restartHeartbeat
	// restartDeadline bounds the whole run; it leaves room for one reclaim
	// (a claim whose reply the outage swallowed is reclaimed after
	// restartReclaimAfter).
	restartDeadline = 2 * time.Minute
)

// TestDatabaseRestart kills the PostgreSQL server (SIGKILL to the
// postmaster) under a running worker and its reclaim loop, starts it
// again a few seconds later, and checks that the service recovers on its
// own: every job succeeds with one response and a gap-free event log, and
// no finished answer is thrown away (provider calls = jobs).
func TestDatabaseRestart(t *testing.T) {
	start := time.Now()
	c := startCluster(t)
	ctx, cancel := context.WithTimeout(t.Context(), restartDeadline)
	defer cancel()
	d := openDatabase(t, storekit.DB{Kind: storekit.Postgres, DSN: c.dsn()})
	srv := providertest.NewServer(providertest.WithLatency(restartLatency))
	t.Cleanup(srv.Close)

	var logs testkit.Logs
	defer func() {
		if t.Failed() {
			t.Logf("worker log (tail):\n%s", tail(logs.String(), 40))
			t.Logf("postgres log (tail):\n%s", tail(c.log.String(), 20))
		}
	}()
	w, err := worker.New(worker.Config{
		Store: d.store, Engine: newEngine(t, srv.URL), Concurrency: restartConcurrency,
		PollInterval: 100 * time.Millisecond, HeartbeatInterval: restartHeartbeat,
		Logger: logs.Logger(),
	})
	if err != nil {
		t.Fatal(err)
	}
	r, err := worker.NewReclaimer(worker.ReclaimerConfig{Store: d.store, ReclaimAfter: restartReclaimAfter, StuckAfter: time.Hour, HeartbeatInterval: restartHeartbeat, Logger: logs.Logger()})
	if err != nil {
		t.Fatal(err)
	}
	byText := map[string]string{}
	ids := enqueueJobs(t, ctx, d.store, 0, restartJobs, byText)
	stop := startAll(t, w, r)
	defer stop()

	// Mid-run, kill the server, leave it down, start it again.
	testkit.WaitFor(t, time.Minute, "a quarter of the jobs to succeed", atLeast(ctx, d.store, restartJobs/4), d.store.Notifier())
	before, _ := counts(ctx, d.store)
	down := time.Now()
	c.kill(t)
	// The outage lasts until the worker has met it where it matters: a
	// finished answer whose write failed is being held, and a heartbeat
	// has failed.
	testkit.WaitFor(t, time.Minute, "the worker to hold a result and miss a heartbeat", func() (bool, string) {
		held, beats := logs.Count("job finalization failing"), logs.Count("heartbeat failing")
		return held > 0 && beats > 0, fmt.Sprintf("%d results held, %d heartbeat failures logged", held, beats)
	}, &logs)
	// ...and past reclaim_after: the outage's length is the test's input,
	// not a wait for something to happen.
	select {
	case <-time.After(time.Until(down.Add(restartOutage))):
	case <-ctx.Done():
		t.Fatal("deadline during the outage")
	}
	c.restart(t)
	outage := time.Since(down)

	testkit.WaitFor(t, time.Until(deadlineOf(ctx)), "every job to finish after the restart", settled(ctx, d.store, restartJobs), d.store.Notifier())
	total := time.Since(start)
	stop()

	a := auditJobs(t, ctx, d, ids)
	calls := providerCalls(t, srv, byText)
	thrownAway := calls.total - restartJobs
	t.Logf("restart: %d jobs, %d slots, provider latency %v; killed the postmaster with jobs at %s; outage %v (until the restarted server was ready)",
		restartJobs, restartConcurrency, restartLatency, sortedCounts(before), outage.Round(time.Millisecond))
	t.Logf("restart: %d succeeded, others %s; %d attempt events (%d provider calls without one), %d reclaims; total %v",
		a.succeeded, sortedCounts(a.others), a.attempts, calls.total-a.attempts, a.interrupted, total.Round(time.Millisecond))
	t.Logf("restart: provider calls %d (jobs by calls made %s), answers thrown away %d, duplicate responses %d",
		calls.total, calls.histogram(ids), thrownAway, a.duplicates)
	t.Logf("restart: worker log: %d finalizations made after the database recovered; warnings and errors: %s",
		logs.Count("job finalized after the database recovered"), logSummary(logs.String()))
	if thrownAway != 0 {
		t.Errorf("%d answers thrown away: the provider was called %d times for %d jobs", thrownAway, calls.total, restartJobs)
	}
	checkCalls(t, calls, a)
}

// service is the lifecycle every background loop shares: the worker and
// the reclaimer.
type service interface {
	Start(ctx context.Context) error
	Stop(ctx context.Context) error
}

// startAll starts each service and returns what stops them all at once
// (a worker's Stop is graceful) and waits for them; stopping twice is
// safe.
func startAll(t *testing.T, ss ...service) (stop func()) {
	t.Helper()
	stop = func() {
		var wg sync.WaitGroup
		for _, s := range ss {
			wg.Go(func() { _ = s.Stop(context.Background()) })
		}
		wg.Wait()
	}
	for _, s := range ss {
		if err := s.Start(t.Context()); err != nil {
			stop()
			t.Fatalf("Start: %v", err)
		}
	}
	return stop
}

// cluster is a throwaway PostgreSQL cluster the test owns, and the
// servers (postmasters) it ran on its data directory, the last one
// current. Each server is a child process of the test with its output on
// a pipe, so what a wait looks for signals it: the log line that says
// the server is ready, the postmaster's exit, and the pipe's end, which
// comes once every process of that server (the postmaster, and the
// backends that inherited its output) has exited.
type cluster struct {
	postgres string
	base     string // owned by the server's user: data, socket
	data     string
	port     int
	// cred is the user the server runs as when the test runs as root
	// (PostgreSQL refuses root); nil otherwise.
	cred *syscall.Credential
	// log is every server's output.
	log     testkit.Logs
	servers []*server
}

// server is one run of the postmaster.
type server struct {
	cmd    *exec.Cmd
	exited chan struct{} // closed once the postmaster has been reaped
	gone   chan struct{} // closed at the end of its output: all its processes have exited
}

// readyLine is what the postmaster logs once it accepts connections,
// after crash recovery too.
const readyLine = "database system is ready to accept connections"

// startCluster creates and starts a cluster on a free loopback port with
// trust authentication, stopped when the test ends. It skips the test
// when initdb or postgres is missing, or when running as root without a
// postgres user.
func startCluster(t *testing.T) *cluster {
	t.Helper()
	initdb, err := exec.LookPath("initdb")
	if err != nil {
		t.Skip("initdb not found on PATH: skipping the PostgreSQL restart test")
	}
	postgres, err := exec.LookPath("postgres")
	if err != nil {
		t.Skip("postgres not found on PATH: skipping the PostgreSQL restart test")
	}
	base, err := os.MkdirTemp("", "promptkit-faults-pg-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(base) })
	c := &cluster{postgres: postgres, base: base, data: filepath.Join(base, "data")}
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			t.Skip("running as root and no postgres user to run PostgreSQL as: skipping the restart test")
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		if err := os.Chown(base, uid, gid); err != nil {
			t.Fatal(err)
		}
		c.cred = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
	}
	if out, err := c.command(initdb, "-D", c.data, "-U", "postgres", "-A", "trust", "-E", "UTF8", "--no-sync", "--no-instructions").CombinedOutput(); err != nil {
		t.Fatalf("initdb: %v\n%s", err, out)
	}
	c.port = freePort(t)
	t.Cleanup(func() { c.stop(t) })
	if err := c.start(t); err != nil {
		t.Fatalf("starting postgres: %v", err)
	}
	return c
}

// command runs name as the server's user.
func (c *cluster) command(name string, args ...string) *exec.Cmd {
	cmd := exec.Command(name, args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: c.cred}
	cmd.Dir = c.base // the test's directory may be closed to that user
	return cmd
}

func (c *cluster) dsn() string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", c.port)
}

// start starts a server and waits until it logs that it accepts
// connections (after crash recovery, when the last one was killed): woken
// by its output and by its exit, within a minute.
func (c *cluster) start(t *testing.T) error {
	r, w, err := os.Pipe()
	if err != nil {
		return err
	}
	cmd := c.command(c.postgres, "-D", c.data, "-p", strconv.Itoa(c.port), "-k", c.base,
		"-c", "listen_addresses=127.0.0.1", "-c", "fsync=off", "-c", "logging_collector=off")
	cmd.Stdout, cmd.Stderr = w, w
	// Should this test binary die, the server dies with it.
	cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
	before := c.log.Count(readyLine)
	err = cmd.Start()
	w.Close() // the server's processes hold the only write ends
	if err != nil {
		r.Close()
		return err
	}
	s := &server{cmd: cmd, exited: make(chan struct{}), gone: make(chan struct{})}
	c.servers = append(c.servers, s)
	go func() { _, _ = io.Copy(&c.log, r); r.Close(); close(s.gone) }()
	go func() { _ = cmd.Wait(); close(s.exited) }()
	ready := func() bool { return c.log.Count(readyLine) > before }
	if !testkit.Until(t.Context(), time.Minute, func() bool { return ready() || closed(s.exited) }, &c.log, testkit.Chan(s.exited)) {
		return fmt.Errorf("not ready within a minute:\n%s", tail(c.log.String(), 10))
	}
	if !ready() {
		return fmt.Errorf("postgres exited (%v):\n%s", cmd.ProcessState, tail(c.log.String(), 10))
	}
	return nil
}

// current is the server started last.
func (c *cluster) current() *server { return c.servers[len(c.servers)-1] }

// kill sends SIGKILL to the postmaster.
func (c *cluster) kill(t *testing.T) {
	t.Helper()
	if err := c.current().cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatalf("kill the postmaster: %v", err)
	}
}

// restart starts a killed server again. The old server's backends exit on
// their own once they notice the postmaster is gone, and until they have
// the new one refuses to start (their shared memory is still in use):
// restart waits for the end of the old server's output, which comes when
// the last of them has exited, then starts the new one.
func (c *cluster) restart(t *testing.T) {
	t.Helper()
	old := c.current()
	testkit.WaitFor(t, 30*time.Second, "the killed server's processes to exit", func() (bool, string) {
		return closed(old.gone), "its output is still open"
	}, testkit.Chan(old.gone))
	if err := c.start(t); err != nil {
		t.Fatalf("starting postgres after the kill: %v", err)
	}
}

// stop ends every server of the cluster at once (SIGQUIT: an immediate
// shutdown, the postmaster ending its backends first; SIGKILL when that
// does not end it within 20 s), and waits until all their processes have
// exited.
func (c *cluster) stop(t *testing.T) {
	for _, s := range c.servers {
		if !closed(s.exited) {
			_ = s.cmd.Process.Signal(syscall.SIGQUIT)
			select {
			case <-s.exited:
			case <-time.After(20 * time.Second):
				t.Logf("postgres did not stop within 20 s of SIGQUIT: killing it")
				_ = s.cmd.Process.Signal(syscall.SIGKILL)
				<-s.exited
			}
		}
		select {
		case <-s.gone:
		case <-time.After(30 * time.Second):
			t.Errorf("a postgres process still holds the server's output 30 s after its postmaster exited")
		}
	}
}

// closed reports whether ch is closed (it is never sent on).
func closed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// freePort returns a loopback TCP port nobody listens on right now.
func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}
