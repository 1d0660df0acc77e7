package pgstore

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/promptkit/promptkit/jobs"
)

// phase is the statements of one network round trip (a pgx batch, sent
// as one pipeline) and the code that reads their results in order.
type phase struct {
	b     pgx.Batch
	reads []func(pgx.BatchResults) error
}

// exec queues a statement whose result is only its success.
func (p *phase) exec(sql string, args ...any) {
	p.b.Queue(sql, args...)
	p.reads = append(p.reads, func(br pgx.BatchResults) error {
		_, err := br.Exec()
		return err
	})
}

// query queues a statement whose rows read consumes.
func (p *phase) query(sql string, args []any, read func(pgx.Rows) error) {
	p.b.Queue(sql, args...)
	p.reads = append(p.reads, func(br pgx.BatchResults) error {
		rows, err := br.Query()
		if err != nil {
			return err
		}
		defer rows.Close()
		if err := read(rows); err != nil {
			return err
		}
		rows.Close()
		return rows.Err()
	})
}

// queryRow queues a statement returning one row, which scan reads.
func (p *phase) queryRow(sql string, args []any, scan func(pgx.Row) error) {
	p.b.Queue(sql, args...)
	p.reads = append(p.reads, func(br pgx.BatchResults) error {
		return scan(br.QueryRow())
	})
}

// send runs the phase's statements in one round trip and reads them; the
// first error stops the reading (the rest of the pipeline is drained).
func (p *phase) send(ctx context.Context, conn *pgxpool.Conn) error {
	if p.b.Len() == 0 {
		return nil
	}
	br := conn.SendBatch(ctx, &p.b)
	var err error
	for _, read := range p.reads {
		if err = read(br); err != nil {
			break
		}
	}
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	return err
}

// errCommitRolledBack reports a COMMIT that PostgreSQL turned into a
// rollback.
var errCommitRolledBack = errors.New("commit rolled back")

// commit queues COMMIT and checks that it committed.
func (p *phase) commit() {
	p.b.Queue("COMMIT")
	p.reads = append(p.reads, func(br pgx.BatchResults) error {
		ct, err := br.Exec()
		if err == nil && ct.String() != "COMMIT" {
			err = fmt.Errorf("%w (%s)", errCommitRolledBack, ct.String())
		}
		return err
	})
}

// readParams are settings of the store's connections (startup
// parameters, unless the database URL names them), so of every read, as
// writeSettings are of every write: sequential scans off, and JIT off
// with them (a disabled scan's cost of 1e10, where one is the only path,
// would make PostgreSQL compile the plan). pgx keeps each connection's
// statements prepared, and after five executions PostgreSQL gives a
// prepared read a generic plan costed once, against the tables as they
// were then: a store opened on a fresh database planned EventsAfter and
// the prompt and response reads as sequential scans while the tables were
// empty and kept those plans as history grew (issue 42: 184 req/s against
// 881 after a restart on the same data). The hot reads are key lookups and
// ordered index scans, right at any size; with sequential scans off their
// plans are those whenever they are made, and they stay cached (planning
// every read instead measured slower). ChangesSince's read is the
// exception (readSettings).
var readParams = map[string]string{"enable_seqscan": "off", "jit": "off"}

// readSettings are the settings of ChangesSince's read, in a transaction
// of its own: planned on every execution. Its best path depends on how
// much of the log lies after its time (the BRIN index on job_events.at
// for a recent time), which a generic plan, costed once on the tables as
// they were, cannot know: one made on empty tables walked every job.
const readSettings = `SELECT set_config('plan_cache_mode', 'force_custom_plan', true)`

// writeSettings opens every writing transaction. The writing statements
// are prepared once per connection (pgx's statement cache), and their
// shapes are chosen to be right whatever the row estimates (primary-key
// lookups, ANY arrays, ordered scans of the index their ORDER BY matches).
// Left to itself PostgreSQL would re-plan the batched CTE statements on
// every execution (their unnest arrays make a custom plan look cheaper),
// which costs more than running them, inside the serialized section. Reads
// keep the default mode, with sequential scans off too (readParams).
// Sequential scans are off for the same reason: the
// side tables (job_queue, job_running) are small or empty when a plan is
// made, so a generic plan would scan them whole, dead rows included, where
// an index lookup by job ID is what every writing statement wants. JIT is
// off because a disabled sequential scan, where one is the only path, costs
// 1e10 and would make PostgreSQL compile the plan on every execution.
const writeSettings = `SELECT set_config('plan_cache_mode', 'force_generic_plan', true),
	set_config('enable_seqscan', 'off', true), set_config('jit', 'off', true)`

// lockSQL takes the event lock ($1 is the store's key).
const lockSQL = `SELECT pg_advisory_xact_lock($1)`

