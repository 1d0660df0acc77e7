package jobs

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"
)

// Files and batches: OpenAI's Files and Batch APIs kept in the job
// database, so that every serve and worker process on one database sees
// them. A file's content is stored in chunks (FileChunkSize bytes), never
// read whole into memory. A batch is a file of chat requests whose lines
// become prompts (BatchID, CustomID) with jobs; jobs/batch drives its
// lifecycle.

// BatchStatus is a batch's state, OpenAI's names.
type BatchStatus string

// Batch states. Failed, Completed, Expired and Cancelled are terminal.
const (
	BatchValidating BatchStatus = "validating"
	BatchFailed     BatchStatus = "failed"
	BatchInProgress BatchStatus = "in_progress"
	BatchFinalizing BatchStatus = "finalizing"
	BatchCompleted  BatchStatus = "completed"
	BatchExpired    BatchStatus = "expired"
	BatchCancelling BatchStatus = "cancelling"
	BatchCancelled  BatchStatus = "cancelled"
)

// BatchStatuses are the eight batch states, in the order declared above.
// What is derived from the states (batchdb.ActiveStatuses, the batch
// processor's work list) is derived from this list.
func BatchStatuses() []BatchStatus {
	return []BatchStatus{BatchValidating, BatchFailed, BatchInProgress, BatchFinalizing, BatchCompleted, BatchExpired,
		BatchCancelling, BatchCancelled}
}

// Terminal reports whether the batch never changes again.
func (s BatchStatus) Terminal() bool {
	return s == BatchFailed || s == BatchCompleted || s == BatchExpired || s == BatchCancelled
}

// Valid reports whether s is one of the eight states.
func (s BatchStatus) Valid() bool {
	switch s {
	case BatchValidating, BatchFailed, BatchInProgress, BatchFinalizing, BatchCompleted, BatchExpired, BatchCancelling, BatchCancelled:
		return true
	}
	return false
}

// CancelTo is what Store.CancelBatch does to a batch in status s: a
// validating or in_progress batch moves to cancelling (returned); one
// already cancelling or cancelled stays as it is (s is returned, and
// nothing is written); any other is past cancelling (finalizing, or
// finished) and gets an error matching ErrBatchChanged.
func (s BatchStatus) CancelTo() (BatchStatus, error) {
	switch s {
	case BatchValidating, BatchInProgress:
		return BatchCancelling, nil
	case BatchCancelling, BatchCancelled:
		return s, nil
	}
	return s, fmt.Errorf("%w: batch is %s", ErrBatchChanged, s)
}

// CountsLive reports whether a batch in status s shows the counts of its
// jobs, read when the batch is read (BatchProgress.Counts), rather than
// the counts stored with it: while its jobs may still change
// (in_progress, finalizing, cancelling). See Batch.Counts.
func (s BatchStatus) CountsLive() bool {
	return s == BatchInProgress || s == BatchFinalizing || s == BatchCancelling
}

// Limits and defaults of files and batches.
const (
	// FileChunkSize is the size of one stored chunk of a file's content.
	FileChunkSize = 256 << 10
	// DefaultMaxFileBytes caps an upload when CreateFileParams.MaxBytes
	// is 0: 200 MB, OpenAI's limit for batch input files.
	DefaultMaxFileBytes = 200 << 20
	// DefaultBatchPriority is a batch line's job priority: after
	// interactive work (50).
	DefaultBatchPriority = 90
)

// File purposes.
const (
	PurposeBatch       = "batch"
	PurposeBatchOutput = "batch_output"
)

var (
	// ErrFileTooLarge: an upload was over its MaxBytes; nothing is stored.
	ErrFileTooLarge = errors.New("jobs: file is over the size limit")
	// ErrBatchChanged: a conditional batch write found the batch no
	// longer in the expected status; nothing was changed.
	ErrBatchChanged = errors.New("jobs: batch status changed")
)

// File is a stored file's description (not its content).
type File struct {
	ID        string    `json:"id"`
	OrgID     string    `json:"org_id"`
	CreatedBy string    `json:"created_by"`
	Purpose   string    `json:"purpose"`
	Filename  string    `json:"filename"`
	Bytes     int64     `json:"bytes"`
	CreatedAt time.Time `json:"created_at"`
}

// CreateFileParams describe an upload. The store reads Content to its
// end inside one write transaction, so Content should be local (a spooled
// file), not a network stream.
type CreateFileParams struct {
	OrgID     string
	CreatedBy string
	Purpose   string
	Filename  string
	Content   io.Reader
	// MaxBytes caps the content: more is ErrFileTooLarge. Defaults to
	// DefaultMaxFileBytes.
	MaxBytes int64
}

