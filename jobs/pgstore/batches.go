package pgstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/promptkit/promptkit/jobs"
	"github.com/promptkit/promptkit/jobs/internal/batchdb"
	"github.com/promptkit/promptkit/jobs/internal/storeops"
)

// Files and batches (migration 00008). The methods of jobs.Store on them
// are storeops.Ops' (embedded in Store), which runs them over opsDB and
// batchTx: the statements below. They have no events and no place in the
// job log: like tokens, they are written without the event lock, each
// write in a transaction of its own. CancelBatchJobs, which cancels jobs,
// is the store's own and goes through Cancel's statement. Archive leaves
// files and batches alone.

const fileCols = `id, org_id, created_by, purpose, filename, bytes, created_at`

const batchCols = `id, org_id, created_by, input_file_id, endpoint, completion_window, metadata::text, priority,
	status, errors::text, output_file_id, error_file_id, total, completed, failed, created_at, expires_at,
	in_progress_at, finalizing_at, completed_at, failed_at, expired_at, cancelling_at, cancelled_at, token_id`

const (
	getFileSQL = `SELECT ` + fileCols + ` FROM files WHERE id = $1 AND ($2 = '' OR org_id = $2)`
	// Newest first, from the file after $3 (an unknown ID: no rows).
	listFilesSQL = `
		SELECT ` + fileCols + ` FROM files
		WHERE ($1 = '' OR org_id = $1) AND ($2 = '' OR purpose = $2)
			AND ($3 = '' OR (created_at, id) < (SELECT created_at, id FROM files WHERE id = $3))
		ORDER BY created_at DESC, id DESC LIMIT $4`
	fileChunkSQL   = `SELECT data FROM file_chunks WHERE file_id = $1 AND seq = $2`
	insertFileSQL  = `INSERT INTO files (` + fileCols + `) VALUES ($1, $2, $3, $4, $5, 0, $6)`
	insertChunkSQL = `INSERT INTO file_chunks (file_id, seq, data) VALUES ($1, $2, $3)`
	fileBytesSQL   = `UPDATE files SET bytes = $1 WHERE id = $2 RETURNING ` + fileCols
	// One statement deletes the file and its chunks (the foreign key is
	// checked at its end).
	deleteFileSQL = `
		WITH f AS (
			SELECT id FROM files WHERE id = $1 AND ($2 = '' OR org_id = $2) FOR UPDATE
		), chunks AS (
			DELETE FROM file_chunks WHERE file_id IN (SELECT id FROM f)
		)
		DELETE FROM files WHERE id IN (SELECT id FROM f)`

	getBatchSQL = `SELECT ` + batchCols + ` FROM batches WHERE id = $1 AND ($2 = '' OR org_id = $2)`
	// Only if the input file is the org's.
	insertBatchSQL = `
		INSERT INTO batches (id, org_id, created_by, input_file_id, endpoint, completion_window, metadata, priority,
			status, created_at, expires_at, token_id)
		SELECT $1, $2, $3, $4, $5, $6, $7::json, $8, 'validating', $9, $10, $11
		WHERE EXISTS (SELECT 1 FROM files WHERE id = $4 AND org_id = $2)
		RETURNING ` + batchCols
	listBatchesSQL = `
		SELECT ` + batchCols + ` FROM batches
		WHERE ($1 = '' OR org_id = $1)
			AND ($2 = '' OR (created_at, id) < (SELECT created_at, id FROM batches WHERE id = $2))
		ORDER BY created_at DESC, id DESC LIMIT $3`
	batchOutputsSQL = `UPDATE batches SET output_file_id = $1, error_file_id = $2 WHERE id = $3
		RETURNING ` + batchCols
	batchPromptsSQL = `SELECT ` + promptCols + ` FROM prompts WHERE batch_id = $1 AND id > $2 ORDER BY id LIMIT $3`
	// Every job of the prompts, oldest first: the last one of each prompt
	// is its newest.
	promptsJobsSQL = `SELECT ` + jobCols + ` FROM jobs WHERE prompt_id = ANY($1) ORDER BY created_at, id`
)

