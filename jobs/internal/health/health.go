// Package health is jobs.Store.Check as both stores run it, and the
// write-failure record they keep for it: a small probe write can succeed
// where real writes fail (on a full disk SQLite's WAL reuses its space, an
// update in place needs no new page, an enqueue needs both), so Check also
// fails while the latest real write failed for a database reason,
// recently, and none has stored anything since.
package health

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/promptkit/promptkit/jobs"
	"github.com/promptkit/promptkit/jobs/internal/groupcommit"
	"github.com/promptkit/promptkit/jobs/internal/schema"
)

// Window is how long, on the store's clock, a failed real write keeps
// Check failing while no write has stored anything since. Past it, the
// probe alone decides.
const Window = 10 * time.Second

// Writes remembers the latest real write that failed, until a write
// stores something. Concurrent writes record in the order they finish.
// The zero value is ready to use.
type Writes struct {
	failed atomic.Pointer[failure]
}

// failure is a real write that failed: which, when (store clock), and
// its error.
type failure struct {
	op  string
	at  time.Time
	err error
}

// Record records the outcome of a real write: op names the method
// ("enqueue"), err is what it returns, stored whether it stored anything.
// A failure for a database reason is remembered with the time at; a write
// that stored something forgets it. A write that stored nothing changes
// neither (an empty Claim poll writes no byte, so it succeeds on a full
// disk too), and neither does a refusal (see Refusal). callerEnded says
// whether an error is how the store's driver ends a call whose context
// ended.
//
// With nothing remembered, recording a success is one atomic load;
// recording allocates nothing but a failure's record.
func (w *Writes) Record(ctx context.Context, op string, err error, stored bool, at func() time.Time, callerEnded func(error) bool) {
	switch {
	case err != nil && !Refusal(ctx, err, callerEnded):
		w.failed.Store(&failure{op: op, at: at(), err: err})
	case stored:
		// A failure recorded meanwhile by another write stays.
		if f := w.failed.Load(); f != nil {
			w.failed.CompareAndSwap(f, nil)
		}
	}
}

// Refusal reports whether a write's error says nothing about whether the
// database accepts writes: the call itself was refused —
// jobs.ErrNotClaimed, ErrInvalid, ErrNotFound, an illegal transition, an
// idempotency conflict, a file over its size limit, a batch no longer in
// the expected status, all of which the database answered — the store is
// closed, the error is the caller's (see Caller), or the caller's context
// ended and the error is what that caused. Any other error is a database
// failure, also one that comes after the caller stopped waiting (a lock
// held past the busy timeout, say).
func Refusal(ctx context.Context, err error, callerEnded func(error) bool) bool {
	for _, target := range [...]error{jobs.ErrNotClaimed, jobs.ErrInvalid, jobs.ErrNotFound,
		jobs.ErrIllegalTransition, jobs.ErrIdempotencyConflict, jobs.ErrFileTooLarge, jobs.ErrBatchChanged,
		groupcommit.ErrClosed} {
		if errors.Is(err, target) {
			return true
		}
	}
	var c callerError
	if errors.As(err, &c) {
		return true
	}
	return ctx.Err() != nil && callerEnded(err)
}

// Caller marks err as the caller's failure, not the database's (the
// reader of an upload failing, say), so that Record does not take it for
// a sign that writes fail. The result wraps err.
func Caller(err error) error {
	if err == nil {
		return nil
	}
	return callerError{err}
}

type callerError struct{ err error }

func (c callerError) Error() string { return c.err.Error() }
func (c callerError) Unwrap() error { return c.err }

// Recent returns an error naming the remembered failure when it is less
// than Window old at now (or in now's future: the clock went back).
func (w *Writes) Recent(now time.Time) error {
	f := w.failed.Load()
	if f == nil {
		return nil
	}
	age := now.Sub(f.at)
	if age >= Window {
		return nil
	}
	return fmt.Errorf("writes are failing: the latest write (%s, %s ago) failed and none has stored anything since: %w",
		f.op, max(age, 0).Round(time.Millisecond), f.err)
}

// Probe is what a store's Check reads and writes.
type Probe struct {
	// Want returns the schema version this build migrates to.
	Want func() (int64, error)
	// Have reads the database's schema version: 0 when no migration was
	// applied.
	Have func(ctx context.Context) (int64, error)
	// Write is the probe write: it fails when the database refuses
	// writes, and waits its turn behind the store's writes.
	Write func(ctx context.Context) error
}

// Check is jobs.Store.Check, in three steps:
//
//  1. the database's schema version must be this build's, else a
//     *schema.VersionError naming both;
//  2. the probe write must succeed;
//  3. no real write may have failed recently (Recent, at now's reading
//     once the probe is done).
func (w *Writes) Check(ctx context.Context, now func() time.Time, p Probe) error {
	want, err := p.Want()
	if err != nil {
		return err
	}
	have, err := p.Have(ctx)
	if err != nil {
		return err
	}
	if err := schema.Check(have, want); err != nil {
		return err
	}
	if err := p.Write(ctx); err != nil {
		return fmt.Errorf("probe write: %w", err)
	}
	return w.Recent(now())
}
