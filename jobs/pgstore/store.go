package pgstore

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"hash/fnv"
	"io/fs"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"

	"github.com/promptkit/promptkit/jobs"
	"github.com/promptkit/promptkit/jobs/internal/deltas"
	"github.com/promptkit/promptkit/jobs/internal/groupcommit"
	"github.com/promptkit/promptkit/jobs/internal/health"
	"github.com/promptkit/promptkit/jobs/internal/storeops"
)

//go:embed migrations/*.sql
var migrationFiles embed.FS

// migrationFS holds the migrations at its root, where goose reads them
// (fs.Sub fails only on an invalid path).
var migrationFS, _ = fs.Sub(migrationFiles, "migrations")

// notifyChannel is the LISTEN/NOTIFY channel; the payload is the schema,
// so stores on other schemas of the same database ignore it.
const notifyChannel = "promptkit_jobs"

var _ jobs.Store = (*Store)(nil)

// Store is a jobs.Store on PostgreSQL. It is safe for concurrent use by
// many goroutines and by many processes sharing one database.
//
// The methods of jobs.Store on files, batches and tokens (CreateFile,
// GetFile, ListFiles, ReadFile, DeleteFile, CreateBatch, GetBatch,
// ListBatches, ActiveBatches, MoveBatch, CancelBatch, FinishBatch,
// BatchProgress, BatchResults, CreateToken, ListTokens, RevokeToken,
// TokenByHash, HasTokens) are written once for both stores and promoted
// from an embedded field, so go doc does not list them here: see
// jobs.Store.
type Store struct {
	// storeOps are the file, batch and token methods (see batches.go and
	// tokens.go).
	storeOps

	pool    *pgxpool.Pool
	now     func() time.Time
	schema  string
	lockKey int64
	// listenCfg opens the dedicated LISTEN connection.
	listenCfg *pgx.ConnConfig

	// writes group-commits concurrent Enqueue, Claim and finishing calls.
	writes *groupcommit.Group[*writeReq]
	// prompts remembers the prompts of the jobs this store claimed, so a
	// Succeed can name its response (see promptCache).
	prompts promptCache
	// notify is the store's Notifier (deltas.go): its first subscription
	// starts the LISTEN loop (listen), which Close stops, and it sends
	// this process's answer pieces to the others.
	notify *notifier
	// probeKey is this store's row of readiness (see Check), and the
	// origin of its answer pieces; health remembers the latest failed
	// write (see wrote).
	probeKey  string
	health    health.Writes
	closeOnce sync.Once
}

// storeOps names storeops.Ops as Store embeds it: an unexported field,
// its methods Store's.
type storeOps = storeops.Ops

// opsDB is the Store as the storeOps it embeds run on it: a type of its
// own, so that its methods are not the Store's.
type opsDB Store

var _ storeops.DB = (*opsDB)(nil)

func (d *opsDB) store() *Store { return (*Store)(d) }

// Open connects to the database at url (postgres:// or postgresql://),
// applies pending migrations and returns a Store. A search_path query
// parameter selects the schema (created when missing); pgxpool parameters
// such as pool_max_conns are honoured. Errors never contain the URL.
func Open(ctx context.Context, url string, opts jobs.Options) (*Store, error) {
	return open(ctx, url, opts, nil)
}

