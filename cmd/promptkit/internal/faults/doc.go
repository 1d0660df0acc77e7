// Package faults holds fault-injection tests of the job service: worker
// processes killed at random while they run jobs (SQLite and PostgreSQL),
// a PostgreSQL server killed and restarted under a running worker, a
// SQLite database on a disk that fills up and frees again, serve killed
// under a running batch, serve killed under a background response
// whose event stream is then resumed from another serve, serve killed
// with a call in flight while a token spends its daily budget, and serve
// killed during a run's second provider call (after a failover, a repair,
// a broken stream, a retry) to count calls against the record.
//
// The package has no code of its own; everything is in its tests, which
// run with go test ./... like every other package. Each test bounds its
// own run time and never sleeps: every wait has a deadline and wakes on
// what signals its condition (internal/testkit's WaitFor and Until) — the
// store's notifications for the jobs' progress, a log's writes for a
// worker's warnings, a child's output and exit for its startup line, the
// end of a PostgreSQL server's output for its processes' exit — with a
// slow fallback tick, since notifications are hints. Tests that need
// something the machine may not offer skip with a one-line reason: the
// PostgreSQL crash loop needs PROMPTKIT_TEST_DATABASE_URL, the restart
// test needs initdb and postgres on PATH, and the full-disk test needs
// root to mount a small tmpfs.
//
// Worker processes are the test binary itself, re-executed: TestMain sees
// the child environment variable and runs `promptkit worker` (the
// command's cli package, cmd/promptkit/internal/cli) with the arguments
// the parent passed, so a SIGKILL hits a real worker process with its
// reclaim loop, not a goroutine.
//
// Each test logs what it measured with t.Logf: jobs, kills or outage
// length, provider calls per job, answers lost (a provider call whose
// answer was produced but never written, so the job needed another) and
// duplicate responses. Run them verbosely to see the figures:
//
//	go test -v -run . ./cmd/promptkit/internal/faults/
package faults