// begin queues what opens every writing transaction: BEGIN, the settings,
// pre's statements (if any).
func begin(p *phase, pre func(*phase)) {
	p.exec("BEGIN")
	p.exec(writeSettings)
	if pre != nil {
		pre(p)
	}
}

// The ways to run a writing transaction:
//
//	writeOneTrip        everything in one round trip (the stamp is read before sending)
//	writeOneTripGated   writeOneTrip, but the event lock is taken only when a gate
//	                    statement says there is something to do (claims)
//	writeTwoTrips       pre's statements in the first round trip; the event lock and the
//	                    locked statements, built from what the first one read, in the second
//	writeTwoTripsGated  the event lock (behind an optional gate) in the first round trip,
//	                    the locked statements in the second, stamped above the change
//	                    floor: where the others go when their stamp check fails
//	chooseTrips         picks writeOneTrip or writeTwoTrips for a transaction
//
// Each takes pre, the statements that may wait for other transactions (row
// locks, inserts that may conflict), and locked, which queues the
// statements that run under the event lock given the stamp.

// writeFunc is writeOneTrip's and writeTwoTrips' signature.
type writeFunc func(ctx context.Context, pre func(*phase), locked func(p *phase, now time.Time)) error

// chooseTrips returns writeTwoTrips when the locked statements depend on
// what the pre-lock ones read (or those reads may reject the transaction),
// else writeOneTrip.
func (s *Store) chooseTrips(readsFirst bool) writeFunc {
	if readsFirst {
		return s.writeTwoTrips
	}
	return s.writeOneTrip
}

// checkStampSQL fails the transaction with SQLSTATE stampBelowFloor when a
// ChangesSince has raised change_floor above the stamp $1 (migration 00003).
const checkStampSQL = `SELECT stamp_below_floor() FROM change_floor WHERE one AND at > $1`

const stampBelowFloor = "PKS01"

// inTx runs send on a pooled connection and rolls back whatever
// transaction an error leaves open, so no connection goes back to the
// pool inside one (holding the event lock, say). If the rollback fails,
// the pool discards the connection on Release because it is not idle.
func (s *Store) inTx(ctx context.Context, send func(conn *pgxpool.Conn) error) error {
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return err
	}
	defer conn.Release()
	if err := send(conn); err != nil {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		conn.Exec(rctx, "ROLLBACK") //nolint:errcheck // best effort, see above
		return dataError(err)
	}
	return nil
}

// dataError makes a value PostgreSQL refuses to store (SQLSTATE class
// 22, data exception: a NUL in text, an out-of-range number) ErrInvalid,
// which no retry can heal, rather than an outage to wait out. The
// parameter rules (jobs.*Params.Normalize) refuse such values first; this
// is the net under them, so a value they miss fails one call instead of
// being retried for ever.
func dataError(err error) error {
	if pgErr, ok := errors.AsType[*pgconn.PgError](err); ok && strings.HasPrefix(pgErr.Code, "22") {
		return fmt.Errorf("%w: the database refused a value (SQLSTATE %s): %w", jobs.ErrInvalid, pgErr.Code, err)
	}
	return err
}

// writeOneTrip runs a writing transaction in one round trip, in the order
// the package doc describes: BEGIN; pre's statements (validation, row
// locks, inserts that may wait on a unique key); the event lock; the
// stamp check; locked's statements (stamps and events; none may wait for
// another transaction's row); COMMIT. The stamp is the store clock read
// before sending, so locked must not depend on anything pre reads, and
// pre's reads may fail only with a database error (which aborts the
// transaction before it commits).
//
// If a ChangesSince took the event lock between the clock reading and
// this transaction's turn, and its clock read later, the stamp check fails;
// the transaction, which wrote nothing, runs again through writeTwoTrips.
func (s *Store) writeOneTrip(ctx context.Context, pre func(*phase), locked func(p *phase, now time.Time)) error {
	stamp := s.clock()
	err := s.inTx(ctx, func(conn *pgxpool.Conn) error {
		var p phase
		begin(&p, pre)
		p.exec(lockSQL, s.lockKey)
		p.exec(checkStampSQL, stamp)
		locked(&p, stamp)
		p.commit()
		return p.send(ctx, conn)
	})
	if belowFloor(err) {
		_, err = s.writeTwoTripsGated(ctx, pre, nil, locked)
	}
	return err
}

// belowFloor reports whether err is the stamp check's (checkStampSQL).
func belowFloor(err error) bool {
	pgErr, ok := errors.AsType[*pgconn.PgError](err)
	return ok && pgErr.Code == stampBelowFloor
}

