package sqlitestore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"

	"github.com/promptkit/promptkit/jobs"
	"github.com/promptkit/promptkit/jobs/internal/batchdb"
)

// Files and batches (migration 5). They have no events: their writes run
// in transactions of their own on the writer, and their reads on the
// reader pool. Archive leaves them alone.

const fileCols = `id, org_id, created_by, purpose, filename, bytes, created_at`

const batchCols = `id, org_id, created_by, input_file_id, endpoint, completion_window, metadata, priority,
	status, errors, output_file_id, error_file_id, total, completed, failed, created_at, expires_at,
	in_progress_at, finalizing_at, completed_at, failed_at, expired_at, cancelling_at, cancelled_at`

var (
	// A file's row goes in first (its size once the content is read), so
	// the chunks' foreign key holds.
	qInsertFile  = wq(`INSERT INTO files (` + fileCols + `) VALUES (?, ?, ?, ?, ?, 0, ?)`)
	qInsertChunk = wq(`INSERT INTO file_chunks (file_id, seq, data) VALUES (?, ?, ?)`)
	qFileBytes   = wq(`UPDATE files SET bytes = ?1 WHERE id = ?2 RETURNING ` + fileCols)
	qFileInOrg   = wq(`SELECT 1 FROM files WHERE id = ?1 AND (?2 = '' OR org_id = ?2)`)
	qDropChunks  = wq(`DELETE FROM file_chunks WHERE file_id = ?`)
	qDropFile    = wq(`DELETE FROM files WHERE id = ?`)

	qInsertBatch = wq(`INSERT INTO batches (id, org_id, created_by, input_file_id, endpoint, completion_window,
		metadata, priority, status, created_at, expires_at)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, 'validating', ?, ?) RETURNING ` + batchCols)
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
	qActiveBatches = `SELECT ` + batchCols + ` FROM batches
		WHERE status IN ('validating', 'in_progress', 'finalizing', 'cancelling') ORDER BY created_at, id`
	qBatchPrompts = `SELECT ` + promptCols + ` FROM prompts WHERE batch_id = ?1 AND id > ?2 ORDER BY id LIMIT ?3`
	// Every job of the prompts, oldest first: the last one of each prompt
	// is its newest.
	qPromptsJobs = `SELECT ` + jobCols + ` FROM jobs WHERE prompt_id IN (SELECT value FROM json_each(?1))
		ORDER BY created_at, id`
)

var qBatchProgress = batchdb.ProgressSQL("?1")

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
		&createdAt, &expiresAt, &inProgress, &finalizing, &completed, &failed, &expired, &cancelling, &cancelled)
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

// CreateFile implements jobs.Store: the content is read in chunks inside
// the write transaction, so a file over the limit rolls back whole.
func (s *Store) CreateFile(ctx context.Context, p jobs.CreateFileParams) (jobs.File, error) {
	p, err := p.Normalize()
	if err != nil {
		return jobs.File{}, fmt.Errorf("sqlitestore: create file: %w", err)
	}
	var f jobs.File
	err = s.write(ctx, "create file", func(w *wtx) error {
		var err error
		f, err = w.createFile(p)
		return err
	})
	s.wrote(ctx, "create file", err, err == nil)
	if err != nil {
		return jobs.File{}, err
	}
	if f.Bytes > walSizeLimit {
		s.truncateWAL(ctx)
	}
	return f, nil
}

// createFile stores a normalized file.
func (w *wtx) createFile(p jobs.CreateFileParams) (jobs.File, error) {
	id := batchdb.FilePrefix + jobs.NewID()
	if _, err := w.exec(qInsertFile, id, p.OrgID, p.CreatedBy, p.Purpose, p.Filename, w.now); err != nil {
		return jobs.File{}, fmt.Errorf("insert file: %w", err)
	}
	n, err := batchdb.ReadChunks(p.Content, p.MaxBytes, func(seq int, data []byte) error {
		_, err := w.exec(qInsertChunk, id, seq, data)
		return err
	})
	if err != nil {
		return jobs.File{}, err
	}
	return scanFile(w.queryRow(qFileBytes, n, id))
}

// GetFile implements jobs.Store.
func (s *Store) GetFile(ctx context.Context, orgID, id string) (jobs.File, error) {
	f, err := scanFile(s.readRow(ctx, qGetFile, id, orgID))
	if err != nil {
		return jobs.File{}, fmt.Errorf("sqlitestore: get file: %w", notFound(err))
	}
	return f, nil
}

