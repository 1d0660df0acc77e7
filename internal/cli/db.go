package cli

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

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

// openStoreWaiting is openStore for the long-running commands (serve,
// worker): while the database cannot be reached — not running yet,
// restarting, starting up — it waits with backoff and says so once,
// instead of exiting. Other errors (a bad path, a bad URL, refused
// credentials) return at once.
func openStoreWaiting(ctx context.Context, dsn string, opts jobs.Options, log *slog.Logger) (jobs.Store, error) {
	wait := 500 * time.Millisecond
	for waited := false; ; waited = true {
		st, err := openStore(ctx, dsn, opts)
		if err == nil {
			if waited {
				log.Info("database reachable; starting")
			}
			return st, nil
		}
		if !unreachable(err) {
			return nil, err
		}
		if !waited {
			log.Warn("database unreachable; waiting for it", "database", displayDB(dsn), "err", err)
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, err
		case <-t.C:
		}
		wait = min(2*wait, 10*time.Second)
	}
}

// unreachable reports whether err says the database server could not be
// reached or is not accepting connections yet.
func unreachable(err error) bool {
	var ne net.Error
	var pe *pgconn.PgError
	switch {
	case errors.Is(err, syscall.ECONNREFUSED), errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EHOSTUNREACH):
		return true
	case errors.As(err, &ne) && ne.Timeout():
		return true
	case errors.As(err, &pe):
		// cannot_connect_now (starting up, shutting down), too many
		// connections.
		return pe.Code == "57P03" || pe.Code == "53300"
	}
	return false
}
