// Package batchdb is what both job stores share to keep files and
// batches: how an upload is cut into chunks, which column stamps each
// batch status, when a batch's counts are computed at read time, the SQL
// that counts a batch's jobs, and the checks the stores make on the
// parameters that have no Normalize method.
package batchdb

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"strings"

	"github.com/promptkit/promptkit/jobs"
	"github.com/promptkit/promptkit/jobs/internal/health"
)

// FilePrefix and BatchPrefix begin the IDs the stores make (OpenAI's
// shapes: "file-…", "batch_…").
const (
	FilePrefix  = "file-"
	BatchPrefix = "batch_"
)

// ReadChunks reads r to its end in jobs.FileChunkSize chunks and calls
// store with each, numbered from 0; it returns the number of bytes read.
// More than max bytes is jobs.ErrFileTooLarge, found after reading at
// most max+1 bytes. The chunk's bytes are only valid during the call. A
// failing reader's error is marked as the caller's (health.Caller): it
// says nothing about the database.
func ReadChunks(r io.Reader, max int64, store func(seq int, data []byte) error) (int64, error) {
	lim := io.LimitReader(r, max+1)
	if max == math.MaxInt64 {
		lim = r
	}
	buf := make([]byte, jobs.FileChunkSize)
	var total int64
	for seq := 0; ; seq++ {
		n, err := io.ReadFull(lim, buf)
		total += int64(n)
		if total > max {
			return total, fmt.Errorf("%w: more than %d bytes", jobs.ErrFileTooLarge, max)
		}
		if n > 0 {
			if err := store(seq, buf[:n]); err != nil {
				return total, err
			}
		}
		switch {
		case errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF):
			return total, nil
		case err != nil:
			return total, health.Caller(fmt.Errorf("read content: %w", err))
		}
	}
}

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

// Live reports whether a batch in status s has its counts computed from
// its jobs at read time (see jobs.Batch.Counts).
func Live(s jobs.BatchStatus) bool {
	return s == jobs.BatchInProgress || s == jobs.BatchFinalizing || s == jobs.BatchCancelling
}

// CheckMove refuses a MoveBatch whose statuses are not batch statuses or
// whose target is validating (where no batch goes back to).
func CheckMove(p jobs.MoveBatchParams) error {
	if !p.From.Valid() || !p.To.Valid() || p.To == jobs.BatchValidating {
		return fmt.Errorf("%w: batch: cannot move %q to %q", jobs.ErrInvalid, p.From, p.To)
	}
	return nil
}

// CheckFinish refuses a FinishBatch whose target is not terminal.
func CheckFinish(p jobs.FinishBatchParams) error {
	if !p.From.Valid() || !p.To.Terminal() {
		return fmt.Errorf("%w: batch: cannot finish %q as %q", jobs.ErrInvalid, p.From, p.To)
	}
	return nil
}

// ResultsLimit is a BatchResults page size: 500 by default, at most
// jobs.MaxListLimit.
func ResultsLimit(limit int) int {
	if limit <= 0 {
		return 500
	}
	return min(limit, jobs.MaxListLimit)
}

// OutputName is the filename of a finished batch's output or error file
// (kind "output" or "error"), as OpenAI names them.
func OutputName(batchID, kind string) string { return batchID + "_" + kind + ".jsonl" }

// OutputMax caps a batch's output and error files: none, since the
// batch's lines were already accepted.
const OutputMax = math.MaxInt64

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

// EncodeChat is the stored form of a prompt's chat request: nil when
// none. A request JSON cannot hold (a NaN temperature) is jobs.ErrInvalid.
func EncodeChat(c *jobs.ChatRequest) ([]byte, error) {
	if c == nil {
		return nil, nil
	}
	b, err := json.Marshal(c)
	if err != nil {
		return nil, fmt.Errorf("%w: chat: %v", jobs.ErrInvalid, err)
	}
	return b, nil
}

// DecodeChat reads EncodeChat's form.
func DecodeChat(b []byte) (*jobs.ChatRequest, error) {
	if len(b) == 0 {
		return nil, nil
	}
	var c jobs.ChatRequest
	if err := json.Unmarshal(b, &c); err != nil {
		return nil, fmt.Errorf("chat: %w", err)
	}
	return &c, nil
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

// Counts are a batch's request_counts from its progress.
func Counts(p jobs.BatchProgress) jobs.BatchCounts {
	return jobs.BatchCounts{Total: p.Lines, Completed: p.Succeeded, Failed: p.Failed + p.Cancelled}
}

// OutputFile describes a finished batch's output or error file (kind
// "output" or "error"): purpose batch_output, owned like the batch.
func OutputFile(b jobs.Batch, kind string, content io.Reader) jobs.CreateFileParams {
	return jobs.CreateFileParams{OrgID: b.OrgID, CreatedBy: b.CreatedBy, Purpose: jobs.PurposeBatchOutput,
		Filename: OutputName(b.ID, kind), Content: content, MaxBytes: OutputMax}
}

// Results makes a BatchResults page: prompts in page order, js every job
// of those prompts oldest first (so a prompt's last is its newest), and
// responses reads the responses of the newest jobs that succeeded. A
// prompt without a job (none is left once archived) has no line.
func Results(prompts []jobs.Prompt, js []jobs.Job, responses func(ids []string) (map[string]jobs.Response, error)) ([]jobs.BatchResult, error) {
	newest := make(map[string]jobs.Job, len(prompts))
	for _, j := range js {
		newest[j.PromptID] = j
	}
	var ids []string
	for _, j := range newest {
		if j.State == jobs.Succeeded && j.ResponseID != "" {
			ids = append(ids, j.ResponseID)
		}
	}
	resp, err := responses(ids)
	if err != nil {
		return nil, err
	}
	out := make([]jobs.BatchResult, 0, len(prompts))
	for _, p := range prompts {
		j, ok := newest[p.ID]
		if !ok {
			continue
		}
		r := jobs.BatchResult{Prompt: p, Job: j}
		if resp, ok := resp[j.ResponseID]; ok && j.State == jobs.Succeeded {
			r.Response = &resp
		}
		out = append(out, r)
	}
	return out, nil
}
