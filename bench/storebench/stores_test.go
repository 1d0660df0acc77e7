package storebench

import (
	"context"

	"github.com/promptkit/promptkit/jobs"
	"github.com/promptkit/promptkit/jobs/pgstore"
	"github.com/promptkit/promptkit/jobs/sqlitestore"
)

func openPGStore(ctx context.Context, url string) (jobs.Store, error) {
	return pgstore.Open(ctx, url, jobs.Options{})
}

func openSQLiteStore(ctx context.Context, path string) (jobs.Store, error) {
	return sqlitestore.Open(ctx, path, jobs.Options{})
}
