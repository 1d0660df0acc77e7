package pgstore_test

import (
	"context"
	"testing"

	"github.com/promptkit/promptkit/internal/pgtest"
	"github.com/promptkit/promptkit/jobs"
	"github.com/promptkit/promptkit/jobs/pgstore"
)

// open opens a store on a fresh schema and closes it when the test ends.
func open(t testing.TB, opts jobs.Options) (*pgstore.Store, string) {
	t.Helper()
	dsn := pgtest.Schema(t)
	s, err := pgstore.Open(context.Background(), dsn, opts)
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s, dsn
}
