package pgstore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/promptkit/promptkit/jobs"
	"github.com/promptkit/promptkit/jobs/internal/batchdb"
)

// Files and batches (migration 00008) have no events and no place in the
// job log: like tokens, they are written without the event lock, each
// write in a transaction of its own. CancelBatchJobs, which cancels jobs,
// goes through Cancel's statement. Archive leaves files and batches alone.

const fileCols = `id, org_id, created_by, purpose, filename, bytes, created_at`

const batchCols = `id, org_id, created_by, input_file_id, endpoint, completion_window, metadata::text, priority,
	status, errors::text, output_file_id, error_file_id, total, completed, failed, created_at, expires_at,
	in_progress_at, finalizing_at, completed_at, failed_at, expired_at, cancelling_at, cancelled_at`

func scanFile(row pgx.Row) (jobs.File, error) {
	var f jobs.File
	if err := row.Scan(&f.ID, &f.OrgID, &f.CreatedBy, &f.Purpose, &f.Filename, &f.Bytes, &f.CreatedAt); err != nil {
		return jobs.File{}, err
	}
	f.CreatedAt = f.CreatedAt.UTC()
	return f, nil
}

func scanBatch(row pgx.Row) (jobs.Batch, error) {
	var (
		b                                      jobs.Batch
		status                                 string
		meta, errs                             []byte
		output, errFile                        *string
		inProgress, finalizing, completed      *time.Time
		failed, expired, cancelling, cancelled *time.Time
	)
	err := row.Scan(&b.ID, &b.OrgID, &b.CreatedBy, &b.InputFileID, &b.Endpoint, &b.CompletionWindow, &meta,
		&b.Priority, &status, &errs, &output, &errFile, &b.Counts.Total, &b.Counts.Completed, &b.Counts.Failed,
		&b.CreatedAt, &b.ExpiresAt, &inProgress, &finalizing, &completed, &failed, &expired, &cancelling, &cancelled)
	if err != nil {
		return jobs.Batch{}, err
	}
	b.Status = jobs.BatchStatus(status)
	if meta != nil {
		b.Metadata = meta
	}
	if b.Errors, err = batchdb.DecodeErrors(errs); err != nil {
		return jobs.Batch{}, err
	}
	b.OutputFileID, b.ErrorFileID = str(output), str(errFile)
	b.CreatedAt, b.ExpiresAt = b.CreatedAt.UTC(), b.ExpiresAt.UTC()
	b.InProgressAt, b.FinalizingAt, b.CompletedAt = tm(inProgress), tm(finalizing), tm(completed)
	b.FailedAt, b.ExpiredAt = tm(failed), tm(expired)
	b.CancellingAt, b.CancelledAt = tm(cancelling), tm(cancelled)
	return b, nil
}

// inWriteTx runs fn in a transaction of its own and commits it.
func (s *Store) inWriteTx(ctx context.Context, fn func(tx pgx.Tx) error) error {
	return pgx.BeginFunc(ctx, s.pool, fn)
}

// CreateFile stores a file, reading its content in chunks inside one
// transaction, so a file over the limit rolls back whole. See jobs.Store.
func (s *Store) CreateFile(ctx context.Context, p jobs.CreateFileParams) (jobs.File, error) {
	p, err := p.Normalize()
	if err != nil {
		return jobs.File{}, fmt.Errorf("pgstore: create file: %w", err)
	}
	var f jobs.File
	err = s.inWriteTx(ctx, func(tx pgx.Tx) error {
		var err error
		f, err = createFile(ctx, tx, p, s.clock())
		return err
	})
	s.wrote(ctx, "create file", err, err == nil)
	if err != nil {
		return jobs.File{}, fmt.Errorf("pgstore: create file: %w", err)
	}
	return f, nil
}

