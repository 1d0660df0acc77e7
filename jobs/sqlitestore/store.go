// Package sqlitestore is the jobs.Store on SQLite (modernc.org/sqlite, no
// cgo): one file, WAL, one writer connection, a pool of read-only
// connections, embedded goose migrations applied on Open.
//
// # Concurrency
//
// Every write runs in a BEGIN IMMEDIATE transaction on the single writer
// connection, so writes in this process are serialised by database/sql and
// writes from other processes on the same file by SQLite's write lock
// (waiting up to the busy timeout). Reads go to the reader pool and see the
// last committed state without blocking the writer.
//
// Because only one transaction writes at a time, a transaction that reads
// the clock after taking the lock, stamps updated_at with it and appends
// its events before committing gives exactly the ordering the jobs package
// doc asks for: event sequence order is commit order, and a reader that
// takes the lock (ChangesSince) knows every change stamped before its clock
// reading has committed.
//
// # Group commit
//
// The per-job writes (Enqueue, Claim, Heartbeat, Succeed, Requeue, Fail,
// AppendAttempt) go through a group committer (jobs/internal/groupcommit):
// calls that arrive while a write is in progress run together in the next
// transaction, each inside its own SAVEPOINT, so one commit serves many
// callers and a call that fails is rolled back alone. Each caller still
// gets its own result or error, and an error means nothing of that call
// was stored; a call whose context ends while it waits is not run, and
// calls after Close fail. Rarer writes (EnqueueBatch, Cancel, Retry,
// Reclaim, Archive, CreateToken, RevokeToken, and those of files and
// batches) and ChangesSince run their own transactions. CreateFile and
// FinishBatch read their content inside theirs, holding the write lock
// while they do: their readers should be local (spooled) files. One that
// stored more than walSizeLimit bytes then checkpoints the WAL and
// truncates it (truncateWAL), which SQLite would otherwise leave that big.
//
// # Notifications
//
// Messaging lives beside the store, in its Notifier (a
// jobs.LocalNotifier): its Notify wakes on this Store's enqueues,
// transitions and batch status changes, and (polling PRAGMA data_version,
// see watch) on commits by other processes sharing the file; its answer
// pieces stay in this process.
//
// # Readiness
//
// Check writes the one row of the readiness table in a transaction of its
// own on the writer connection, so it waits its turn, and also fails for a
// while after a real write failed for a database reason, until a write
// stores something (see Check and wrote in health.go).
package sqlitestore

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pressly/goose/v3"
	"modernc.org/sqlite" // also registers the "sqlite" driver
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/promptkit/promptkit/jobs"
	"github.com/promptkit/promptkit/jobs/internal/groupcommit"
	"github.com/promptkit/promptkit/jobs/internal/health"
	"github.com/promptkit/promptkit/jobs/internal/storeops"
)

var _ jobs.Store = (*Store)(nil)

//go:embed migrations/*.sql
var migrationFiles embed.FS

// migrationFS holds the migrations at its root, where goose reads them
// (fs.Sub fails only on an invalid path).
var migrationFS, _ = fs.Sub(migrationFiles, "migrations")

// busyTimeout is how long a writer waits for another process's write lock
// before giving up with SQLITE_BUSY.
const busyTimeout = 10 * time.Second

// walSizeLimit is the writer's PRAGMA journal_size_limit: the size SQLite
// truncates the -wal file to when it starts it over, which it otherwise
// never shrinks, reusing it instead. The WAL holds about 4 MiB in steady
// state (the default autocheckpoint at 1000 pages), so the limit never
// costs a normal workload a regrowth; a single big transaction (a 100 MB
// upload is one) no longer leaves a WAL its size on disk for good. Writes
// that store more file content than this also checkpoint at once (see
// truncateWAL).
const walSizeLimit = 16 << 20

// A -wal file past walCheckpointAt after a commit (half again the 4 MiB
// the automatic checkpoints keep it at) is checkpointed and truncated at
// once, the writer waiting up to walCheckpointWait for readers of older
// snapshots to finish: readers that always overlap starve the automatic
// checkpoints, and the WAL would grow until the disk is full.
const (
	walCheckpointAt   = 6 << 20
	walCheckpointWait = 2 * time.Second
	// walCheckEvery: the size is looked at every so many commits, which
	// add far less than the margin above the 4 MiB between looks.
	walCheckEvery = 16
)

// walPast reports whether the file at path is larger than n bytes.
func walPast(path string, n int64) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.Size() > n
}

