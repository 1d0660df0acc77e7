//go:build linux

package faults_test

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

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
	d := openPostgres(t, c.dsn())
	srv := providertest.NewServer(providertest.WithLatency(restartLatency))
	t.Cleanup(srv.Close)

	var logs logBuf
	defer func() {
		if t.Failed() {
			t.Logf("worker log (tail):\n%s", tail(logs.String(), 40))
			b, _ := os.ReadFile(c.logFile)
			t.Logf("postgres log (tail):\n%s", tail(string(b), 20))
		}
	}()
	w, err := worker.New(worker.Config{
		Store: d.store, Engine: newEngine(t, srv.URL), Concurrency: restartConcurrency,
		PollInterval: 100 * time.Millisecond, HeartbeatInterval: restartHeartbeat,
		Logger: logs.logger(),
	})
	if err != nil {
		t.Fatal(err)
	}
	r, err := worker.NewReclaimer(worker.ReclaimerConfig{Store: d.store, ReclaimAfter: restartReclaimAfter, StuckAfter: time.Hour, HeartbeatInterval: restartHeartbeat, Logger: logs.logger()})
	if err != nil {
		t.Fatal(err)
	}
	byText := map[string]string{}
	ids := enqueueJobs(t, ctx, d.store, 0, restartJobs, byText)
	stop := startAll(t, w, r)
	defer stop()

	// Mid-run, kill the server, leave it down, start it again.
	waitFor(t, time.Minute, "a quarter of the jobs to succeed", atLeast(ctx, d.store, restartJobs/4))
	before, _ := counts(ctx, d.store)
	down := time.Now()
	c.kill(t)
	// The outage lasts until the worker has met it where it matters: a
	// finished answer whose write failed is being held, and a heartbeat
	// has failed.
	waitFor(t, time.Minute, "the worker to hold a result and miss a heartbeat", func() (bool, string) {
		held, beats := logs.count("job finalization failing"), logs.count("heartbeat failing")
		return held > 0 && beats > 0, fmt.Sprintf("%d results held, %d heartbeat failures logged", held, beats)
	})
	// ...and past reclaim_after: the outage's length is the test's input,
	// not a wait for something to happen.
	select {
	case <-time.After(time.Until(down.Add(restartOutage))):
	case <-ctx.Done():
		t.Fatal("deadline during the outage")
	}
	c.restart(t)
	outage := time.Since(down)

	waitFor(t, time.Until(deadlineOf(ctx)), "every job to finish after the restart", settled(ctx, d.store, restartJobs))
	total := time.Since(start)
	stop()

	a := auditJobs(t, ctx, d, ids)
	calls := providerCalls(t, srv, byText)
	thrownAway := calls.total - restartJobs
	t.Logf("restart: %d jobs, %d slots, provider latency %v; killed the postmaster with jobs at %s; outage %v (until pg_ctl start returned)",
		restartJobs, restartConcurrency, restartLatency, sortedCounts(before), outage.Round(time.Millisecond))
	t.Logf("restart: %d succeeded, others %s; %d attempt events (%d provider calls without one), %d reclaims; total %v",
		a.succeeded, sortedCounts(a.others), a.attempts, calls.total-a.attempts, a.interrupted, total.Round(time.Millisecond))
	t.Logf("restart: provider calls %d (jobs by calls made %s), answers thrown away %d, duplicate responses %d",
		calls.total, calls.histogram(ids), thrownAway, a.duplicates)
	t.Logf("restart: worker log: %d finalizations made after the database recovered; warnings and errors: %s",
		logs.count("job finalized after the database recovered"), logSummary(logs.String()))
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

// cluster is a throwaway PostgreSQL server the test owns.
type cluster struct {
	pgCtl   string
	base    string // owned by the server's user: data, socket, log
	data    string
	logFile string
	port    int
	// runAs is the user the server runs as when the test runs as root
	// (PostgreSQL refuses root); empty otherwise.
	runAs string
}

