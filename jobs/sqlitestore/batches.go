package sqlitestore

import (
	"context"
	"database/sql"

	"github.com/promptkit/promptkit/jobs"
	"github.com/promptkit/promptkit/jobs/internal/batchdb"
	"github.com/promptkit/promptkit/jobs/internal/storeops"
)

// Files and batches (migration 5). The methods of jobs.Store on them are
// storeops.Ops' (embedded in Store), which runs them over opsDB and wtx:
// the statements below. They have no events: their writes run in
// transactions of their own on the writer, and their reads on the reader
// pool. CancelBatchJobs, which cancels jobs, is the store's own. Archive
// leaves files and batches alone.

const fileCols = `id, org_id, created_by, purpose, filename, bytes, created_at`

const batchCols = `id, org_id, created_by, input_file_id, endpoint, completion_window, metadata, priority,
	status, errors, output_file_id, error_file_id, total, completed, failed, created_at, expires_at,
	in_progress_at, finalizing_at, completed_at, failed_at, expired_at, cancelling_at, cancelled_at, token_id`

var (
	qInsertFile  = wq(`INSERT INTO files (` + fileCols + `) VALUES (?, ?, ?, ?, ?, 0, ?)`)
	qInsertChunk = wq(`INSERT INTO file_chunks (file_id, seq, data) VALUES (?, ?, ?)`)
	qFileBytes   = wq(`UPDATE files SET bytes = ?1 WHERE id = ?2 RETURNING ` + fileCols)
	qFileInOrg   = wq(`SELECT 1 FROM files WHERE id = ?1 AND (?2 = '' OR org_id = ?2)`)
	qDropChunks  = wq(`DELETE FROM file_chunks WHERE file_id = ?`)
	qDropFile    = wq(`DELETE FROM files WHERE id = ?`)

	qInsertBatch = wq(`INSERT INTO batches (id, org_id, created_by, input_file_id, endpoint, completion_window,
		metadata, priority, status, created_at, expires_at, token_id)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, 'validating', ?, ?, ?) RETURNING ` + batchCols)
	// A write transaction holds the database's write lock, so this read
	// needs no FOR UPDATE.
	qBatchForUpdate = wq(`SELECT ` + batchCols + ` FROM batches WHERE id = ?1 AND (?2 = '' OR org_id = ?2)`)
	// The conditional move: ?1 the new status, ?2 the time, ?3 whether
	// ?4 replaces the errors, ?5–?7 the counts (NULL: kept), ?8 the
	// batch, ?9 the status it must be in.
	qMoveBatch = wq(`UPDATE batches SET status = ?1,
			` + batchdb.StampSet("?1", "?2") + `,
			errors = CASE WHEN ?3 THEN ?4 ELSE errors END,
			total = coalesce(?5, total), completed = coalesce(?6, completed), failed = coalesce(?7, failed)
		WHERE id = ?8 AND status = ?9 RETURNING ` + batchCols)
	qBatchOutputs = wq(`UPDATE batches SET output_file_id = ?1, error_file_id = ?2 WHERE id = ?3
		RETURNING ` + batchCols)
	// The batch's jobs that can be cancelled, in ID order.
	qBatchLiveJobs = wq(`SELECT ` + jobCols + ` FROM jobs
		WHERE prompt_id IN (SELECT id FROM prompts WHERE batch_id = ?1) AND state IN ('queued', 'running')
		ORDER BY id`)
)

const (
	qGetFile = `SELECT ` + fileCols + ` FROM files WHERE id = ?1 AND (?2 = '' OR org_id = ?2)`
	// Newest first, from the file after ?3 (an unknown ID: no rows).
	qListFiles = `SELECT ` + fileCols + ` FROM files
		WHERE (?1 = '' OR org_id = ?1) AND (?2 = '' OR purpose = ?2)
			AND (?3 = '' OR (created_at, id) < (SELECT created_at, id FROM files WHERE id = ?3))
		ORDER BY created_at DESC, id DESC LIMIT ?4`
	qFileChunk = `SELECT data FROM file_chunks WHERE file_id = ?1 AND seq = ?2`

	qGetBatch    = `SELECT ` + batchCols + ` FROM batches WHERE id = ?1 AND (?2 = '' OR org_id = ?2)`
	qListBatches = `SELECT ` + batchCols + ` FROM batches
		WHERE (?1 = '' OR org_id = ?1)
			AND (?2 = '' OR (created_at, id) < (SELECT created_at, id FROM batches WHERE id = ?2))
		ORDER BY created_at DESC, id DESC LIMIT ?3`
	qBatchPrompts = `SELECT ` + promptCols + ` FROM prompts WHERE batch_id = ?1 AND id > ?2 ORDER BY id LIMIT ?3`
	// Every job of the prompts, oldest first: the last one of each prompt
	// is its newest.
	qPromptsJobs = `SELECT ` + jobCols + ` FROM jobs WHERE prompt_id IN (SELECT value FROM json_each(?1))
		ORDER BY created_at, id`
)

var qBatchProgress = batchdb.ProgressSQL("?1")