// Store is a jobs.Store on one SQLite file. Create it with Open; it is safe
// for concurrent use, and several processes may open the same file.
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

	writer *sql.DB // exactly one connection: the only writer in this process
	reader *sql.DB // query_only connections for reads
	wal    string  // the -wal file's path
	// commits counts commits, to look at the -wal file's size every
	// walCheckEvery of them.
	commits atomic.Uint64
	now     func() time.Time
	floor   atomic.Int64 // the latest time a transaction used, in µs

	// wstmts are the writer's statements, prepared once at Open on the
	// writer connection; transactions reuse them through Tx.StmtContext
	// instead of re-preparing (re-preparing is where SQLite job queues
	// lose most of their time).
	wstmts map[string]*sql.Stmt

	rmu    sync.Mutex
	rstmts map[string]*sql.Stmt // reader statements, prepared on first use

	writes *groupcommit.Group[*call]
	// notify is the store's Notifier: in-process, since a SQLite file has
	// no channel between processes but its commits (see watch).
	notify *jobs.LocalNotifier
	// health remembers the latest failed write for Check (see wrote).
	health health.Writes

	closeOnce sync.Once
	closeErr  error
}

// storeOps names storeops.Ops as Store embeds it: an unexported field,
// its methods Store's.
type storeOps = storeops.Ops

// opsDB is the Store as the storeOps it embeds run on it: a type of its
// own, so that its methods are not the Store's.
type opsDB Store

var _ storeops.DB = (*opsDB)(nil)

func (d *opsDB) store() *Store { return (*Store)(d) }

// watchInterval is how often the watcher asks SQLite whether another
// connection committed: cheap (no lock, no I/O beyond the WAL index), and
// it bounds how late another process's enqueue wakes this one's workers.
const watchInterval = 10 * time.Millisecond

// dsn builds the modernc.org/sqlite data source name for path. The file:
// URI form keeps a path containing '?' or '#' intact; SQLite ignores the
// underscore parameters, which the driver consumes.
func dsn(path string, params ...string) string {
	escaped := strings.NewReplacer("%", "%25", "?", "%3f", "#", "%23").Replace(path)
	return "file:" + escaped + "?" + strings.Join(params, "&")
}

// openWriter opens the single-connection writer pool.
func openWriter(path string) (*sql.DB, error) {
	db, err := sql.Open("sqlite", dsn(path,
		// BEGIN IMMEDIATE: take the write lock when the transaction starts,
		// not at its first write, so a transaction never fails halfway with
		// SQLITE_BUSY and reads the clock only once it owns the lock.
		"_txlock=immediate",
		fmt.Sprintf("_pragma=busy_timeout(%d)", busyTimeout.Milliseconds()),
		"_pragma=journal_mode(WAL)",
		// WAL with synchronous=NORMAL does not fsync on each commit, only
		// at checkpoints: a committed transaction survives a crash of the
		// process (the WAL is in the OS page cache and is replayed), and
		// the database can never be corrupted; only a power loss or OS
		// crash may roll back the last few commits. That is the durability
		// a job queue needs at a fraction of FULL's cost.
		"_pragma=synchronous(NORMAL)",
		"_pragma=foreign_keys(1)",
		fmt.Sprintf("_pragma=journal_size_limit(%d)", walSizeLimit),
	))
	if err != nil {
		return nil, err
	}
	db.SetMaxOpenConns(1)
	db.SetMaxIdleConns(1)
	db.SetConnMaxLifetime(0)
	db.SetConnMaxIdleTime(0)
	return db, nil
}

// openReader opens the read-only pool.
func openReader(path string) (*sql.DB, error) {
	db, err := sql.Open("sqlite", dsn(path,
		fmt.Sprintf("_pragma=busy_timeout(%d)", busyTimeout.Milliseconds()),
		"_pragma=query_only(1)",
	))
	if err != nil {
		return nil, err
	}
	n := max(4, runtime.GOMAXPROCS(0))
	db.SetMaxOpenConns(n)
	db.SetMaxIdleConns(n)
	db.SetConnMaxIdleTime(time.Minute)
	return db, nil
}