var batchProgressSQL = batchdb.ProgressSQL("$1")

// activeBatchesSQL reads the active batches through the partial index
// batches_active_idx (batchdb.ActiveWhere).
var activeBatchesSQL = `
		SELECT ` + batchCols + ` FROM batches
		WHERE ` + batchdb.ActiveWhere + ` ORDER BY created_at, id`

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
		&b.CreatedAt, &b.ExpiresAt, &inProgress, &finalizing, &completed, &failed, &expired, &cancelling, &cancelled, &b.TokenID)
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
		cancelJobs(ph, now, live, nil, s.schema, &out)
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

// WriteTx runs fn in a transaction of its own from the pool.
func (d *opsDB) WriteTx(ctx context.Context, fn func(storeops.Tx) error) error {
	return pgx.BeginFunc(ctx, d.pool, func(tx pgx.Tx) error {
		return fn(&batchTx{ctx: ctx, tx: tx, s: d.store()})
	})
}

func (d *opsDB) Wrote(ctx context.Context, op string, err error, stored bool) {
	d.store().wrote(ctx, op, err, stored)
}

// Changed wakes this process's batch waiters at once; other processes
// through moveBatchSQL's notification.
func (d *opsDB) Changed() { d.notify.Broadcast() }

// StoredFiles does nothing: PostgreSQL recycles its WAL itself.
func (d *opsDB) StoredFiles(context.Context, int64) {}

func (d *opsDB) FileGet(ctx context.Context, p storeops.FileGetParams) (jobs.File, error) {
	f, err := scanFile(d.pool.QueryRow(ctx, getFileSQL, p.ID, p.OrgID))
	return f, notFound(err)
}

func (d *opsDB) FileList(ctx context.Context, p jobs.FileListParams) ([]jobs.File, error) {
	rows, err := d.pool.Query(ctx, listFilesSQL, p.OrgID, p.Purpose, p.After, p.Limit)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (jobs.File, error) { return scanFile(r) })
}

func (d *opsDB) FileChunkGet(ctx context.Context, p storeops.FileChunkGetParams) ([]byte, error) {
	var data []byte
	err := d.pool.QueryRow(ctx, fileChunkSQL, p.FileID, p.Seq).Scan(&data)
	return data, notFound(err)
}

func (d *opsDB) BatchGet(ctx context.Context, p storeops.BatchGetParams) (jobs.Batch, error) {
	b, err := scanBatch(d.pool.QueryRow(ctx, getBatchSQL, p.ID, p.OrgID))
	return b, notFound(err)
}

func (d *opsDB) BatchList(ctx context.Context, p jobs.BatchListParams) ([]jobs.Batch, error) {
	return d.queryBatches(ctx, listBatchesSQL, p.OrgID, p.After, p.Limit)
}

func (d *opsDB) BatchListActive(ctx context.Context) ([]jobs.Batch, error) {
	return d.queryBatches(ctx, activeBatchesSQL)
}

// queryBatches reads batchCols rows.
func (d *opsDB) queryBatches(ctx context.Context, q string, args ...any) ([]jobs.Batch, error) {
	rows, err := d.pool.Query(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (jobs.Batch, error) { return scanBatch(r) })
}

func (d *opsDB) BatchProgress(ctx context.Context, batchID string) (jobs.BatchProgress, error) {
	return batchdb.ScanProgress(d.pool.QueryRow(ctx, batchProgressSQL, batchID).Scan)
}

func (d *opsDB) BatchPromptList(ctx context.Context, p jobs.BatchResultsParams) ([]jobs.Prompt, error) {
	rows, err := d.pool.Query(ctx, batchPromptsSQL, p.BatchID, p.After, p.Limit)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (jobs.Prompt, error) { return scanPrompt(r) })
}

func (d *opsDB) PromptJobList(ctx context.Context, promptIDs []string) ([]jobs.Job, error) {
	return d.store().queryJobs(ctx, promptsJobsSQL, promptIDs)
}

func (d *opsDB) ResponseList(ctx context.Context, ids []string) (map[string]jobs.Response, error) {
	return d.store().GetResponses(ctx, "", ids)
}

