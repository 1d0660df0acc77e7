package pgstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
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

// write runs one writing transaction in two round trips, in the order
// the package doc describes:
//
//  1. BEGIN; pre's statements (validation, row locks, inserts that may
//     wait on a unique key); pg_advisory_xact_lock(event lock)
//  2. the store clock is read only now; locked's statements (stamps and
//     events; none may wait for another transaction's row); COMMIT
//
// An error from any reader rolls the transaction back.
func (s *Store) write(ctx context.Context, pre func(*phase), locked func(p *phase, now time.Time)) error {
	_, err := s.writeIf(ctx, pre, nil, locked)
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

// writeIf is write with an optional gate on the event lock. When the gate
// says no, locked is not called and the transaction (which has written
// nothing) just commits, so it serializes with nobody; took reports which
// happened.
func (s *Store) writeIf(ctx context.Context, pre func(*phase), gate *lockGate, locked func(p *phase, now time.Time)) (took bool, err error) {
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return false, err
	}
	defer conn.Release()
	open := false
	defer func() {
		if err != nil && open {
			// Never leave a connection inside a transaction; if the
			// rollback fails, the pool discards the connection on Release
			// because it is not idle.
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			defer cancel()
			conn.Exec(rctx, "ROLLBACK") //nolint:errcheck // best effort, see above
		}
	}()

	var first phase
	first.exec("BEGIN")
	open = true
	// The writing statements are prepared once per connection (pgx's
	// statement cache), and their shapes are chosen to be right whatever
	// the row estimates (primary-key lookups, ANY arrays, ordered scans of
	// the index their ORDER BY matches). Left to itself PostgreSQL would
	// re-plan the batched CTE statements on every execution (their unnest
	// arrays make a custom plan look cheaper), which costs more than running
	// them, inside the serialized section. Reads keep the default mode.
	// Sequential scans are off for the same reason: the side tables
	// (job_queue, job_running) are small or empty when a plan is made, so
	// a generic plan would scan them whole, dead rows included, where an
	// index lookup by job ID is what every writing statement wants.
	first.exec("SELECT set_config('plan_cache_mode', 'force_generic_plan', true), set_config('enable_seqscan', 'off', true)")
	if pre != nil {
		pre(&first)
	}
	took = true
	if gate == nil {
		first.exec(`SELECT pg_advisory_xact_lock($1)`, s.lockKey)
	} else {
		first.queryRow(gate.sql, append([]any{s.lockKey}, gate.args...), func(row pgx.Row) error {
			return row.Scan(&took)
		})
	}
	if err := first.send(ctx, conn); err != nil {
		return false, err
	}

	var second phase
	if took {
		locked(&second, s.clock())
	}
	var tag string
	second.b.Queue("COMMIT")
	second.reads = append(second.reads, func(br pgx.BatchResults) error {
		ct, err := br.Exec()
		tag = ct.String()
		return err
	})
	if err := second.send(ctx, conn); err != nil {
		return false, err
	}
	open = false
	if tag != "COMMIT" {
		return false, fmt.Errorf("%w (%s)", errCommitRolledBack, tag)
	}
	return took, nil
}