// createFile stores a normalized file in tx: its row first (its size once
// the content is read), so the chunks' foreign key holds.
func createFile(ctx context.Context, tx pgx.Tx, p jobs.CreateFileParams, now time.Time) (jobs.File, error) {
	id := batchdb.FilePrefix + jobs.NewID()
	if _, err := tx.Exec(ctx, `INSERT INTO files (`+fileCols+`) VALUES ($1, $2, $3, $4, $5, 0, $6)`,
		id, p.OrgID, p.CreatedBy, p.Purpose, p.Filename, now); err != nil {
		return jobs.File{}, fmt.Errorf("insert file: %w", err)
	}
	n, err := batchdb.ReadChunks(p.Content, p.MaxBytes, func(seq int, data []byte) error {
		_, err := tx.Exec(ctx, `INSERT INTO file_chunks (file_id, seq, data) VALUES ($1, $2, $3)`, id, seq, data)
		return err
	})
	if err != nil {
		return jobs.File{}, err
	}
	return scanFile(tx.QueryRow(ctx, `UPDATE files SET bytes = $1 WHERE id = $2 RETURNING `+fileCols, n, id))
}

const getFileSQL = `SELECT ` + fileCols + ` FROM files WHERE id = $1 AND ($2 = '' OR org_id = $2)`

// GetFile returns a file's description. See jobs.Store.
func (s *Store) GetFile(ctx context.Context, orgID, id string) (jobs.File, error) {
	f, err := scanFile(s.pool.QueryRow(ctx, getFileSQL, id, orgID))
	if err != nil {
		return jobs.File{}, fmt.Errorf("pgstore: get file: %w", notFound(err))
	}
	return f, nil
}

