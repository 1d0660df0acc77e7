package jobs

import (
	"context"
	"errors"
	"fmt"
)

// Bulk actions: cancel or retry every job a JobFilter matches, the one
// pipeline the server's admin API and the CLI share. A bulk action is no
// transaction: it pages through ListJobs and cancels or retries each job
// with its own Cancel or Retry (its own transaction and its own event,
// whose data names the caller and the action: CancelParams.By and Bulk),
// so a large action never holds writers up, and a job that changes
// meanwhile (finished, retried by someone else) is skipped, not an error.

// MaxBulk is the default and the most jobs one bulk action acts on.
const MaxBulk = 10000

// bulkPage is how many jobs a bulk action lists at a time (tests make it
// small to page).
var bulkPage = MaxListLimit

// BulkParams selects the jobs a bulk action acts on and says who acts.
type BulkParams struct {
	Filter JobFilter
	// By is who asks, as CancelParams.By ("cli:alice", "token:<id>").
	By string
	// Limit caps how many jobs one call acts on (default and max MaxBulk = 10000); more matching is Truncated.
	Limit int
}

// BulkResult says what a bulk action did.
type BulkResult struct {
	ID        string `json:"id"`        // the bulk action's ID, in each job's event data
	Matched   int    `json:"matched"`   // jobs matching when it started
	Done      int    `json:"done"`      // jobs it cancelled / retried
	Skipped   int    `json:"skipped"`   // matched but changed meanwhile (finished, already retried)
	Truncated bool   `json:"truncated"` // more matched than Limit
}

// CancellableStates are the states a bulk cancel acts on given f.State:
// queued and running when it is empty, else f.State itself, which must be
// one of them (ErrInvalid otherwise).
func CancellableStates(f JobFilter) ([]State, error) {
	switch f.State {
	case "":
		// Queued first: a job that starts while the queued ones are
		// cancelled is then found among the running.
		return []State{Queued, Running}, nil
	case Queued, Running:
		return []State{f.State}, nil
	}
	return nil, invalidField("state", "a cancel acts on queued or running jobs, not %s", f.State)
}

// RetryableStates are the states a bulk retry acts on given f.State:
// failed and cancelled when it is empty, else f.State itself, which must
// be one of them or succeeded (a succeeded job is retried only when asked
// for by name; ErrInvalid otherwise).
func RetryableStates(f JobFilter) ([]State, error) {
	switch f.State {
	case "":
		return []State{Failed, Cancelled}, nil
	case Failed, Cancelled, Succeeded:
		return []State{f.State}, nil
	}
	return nil, invalidField("state", "a retry acts on failed, cancelled or succeeded jobs, not %s", f.State)
}

// CountCancellable / CountRetryable: how many jobs the action would act on now (the count shown first).
func CountCancellable(ctx context.Context, st Store, f JobFilter) (int, error) {
	states, err := CancellableStates(f)
	if err != nil {
		return 0, err
	}
	return countIn(ctx, st, f, states)
}

// CountRetryable is CountCancellable for RetryMatching: the current jobs
// in RetryableStates.
func CountRetryable(ctx context.Context, st Store, f JobFilter) (int, error) {
	states, err := RetryableStates(f)
	if err != nil {
		return 0, err
	}
	f.Current = true
	return countIn(ctx, st, f, states)
}

// countIn counts the jobs matching f in each of states.
func countIn(ctx context.Context, st Store, f JobFilter, states []State) (int, error) {
	n := 0
	for _, s := range states {
		f.State = s
		c, err := st.CountJobs(ctx, f)
		if err != nil {
			return 0, err
		}
		n += c
	}
	return n, nil
}

// CancelMatching cancels the queued and running jobs p.Filter matches
// (CancellableStates), at most p.Limit, each with Cancel in a transaction
// of its own and with p.By and the action's new ID (BulkResult.ID) in its
// cancelled event. A job that is no longer cancellable when its turn
// comes is Skipped. It stops when ctx ends, returning what it did so far
// with ctx's error.
func CancelMatching(ctx context.Context, st Store, p BulkParams) (BulkResult, error) {
	states, err := CancellableStates(p.Filter)
	if err != nil {
		return BulkResult{}, err
	}
	return runBulk(ctx, st, p, states, CountCancellable, func(id string, j Job) error {
		_, err := st.Cancel(ctx, CancelParams{OrgID: p.Filter.OrgID, JobID: j.ID, By: p.By, Bulk: id})
		return err
	})
}

// RetryMatching retries the current failed and cancelled jobs p.Filter
// matches (RetryableStates; succeeded ones only when p.Filter.State names
// them), at most p.Limit, each with Retry in a transaction of its own
// (keeping its priority) and with p.By and the action's ID in both its
// events. A job retried or changed meanwhile is Skipped. It stops when ctx
// ends, returning what it did so far with ctx's error.
func RetryMatching(ctx context.Context, st Store, p BulkParams) (BulkResult, error) {
	states, err := RetryableStates(p.Filter)
	if err != nil {
		return BulkResult{}, err
	}
	p.Filter.Current = true
	return runBulk(ctx, st, p, states, CountRetryable, func(id string, j Job) error {
		_, err := st.Retry(ctx, RetryParams{OrgID: p.Filter.OrgID, JobID: j.ID, By: p.By, Bulk: id})
		return err
	})
}

// runBulk counts the matching jobs, then pages through each state's
// (newest first) and acts on each job once, until Limit jobs were acted
// on.
func runBulk(ctx context.Context, st Store, p BulkParams, states []State,
	count func(context.Context, Store, JobFilter) (int, error), act func(bulkID string, j Job) error) (BulkResult, error) {
	f, err := p.Filter.Normalize()
	if err != nil {
		return BulkResult{}, err
	}
	if err := checkActor("by", p.By); err != nil {
		return BulkResult{}, err
	}
	limit := p.Limit
	if limit <= 0 || limit > MaxBulk {
		limit = MaxBulk
	}
	res := BulkResult{ID: NewID()}
	if res.Matched, err = count(ctx, st, f); err != nil {
		return res, fmt.Errorf("jobs: bulk %s: count: %w", res.ID, err)
	}
	// A job seen in one state's pass may turn up in the next (one that
	// started running while the queued were cancelled): it is acted on
	// once.
	seen := make(map[string]bool)
	for _, s := range states {
		lf := f
		lf.State = s
		lp := ListParams{JobFilter: lf, Limit: bulkPage}
		for {
			page, err := st.ListJobs(ctx, lp)
			if err != nil {
				return res, fmt.Errorf("jobs: bulk %s: list: %w", res.ID, err)
			}
			for _, j := range page.Jobs {
				if seen[j.ID] {
					continue
				}
				if res.Done+res.Skipped == limit {
					res.Truncated = true
					return res, nil
				}
				if err := ctx.Err(); err != nil {
					return res, fmt.Errorf("jobs: bulk %s: %w", res.ID, err)
				}
				seen[j.ID] = true
				switch err := act(res.ID, j); {
				case err == nil:
					res.Done++
				case errors.Is(err, ErrIllegalTransition), errors.Is(err, ErrNotFound):
					// Finished, retried or archived since it was listed.
					res.Skipped++
				default:
					return res, fmt.Errorf("jobs: bulk %s: job %s: %w", res.ID, j.ID, err)
				}
			}
			if page.Next == "" {
				break
			}
			lp.After = page.Next
		}
	}
	return res, nil
}