// batchTx is a storeops.Tx on a pgx transaction.
type batchTx struct {
	ctx context.Context
	tx  pgx.Tx
	s   *Store
	now time.Time // the store's clock at the first write; zero until then
}

var _ storeops.Tx = (*batchTx)(nil)

// clock is the transaction's time, read at its first write: after the
// row locks a CancelBatch waited for.
func (t *batchTx) clock() time.Time {
	if t.now.IsZero() {
		t.now = t.s.clock()
	}
	return t.now
}

// BatchGet implements storeops.Tx.
func (t *batchTx) BatchGet(p storeops.BatchGetParams) (jobs.Batch, error) {
	q := getBatchSQL
	if p.ForUpdate {
		q += ` FOR UPDATE`
	}
	b, err := scanBatch(t.tx.QueryRow(t.ctx, q, p.ID, p.OrgID))
	return b, notFound(err)
}

// BatchInsert implements storeops.Tx with insertBatchSQL.
func (t *batchTx) BatchInsert(p storeops.BatchInsertParams) (jobs.Batch, error) {
	now := t.clock()
	b, err := scanBatch(t.tx.QueryRow(t.ctx, insertBatchSQL, p.ID, p.OrgID, p.CreatedBy, p.InputFileID, p.Endpoint,
		p.CompletionWindow, rawPtr(p.Metadata), p.Priority, now, now.Add(p.Window).Truncate(time.Microsecond), p.TokenID))
	return b, noRows(err)
}

// BatchMove implements storeops.Tx with moveBatchSQL.
func (t *batchTx) BatchMove(p storeops.BatchMoveParams) (jobs.Batch, error) {
	var total, completed, failed *int
	if c := p.Counts; c != nil {
		total, completed, failed = &c.Total, &c.Completed, &c.Failed
	}
	var errs *string
	if p.Errors != nil {
		errs = new(string(p.Errors))
	}
	b, err := scanBatch(t.tx.QueryRow(t.ctx, moveBatchSQL.q, moveBatchSQL.args(string(p.To), t.clock(), p.SetErrors, errs,
		total, completed, failed, p.ID, string(p.From), t.s.schema)...))
	return b, noRows(err)
}

// BatchSetOutputs implements storeops.Tx.
func (t *batchTx) BatchSetOutputs(p storeops.BatchSetOutputsParams) (jobs.Batch, error) {
	return scanBatch(t.tx.QueryRow(t.ctx, batchOutputsSQL, nullIfEmpty(p.OutputFileID), nullIfEmpty(p.ErrorFileID), p.ID))
}

// FileInsert implements storeops.Tx.
func (t *batchTx) FileInsert(p storeops.FileInsertParams) error {
	_, err := t.tx.Exec(t.ctx, insertFileSQL, p.ID, p.OrgID, p.CreatedBy, p.Purpose, p.Filename, t.clock())
	return err
}

// FileChunkInsert implements storeops.Tx.
func (t *batchTx) FileChunkInsert(p storeops.FileChunkInsertParams) error {
	_, err := t.tx.Exec(t.ctx, insertChunkSQL, p.FileID, p.Seq, p.Data)
	return err
}

// FileSetBytes implements storeops.Tx.
func (t *batchTx) FileSetBytes(p storeops.FileSetBytesParams) (jobs.File, error) {
	return scanFile(t.tx.QueryRow(t.ctx, fileBytesSQL, p.Bytes, p.ID))
}

// FileDelete implements storeops.Tx with deleteFileSQL.
func (t *batchTx) FileDelete(p storeops.FileGetParams) error {
	tag, err := t.tx.Exec(t.ctx, deleteFileSQL, p.ID, p.OrgID)
	if err == nil && tag.RowsAffected() == 0 {
		err = jobs.ErrNotFound
	}
	return err
}

// noRows translates pgx.ErrNoRows, and only it, into jobs.ErrNotFound.
func noRows(err error) error {
	if errors.Is(err, pgx.ErrNoRows) {
		return jobs.ErrNotFound
	}
	return err
}

// nullIfEmpty is NULL for "".
func nullIfEmpty(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}
