//go:build linux

package faults_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/promptkit/promptkit/internal/testkit"
	"github.com/promptkit/promptkit/providertest"
)

// The crash loop's shape. The provider's latency keeps each call in
// flight long enough for kills to land mid-call; with crashWorkers
// processes of crashConcurrency slots the queue lasts longer than the
// kills.
const (
	crashJobs        = 800
	crashWorkers     = 3
	crashConcurrency = 2
	crashLatency     = 80 * time.Millisecond
	crashKills       = 8
	// Reclaim timings: a dead worker's jobs are back in the queue about a
	// second after its last heartbeat.
	crashHeartbeat    = 100 * time.Millisecond
	crashReclaimAfter = time.Second
	// crashDeadline bounds the whole run.
	crashDeadline = 2 * time.Minute
)

// TestCrashLoop kills worker processes at random while they run jobs and
// checks that the service loses nothing and duplicates nothing: every job
// succeeds with exactly one response, every job's event log is a
// gap-free path, and every provider call is accounted for by a recorded
// attempt or by a reclaim of a killed worker's job.
func TestCrashLoop(t *testing.T) {
	t.Run("sqlite", func(t *testing.T) { crashLoop(t, openSQLite(t, t.TempDir())) })
	t.Run("postgres", func(t *testing.T) { crashLoop(t, openPostgresSchema(t)) })
}

func crashLoop(t *testing.T, d *database) {
	start := time.Now()
	ctx, cancel := context.WithTimeout(t.Context(), crashDeadline)
	defer cancel()
	dir := t.TempDir()
	srv := providertest.NewServer(providertest.WithLatency(crashLatency))
	t.Cleanup(srv.Close)
	cfg := writeConfig(t, dir, srv.URL)

	byText := map[string]string{}
	ids := enqueueJobs(t, ctx, d.store, 0, crashJobs, byText)

	args := []string{"worker", "--database", d.DSN, "--config", cfg,
		"--workers", fmt.Sprint(crashConcurrency),
		"--heartbeat-interval", crashHeartbeat.String(),
		"--reclaim-after", crashReclaimAfter.String(),
		"--stuck-after", "1h", "--shutdown-grace", "10s"}
	var all []*proc
	spawn := func() *proc {
		p := startProc(t, fmt.Sprintf("worker-%d", len(all)+1), args)
		all = append(all, p)
		return p
	}
	live := make([]*proc, crashWorkers)
	for i := range live {
		live[i] = spawn()
	}
	defer func() {
		if t.Failed() {
			for _, p := range all {
				t.Logf("%s log (tail):\n%s", p.name, tail(p.output(), 15))
			}
		}
	}()

	// Kill one worker at random every 1–2 s, replacing it, until the kills
	// are spent or the queue has drained.
	seed := uint64(time.Now().UnixNano())
	rng := rand.New(rand.NewPCG(seed, seed>>1))
	drained := settled(ctx, d.store, crashJobs)
	kills := 0
	for kills < crashKills {
		pace := time.Second + time.Duration(rng.Int64N(int64(time.Second)))
		if testkit.Until(ctx, pace, func() bool { ok, _ := drained(); return ok }, d.store.Notifier()) {
			break
		}
		i := rng.IntN(len(live))
		live[i].kill()
		kills++
		live[i] = spawn()
	}
	killsDone := time.Since(start)

	// The surviving workers finish the queue.
	testkit.WaitFor(t, time.Until(deadlineOf(ctx)), "every job to finish", drained, d.store.Notifier())
	drainedAt := time.Since(start)
	for _, p := range live {
		code, err := p.stop(15 * time.Second)
		if err != nil || code != 0 {
			t.Errorf("%s: exit code %d after SIGTERM (%v)", p.name, code, err)
		}
	}
	checkLogs(t, all)

	a := auditJobs(t, ctx, d, ids)
	c := providerCalls(t, srv, byText)
	checkCalls(t, c, a)
	t.Logf("%s: %d jobs, %d workers × %d slots, provider latency %v, seed %d", d.name(), crashJobs, crashWorkers, crashConcurrency, crashLatency, seed)
	t.Logf("%s: %d kills in %v (%d killed mid-call); queue drained at %v", d.name(), kills, killsDone.Round(time.Millisecond), c.cancelled, drainedAt.Round(time.Millisecond))
	t.Logf("%s: %d succeeded, others %s; %d attempt events, %d interrupted attempts (reclaims)", d.name(), a.succeeded, sortedCounts(a.others), a.attempts, a.interrupted)
	t.Logf("%s: provider calls %d (%.3f per job; jobs by calls made %s), answers lost %d, duplicate responses %d",
		d.name(), c.total, float64(c.total)/float64(crashJobs), c.histogram(ids), c.completed()-a.succeeded, a.duplicates)
	var outs []string
	for _, p := range all {
		outs = append(outs, p.output())
	}
	t.Logf("%s: worker warnings and errors: %s", d.name(), logSummary(outs...))
	if kills == 0 {
		t.Errorf("the queue drained before the first kill: the test proved nothing (make it longer)")
	}
}

// deadlineOf is ctx's deadline (every test context here has one).
func deadlineOf(ctx context.Context) time.Time {
	d, _ := ctx.Deadline()
	return d
}