// open is Open; configure, when set, adjusts the pool's configuration
// last (tests watch the store's own connections this way).
func open(ctx context.Context, url string, opts jobs.Options, configure func(*pgxpool.Config)) (*Store, error) {
	cfg, err := parseURL(url)
	if err != nil {
		return nil, err
	}
	if _, err := migrate(ctx, cfg.ConnConfig); err != nil {
		return nil, err
	}
	// A read's plan must not depend on the tables' size when it was
	// first made (readParams).
	for k, v := range readParams {
		if _, set := cfg.ConnConfig.RuntimeParams[k]; !set {
			cfg.ConnConfig.RuntimeParams[k] = v
		}
	}
	if configure != nil {
		configure(cfg)
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("pgstore: open: %w", err)
	}
	var schema string
	if err := pool.QueryRow(ctx, `SELECT current_schema()`).Scan(&schema); err != nil {
		pool.Close()
		return nil, fmt.Errorf("pgstore: open: %w", err)
	}
	now := opts.Now
	if now == nil {
		now = time.Now
	}
	s := &Store{
		pool:      pool,
		now:       now,
		schema:    schema,
		lockKey:   eventLockKey(schema),
		listenCfg: cfg.ConnConfig.Copy(),
		probeKey:  jobs.NewID(),
	}
	s.storeOps = storeops.NewOps("pgstore", (*opsDB)(s))
	s.writes = groupcommit.New(writeBatchMax, (*writeReq).key, s.runWrites)
	s.notify = &notifier{LocalNotifier: jobs.NewLocalNotifier(s.listen), schema: schema, origin: s.probeKey,
		out: newDeltaSender(s.sendDeltas)}
	return s, nil
}

// Migrate applies the embedded migrations to the database at url, in the
// schema its search_path names (created when missing), and returns the
// versions it applied (none: the schema was current). It is safe to run
// from several processes at once: a per-schema advisory lock serializes
// them.
func Migrate(ctx context.Context, url string) (applied []int64, err error) {
	cfg, err := parseURL(url)
	if err != nil {
		return nil, err
	}
	return migrate(ctx, cfg.ConnConfig)
}

// parseURL parses a postgres URL without ever echoing it (it may carry a
// password) in an error.
func parseURL(url string) (*pgxpool.Config, error) {
	if !strings.HasPrefix(url, "postgres://") && !strings.HasPrefix(url, "postgresql://") {
		return nil, fmt.Errorf("pgstore: database URL must start with postgres:// or postgresql://: %w", jobs.ErrInvalid)
	}
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("pgstore: cannot parse the database URL: %w", jobs.ErrInvalid)
	}
	return cfg, nil
}

func migrate(ctx context.Context, cc *pgx.ConnConfig) ([]int64, error) {
	if schema := firstSchema(cc.RuntimeParams["search_path"]); schema != "" {
		if err := createSchema(ctx, cc, schema); err != nil {
			return nil, err
		}
	}
	db := stdlib.OpenDB(*cc.Copy())
	defer db.Close()
	p, err := goose.NewProvider(goose.DialectPostgres, db, migrationFS,
		goose.WithSessionLocker(migrationLocker{}),
		goose.WithDisableGlobalRegistry(true))
	if err != nil {
		return nil, fmt.Errorf("pgstore: migrate: %w", err)
	}
	res, err := p.Up(ctx)
	if err != nil {
		return nil, fmt.Errorf("pgstore: migrate: %w", err)
	}
	var applied []int64
	for _, r := range res {
		applied = append(applied, r.Source.Version)
	}
	return applied, nil
}

// createSchema creates the search_path's schema unless it exists; a
// concurrent creator winning the race is not an error.
func createSchema(ctx context.Context, cc *pgx.ConnConfig, schema string) error {
	conn, err := pgx.ConnectConfig(ctx, cc.Copy())
	if err != nil {
		return fmt.Errorf("pgstore: migrate: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	var exists bool
	if err := conn.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = $1)`, schema).Scan(&exists); err != nil {
		return fmt.Errorf("pgstore: migrate: %w", err)
	}
	if exists {
		return nil
	}
	_, err = conn.Exec(ctx, `CREATE SCHEMA IF NOT EXISTS `+pgx.Identifier{schema}.Sanitize())
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && (pgErr.Code == "23505" || pgErr.Code == "42P06") {
		err = nil
	}
	if err != nil {
		return fmt.Errorf("pgstore: migrate: create schema: %w", err)
	}
	return nil
}

// firstSchema returns the first schema of a search_path value, unquoted,
// or "" when there is none (or it is "$user").
func firstSchema(path string) string {
	first, _, _ := strings.Cut(path, ",")
	first = strings.TrimSpace(first)
	if len(first) >= 2 && first[0] == '"' && first[len(first)-1] == '"' {
		return strings.ReplaceAll(first[1:len(first)-1], `""`, `"`)
	}
	if first == "$user" {
		return ""
	}
	return strings.ToLower(first)
}

