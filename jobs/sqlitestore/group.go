package sqlitestore

import (
	"context"
	"fmt"
)

// maxGroup bounds how many calls share one transaction, so one commit
// never holds the write lock for long.
const maxGroup = 256

var (
	qSavepoint  = wq(`SAVEPOINT call`)
	qRollbackTo = wq(`ROLLBACK TO call`)
	qRelease    = wq(`RELEASE call`)
)

// call is one store call waiting for the group commit. fn must only touch
// the database through w (and its own variables, which the caller may read
// once grouped returns).
type call struct {
	op string
	fn func(w *wtx) error
}

// grouped runs fn in the next group transaction and returns its outcome
// (see the package doc on group commit).
func (s *Store) grouped(ctx context.Context, op string, fn func(w *wtx) error) error {
	if err := s.writes.Do(ctx, &call{op: op, fn: fn}); err != nil {
		return fmt.Errorf("sqlitestore: %s: %w", op, err)
	}
	return nil
}

// commitGroup runs a batch of calls in one transaction, each in its own
// savepoint: a call that fails is rolled back to its savepoint (its events
// dropped) and the others go on. If the transaction itself fails, every
// call gets that error: nothing was stored.
func (s *Store) commitGroup(ctx context.Context, batch []*call) []error {
	errs := make([]error, len(batch))
	if len(batch) == 1 {
		// Alone: no savepoint needed, a failure rolls back the transaction.
		errs[0] = s.tx(ctx, batch[0].fn)
		return errs
	}
	err := s.tx(ctx, func(w *wtx) error {
		for i, c := range batch {
			if _, err := w.exec(qSavepoint); err != nil {
				return err
			}
			mark := len(w.events)
			if errs[i] = c.fn(w); errs[i] != nil {
				w.events = w.events[:mark]
				if _, err := w.exec(qRollbackTo); err != nil {
					return err
				}
			}
			if _, err := w.exec(qRelease); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		for i := range errs {
			errs[i] = err
		}
	}
	return errs
}