// startCluster creates and starts a cluster on a free loopback port with
// trust authentication, stopped when the test ends. It skips the test
// when initdb or pg_ctl is missing, or when running as root without a
// postgres user.
func startCluster(t *testing.T) *cluster {
	t.Helper()
	initdb, err := exec.LookPath("initdb")
	if err != nil {
		t.Skip("initdb not found on PATH: skipping the PostgreSQL restart test")
	}
	pgCtl, err := exec.LookPath("pg_ctl")
	if err != nil {
		t.Skip("pg_ctl not found on PATH: skipping the PostgreSQL restart test")
	}
	base, err := os.MkdirTemp("", "promptkit-faults-pg-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(base) })
	c := &cluster{pgCtl: pgCtl, base: base, data: filepath.Join(base, "data"), logFile: filepath.Join(base, "postgres.log")}
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
		c.runAs = "postgres"
	}
	if out, err := c.command(initdb, "-D", c.data, "-U", "postgres", "-A", "trust", "-E", "UTF8", "--no-sync", "--no-instructions").CombinedOutput(); err != nil {
		t.Fatalf("initdb: %v\n%s", err, out)
	}
	c.port = freePort(t)
	t.Cleanup(func() { c.stop(t) })
	if err := c.start(); err != nil {
		t.Fatalf("pg_ctl start: %v", err)
	}
	return c
}

// command runs name as the server's user.
func (c *cluster) command(name string, args ...string) *exec.Cmd {
	var cmd *exec.Cmd
	if c.runAs != "" {
		cmd = exec.Command("runuser", append([]string{"-u", c.runAs, "--", name}, args...)...)
	} else {
		cmd = exec.Command(name, args...)
	}
	cmd.Dir = c.base // the test's directory may be closed to that user
	return cmd
}

func (c *cluster) dsn() string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", c.port)
}

// start starts the server and waits until it accepts connections (after
// crash recovery, when it was killed).
func (c *cluster) start() error {
	opts := fmt.Sprintf("-p %d -k %s -c listen_addresses=127.0.0.1 -c fsync=off", c.port, c.base)
	out, err := c.command(c.pgCtl, "start", "-D", c.data, "-l", c.logFile, "-w", "-t", "60", "-o", opts).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%v: %s", err, strings.TrimSpace(string(out)))
	}
	return nil
}

// restart starts a killed server again. The old server's backends exit
// on their own once they notice the postmaster is gone; until then the
// new one refuses to start, so it is tried again.
func (c *cluster) restart(t *testing.T) {
	t.Helper()
	var err error
	if !poll(30*time.Second, func() bool { err = c.start(); return err == nil }) {
		t.Fatalf("pg_ctl start after the kill: %v", err)
	}
}

// pid reads the postmaster's process ID from postmaster.pid.
func (c *cluster) pid() (int, error) {
	b, err := os.ReadFile(filepath.Join(c.data, "postmaster.pid"))
	if err != nil {
		return 0, err
	}
	line, _, _ := strings.Cut(string(b), "\n")
	return strconv.Atoi(strings.TrimSpace(line))
}

// kill sends SIGKILL to the postmaster.
func (c *cluster) kill(t *testing.T) {
	t.Helper()
	pid, err := c.pid()
	if err != nil {
		t.Fatalf("postmaster pid: %v", err)
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatalf("kill postmaster %d: %v", pid, err)
	}
}

// stop stops the server at once, killing the postmaster when pg_ctl
// cannot.
func (c *cluster) stop(t *testing.T) {
	out, err := c.command(c.pgCtl, "stop", "-D", c.data, "-m", "immediate", "-w", "-t", "20").CombinedOutput()
	if err == nil {
		return
	}
	if pid, perr := c.pid(); perr == nil {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
	if !strings.Contains(string(out), "Is server running?") {
		t.Logf("pg_ctl stop: %v: %s", err, strings.TrimSpace(string(out)))
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