// Normalize checks p: org, purpose, filename and content set; fills
// MaxBytes.
func (p CreateFileParams) Normalize() (CreateFileParams, error) {
	switch {
	case p.OrgID == "":
		return p, invalid("file: empty org")
	case p.Purpose == "":
		return p, invalid("file: empty purpose")
	case p.Filename == "":
		return p, invalid("file: empty filename")
	case p.Content == nil:
		return p, invalid("file: no content")
	case p.MaxBytes < 0:
		return p, invalid("file: negative size limit")
	}
	if err := checkText("filename", p.Filename); err != nil {
		return p, err
	}
	if err := checkText("purpose", p.Purpose); err != nil {
		return p, err
	}
	if p.MaxBytes == 0 {
		p.MaxBytes = DefaultMaxFileBytes
	}
	return p, nil
}

// FileListParams page through files, newest first.
type FileListParams struct {
	OrgID string
	// Purpose, when set, keeps only files with it.
	Purpose string
	// After is the ID of the last file of the previous page.
	After string
	// Limit defaults to 50, at most 1000 (as ListParams).
	Limit int
}

// Normalize fills Limit.
func (p FileListParams) Normalize() (FileListParams, error) {
	p.Limit = pageLimit(p.Limit, DefaultListLimit)
	return p, nil
}

// BatchError is one reason a batch failed validation, or a line that
// validation refused without failing the batch (its error-file line is
// written when the batch finishes).
type BatchError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
	Param   string `json:"param,omitempty"`
	// Line is the 1-based line of the input file, 0 when none.
	Line int `json:"line,omitempty"`
	// CustomID is a refused line's custom_id, for its error-file line.
	CustomID string `json:"custom_id,omitempty"`
}

// BatchCounts are a batch's request_counts.
type BatchCounts struct {
	Total     int `json:"total"`
	Completed int `json:"completed"`
	Failed    int `json:"failed"`
}

// Batch is a batch of chat requests. Zero times mean "not set".
type Batch struct {
	ID        string `json:"id"`
	OrgID     string `json:"org_id"`
	CreatedBy string `json:"created_by"`
	// TokenID is the API token that created the batch; empty without one.
	TokenID          string          `json:"token_id,omitempty"`
	InputFileID      string          `json:"input_file_id"`
	Endpoint         string          `json:"endpoint"`
	CompletionWindow string          `json:"completion_window"`
	Metadata         json.RawMessage `json:"metadata,omitempty"`
	// Priority is the priority of the batch's jobs.
	Priority     int          `json:"priority"`
	Status       BatchStatus  `json:"status"`
	Errors       []BatchError `json:"errors,omitempty"`
	OutputFileID string       `json:"output_file_id,omitempty"`
	ErrorFileID  string       `json:"error_file_id,omitempty"`
	// Counts: while the batch is in_progress, finalizing or cancelling,
	// the store counts its jobs at read time (Total: lines; Completed:
	// succeeded jobs; Failed: failed or cancelled ones); otherwise they
	// are the counts stored by the last MoveBatch or FinishBatch.
	Counts       BatchCounts `json:"request_counts"`
	CreatedAt    time.Time   `json:"created_at"`
	ExpiresAt    time.Time   `json:"expires_at"`
	InProgressAt time.Time   `json:"in_progress_at,omitzero"`
	FinalizingAt time.Time   `json:"finalizing_at,omitzero"`
	CompletedAt  time.Time   `json:"completed_at,omitzero"`
	FailedAt     time.Time   `json:"failed_at,omitzero"`
	ExpiredAt    time.Time   `json:"expired_at,omitzero"`
	CancellingAt time.Time   `json:"cancelling_at,omitzero"`
	CancelledAt  time.Time   `json:"cancelled_at,omitzero"`
}

// CreateBatchParams describe a new batch (status validating).
type CreateBatchParams struct {
	OrgID     string
	CreatedBy string
	// TokenID is the API token that created the batch; its lines' jobs
	// carry it (jobs.EnqueueParams.TokenID).
	TokenID     string
	InputFileID string
	Endpoint    string
	// CompletionWindow is OpenAI's string ("24h"); Window its duration:
	// ExpiresAt = CreatedAt + Window.
	CompletionWindow string
	Window           time.Duration
	Metadata         json.RawMessage
	// Priority of the batch's jobs; defaults to DefaultBatchPriority when
	// nil.
	Priority *int
}