// ListFiles returns a page of files, newest first, from the file after
// After (an unknown one: an empty page); one row past the page says
// whether more follow. See jobs.Store.
func (s *Store) ListFiles(ctx context.Context, p jobs.FileListParams) ([]jobs.File, bool, error) {
	p, err := p.Normalize()
	if err != nil {
		return nil, false, fmt.Errorf("pgstore: list files: %w", err)
	}
	rows, err := s.pool.Query(ctx, `
		SELECT `+fileCols+` FROM files
		WHERE ($1 = '' OR org_id = $1) AND ($2 = '' OR purpose = $2)
			AND ($3 = '' OR (created_at, id) < (SELECT created_at, id FROM files WHERE id = $3))
		ORDER BY created_at DESC, id DESC LIMIT $4`, p.OrgID, p.Purpose, p.After, p.Limit+1)
	if err != nil {
		return nil, false, fmt.Errorf("pgstore: list files: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (jobs.File, error) { return scanFile(r) })
	if err != nil {
		return nil, false, fmt.Errorf("pgstore: list files: %w", err)
	}
	if len(out) > p.Limit {
		return out[:p.Limit], true, nil
	}
	return out, false, nil
}

// ReadFile writes a file's content to w, one query per chunk, none held
// open while w writes. A file deleted meanwhile ends the copy with
// jobs.ErrNotFound. See jobs.Store.
func (s *Store) ReadFile(ctx context.Context, orgID, id string, w io.Writer) error {
	f, err := scanFile(s.pool.QueryRow(ctx, getFileSQL, id, orgID))
	if err != nil {
		return fmt.Errorf("pgstore: read file: %w", notFound(err))
	}
	var n int64
	for seq := 0; n < f.Bytes; seq++ {
		var data []byte
		err := s.pool.QueryRow(ctx, `SELECT data FROM file_chunks WHERE file_id = $1 AND seq = $2`, id, seq).Scan(&data)
		if err != nil {
			return fmt.Errorf("pgstore: read file: chunk %d: %w", seq, notFound(err))
		}
		if _, err := w.Write(data); err != nil {
			return fmt.Errorf("pgstore: read file: %w", err)
		}
		n += int64(len(data))
	}
	return nil
}

// DeleteFile deletes a file and its chunks in one statement (the foreign
// key is checked at its end). See jobs.Store.
func (s *Store) DeleteFile(ctx context.Context, orgID, id string) error {
	tag, err := s.pool.Exec(ctx, `
		WITH f AS (
			SELECT id FROM files WHERE id = $1 AND ($2 = '' OR org_id = $2) FOR UPDATE
		), chunks AS (
			DELETE FROM file_chunks WHERE file_id IN (SELECT id FROM f)
		)
		DELETE FROM files WHERE id IN (SELECT id FROM f)`, id, orgID)
	if err == nil && tag.RowsAffected() == 0 {
		err = jobs.ErrNotFound
	}
	s.wrote(ctx, "delete file", err, err == nil)
	if err != nil {
		return fmt.Errorf("pgstore: delete file: %w", err)
	}
	return nil
}

// CreateBatch stores a batch in status validating, only if its input file
// is the org's. See jobs.Store.
func (s *Store) CreateBatch(ctx context.Context, p jobs.CreateBatchParams) (jobs.Batch, error) {
	p, err := p.Normalize()
	if err != nil {
		return jobs.Batch{}, fmt.Errorf("pgstore: create batch: %w", err)
	}
	now := s.clock()
	b, err := scanBatch(s.pool.QueryRow(ctx, `
		INSERT INTO batches (id, org_id, created_by, input_file_id, endpoint, completion_window, metadata, priority,
			status, created_at, expires_at)
		SELECT $1, $2, $3, $4, $5, $6, $7::json, $8, 'validating', $9, $10
		WHERE EXISTS (SELECT 1 FROM files WHERE id = $4 AND org_id = $2)
		RETURNING `+batchCols, batchdb.BatchPrefix+jobs.NewID(), p.OrgID, p.CreatedBy, p.InputFileID, p.Endpoint,
		p.CompletionWindow, rawPtr(p.Metadata), *p.Priority, now, now.Add(p.Window).Truncate(time.Microsecond)))
	if errors.Is(err, pgx.ErrNoRows) {
		err = fmt.Errorf("input file: %w", jobs.ErrNotFound)
	}
	s.wrote(ctx, "create batch", err, err == nil)
	if err != nil {
		return jobs.Batch{}, fmt.Errorf("pgstore: create batch: %w", err)
	}
	return b, nil
}

const getBatchSQL = `SELECT ` + batchCols + ` FROM batches WHERE id = $1 AND ($2 = '' OR org_id = $2)`

// GetBatch returns a batch, its counts computed from its jobs while they
// run. See jobs.Store.
func (s *Store) GetBatch(ctx context.Context, orgID, id string) (jobs.Batch, error) {
	b, err := scanBatch(s.pool.QueryRow(ctx, getBatchSQL, id, orgID))
	if err == nil {
		b, err = s.liveCounts(ctx, b)
	}
	if err != nil {
		return jobs.Batch{}, fmt.Errorf("pgstore: get batch: %w", notFound(err))
	}
	return b, nil
}

// liveCounts fills the counts of a batch whose jobs are running from
// those jobs (see jobs.Batch.Counts).
func (s *Store) liveCounts(ctx context.Context, b jobs.Batch) (jobs.Batch, error) {
	if !batchdb.Live(b.Status) {
		return b, nil
	}
	p, err := s.batchProgress(ctx, b.ID)
	b.Counts = batchdb.Counts(p)
	return b, err
}

// ListBatches returns a page of batches, newest first; one row past the
// page says whether more follow. See jobs.Store.
func (s *Store) ListBatches(ctx context.Context, p jobs.BatchListParams) ([]jobs.Batch, bool, error) {
	p, err := p.Normalize()
	if err != nil {
		return nil, false, fmt.Errorf("pgstore: list batches: %w", err)
	}
	out, err := s.queryBatches(ctx, `
		SELECT `+batchCols+` FROM batches
		WHERE ($1 = '' OR org_id = $1)
			AND ($2 = '' OR (created_at, id) < (SELECT created_at, id FROM batches WHERE id = $2))
		ORDER BY created_at DESC, id DESC LIMIT $3`, p.OrgID, p.After, p.Limit+1)
	if err != nil {
		return nil, false, fmt.Errorf("pgstore: list batches: %w", err)
	}
	if len(out) > p.Limit {
		return out[:p.Limit], true, nil
	}
	return out, false, nil
}

// ActiveBatches returns every unfinished batch, oldest first (the
// partial index batches_active_idx). See jobs.Store.
func (s *Store) ActiveBatches(ctx context.Context) ([]jobs.Batch, error) {
	out, err := s.queryBatches(ctx, `
		SELECT `+batchCols+` FROM batches
		WHERE status IN ('validating', 'in_progress', 'finalizing', 'cancelling') ORDER BY created_at, id`)
	if err != nil {
		return nil, fmt.Errorf("pgstore: active batches: %w", err)
	}
	return out, nil
}

// queryBatches reads batchCols rows, each with its counts.
func (s *Store) queryBatches(ctx context.Context, q string, args ...any) ([]jobs.Batch, error) {
	rows, err := s.pool.Query(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (jobs.Batch, error) { return scanBatch(r) })
	if err != nil {
		return nil, err
	}
	for i := range out {
		if out[i], err = s.liveCounts(ctx, out[i]); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// moveBatchSQL moves batch $id from status $from to $to, and notifies,
// so a batch waiter (GET /v1/batches/{id}?wait=) in another process looks
// again once the transaction commits; a batch not in $from is not moved
// and wakes nobody. $setErrors says whether $errors replaces the errors;
// the counts left NULL are kept.
var moveBatchSQL = named(`
	WITH moved AS (
		UPDATE batches SET status = $to,
			`+batchdb.StampSet("$to::text", "$now::timestamptz")+`,
			errors = CASE WHEN $setErrors THEN $errors::json ELSE errors END,
			total = coalesce($total, total), completed = coalesce($completed, completed), failed = coalesce($failed, failed)
		WHERE id = $id AND status = $from RETURNING batches.*
	), `+notified("moved")+`
	SELECT `+batchCols+` FROM moved, notified`,
	"to", "now", "setErrors", "errors", "total", "completed", "failed", "id", "from", "schema")

// querier is what moveBatch runs on: the pool or a transaction.
type querier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// moveBatch moves batch id from → to; a batch in another status is
// jobs.ErrBatchChanged, and nothing changes.
func (s *Store) moveBatch(ctx context.Context, q querier, now time.Time, id string, from, to jobs.BatchStatus,
	setErrors bool, errs []byte, c *jobs.BatchCounts) (jobs.Batch, error) {
	var total, completed, failed *int
	if c != nil {
		total, completed, failed = &c.Total, &c.Completed, &c.Failed
	}
	var errsArg *string
	if errs != nil {
		errsArg = new(string(errs))
	}
	b, err := scanBatch(q.QueryRow(ctx, moveBatchSQL.q, moveBatchSQL.args(string(to), now, setErrors, errsArg,
		total, completed, failed, id, string(from), s.schema)...))
	if !errors.Is(err, pgx.ErrNoRows) {
		return b, err
	}
	var status string
	if err := q.QueryRow(ctx, `SELECT status FROM batches WHERE id = $1`, id).Scan(&status); err != nil {
		return jobs.Batch{}, notFound(err)
	}
	return jobs.Batch{}, fmt.Errorf("%w: batch is %s, not %s", jobs.ErrBatchChanged, status, from)
}

// MoveBatch moves a batch From → To, only if it is From. See jobs.Store.
func (s *Store) MoveBatch(ctx context.Context, p jobs.MoveBatchParams) (jobs.Batch, error) {
	if err := batchdb.CheckMove(p); err != nil {
		return jobs.Batch{}, fmt.Errorf("pgstore: move batch: %w", err)
	}
	errs, err := batchdb.EncodeErrors(p.Errors)
	if err != nil {
		return jobs.Batch{}, fmt.Errorf("pgstore: move batch: %w", err)
	}
	b, err := s.moveBatch(ctx, s.pool, s.clock(), p.ID, p.From, p.To, p.Errors != nil, errs, p.Counts)
	s.wrote(ctx, "move batch", err, err == nil)
	if err == nil {
		s.notify.Broadcast() // this process's batch waiters at once; others through moveBatchSQL
	}
	if err == nil {
		b, err = s.liveCounts(ctx, b)
	}
	if err != nil {
		return jobs.Batch{}, fmt.Errorf("pgstore: move batch: %w", err)
	}
	return b, nil
}

// CancelBatch moves a validating or in_progress batch to cancelling,
// holding its row locked from the read to the write. See jobs.Store.
func (s *Store) CancelBatch(ctx context.Context, orgID, id string) (jobs.Batch, error) {
	var b jobs.Batch
	moved := false
	err := s.inWriteTx(ctx, func(tx pgx.Tx) error {
		var err error
		if b, err = scanBatch(tx.QueryRow(ctx, getBatchSQL+` FOR UPDATE`, id, orgID)); err != nil {
			return notFound(err)
		}
		switch b.Status {
		case jobs.BatchCancelling, jobs.BatchCancelled:
			return nil
		case jobs.BatchValidating, jobs.BatchInProgress:
			b, err = s.moveBatch(ctx, tx, s.clock(), id, b.Status, jobs.BatchCancelling, false, nil, nil)
			moved = err == nil
			return err
		}
		return fmt.Errorf("%w: batch is %s", jobs.ErrBatchChanged, b.Status)
	})
	s.wrote(ctx, "cancel batch", err, moved)
	if moved {
		s.notify.Broadcast() // this process's batch waiters at once; others through moveBatchSQL
	}
	if err == nil {
		b, err = s.liveCounts(ctx, b)
	}
	if err != nil {
		return jobs.Batch{}, fmt.Errorf("pgstore: cancel batch: %w", err)
	}
	return b, nil
}

// FinishBatch moves the batch first, so that one no longer From stores
// no file (and a concurrent FinishBatch waits for the row, then finds it
// moved), then stores the files and names them in the batch, in one
// transaction. See jobs.Store.
func (s *Store) FinishBatch(ctx context.Context, p jobs.FinishBatchParams) (jobs.Batch, error) {
	if err := batchdb.CheckFinish(p); err != nil {
		return jobs.Batch{}, fmt.Errorf("pgstore: finish batch: %w", err)
	}
	var b jobs.Batch
	err := s.inWriteTx(ctx, func(tx pgx.Tx) error {
		now := s.clock()
		var err error
		if b, err = s.moveBatch(ctx, tx, now, p.ID, p.From, p.To, false, nil, &p.Counts); err != nil {
			return err
		}
		var ids [2]*string
		for i, out := range []struct {
			kind string
			r    io.Reader
		}{{"output", p.Output}, {"error", p.Errors}} {
			if out.r == nil {
				continue
			}
			f, err := createFile(ctx, tx, batchdb.OutputFile(b, out.kind, out.r), now)
			if err != nil {
				return fmt.Errorf("%s file: %w", out.kind, err)
			}
			ids[i] = &f.ID
		}
		b, err = scanBatch(tx.QueryRow(ctx, `UPDATE batches SET output_file_id = $1, error_file_id = $2 WHERE id = $3
			RETURNING `+batchCols, ids[0], ids[1], p.ID))
		return err
	})
	s.wrote(ctx, "finish batch", err, err == nil)
	if err == nil {
		s.notify.Broadcast() // this process's batch waiters at once; others through moveBatchSQL
	}
	if err != nil {
		return jobs.Batch{}, fmt.Errorf("pgstore: finish batch: %w", err)
	}
	return b, nil
}

var batchProgressSQL = batchdb.ProgressSQL("$1")

// BatchProgress counts the batch's current jobs by outcome in one query;
// jobs.ErrNotFound for an unknown batch. See jobs.Store.
func (s *Store) BatchProgress(ctx context.Context, batchID string) (jobs.BatchProgress, error) {
	p, err := s.batchProgress(ctx, batchID)
	if err != nil {
		return jobs.BatchProgress{}, fmt.Errorf("pgstore: batch progress: %w", err)
	}
	return p, nil
}

func (s *Store) batchProgress(ctx context.Context, batchID string) (jobs.BatchProgress, error) {
	return batchdb.ScanProgress(s.pool.QueryRow(ctx, batchProgressSQL, batchID).Scan)
}

// batchLiveJobsSQL locks the batch's queued and running jobs before the
// event lock, in ID order like every other writer that locks jobs.
const batchLiveJobsSQL = `
	SELECT ` + jobCols + ` FROM jobs
	WHERE prompt_id IN (SELECT id FROM prompts WHERE batch_id = $1) AND state IN ('queued', 'running')
	ORDER BY id FOR UPDATE`

// batchLiveGateSQL takes the event lock only when the batch has a job to
// cancel, so a batch with none serializes with nobody. A job
// batchLiveJobsSQL locked still qualifies here (its state cannot change
// while it is locked).
const batchLiveGateSQL = `
	SELECT CASE WHEN EXISTS (SELECT 1 FROM prompts p JOIN jobs j ON j.prompt_id = p.id
		WHERE p.batch_id = $2 AND j.state IN ('queued', 'running'))
		THEN (SELECT true FROM pg_advisory_xact_lock($1)) ELSE false END`

// CancelBatchJobs cancels the batch's queued and running jobs through
// Cancel's statement (cancelSQL), in one transaction. See jobs.Store.
func (s *Store) CancelBatchJobs(ctx context.Context, batchID string) (int, error) {
	var live, out []jobs.Job
	_, err := s.writeTwoTripsGated(ctx, func(ph *phase) {
		ph.query(batchLiveJobsSQL, []any{batchID}, func(rows pgx.Rows) error {
			var err error
			live, err = collectJobs(rows)
			return err
		})
	}, &lockGate{sql: batchLiveGateSQL, args: []any{batchID}}, func(ph *phase, now time.Time) {
		cancelJobs(ph, now, live, s.schema, &out)
	})
	s.wrote(ctx, "cancel batch jobs", err, err == nil && len(out) > 0)
	if err != nil {
		return 0, fmt.Errorf("pgstore: cancel batch jobs: %w", err)
	}
	if len(out) > 0 {
		s.notify.Broadcast()
	}
	return len(out), nil
}

// BatchResults returns a page of the batch's lines with three reads: the
// page of prompts, their jobs, and the responses of the newest jobs that
// succeeded. A job's response commits with its success, so a read after
// the job's never misses it. See jobs.Store.
func (s *Store) BatchResults(ctx context.Context, p jobs.BatchResultsParams) ([]jobs.BatchResult, error) {
	out, err := s.batchResults(ctx, p)
	if err != nil {
		return nil, fmt.Errorf("pgstore: batch results: %w", err)
	}
	return out, nil
}

func (s *Store) batchResults(ctx context.Context, p jobs.BatchResultsParams) ([]jobs.BatchResult, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+promptCols+` FROM prompts WHERE batch_id = $1 AND id > $2 ORDER BY id LIMIT $3`,
		p.BatchID, p.After, batchdb.ResultsLimit(p.Limit))
	if err != nil {
		return nil, err
	}
	prompts, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (jobs.Prompt, error) { return scanPrompt(r) })
	if err != nil || len(prompts) == 0 {
		return nil, err
	}
	ids := make([]string, len(prompts))
	for i, pr := range prompts {
		ids[i] = pr.ID
	}
	js, err := s.queryJobs(ctx, `SELECT `+jobCols+` FROM jobs WHERE prompt_id = ANY($1) ORDER BY created_at, id`, ids)
	if err != nil {
		return nil, err
	}
	return batchdb.Results(prompts, js, func(ids []string) (map[string]jobs.Response, error) {
		return s.GetResponses(ctx, "", ids)
	})
}