// migrate applies the embedded migrations on db.
//
// Two processes opening the same file may both find a migration pending;
// SQLite's write lock runs them one after the other, and most statements
// say IF NOT EXISTS, so the second run changes nothing. A statement that
// cannot (ALTER TABLE … ADD COLUMN) fails the second run instead: when the
// migration that failed is applied by then, goose runs again from there.
func migrate(ctx context.Context, db *sql.DB) ([]int64, error) {
	p, err := goose.NewProvider(goose.DialectSQLite3, db, migrationFS, goose.WithDisableGlobalRegistry(true))
	if err != nil {
		return nil, err
	}
	// Not p.Close: it would close db, which the caller owns.
	var applied []int64
	busyWait := 10 * time.Millisecond
	for {
		res, err := p.Up(ctx)
		for _, r := range res {
			if r.Error == nil {
				applied = append(applied, r.Source.Version)
			}
		}
		var pe *goose.PartialError
		var se *sqlite.Error
		if errors.As(err, &se) && se.Code()&0xff == sqlite3.SQLITE_BUSY && busyWait < 5*time.Second {
			// Two processes creating a new file at once: goose's first
			// transaction reads, then writes, and SQLite answers a reader
			// that wants to write while another writes with SQLITE_BUSY
			// at once (waiting could deadlock). Try again shortly.
			t := time.NewTimer(busyWait)
			select {
			case <-ctx.Done():
				t.Stop()
				return applied, err
			case <-t.C:
			}
			busyWait *= 2
			continue
		}
		if !errors.As(err, &pe) || pe.Failed == nil || pe.Failed.Source == nil {
			return applied, err
		}
		if len(res) == 0 { // goose reports a partial run's work here instead
			for _, r := range pe.Applied {
				applied = append(applied, r.Source.Version)
			}
		}
		v, verr := p.GetDBVersion(ctx)
		if verr != nil || v < pe.Failed.Source.Version {
			return applied, err
		}
		// Another process applied it: every round ends further on.
	}
}

// createFile creates the database file at path, empty and readable and
// writable by its owner only, unless it exists. SQLite gives its -wal and
// -shm files the database file's mode, so those are private too; it would
// create the database file itself with 0644 (less the umask). An existing
// file's mode is left alone.
func createFile(path string) error {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, fs.ErrExist) {
		return nil
	}
	if err != nil {
		return err
	}
	return f.Close()
}

// Migrate applies the embedded migrations to the database file at path,
// creating it (mode 0600) if needed, and returns the versions it applied
// (none: the file was current). Open also migrates; Migrate is for
// `promptkit migrate`.
func Migrate(ctx context.Context, path string) (applied []int64, err error) {
	if err := createFile(path); err != nil {
		return nil, fmt.Errorf("sqlitestore: migrate: %w", err)
	}
	db, err := openWriter(path)
	if err != nil {
		return nil, fmt.Errorf("sqlitestore: migrate: %w", err)
	}
	defer db.Close()
	applied, err = migrate(ctx, db)
	if err != nil {
		return applied, fmt.Errorf("sqlitestore: migrate: %w", err)
	}
	return applied, nil
}

// Open opens (creating if needed, with mode 0600) the database file at
// path and applies the migrations. Close the Store when done. path must be
// a file: an in-memory database would be a different database on each
// connection.
func Open(ctx context.Context, path string, opts jobs.Options) (*Store, error) {
	if path == "" || path == ":memory:" || strings.HasPrefix(path, "file::memory:") {
		return nil, fmt.Errorf("sqlitestore: open: %w: need a file path, not %q", jobs.ErrInvalid, path)
	}
	if err := createFile(path); err != nil {
		return nil, fmt.Errorf("sqlitestore: open: %w", err)
	}
	writer, err := openWriter(path)
	if err != nil {
		return nil, fmt.Errorf("sqlitestore: open: %w", err)
	}
	if _, err := migrate(ctx, writer); err != nil {
		writer.Close()
		return nil, fmt.Errorf("sqlitestore: open: migrate: %w", err)
	}
	reader, err := openReader(path)
	if err != nil {
		writer.Close()
		return nil, fmt.Errorf("sqlitestore: open: %w", err)
	}
	s := &Store{
		writer: writer,
		reader: reader,
		wal:    path + "-wal",
		now:    opts.Now,
		wstmts: make(map[string]*sql.Stmt, len(writerQueries)),
		rstmts: make(map[string]*sql.Stmt),
	}
	if s.now == nil {
		s.now = time.Now
	}
	s.writes = groupcommit.New(maxGroup, nil, s.commitGroup)
	// The watcher notices commits by other processes; the notifier starts
	// it with the first Notify and stops it at Close.
	s.notify = jobs.NewLocalNotifier(s.watch)
	s.storeOps = storeops.NewOps("sqlitestore", (*opsDB)(s))
	for _, q := range writerQueries {
		st, err := writer.PrepareContext(ctx, q)
		if err != nil {
			reader.Close()
			writer.Close()
			return nil, fmt.Errorf("sqlitestore: open: prepare: %w", err)
		}
		s.wstmts[q] = st
	}
	return s, nil
}