// ListFiles implements jobs.Store: one row past the page says whether
// more follow.
func (s *Store) ListFiles(ctx context.Context, p jobs.FileListParams) ([]jobs.File, bool, error) {
	p, err := p.Normalize()
	if err != nil {
		return nil, false, fmt.Errorf("sqlitestore: list files: %w", err)
	}
	rows, err := s.readQuery(ctx, qListFiles, p.OrgID, p.Purpose, p.After, p.Limit+1)
	if err != nil {
		return nil, false, fmt.Errorf("sqlitestore: list files: %w", err)
	}
	var out []jobs.File
	err = eachRow(rows, func() error {
		f, err := scanFile(rows)
		out = append(out, f)
		return err
	})
	if err != nil {
		return nil, false, fmt.Errorf("sqlitestore: list files: %w", err)
	}
	if len(out) > p.Limit {
		return out[:p.Limit], true, nil
	}
	return out, false, nil
}

// ReadFile implements jobs.Store: one read per chunk, none held open
// while w writes. A file deleted meanwhile ends the copy with ErrNotFound.
func (s *Store) ReadFile(ctx context.Context, orgID, id string, w io.Writer) error {
	f, err := scanFile(s.readRow(ctx, qGetFile, id, orgID))
	if err != nil {
		return fmt.Errorf("sqlitestore: read file: %w", notFound(err))
	}
	var n int64
	for seq := 0; n < f.Bytes; seq++ {
		var data []byte
		if err := s.readRow(ctx, qFileChunk, id, seq).Scan(&data); err != nil {
			return fmt.Errorf("sqlitestore: read file: chunk %d: %w", seq, notFound(err))
		}
		if _, err := w.Write(data); err != nil {
			return fmt.Errorf("sqlitestore: read file: %w", err)
		}
		n += int64(len(data))
	}
	return nil
}

// DeleteFile implements jobs.Store.
func (s *Store) DeleteFile(ctx context.Context, orgID, id string) error {
	err := s.write(ctx, "delete file", func(w *wtx) error {
		var one int
		if err := w.queryRow(qFileInOrg, id, orgID).Scan(&one); err != nil {
			return notFound(err)
		}
		if _, err := w.exec(qDropChunks, id); err != nil {
			return err
		}
		_, err := w.exec(qDropFile, id)
		return err
	})
	s.wrote(ctx, "delete file", err, err == nil)
	return err
}

// CreateBatch implements jobs.Store.
func (s *Store) CreateBatch(ctx context.Context, p jobs.CreateBatchParams) (jobs.Batch, error) {
	p, err := p.Normalize()
	if err != nil {
		return jobs.Batch{}, fmt.Errorf("sqlitestore: create batch: %w", err)
	}
	var b jobs.Batch
	err = s.write(ctx, "create batch", func(w *wtx) error {
		var one int
		if err := w.queryRow(qFileInOrg, p.InputFileID, p.OrgID).Scan(&one); err != nil {
			return fmt.Errorf("input file: %w", notFound(err))
		}
		expires := fromMicros(w.now).Add(p.Window).UnixMicro()
		var err error
		b, err = scanBatch(w.queryRow(qInsertBatch, batchdb.BatchPrefix+jobs.NewID(), p.OrgID, p.CreatedBy,
			p.InputFileID, p.Endpoint, p.CompletionWindow, nullBytes(p.Metadata), *p.Priority, w.now, expires))
		return err
	})
	s.wrote(ctx, "create batch", err, err == nil)
	if err != nil {
		return jobs.Batch{}, err
	}
	return b, nil
}

