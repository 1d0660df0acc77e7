package cli

import (
	"context"
	"strings"

	"github.com/promptkit/promptkit/jobs"
	"github.com/promptkit/promptkit/jobs/pgstore"
	"github.com/promptkit/promptkit/jobs/sqlitestore"
)

// defaultDatabase is the SQLite file serve and every operator command use
// when --database is not given, so a second shell in the same folder needs
// no flags.
const defaultDatabase = "promptkit.db"

// isPostgres reports whether dsn selects PostgreSQL.
func isPostgres(dsn string) bool {
	return strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://")
}

// sqlitePath maps "sqlite://path" and bare paths to a file path.
func sqlitePath(dsn string) string {
	if dsn == "" {
		return defaultDatabase
	}
	return strings.TrimPrefix(dsn, "sqlite://")
}

// openStore opens (and migrates) the store named by dsn: postgres:// or
// postgresql:// URLs select PostgreSQL, anything else is a SQLite file.
func openStore(ctx context.Context, dsn string, opts jobs.Options) (jobs.Store, error) {
	if isPostgres(dsn) {
		return pgstore.Open(ctx, dsn, opts)
	}
	return sqlitestore.Open(ctx, sqlitePath(dsn), opts)
}

// migrateStore applies pending migrations to the database named by dsn.
func migrateStore(ctx context.Context, dsn string) error {
	if isPostgres(dsn) {
		return pgstore.Migrate(ctx, dsn)
	}
	return sqlitestore.Migrate(ctx, sqlitePath(dsn))
}