// Close waits for the group commit in hand (calls still waiting fail),
// closes every Notify channel, stops the watcher and closes the database
// connections. Calling it again returns the first result.
func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		s.writes.Close()
		_ = s.notify.Close(context.Background()) // the watcher ends within a tick
		s.closeErr = errors.Join(s.reader.Close(), s.writer.Close())
	})
	return s.closeErr
}

// nowMicros reads the store clock as unix microseconds, the stored unit.
func (s *Store) nowMicros() int64 { return s.now().UnixMicro() }

// qLastUpdate is the newest updated_at, read from the end of jobs_updated.
var qLastUpdate = wq(`SELECT max(updated_at) FROM jobs`)

// writerQueries lists every statement run on the writer; Open prepares them
// all. Add queries with wq.
var writerQueries []string

// wq registers a writer query for preparation at Open.
func wq(q string) string {
	writerQueries = append(writerQueries, q)
	return q
}

// readStmt returns the cached prepared statement for q on the reader pool.
func (s *Store) readStmt(ctx context.Context, q string) (*sql.Stmt, error) {
	s.rmu.Lock()
	defer s.rmu.Unlock()
	if st, ok := s.rstmts[q]; ok {
		return st, nil
	}
	st, err := s.reader.PrepareContext(ctx, q)
	if err != nil {
		return nil, err
	}
	s.rstmts[q] = st
	return st, nil
}

// readQuery runs a read on the reader pool.
func (s *Store) readQuery(ctx context.Context, q string, args ...any) (*sql.Rows, error) {
	st, err := s.readStmt(ctx, q)
	if err != nil {
		return nil, err
	}
	return st.QueryContext(ctx, args...)
}