// qActiveBatches reads the active batches through the partial index
// batches_active (batchdb.ActiveWhere).
var qActiveBatches = `SELECT ` + batchCols + ` FROM batches
		WHERE ` + batchdb.ActiveWhere + ` ORDER BY created_at, id`

func scanFile(r scanner) (jobs.File, error) {
	var f jobs.File
	var createdAt int64
	if err := r.Scan(&f.ID, &f.OrgID, &f.CreatedBy, &f.Purpose, &f.Filename, &f.Bytes, &createdAt); err != nil {
		return jobs.File{}, err
	}
	f.CreatedAt = fromMicros(createdAt)
	return f, nil
}

func scanBatch(r scanner) (jobs.Batch, error) {
	var (
		b                                      jobs.Batch
		status                                 string
		meta, errs, output, errFile            sql.NullString
		createdAt, expiresAt                   int64
		inProgress, finalizing, completed      sql.NullInt64
		failed, expired, cancelling, cancelled sql.NullInt64
	)
	err := r.Scan(&b.ID, &b.OrgID, &b.CreatedBy, &b.InputFileID, &b.Endpoint, &b.CompletionWindow, &meta,
		&b.Priority, &status, &errs, &output, &errFile, &b.Counts.Total, &b.Counts.Completed, &b.Counts.Failed,
		&createdAt, &expiresAt, &inProgress, &finalizing, &completed, &failed, &expired, &cancelling, &cancelled, &b.TokenID)
	if err != nil {
		return jobs.Batch{}, err
	}
	b.Status = jobs.BatchStatus(status)
	if meta.Valid {
		b.Metadata = []byte(meta.String)
	}
	if b.Errors, err = batchdb.DecodeErrors([]byte(errs.String)); err != nil {
		return jobs.Batch{}, err
	}
	b.OutputFileID, b.ErrorFileID = output.String, errFile.String
	b.CreatedAt, b.ExpiresAt = fromMicros(createdAt), fromMicros(expiresAt)
	b.InProgressAt, b.FinalizingAt, b.CompletedAt = nullTime(inProgress), nullTime(finalizing), nullTime(completed)
	b.FailedAt, b.ExpiredAt = nullTime(failed), nullTime(expired)
	b.CancellingAt, b.CancelledAt = nullTime(cancelling), nullTime(cancelled)
	return b, nil
}

// CancelBatchJobs implements jobs.Store: every queued or running job of
// the batch is cancelled as Cancel cancels one, in one transaction.
func (s *Store) CancelBatchJobs(ctx context.Context, batchID string) (int, error) {
	n := 0
	err := s.write(ctx, "cancel batch jobs", func(w *wtx) error {
		n = 0
		rows, err := w.query(qBatchLiveJobs, batchID)
		if err != nil {
			return err
		}
		live, err := scanJobs(rows)
		if err != nil {
			return err
		}
		for _, j := range live {
			if _, err := w.cancel(j, nil); err != nil {
				return err
			}
			n++
		}
		return nil
	})
	s.wrote(ctx, "cancel batch jobs", err, n > 0)
	if err != nil {
		return 0, err
	}
	return n, nil
}

// cancel moves old, a queued or running job, to cancelled and records the
// transition with data (jobs.CancelParams.Data; nil for a batch's).
func (w *wtx) cancel(old jobs.Job, data []byte) (jobs.Job, error) {
	j, err := scanJob(w.queryRow(qCancel, w.now, old.ID))
	if err != nil {
		return jobs.Job{}, err
	}
	w.transition(j, old.State, jobs.Cancelled, data)
	if old.State == jobs.Running {
		// Its worker's unwritten call, if any, is lost (jobs.LostCall).
		if err := w.insertCalls(j, []jobs.UsageCall{jobs.LostCall}); err != nil {
			return jobs.Job{}, err
		}
	}
	return j, nil
}

// WriteTx runs fn in a transaction of its own on the writer (see tx).
func (d *opsDB) WriteTx(ctx context.Context, fn func(storeops.Tx) error) error {
	return d.store().tx(ctx, func(w *wtx) error { return fn(w) })
}

func (d *opsDB) Wrote(ctx context.Context, op string, err error, stored bool) {
	d.store().wrote(ctx, op, err, stored)
}

// Changed wakes this process's batch waiters (GET /v1/batches/{id}?wait=);
// other processes' watchers see the commit.
func (d *opsDB) Changed() { d.notify.Broadcast() }

// StoredFiles truncates the WAL after a write of more file content than
// walSizeLimit.
func (d *opsDB) StoredFiles(ctx context.Context, bytes int64) {
	if bytes > walSizeLimit {
		d.store().truncateWAL(ctx, 0)
	}
}

func (d *opsDB) FileGet(ctx context.Context, p storeops.FileGetParams) (jobs.File, error) {
	f, err := scanFile(d.store().readRow(ctx, qGetFile, p.ID, p.OrgID))
	return f, notFound(err)
}

func (d *opsDB) FileList(ctx context.Context, p jobs.FileListParams) ([]jobs.File, error) {
	return readAll(ctx, d.store(), scanFile, qListFiles, p.OrgID, p.Purpose, p.After, p.Limit)
}

