package pgstore_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/promptkit/promptkit/internal/pgtest"
	"github.com/promptkit/promptkit/jobs/jobstest"
	"github.com/promptkit/promptkit/jobs/pgstore"
)

// harness gives every suite test a fresh schema, and checks the side
// tables once the test's stores have closed.
var harness = jobstest.Harness{
	NewDatabase: func(t *testing.T) string {
		dsn := pgtest.Schema(t)
		t.Cleanup(func() { checkSideTables(t, dsn) })
		return dsn
	},
	Open:               jobstest.Opener(pgstore.Open),
	CrossProcessDeltas: true,
}

// TestMain lets the suite re-execute this binary as a second claiming
// process, and fails the run if any goroutine outlives the tests: every
// store the tests open is closed, so this proves Close stops the LISTEN
// goroutine, Notify's context watchers and the pool.
func TestMain(m *testing.M) { jobstest.Main(m, harness) }

func TestConformance(t *testing.T) {
	pgtest.BaseURL(t)
	jobstest.Run(t, harness)
}

// sideTablesMismatch counts the rows that break the side tables' contract
// (migrations 00002, 00013): a job is in job_queue, with its claim-order
// columns (its start tag included), exactly when it is queued, and in
// job_running exactly when it is running.
const sideTablesMismatch = `
	SELECT
		(SELECT count(*) FROM jobs j WHERE
			(j.state = 'queued') <> EXISTS (SELECT 1 FROM job_queue q WHERE q.job_id = j.id
				AND q.priority = j.priority AND q.available_at = j.available_at
				AND q.created_at = j.created_at AND q.depends_on IS NOT DISTINCT FROM j.depends_on
				AND q.tag = j.fair_tag)
			OR (j.state = 'running') <> EXISTS (SELECT 1 FROM job_running r WHERE r.job_id = j.id))
		+ (SELECT count(*) FROM job_queue q WHERE NOT EXISTS (SELECT 1 FROM jobs j WHERE j.id = q.job_id))
		+ (SELECT count(*) FROM job_running r WHERE NOT EXISTS (SELECT 1 FROM jobs j WHERE j.id = r.job_id))`

// checkSideTables runs after a suite test (and after its stores closed)
// and fails it if the side tables disagree with jobs.state.
func checkSideTables(t *testing.T, dsn string) {
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Errorf("side tables: connect: %v", err)
		return
	}
	defer conn.Close(ctx)
	var bad int
	if err := conn.QueryRow(ctx, sideTablesMismatch).Scan(&bad); err != nil {
		t.Errorf("side tables: %v", err)
	} else if bad != 0 {
		t.Errorf("%d jobs disagree with job_queue / job_running", bad)
	}
}
