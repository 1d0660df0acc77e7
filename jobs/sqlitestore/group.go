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

// call is one store call waiting for the group committer.
type call struct {
	ctx  context.Context
	op   string
	fn   func(w *wtx) error
	done chan error // buffered: the committer never blocks on it
}

// grouped runs fn in the next group transaction and returns its outcome.
// Once the committer has taken the call it is waited for even if ctx ends,
// so an error always means nothing of fn was stored. fn must only touch
// the database through w (and its own variables, which the caller may
// read once grouped returns).
func (s *Store) grouped(ctx context.Context, op string, fn func(w *wtx) error) error {
	c := &call{ctx: ctx, op: op, fn: fn, done: make(chan error, 1)}
	select {
	case s.calls <- c:
	case <-ctx.Done():
		return fmt.Errorf("sqlitestore: %s: %w", op, ctx.Err())
	case <-s.closing:
		return errClosed
	}
	return <-c.done
}

// commitLoop is the group committer: it takes one waiting call, gathers
// every other call already waiting (those that arrived while the previous
// write was in progress), and commits them together.
func (s *Store) commitLoop() {
	defer close(s.committerDone)
	for {
		var first *call
		select {
		case first = <-s.calls:
		case <-s.closing:
			return
		}
		batch := []*call{first}
	gather:
		for len(batch) < maxGroup {
			select {
			case c := <-s.calls:
				batch = append(batch, c)
			default:
				break gather
			}
		}
		s.commitGroup(batch)
	}
}

// commitGroup runs a batch of calls in one transaction, each in its own
// savepoint: a call that fails is rolled back to its savepoint (its events
// dropped) and the others go on. Calls whose context ended while waiting
// are answered with its error and not run. If the transaction itself
// fails, every call gets that error: nothing was stored.
func (s *Store) commitGroup(batch []*call) {
	live := make([]*call, 0, len(batch))
	for _, c := range batch {
		if err := c.ctx.Err(); err != nil {
			c.done <- fmt.Errorf("sqlitestore: %s: %w", c.op, err)
			continue
		}
		live = append(live, c)
	}
	// The transaction belongs to the whole group: no single caller's
	// context may cancel it.
	ctx := context.Background()
	errs := make([]error, len(live))
	switch len(live) {
	case 0:
		return
	case 1:
		// Alone: no savepoint needed, a failure rolls back the transaction.
		errs[0] = s.write(ctx, live[0].op, live[0].fn)
	default:
		err := s.write(ctx, "group commit", func(w *wtx) error {
			for i, c := range live {
				if _, err := w.exec(qSavepoint); err != nil {
					return err
				}
				mark := len(w.events)
				if err := c.fn(w); err != nil {
					errs[i] = fmt.Errorf("sqlitestore: %s: %w", c.op, err)
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
	}
	for i, c := range live {
		c.done <- errs[i]
	}
}
