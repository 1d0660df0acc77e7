package cli

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"slices"
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

// serverDB is a database driver reached by URL (every database but the
// SQLite file, which is the default): adding a database is one entry of
// serverDBs.
type serverDB struct {
	schemes []string // URL schemes, without "://"
	open    func(ctx context.Context, dsn string, opts jobs.Options) (jobs.Store, error)
	migrate func(ctx context.Context, dsn string) ([]int64, error)
}

var serverDBs = []serverDB{
	{[]string{"postgres", "postgresql"}, func(ctx context.Context, dsn string, opts jobs.Options) (jobs.Store, error) {
		return pgstore.Open(ctx, dsn, opts)
	}, pgstore.Migrate},
}

// serverFor returns the driver of a database URL; false for a SQLite path
// (a bare path or sqlite://) or an unknown scheme.
func serverFor(dsn string) (serverDB, bool) {
	scheme, _, ok := strings.Cut(dsn, "://")
	if !ok {
		return serverDB{}, false
	}
	for _, d := range serverDBs {
		if slices.Contains(d.schemes, scheme) {
			return d, true
		}
	}
	return serverDB{}, false
}

// isServerDB reports whether dsn names a database server rather than a
// SQLite file.
func isServerDB(dsn string) bool {
	_, ok := serverFor(dsn)
	return ok
}

// sqlitePath maps "sqlite://path" and bare paths to a file path.
func sqlitePath(dsn string) string {
	if dsn == "" {
		return defaultDatabase
	}
	return strings.TrimPrefix(dsn, "sqlite://")
}

// checkDatabase refuses a database name that cannot work: a URL scheme
// other than postgres://, postgresql:// and sqlite:// (mysql://… would
// otherwise become a SQLite file of that name), or a SQLite path that is a
// folder or whose folder does not exist.
func checkDatabase(dsn string) error {
	if isServerDB(dsn) {
		return nil
	}
	if scheme, _, ok := strings.Cut(dsn, "://"); ok && scheme != "sqlite" {
		return usageError{fmt.Errorf("database %q: unknown scheme %s://; use a SQLite file path, sqlite://PATH or postgres://URL", redactURL(dsn), scheme)}
	}
	path := sqlitePath(dsn)
	if fi, err := os.Stat(path); err == nil && fi.IsDir() {
		return usageError{fmt.Errorf("database %s is a folder, not a file", path)}
	}
	if dir := filepath.Dir(path); dir != "." {
		if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
			return usageError{fmt.Errorf("database %s: folder %s does not exist", path, dir)}
		}
	}
	return nil
}

// redactURL drops a URL's user information (it may hold a password).
func redactURL(dsn string) string {
	if u, err := url.Parse(dsn); err == nil && u.User != nil {
		u.User = nil
		return u.String()
	}
	return dsn
}

// openStore opens (and migrates) the store named by dsn: a URL of one of
// serverDBs selects its driver (postgres:// and postgresql://:
// PostgreSQL), anything else is a SQLite file, created when missing. Errors name the SQLite file.
func openStore(ctx context.Context, dsn string, opts jobs.Options) (jobs.Store, error) {
	if err := checkDatabase(dsn); err != nil {
		return nil, err
	}
	if d, ok := serverFor(dsn); ok {
		return d.open(ctx, dsn, opts)
	}
	st, err := sqlitestore.Open(ctx, sqlitePath(dsn), opts)
	if err != nil {
		return nil, fmt.Errorf("database %s: %w", sqlitePath(dsn), err)
	}
	return st, nil
}

// openExisting is openStore for commands that only look at or change
// what is there: a SQLite file that does not exist is an error naming it
// (a typo in --database must not create an empty database).
func openExisting(ctx context.Context, dsn string) (jobs.Store, error) {
	if err := checkDatabase(dsn); err != nil {
		return nil, err
	}
	if !isServerDB(dsn) {
		if _, err := os.Stat(sqlitePath(dsn)); errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("no database at %s: start `promptkit serve` or run `promptkit migrate` there first, or pass --database (or set service.database)", sqlitePath(dsn))
		}
	}
	return openStore(ctx, dsn, jobs.Options{})
}

// migrateStore applies pending migrations to the database named by dsn
// and returns the versions applied.
func migrateStore(ctx context.Context, dsn string) ([]int64, error) {
	if err := checkDatabase(dsn); err != nil {
		return nil, err
	}
	if d, ok := serverFor(dsn); ok {
		return d.migrate(ctx, dsn)
	}
	applied, err := sqlitestore.Migrate(ctx, sqlitePath(dsn))
	if err != nil {
		return nil, fmt.Errorf("database %s: %w", sqlitePath(dsn), err)
	}
	return applied, nil
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