// writeTwoTrips runs a writing transaction whose locked statements depend
// on what pre reads, in two round trips, the event lock in the second:
//
//  1. BEGIN; pre's statements
//  2. the event lock; the stamp check of the store clock read just before
//     sending; locked's statements; COMMIT
//
// So, as in writeOneTrip, no network wait falls inside the serialized
// section: the lock is held from its grant to the commit of one pipeline.
// If the stamp check fails (a ChangesSince raised the floor meanwhile),
// the transaction, which wrote nothing under the lock, runs again through
// writeTwoTripsGated, which takes the lock in its first round trip and
// stamps above the floor. An error from any reader rolls the transaction
// back.
func (s *Store) writeTwoTrips(ctx context.Context, pre func(*phase), locked func(p *phase, now time.Time)) error {
	err := s.inTx(ctx, func(conn *pgxpool.Conn) error {
		var first phase
		begin(&first, pre)
		if err := first.send(ctx, conn); err != nil {
			return err
		}
		var second phase
		stamp := s.clock()
		second.exec(lockSQL, s.lockKey)
		second.exec(checkStampSQL, stamp)
		locked(&second, stamp)
		second.commit()
		return second.send(ctx, conn)
	})
	if belowFloor(err) {
		_, err = s.writeTwoTripsGated(ctx, pre, nil, locked)
	}
	return err
}

// lockGate decides, in the first round trip, whether a transaction takes
// the event lock at all: sql returns one boolean and must take the lock
// (by calling pg_advisory_xact_lock($1), $1 being the lock key) exactly
// when it returns true; args are $2 on.
type lockGate struct {
	sql  string
	args []any
}

// writeOneTripGated runs, in one round trip, a transaction whose gate
// (sqlGated, which must also set gateSkipped when it does not take the
// lock) decides whether it takes the event lock: BEGIN; the gate; the
// stamp check; locked's statements, which must do nothing when the gate
// skipped the lock (see gateOpen); COMMIT. took reports whether the gate
// took the lock. Claims run this way: an empty poll and a claim that finds
// work each cost one round trip, and the lock is held only from its grant
// to the commit of the pipeline. If the stamp check fails, the
// transaction runs again through writeTwoTripsGated. When the gate said
// no, what follows it writes nothing, so an error after the gate (a
// read-only database refuses the statements that would have written, say)
// does not fail the transaction: it did nothing, as of the gate's time.
func (s *Store) writeOneTripGated(ctx context.Context, gate *lockGate, locked func(p *phase, now time.Time)) (took bool, err error) {
	stamp := s.clock()
	answered := false
	err = s.inTx(ctx, func(conn *pgxpool.Conn) error {
		var p phase
		begin(&p, nil)
		p.queryRow(gate.sql, append([]any{s.lockKey}, gate.args...), func(row pgx.Row) error {
			err := row.Scan(&took)
			answered = err == nil
			return err
		})
		p.exec(checkStampGatedSQL, stamp)
		locked(&p, stamp)
		p.commit()
		return p.send(ctx, conn)
	})
	switch {
	case err != nil && answered && !took:
		return false, nil
	case belowFloor(err):
		return s.writeTwoTripsGated(ctx, nil, gate, locked)
	}
	return took && err == nil, err
}

// gateSkipped is the transaction-local setting a one-trip gate sets when it
// does not take the event lock; gateOpen is the condition, true otherwise,
// that the statements after it check.
const (
	gateSkipped = `set_config('promptkit.gate', 'skipped', true)`
	gateOpen    = `current_setting('promptkit.gate', true) IS DISTINCT FROM 'skipped'`
)

// checkStampGatedSQL is checkStampSQL when the gate took the lock.
const checkStampGatedSQL = `SELECT stamp_below_floor() FROM change_floor WHERE one AND at > $1 AND ` + gateOpen

// writeTwoTripsGated takes the event lock in its first round trip, behind
// an optional gate. When the gate says no, locked is not called and the transaction
// (which has written nothing) just commits, so it serializes with nobody;
// took reports which happened.
func (s *Store) writeTwoTripsGated(ctx context.Context, pre func(*phase), gate *lockGate, locked func(p *phase, now time.Time)) (took bool, err error) {
	err = s.inTx(ctx, func(conn *pgxpool.Conn) error {
		var first phase
		begin(&first, pre)
		took = true
		if gate == nil {
			first.exec(lockSQL, s.lockKey)
		} else {
			first.queryRow(gate.sql, append([]any{s.lockKey}, gate.args...), func(row pgx.Row) error {
				return row.Scan(&took)
			})
		}
		var floor *time.Time
		first.queryRow(`SELECT max(at) FROM change_floor`, nil, func(row pgx.Row) error {
			return row.Scan(&floor)
		})
		if err := first.send(ctx, conn); err != nil {
			return err
		}
		var second phase
		if took {
			stamp := s.clock()
			if floor != nil && floor.After(stamp) {
				stamp = floor.UTC()
			}
			locked(&second, stamp)
		}
		second.commit()
		return second.send(ctx, conn)
	})
	return took && err == nil, err
}