// readJobs runs a read returning jobCols rows on the reader pool.
func (s *Store) readJobs(ctx context.Context, q string, args ...any) ([]jobs.Job, error) {
	rows, err := s.readQuery(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	return scanJobs(rows)
}

// readRow runs a single-row read on the reader pool.
func (s *Store) readRow(ctx context.Context, q string, args ...any) *rowResult {
	rows, err := s.readQuery(ctx, q, args...)
	return &rowResult{rows: rows, err: err}
}

// rowResult is a *sql.Row that also carries preparation errors.
type rowResult struct {
	rows *sql.Rows
	err  error
}

// Scan scans the first row like sql.Row.Scan: sql.ErrNoRows when empty.
func (r *rowResult) Scan(dest ...any) error {
	if r.err != nil {
		return r.err
	}
	defer r.rows.Close()
	if !r.rows.Next() {
		if err := r.rows.Err(); err != nil {
			return err
		}
		return sql.ErrNoRows
	}
	if err := r.rows.Scan(dest...); err != nil {
		return err
	}
	return r.rows.Close()
}

// wtx is one write transaction on the writer connection.
type wtx struct {
	ctx    context.Context
	tx     *sql.Tx
	s      *Store
	now    int64      // the clock, read after the write lock was taken
	events []jobEvent // appended at the end of the transaction
	// tags are start tags taken (takeTags) and not yet given to a job.
	tags map[tagKey][]float64
}

// jobEvent is an event waiting to be inserted.
type jobEvent struct {
	jobID, promptID, orgID string
	typ                    jobs.EventType
	from, to               jobs.State
	data                   []byte
}

// write runs fn in a transaction of its own (see tx); errors read
// "sqlitestore: <op>: …".
func (s *Store) write(ctx context.Context, op string, fn func(w *wtx) error) error {
	if err := s.tx(ctx, fn); err != nil {
		return fmt.Errorf("sqlitestore: %s: %w", op, err)
	}
	return nil
}

// tx runs fn in a BEGIN IMMEDIATE transaction, then appends the events fn
// recorded, commits, and notifies subscribers if there were any.
func (s *Store) tx(ctx context.Context, fn func(w *wtx) error) error {
	tx, err := s.writer.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	w := &wtx{ctx: ctx, tx: tx, s: s, now: s.nowMicros()}
	// Time never goes back for the store: not below a committed updated_at
	// (another process may have stamped it), nor below any earlier reading
	// of this Store (ChangesSince's AsOf). Otherwise, after the wall clock
	// stepped back, a since-poller past the earlier time would miss this
	// change forever.
	var last sql.NullInt64
	if err := w.queryRow(qLastUpdate).Scan(&last); err != nil {
		_ = tx.Rollback()
		return err
	}
	w.now = max(w.now, last.Int64, s.floor.Load())
	s.floor.Store(w.now) // only transactions write it, one at a time
	if err := fn(w); err != nil {
		_ = tx.Rollback()
		return err
	}
	// Events last, so the sequence numbers are taken at the end of the
	// transaction (see the jobs package doc on event ordering).
	for _, e := range w.events {
		if _, err := w.exec(qInsertEvent, e.jobID, e.promptID, e.orgID, string(e.typ),
			string(e.from), string(e.to), nullBytes(e.data), w.now); err != nil {
			_ = tx.Rollback()
			return fmt.Errorf("insert event: %w", err)
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	if s.commits.Add(1)%walCheckEvery == 0 && walPast(s.wal, walCheckpointAt) {
		// The automatic checkpoints are not keeping up: readers on older
		// snapshots kept the WAL from starting over, and it grows by every
		// commit until the disk is full.
		s.truncateWAL(ctx, walCheckpointWait)
	}
	if len(w.events) > 0 {
		s.notify.Broadcast()
	}
	return nil
}

// stmt returns the transaction's handle on a prepared writer statement.
func (w *wtx) stmt(q string) *sql.Stmt {
	st, ok := w.s.wstmts[q]
	if !ok {
		panic("sqlitestore: writer query not registered with wq: " + q)
	}
	return w.tx.StmtContext(w.ctx, st)
}

func (w *wtx) exec(q string, args ...any) (sql.Result, error) {
	return w.stmt(q).ExecContext(w.ctx, args...)
}

func (w *wtx) query(q string, args ...any) (*sql.Rows, error) {
	return w.stmt(q).QueryContext(w.ctx, args...)
}

func (w *wtx) queryRow(q string, args ...any) *sql.Row {
	return w.stmt(q).QueryRowContext(w.ctx, args...)
}

// transition records a state change of j, with its data (see
// jobs.TransitionData).
func (w *wtx) transition(j jobs.Job, from, to jobs.State, data []byte) {
	w.events = append(w.events, jobEvent{jobID: j.ID, promptID: j.PromptID, orgID: j.OrgID,
		typ: jobs.EventTransition, from: from, to: to, data: data})
}

// truncateWAL checkpoints the WAL and truncates the -wal file to nothing:
// after a write that stored more than walSizeLimit bytes of file content
// (journal_size_limit alone would shrink it only at the next write), and
// after a commit that left the WAL past walCheckpointAt. It runs on the writer connection, outside any
// transaction, after the commit, so it changes nothing the caller gets: a
// checkpoint that fails, or is still busy after wait because another
// connection reads an older snapshot or writes, is skipped. With wait 0 it
// never waits for other connections while holding this process's only
// writer.
func (s *Store) truncateWAL(ctx context.Context, wait time.Duration) {
	conn, err := s.writer.Conn(ctx)
	if err != nil {
		return // ctx ended or the store closed: nothing to do
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, fmt.Sprintf("PRAGMA busy_timeout = %d", wait.Milliseconds())); err == nil {
		// A busy checkpoint reports busy = 1 rather than an error.
		var busy, frames, done int
		_ = conn.QueryRowContext(ctx, "PRAGMA wal_checkpoint(TRUNCATE)").Scan(&busy, &frames, &done)
	}
	// Restored whatever happened (ctx may have ended with the timeout
	// already off): every later write needs it. A connection that cannot
	// take it is dropped (the pool opens a new one with the DSN's pragmas)
	// rather than left failing at once on every lock wait.
	restore := fmt.Sprintf("PRAGMA busy_timeout = %d", busyTimeout.Milliseconds())
	if _, err := conn.ExecContext(context.WithoutCancel(ctx), restore); err != nil {
		_ = conn.Raw(func(any) error { return driver.ErrBadConn })
	}
}

// Notifier returns the store's in-process jobs.LocalNotifier: it wakes on
// this Store's commits and, once subscribed, on other processes' commits
// to the file (see watch); its answer pieces reach only this process's
// readers, since a SQLite file has no channel to other processes, whose
// readers get the stored answer whole. See jobs.Store.
func (s *Store) Notifier() jobs.Notifier { return s.notify }

// Time and NULL helpers. Times are stored as unix microseconds UTC.

func fromMicros(v int64) time.Time { return time.UnixMicro(v).UTC() }

func nullTime(v sql.NullInt64) time.Time {
	if !v.Valid {
		return time.Time{}
	}
	return fromMicros(v.Int64)
}

func nullString(s string) any {
	if s == "" {
		return nil
	}
	return s
}

func nullBytes(b []byte) any {
	if len(b) == 0 {
		return nil
	}
	return string(b)
}

// jobCols is the column list scanJob reads.
const jobCols = `id, prompt_id, state, priority, attempt, max_attempts, execution_options,
	worker_claim, claimed_at, started_at, running_heartbeat_at, finished_at, response_id,
	error_kind, error_message, supersedes, depends_on, org_id, created_by, created_at,
	updated_at, available_at, token_id`

type scanner interface{ Scan(dest ...any) error }

func scanJob(r scanner) (jobs.Job, error) {
	var (
		j                                             jobs.Job
		opts                                          string
		claim, responseID, supersedes, dependsOn      sql.NullString
		claimedAt, startedAt, heartbeatAt, finishedAt sql.NullInt64
		createdAt, updatedAt, availableAt             int64
		state, kind                                   string
	)
	err := r.Scan(&j.ID, &j.PromptID, &state, &j.Priority, &j.Attempt, &j.MaxAttempts, &opts,
		&claim, &claimedAt, &startedAt, &heartbeatAt, &finishedAt, &responseID,
		&kind, &j.ErrorMessage, &supersedes, &dependsOn, &j.OrgID, &j.CreatedBy, &createdAt,
		&updatedAt, &availableAt, &j.TokenID)
	if err != nil {
		return jobs.Job{}, err
	}
	j.State = jobs.State(state)
	j.ErrorKind = jobs.ErrorKind(kind)
	if j.ExecutionOptions, err = jobs.DecodeExecutionOptions([]byte(opts)); err != nil {
		return jobs.Job{}, err
	}
	j.WorkerClaim = claim.String
	j.ClaimedAt = nullTime(claimedAt)
	j.StartedAt = nullTime(startedAt)
	j.HeartbeatAt = nullTime(heartbeatAt)
	j.FinishedAt = nullTime(finishedAt)
	j.ResponseID = responseID.String
	j.Supersedes = supersedes.String
	j.DependsOn = dependsOn.String
	j.CreatedAt = fromMicros(createdAt)
	j.UpdatedAt = fromMicros(updatedAt)
	j.AvailableAt = fromMicros(availableAt)
	return j, nil
}

// scanJobs reads every row of rows and closes it.
func scanJobs(rows *sql.Rows) ([]jobs.Job, error) {
	defer rows.Close()
	var out []jobs.Job
	for rows.Next() {
		j, err := scanJob(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, j)
	}
	return out, rows.Err()
}

// notFound translates sql.ErrNoRows to jobs.ErrNotFound.
func notFound(err error) error {
	if errors.Is(err, sql.ErrNoRows) {
		return jobs.ErrNotFound
	}
	return err
}

// watch wakes subscribers when another connection — usually another
// process on the same file, such as `promptkit submit` next to a running
// serve — commits. PRAGMA data_version changes exactly when a different
// connection has committed since the last call on this one, so it needs a
// dedicated connection, held until ctx ends (the store closes).
func (s *Store) watch(ctx context.Context) error {
	// Each query is quick and runs to its end: the loop stops between
	// them, and a query cancelled halfway would spoil the connection.
	qctx := context.WithoutCancel(ctx)
	conn, err := s.reader.Conn(qctx)
	if err != nil {
		return nil // the store is closing, or the file is gone: polling remains
	}
	defer conn.Close()
	t := time.NewTicker(watchInterval)
	defer t.Stop()
	last := int64(-1)
	for first := true; ; first = false {
		if !first {
			select {
			case <-ctx.Done():
				return nil
			case <-t.C:
			}
		}
		var v int64
		if err := conn.QueryRowContext(qctx, "PRAGMA data_version").Scan(&v); err != nil {
			continue
		}
		// The first reading wakes too: a commit may have landed between
		// the subscription and this baseline.
		if v != last {
			s.notify.Broadcast()
		}
		last = v
	}
}