func (d *opsDB) FileChunkGet(ctx context.Context, p storeops.FileChunkGetParams) ([]byte, error) {
	var data []byte
	err := d.store().readRow(ctx, qFileChunk, p.FileID, p.Seq).Scan(&data)
	return data, notFound(err)
}

func (d *opsDB) BatchGet(ctx context.Context, p storeops.BatchGetParams) (jobs.Batch, error) {
	b, err := scanBatch(d.store().readRow(ctx, qGetBatch, p.ID, p.OrgID))
	return b, notFound(err)
}

func (d *opsDB) BatchList(ctx context.Context, p jobs.BatchListParams) ([]jobs.Batch, error) {
	return readAll(ctx, d.store(), scanBatch, qListBatches, p.OrgID, p.After, p.Limit)
}

func (d *opsDB) BatchListActive(ctx context.Context) ([]jobs.Batch, error) {
	return readAll(ctx, d.store(), scanBatch, qActiveBatches)
}

func (d *opsDB) BatchProgress(ctx context.Context, batchID string) (jobs.BatchProgress, error) {
	return batchdb.ScanProgress(d.store().readRow(ctx, qBatchProgress, batchID).Scan)
}

func (d *opsDB) BatchPromptList(ctx context.Context, p jobs.BatchResultsParams) ([]jobs.Prompt, error) {
	return readAll(ctx, d.store(), scanPrompt, qBatchPrompts, p.BatchID, p.After, p.Limit)
}

func (d *opsDB) PromptJobList(ctx context.Context, promptIDs []string) ([]jobs.Job, error) {
	arg, err := batchIDs(promptIDs)
	if err != nil {
		return nil, err
	}
	return d.store().readJobs(ctx, qPromptsJobs, arg)
}

func (d *opsDB) ResponseList(ctx context.Context, ids []string) (map[string]jobs.Response, error) {
	return d.store().GetResponses(ctx, "", ids)
}

var _ storeops.Tx = (*wtx)(nil)

// BatchGet implements storeops.Tx.
func (w *wtx) BatchGet(p storeops.BatchGetParams) (jobs.Batch, error) {
	b, err := scanBatch(w.queryRow(qBatchForUpdate, p.ID, p.OrgID))
	return b, notFound(err)
}

// BatchInsert implements storeops.Tx: it looks for the input file, then
// inserts.
func (w *wtx) BatchInsert(p storeops.BatchInsertParams) (jobs.Batch, error) {
	var one int
	if err := w.queryRow(qFileInOrg, p.InputFileID, p.OrgID).Scan(&one); err != nil {
		return jobs.Batch{}, notFound(err)
	}
	expires := fromMicros(w.now).Add(p.Window).UnixMicro()
	return scanBatch(w.queryRow(qInsertBatch, p.ID, p.OrgID, p.CreatedBy, p.InputFileID, p.Endpoint, p.CompletionWindow,
		nullBytes(p.Metadata), p.Priority, w.now, expires, p.TokenID))
}

// BatchMove implements storeops.Tx with qMoveBatch.
func (w *wtx) BatchMove(p storeops.BatchMoveParams) (jobs.Batch, error) {
	var total, completed, failed any
	if c := p.Counts; c != nil {
		total, completed, failed = c.Total, c.Completed, c.Failed
	}
	b, err := scanBatch(w.queryRow(qMoveBatch, string(p.To), w.now, p.SetErrors, nullBytes(p.Errors),
		total, completed, failed, p.ID, string(p.From)))
	return b, notFound(err)
}

// BatchSetOutputs implements storeops.Tx.
func (w *wtx) BatchSetOutputs(p storeops.BatchSetOutputsParams) (jobs.Batch, error) {
	return scanBatch(w.queryRow(qBatchOutputs, nullString(p.OutputFileID), nullString(p.ErrorFileID), p.ID))
}

// FileInsert implements storeops.Tx.
func (w *wtx) FileInsert(p storeops.FileInsertParams) error {
	_, err := w.exec(qInsertFile, p.ID, p.OrgID, p.CreatedBy, p.Purpose, p.Filename, w.now)
	return err
}

// FileChunkInsert implements storeops.Tx.
func (w *wtx) FileChunkInsert(p storeops.FileChunkInsertParams) error {
	_, err := w.exec(qInsertChunk, p.FileID, p.Seq, p.Data)
	return err
}

// FileSetBytes implements storeops.Tx.
func (w *wtx) FileSetBytes(p storeops.FileSetBytesParams) (jobs.File, error) {
	return scanFile(w.queryRow(qFileBytes, p.Bytes, p.ID))
}

// FileDelete implements storeops.Tx: the chunks, then the file.
func (w *wtx) FileDelete(p storeops.FileGetParams) error {
	var one int
	if err := w.queryRow(qFileInOrg, p.ID, p.OrgID).Scan(&one); err != nil {
		return notFound(err)
	}
	if _, err := w.exec(qDropChunks, p.ID); err != nil {
		return err
	}
	_, err := w.exec(qDropFile, p.ID)
	return err
}
