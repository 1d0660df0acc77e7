// Package storeops runs the methods of jobs.Store that move no job —
// those of files, batches, tokens, limits, reservations and shared
// pacing — once for both job stores, over a
// store's DB and Tx, whose methods only move rows (SQL text and
// scanning). The rules are package jobs': the Normalize methods,
// BatchStatus.CancelTo and CountsLive, BatchProgress.Counts,
// BackendPacing.Merge. What storeops
// adds is the order of the writes, which transaction each belongs to, and
// the store's books (DB.Wrote, Changed, StoredFiles).
package storeops

import "fmt"

// Ops are the methods of jobs.Store that move no job, written once
// over a store's DB: each store embeds one (through an unexported alias,
// so the field stays unexported) and adds CancelBatchJobs, which moves
// jobs. Errors read "<store>: <operation>: …".
type Ops struct {
	store string
	db    DB
}

// NewOps returns the Ops of the store named store ("pgstore") on db.
func NewOps(store string, db DB) Ops { return Ops{store: store, db: db} }

// fail wraps a method's error with the store and the operation.
func (o Ops) fail(op string, err error) error { return fmt.Errorf("%s: %s: %w", o.store, op, err) }

// page cuts rows read one past limit to a page, and says whether more
// follow.
func page[T any](rows []T, limit int) ([]T, bool) {
	if len(rows) > limit {
		return rows[:limit], true
	}
	return rows, false
}