// GetBatch implements jobs.Store.
func (s *Store) GetBatch(ctx context.Context, orgID, id string) (jobs.Batch, error) {
	b, err := scanBatch(s.readRow(ctx, qGetBatch, id, orgID))
	if err == nil {
		b, err = s.liveCounts(ctx, b)
	}
	if err != nil {
		return jobs.Batch{}, fmt.Errorf("sqlitestore: get batch: %w", notFound(err))
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

// ListBatches implements jobs.Store.
func (s *Store) ListBatches(ctx context.Context, p jobs.BatchListParams) ([]jobs.Batch, bool, error) {
	p, err := p.Normalize()
	if err != nil {
		return nil, false, fmt.Errorf("sqlitestore: list batches: %w", err)
	}
	out, err := s.readBatches(ctx, qListBatches, p.OrgID, p.After, p.Limit+1)
	if err != nil {
		return nil, false, fmt.Errorf("sqlitestore: list batches: %w", err)
	}
	if len(out) > p.Limit {
		return out[:p.Limit], true, nil
	}
	return out, false, nil
}

// ActiveBatches implements jobs.Store.
func (s *Store) ActiveBatches(ctx context.Context) ([]jobs.Batch, error) {
	out, err := s.readBatches(ctx, qActiveBatches)
	if err != nil {
		return nil, fmt.Errorf("sqlitestore: active batches: %w", err)
	}
	return out, nil
}

// readBatches reads batchCols rows, each with its counts.
func (s *Store) readBatches(ctx context.Context, q string, args ...any) ([]jobs.Batch, error) {
	rows, err := s.readQuery(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	var out []jobs.Batch
	err = eachRow(rows, func() error {
		b, err := scanBatch(rows)
		out = append(out, b)
		return err
	})
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

// MoveBatch implements jobs.Store.
func (s *Store) MoveBatch(ctx context.Context, p jobs.MoveBatchParams) (jobs.Batch, error) {
	if err := batchdb.CheckMove(p); err != nil {
		return jobs.Batch{}, fmt.Errorf("sqlitestore: move batch: %w", err)
	}
	errs, err := batchdb.EncodeErrors(p.Errors)
	if err != nil {
		return jobs.Batch{}, fmt.Errorf("sqlitestore: move batch: %w", err)
	}
	var b jobs.Batch
	err = s.write(ctx, "move batch", func(w *wtx) error {
		var err error
		b, err = w.moveBatch(p.ID, p.From, p.To, p.Errors != nil, errs, p.Counts)
		return err
	})
	s.wrote(ctx, "move batch", err, err == nil)
	if err == nil {
		s.notify.Broadcast() // a batch waiter (GET /v1/batches/{id}?wait=) looks again
	}
	if err == nil {
		b, err = s.liveCounts(ctx, b)
	}
	if err != nil {
		return jobs.Batch{}, fmt.Errorf("sqlitestore: move batch: %w", err)
	}
	return b, nil
}

// moveBatch moves batch id from → to (see qMoveBatch); a batch in
// another status is jobs.ErrBatchChanged, and nothing changes.
func (w *wtx) moveBatch(id string, from, to jobs.BatchStatus, setErrors bool, errs []byte, c *jobs.BatchCounts) (jobs.Batch, error) {
	var total, completed, failed any
	if c != nil {
		total, completed, failed = c.Total, c.Completed, c.Failed
	}
	b, err := scanBatch(w.queryRow(qMoveBatch, string(to), w.now, setErrors, nullBytes(errs),
		total, completed, failed, id, string(from)))
	if !errors.Is(err, sql.ErrNoRows) {
		return b, err
	}
	if b, err = scanBatch(w.queryRow(qBatchForUpdate, id, "")); err != nil {
		return jobs.Batch{}, notFound(err)
	}
	return jobs.Batch{}, fmt.Errorf("%w: batch is %s, not %s", jobs.ErrBatchChanged, b.Status, from)
}

// CancelBatch implements jobs.Store.
func (s *Store) CancelBatch(ctx context.Context, orgID, id string) (jobs.Batch, error) {
	var b jobs.Batch
	moved := false
	err := s.write(ctx, "cancel batch", func(w *wtx) error {
		var err error
		if b, err = scanBatch(w.queryRow(qBatchForUpdate, id, orgID)); err != nil {
			return notFound(err)
		}
		switch b.Status {
		case jobs.BatchCancelling, jobs.BatchCancelled:
			return nil
		case jobs.BatchValidating, jobs.BatchInProgress:
			b, err = w.moveBatch(id, b.Status, jobs.BatchCancelling, false, nil, nil)
			moved = err == nil
			return err
		}
		return fmt.Errorf("%w: batch is %s", jobs.ErrBatchChanged, b.Status)
	})
	s.wrote(ctx, "cancel batch", err, moved)
	if moved {
		s.notify.Broadcast() // a batch waiter (GET /v1/batches/{id}?wait=) looks again
	}
	if err == nil {
		b, err = s.liveCounts(ctx, b)
	}
	if err != nil {
		return jobs.Batch{}, fmt.Errorf("sqlitestore: cancel batch: %w", err)
	}
	return b, nil
}

// FinishBatch implements jobs.Store: the move comes first, so a batch no
// longer From stores no file.
func (s *Store) FinishBatch(ctx context.Context, p jobs.FinishBatchParams) (jobs.Batch, error) {
	if err := batchdb.CheckFinish(p); err != nil {
		return jobs.Batch{}, fmt.Errorf("sqlitestore: finish batch: %w", err)
	}
	var b jobs.Batch
	var stored int64 // bytes of output and error files
	err := s.write(ctx, "finish batch", func(w *wtx) error {
		stored = 0
		var err error
		if b, err = w.moveBatch(p.ID, p.From, p.To, false, nil, &p.Counts); err != nil {
			return err
		}
		var ids [2]string
		for i, out := range []struct {
			kind string
			r    io.Reader
		}{{"output", p.Output}, {"error", p.Errors}} {
			if out.r == nil {
				continue
			}
			f, err := w.createFile(batchdb.OutputFile(b, out.kind, out.r))
			if err != nil {
				return fmt.Errorf("%s file: %w", out.kind, err)
			}
			ids[i] = f.ID
			stored += f.Bytes
		}
		b, err = scanBatch(w.queryRow(qBatchOutputs, nullString(ids[0]), nullString(ids[1]), p.ID))
		return err
	})
	s.wrote(ctx, "finish batch", err, err == nil)
	if err == nil {
		s.notify.Broadcast() // a batch waiter (GET /v1/batches/{id}?wait=) looks again
	}
	if err != nil {
		return jobs.Batch{}, err
	}
	if stored > walSizeLimit {
		s.truncateWAL(ctx)
	}
	return b, nil
}

// BatchProgress implements jobs.Store; ErrNotFound for an unknown batch.
func (s *Store) BatchProgress(ctx context.Context, batchID string) (jobs.BatchProgress, error) {
	p, err := s.batchProgress(ctx, batchID)
	if err != nil {
		return jobs.BatchProgress{}, fmt.Errorf("sqlitestore: batch progress: %w", err)
	}
	return p, nil
}

func (s *Store) batchProgress(ctx context.Context, batchID string) (jobs.BatchProgress, error) {
	return batchdb.ScanProgress(s.readRow(ctx, qBatchProgress, batchID).Scan)
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
			if _, err := w.cancel(j); err != nil {
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

// BatchResults implements jobs.Store with three reads: the page of
// prompts, their jobs, and the responses of the newest jobs that
// succeeded. A job's response commits with its success, so one read after
// the job's never misses it.
func (s *Store) BatchResults(ctx context.Context, p jobs.BatchResultsParams) ([]jobs.BatchResult, error) {
	out, err := s.batchResults(ctx, p)
	if err != nil {
		return nil, fmt.Errorf("sqlitestore: batch results: %w", err)
	}
	return out, nil
}

func (s *Store) batchResults(ctx context.Context, p jobs.BatchResultsParams) ([]jobs.BatchResult, error) {
	rows, err := s.readQuery(ctx, qBatchPrompts, p.BatchID, p.After, batchdb.ResultsLimit(p.Limit))
	if err != nil {
		return nil, err
	}
	var prompts []jobs.Prompt
	err = eachRow(rows, func() error {
		pr, err := scanPrompt(rows)
		prompts = append(prompts, pr)
		return err
	})
	if err != nil || len(prompts) == 0 {
		return nil, err
	}
	ids := make([]string, len(prompts))
	for i, pr := range prompts {
		ids[i] = pr.ID
	}
	arg, err := batchIDs(ids)
	if err != nil {
		return nil, err
	}
	js, err := s.readJobs(ctx, qPromptsJobs, arg)
	if err != nil {
		return nil, err
	}
	return batchdb.Results(prompts, js, func(ids []string) (map[string]jobs.Response, error) {
		return s.GetResponses(ctx, "", ids)
	})
}

// cancel moves old, a queued or running job, to cancelled and records the
// transition.
func (w *wtx) cancel(old jobs.Job) (jobs.Job, error) {
	j, err := scanJob(w.queryRow(qCancel, w.now, old.ID))
	if err != nil {
		return jobs.Job{}, err
	}
	w.transition(j, old.State, jobs.Cancelled, nil)
	return j, nil
}