// migrationLocker serializes migrations of one schema with a blocking
// session advisory lock (goose's own locker polls every few seconds).
type migrationLocker struct{}

func (migrationLocker) SessionLock(ctx context.Context, conn *sql.Conn) error {
	_, err := conn.ExecContext(ctx, `SELECT pg_advisory_lock(hashtextextended('promptkit/migrate/' || current_schema(), 0))`)
	return err
}

func (migrationLocker) SessionUnlock(ctx context.Context, conn *sql.Conn) error {
	_, err := conn.ExecContext(ctx, `SELECT pg_advisory_unlock(hashtextextended('promptkit/migrate/' || current_schema(), 0))`)
	return err
}

// eventLockKey is the advisory lock key of a schema's event lock: one
// constant per schema, so separate schemas never wait for each other.
func eventLockKey(schema string) int64 {
	h := fnv.New64a()
	h.Write([]byte("promptkit/jobs/events/" + schema))
	return int64(h.Sum64())
}

// Close waits for the group commit in hand (calls still waiting fail),
// closes every Notify channel, stops the LISTEN goroutine and closes the
// connection pool. Closing twice is safe.
func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		s.writes.Close()
		s.notify.close() // the LISTEN loop ends at once
		s.pool.Close()
	})
	return nil
}

// clock is the store's now at PostgreSQL's precision (microseconds), in
// UTC, so what a method returns equals what a later read returns.
func (s *Store) clock() time.Time {
	return s.now().UTC().Truncate(time.Microsecond)
}

// Notifier returns the store's notifier: its Notify channels receive a
// value, coalesced, when a job is enqueued or changes state, or a batch's
// status changes, in this process or (through LISTEN) another, and are
// closed when ctx ends or the store closes; its answer pieces reach the
// readers of every process on the database (see deltas.go). See
// jobs.Store.
func (s *Store) Notifier() jobs.Notifier { return s.notify }

// listen keeps one LISTEN connection open until ctx ends (the store
// closes), reconnecting with capped exponential backoff.
func (s *Store) listen(ctx context.Context) error {
	const minBackoff, maxBackoff = 50 * time.Millisecond, 5 * time.Second
	backoff := minBackoff
	for {
		connected, _ := s.listenOnce(ctx)
		if ctx.Err() != nil {
			return nil
		}
		if connected {
			backoff = minBackoff
		}
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-t.C:
		}
		backoff = min(2*backoff, maxBackoff)
	}
}

// listenOnce connects, LISTENs and forwards notifications for this
// schema until the connection fails or ctx ends.
func (s *Store) listenOnce(ctx context.Context) (connected bool, err error) {
	conn, err := pgx.ConnectConfig(ctx, s.listenCfg.Copy())
	if err != nil {
		return false, err
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		conn.Close(cctx)
	}()
	if _, err := conn.Exec(ctx, `LISTEN `+notifyChannel+`; LISTEN `+deltaChannel); err != nil {
		return false, err
	}
	// Anything sent while we were not listening is lost: wake everyone
	// once so they poll.
	s.notify.Broadcast()
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			return true, err
		}
		switch {
		case n.Channel == deltaChannel:
			if jobID, d, ok := deltas.Parse(n.Payload, s.schema, s.probeKey); ok {
				s.notify.LocalNotifier.PublishDelta(jobID, d) // to this process's readers only
			}
		case n.Payload == s.schema:
			s.notify.Broadcast()
		}
	}
}
