// Package batchdb is what both job stores' SQL and scanning share for
// batches: which column stamps each batch status, which statuses are
// active (ActiveWhere), the SQL that counts a batch's jobs, and the stored
// form of a batch's errors. The operations
// that run over that SQL are jobs/internal/storeops'.
package batchdb

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/promptkit/promptkit/jobs"
)

// timeColumns are the columns that record when a batch entered each
// status (validating's is created_at, set once).
var timeColumns = []struct {
	status jobs.BatchStatus
	column string
}{
	{jobs.BatchInProgress, "in_progress_at"},
	{jobs.BatchFinalizing, "finalizing_at"},
	{jobs.BatchCompleted, "completed_at"},
	{jobs.BatchFailed, "failed_at"},
	{jobs.BatchExpired, "expired_at"},
	{jobs.BatchCancelling, "cancelling_at"},
	{jobs.BatchCancelled, "cancelled_at"},
}

// ActiveStatuses are the statuses of the batches still to be driven (the
// batch processor's work list): those that are not terminal
// (jobs.BatchStatus.Terminal), in jobs.BatchStatuses' order.
func ActiveStatuses() []jobs.BatchStatus {
	var out []jobs.BatchStatus
	for _, s := range jobs.BatchStatuses() {
		if !s.Terminal() {
			out = append(out, s)
		}
	}
	return out
}

// ActiveWhere is the predicate, the same in both dialects, that holds for
// a batch in one of ActiveStatuses: "status IN ('validating', ...)". Each
// store's partial index of active batches (PostgreSQL's
// batches_active_idx, SQLite's batches_active) is declared by a migration
// with this very predicate, which the active batches' query must imply
// for the index to serve it; TestActiveWhereMatchesIndexes holds the
// migrations to it. A change to which statuses are terminal therefore
// needs a migration that rebuilds both indexes.
var ActiveWhere = activeWhere()

func activeWhere() string {
	quoted := make([]string, 0, 4)
	for _, s := range ActiveStatuses() {
		quoted = append(quoted, "'"+string(s)+"'")
	}
	return "status IN (" + strings.Join(quoted, ", ") + ")"
}

// StampSet is the SET list that stamps the time column of the status to
// with now, leaving the others alone; to and now are the statement's
// expressions for them (a placeholder, with a cast where the database
// needs one).
func StampSet(to, now string) string {
	parts := make([]string, len(timeColumns))
	for i, c := range timeColumns {
		parts[i] = fmt.Sprintf("%s = CASE %s WHEN '%s' THEN %s ELSE %s END", c.column, to, c.status, now, c.column)
	}
	return strings.Join(parts, ",\n\t\t\t")
}

// EncodeErrors is the stored form of a batch's errors: nil when none.
func EncodeErrors(errs []jobs.BatchError) ([]byte, error) {
	if len(errs) == 0 {
		return nil, nil
	}
	return json.Marshal(errs)
}

// DecodeErrors reads EncodeErrors' form.
func DecodeErrors(b []byte) ([]jobs.BatchError, error) {
	if len(b) == 0 {
		return nil, nil
	}
	var out []jobs.BatchError
	if err := json.Unmarshal(b, &out); err != nil {
		return nil, fmt.Errorf("batch errors: %w", err)
	}
	return out, nil
}

// ProgressSQL counts a batch's lines and its current jobs by outcome, and
// whether the batch exists, in one query: batch_id is the placeholder of
// the batch's ID. A prompt has at most one job that is not superseded
// (Retry supersedes the old job as it creates the new one), so counting
// joined rows counts current jobs.
func ProgressSQL(batchID string) string {
	return `SELECT (SELECT count(*) FROM batches WHERE id = ` + batchID + `),
		count(DISTINCT p.id),
		count(*) FILTER (WHERE j.state = 'succeeded'),
		count(*) FILTER (WHERE j.state = 'failed'),
		count(*) FILTER (WHERE j.state = 'cancelled'),
		count(*) FILTER (WHERE j.state IN ('queued', 'running'))
	FROM prompts p LEFT JOIN jobs j ON j.prompt_id = p.id AND j.state <> 'superseded'
	WHERE p.batch_id = ` + batchID
}

// ScanProgress reads a ProgressSQL row; a batch that does not exist is
// jobs.ErrNotFound.
func ScanProgress(scan func(dest ...any) error) (jobs.BatchProgress, error) {
	var exists int
	var p jobs.BatchProgress
	if err := scan(&exists, &p.Lines, &p.Succeeded, &p.Failed, &p.Cancelled, &p.Unfinished); err != nil {
		return jobs.BatchProgress{}, err
	}
	if exists == 0 {
		return jobs.BatchProgress{}, jobs.ErrNotFound
	}
	return p, nil
}