// Normalize checks p and fills the priority.
func (p CreateBatchParams) Normalize() (CreateBatchParams, error) {
	switch {
	case p.OrgID == "":
		return p, invalid("batch: empty org")
	case p.InputFileID == "":
		return p, invalid("batch: empty input_file_id")
	case p.Endpoint == "":
		return p, invalid("batch: empty endpoint")
	case p.Window <= 0:
		return p, invalid("batch: completion window must be positive")
	}
	if err := checkJSONText("metadata", p.Metadata); err != nil {
		return p, err
	}
	if len(p.Metadata) > 0 {
		var obj map[string]json.RawMessage
		if err := json.Unmarshal(p.Metadata, &obj); err != nil {
			return p, invalid("batch: metadata is not a JSON object")
		}
		if obj == nil {
			p.Metadata = nil
		}
	}
	prio := DefaultBatchPriority
	if p.Priority != nil {
		prio = *p.Priority
	}
	if err := checkPriority(prio); err != nil {
		return p, err
	}
	p.Priority = &prio
	return p, nil
}

// BatchListParams page through batches, newest first.
type BatchListParams struct {
	// OrgID, empty: every org (operators).
	OrgID string
	// After is the ID of the last batch of the previous page.
	After string
	// Limit defaults to 50, at most 1000.
	Limit int
}

// Normalize fills Limit.
func (p BatchListParams) Normalize() (BatchListParams, error) {
	p.Limit = pageLimit(p.Limit, DefaultListLimit)
	return p, nil
}

// MoveBatchParams change a batch's status, only if it is From.
type MoveBatchParams struct {
	ID       string
	From, To BatchStatus
	// Errors replace the batch's errors when non-nil (validation); empty
	// but not nil, they clear them.
	Errors []BatchError
	// Counts replace the stored counts when non-nil.
	Counts *BatchCounts
}

// Normalize checks the move: From and To must be batch statuses, and To
// not validating, where no batch goes back to.
func (p MoveBatchParams) Normalize() (MoveBatchParams, error) {
	if !p.From.Valid() || !p.To.Valid() || p.To == BatchValidating {
		return p, invalid("batch: cannot move %q to %q", p.From, p.To)
	}
	return p, nil
}

// FinishBatchParams end a batch: in one transaction the output and error
// files (purpose batch_output, owned like the batch) are stored and the
// batch moves From → To (a terminal status) with its counts. A nil
// reader stores no file. Readers should be local (spooled files).
type FinishBatchParams struct {
	ID       string
	From, To BatchStatus
	Output   io.Reader
	Errors   io.Reader
	Counts   BatchCounts
}

// Normalize checks the move: From must be a batch status and To a
// terminal one.
func (p FinishBatchParams) Normalize() (FinishBatchParams, error) {
	if !p.From.Valid() || !p.To.Terminal() {
		return p, invalid("batch: cannot finish %q as %q", p.From, p.To)
	}
	return p, nil
}

// BatchProgress counts a batch's current jobs (superseded ones left out)
// by outcome.
type BatchProgress struct {
	// Lines is the number of prompts of the batch.
	Lines      int
	Succeeded  int
	Failed     int
	Cancelled  int
	Unfinished int // queued or running
}

// Counts are the request_counts of a batch with this progress: its lines,
// those whose job succeeded, and those whose job failed or was cancelled.
func (p BatchProgress) Counts() BatchCounts {
	return BatchCounts{Total: p.Lines, Completed: p.Succeeded, Failed: p.Failed + p.Cancelled}
}

// BatchResultsParams page through a batch's lines in prompt order.
type BatchResultsParams struct {
	BatchID string
	// After is the prompt ID of the last line of the previous page.
	After string
	// Limit defaults to 500, at most 1000.
	Limit int
}

// Normalize fills Limit.
func (p BatchResultsParams) Normalize() (BatchResultsParams, error) {
	p.Limit = pageLimit(p.Limit, 500)
	return p, nil
}

// pageLimit is a page's size: def when limit is not positive, at most
// MaxListLimit.
func pageLimit(limit, def int) int {
	if limit <= 0 {
		return def
	}
	return min(limit, MaxListLimit)
}

// BatchResult is one line of a batch: its prompt, the job that stands for
// it (the newest), and the response when that job succeeded.
type BatchResult struct {
	Prompt   Prompt
	Job      Job
	Response *Response
}
