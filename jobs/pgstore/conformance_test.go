package pgstore_test

import (
	"context"
	"testing"

	"go.uber.org/goleak"

	"github.com/promptkit/promptkit/internal/pgtest"
	"github.com/promptkit/promptkit/jobs"
	"github.com/promptkit/promptkit/jobs/jobstest"
	"github.com/promptkit/promptkit/jobs/pgstore"
)

// harness gives every suite test a store on its own fresh schema.
var harness = jobstest.Harness{
	Open: func(t *testing.T, opts jobs.Options) (jobs.Store, string) {
		dsn := pgtest.Schema(t)
		s, err := pgstore.Open(t.Context(), dsn, opts)
		if err != nil {
			t.Fatalf("open: %v", err)
		}
		return s, dsn
	},
	Reopen: func(dsn string, opts jobs.Options) (jobs.Store, error) {
		return pgstore.Open(context.Background(), dsn, opts)
	},
}

// TestMain lets the suite re-execute this binary as a second claiming
// process, and fails the run if any goroutine outlives the tests: every
// store the tests open is closed, so this proves Close stops the LISTEN
// goroutine, Notify's context watchers and the pool.
func TestMain(m *testing.M) {
	jobstest.RunChildIfRequested(harness)
	goleak.VerifyTestMain(m)
}

func TestConformance(t *testing.T) {
	pgtest.BaseURL(t)
	jobstest.Run(t, harness)
}
