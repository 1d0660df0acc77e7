// Package batch drives OpenAI-style batches (jobs.Batch) through their
// lifecycle: it validates a batch's input file and enqueues one job per
// line, watches the jobs, and writes the output and error files when the
// batch completes, expires or is cancelled.
//
// A Processor works through jobs.Store alone, and every change it makes
// is conditional (MoveBatch and FinishBatch from a given status, enqueues
// under idempotency keys), so any number of processes may run one on the
// same database, and a process killed at any point leaves work the next
// Step, here or elsewhere, completes without duplicating a line.
package batch

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/promptkit/promptkit/internal/openaiapi"
	"github.com/promptkit/promptkit/jobs"
)

// Limits of a batch, OpenAI's.
const (
	// MaxLines is the most requests one batch may hold.
	MaxLines = 50_000
	// MaxErrors is the most validation errors a failed batch reports.
	MaxErrors = 100
	// DefaultInterval is how often a Processor looks at active batches
	// without a notification.
	DefaultInterval = time.Second
	// chunk is how many lines are enqueued, or results read, at once.
	chunk = 500
)

// Validation error codes: OpenAI's where it has one.
const (
	CodeInvalidJSON   = "invalid_json_line"
	CodeInvalid       = "invalid_request"
	CodeDuplicate     = "duplicate_custom_id"
	CodeURLMismatch   = "url_mismatch"
	CodeModelNotFound = "model_not_found"
	CodeEmptyFile     = "empty_file"
	CodeTooMany       = "too_many_tasks"
	CodeFileNotFound  = "file_not_found"
)

const (
	methodPost     = "POST"
	tempPattern    = "promptkit-batch-*"
	batchKeyPrefix = "batch/"
)

// Config configures a Processor.
type Config struct {
	// Store holds the batches, files and jobs. Required.
	Store jobs.Store
	// Resolve maps a line's model to the profile and execution options
	// its job runs with; false for a model nothing serves. Required.
	Resolve func(model string) (openaiapi.Target, bool)
	// Check, when set, refuses a line the engine could not run (the
	// batch fails validation naming the line). Its error's text is shown
	// in the batch's errors, so it must not quote the request.
	Check func(jobs.EnqueueParams) error
	// MaxAttempts of each line's job; 0: the store's default.
	MaxAttempts int
	// Interval between looks at the active batches; the store's
	// notifications wake the processor sooner. Defaults to
	// DefaultInterval.
	Interval time.Duration
	// TempDir holds the spooled input and result files while a batch is
	// validated or finished. Defaults to os.TempDir().
	TempDir string
	// Logger receives operational messages (batch ids, never line
	// content). Defaults to slog.Default().
	Logger *slog.Logger
	// Now is the clock that decides expiry. Defaults to time.Now.
	Now func() time.Time
}

// Processor drives batches; see the package documentation.
type Processor struct {
	cfg Config
	// mu serializes Steps: each pass sees the store's batches once.
	mu sync.Mutex
	// logged holds "batch id/stage" of the errors already logged, so a
	// fault that lasts logs once, not once a second.
	logged map[string]bool
}

// New checks cfg, fills its defaults and returns a Processor.
func New(cfg Config) (*Processor, error) {
	switch {
	case cfg.Store == nil:
		return nil, errors.New("batch: Config.Store is required")
	case cfg.Resolve == nil:
		return nil, errors.New("batch: Config.Resolve is required")
	case cfg.Interval < 0:
		return nil, fmt.Errorf("batch: Config.Interval %v is negative", cfg.Interval)
	case cfg.MaxAttempts < 0:
		return nil, fmt.Errorf("batch: Config.MaxAttempts %d is negative", cfg.MaxAttempts)
	}
	cfg.Interval = cmp.Or(cfg.Interval, DefaultInterval)
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Processor{cfg: cfg, logged: map[string]bool{}}, nil
}

// Run steps at once and then every Interval, or sooner when the store
// notifies a change, until ctx ends; it returns nil then. Errors are
// logged (once per batch and stage) and retried on the next step.
func (p *Processor) Run(ctx context.Context) error {
	notify := p.cfg.Store.Notify(ctx)
	t := time.NewTicker(p.cfg.Interval)
	defer t.Stop()
	// A busy queue notifies on every job; one early step per interval is
	// enough to notice a new batch or the last line finishing promptly.
	wake := notify
	for {
		_ = p.Step(ctx)
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
			wake = notify
		case _, ok := <-wake:
			if !ok {
				notify = nil // the store is closing: poll until ctx ends
			}
			wake = nil
		}
	}
}

// Step processes every active batch once and returns what went wrong,
// joined (each error is also logged once per batch and stage). Another
// process having moved a batch first is not an error.
func (p *Processor) Step(ctx context.Context) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	bs, err := p.cfg.Store.ActiveBatches(ctx)
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		err = fmt.Errorf("batch: listing active batches: %w", err)
		p.logOnce("", "list", err)
		return err
	}
	p.recovered("", "list")
	active := map[string]bool{}
	var errs []error
	for _, b := range bs {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		active[b.ID] = true
		stage, err := p.process(ctx, b)
		switch {
		case err == nil, errors.Is(err, jobs.ErrBatchChanged):
			p.recovered(b.ID, stage)
		case ctx.Err() == nil:
			err = fmt.Errorf("batch %s: %s: %w", b.ID, stage, err)
			p.logOnce(b.ID, stage, err)
			errs = append(errs, err)
		}
	}
	for k := range p.logged {
		if id, _, _ := strings.Cut(k, "/"); id != "" && !active[id] {
			delete(p.logged, k)
		}
	}
	return errors.Join(errs...)
}

// logOnce logs a failure when it starts, not on every retry.
func (p *Processor) logOnce(id, stage string, err error) {
	k := id + "/" + stage
	if p.logged[k] {
		return
	}
	p.logged[k] = true
	p.cfg.Logger.Warn("batch processing failed; will retry", "batch_id", id, "stage", stage, "err", err)
}

// recovered logs the end of a failure logOnce logged.
func (p *Processor) recovered(id, stage string) {
	k := id + "/" + stage
	if p.logged[k] {
		delete(p.logged, k)
		p.cfg.Logger.Info("batch processing recovered", "batch_id", id, "stage", stage)
	}
}

// process advances one batch as far as it can go now; stage names what
// it was doing, for the log.
func (p *Processor) process(ctx context.Context, b jobs.Batch) (stage string, err error) {
	switch b.Status {
	case jobs.BatchValidating:
		return "validating", p.validate(ctx, b)
	case jobs.BatchInProgress:
		return "watching", p.watch(ctx, b)
	case jobs.BatchFinalizing:
		return "finalizing", p.finalize(ctx, b, jobs.BatchCompleted)
	case jobs.BatchCancelling:
		return "cancelling", p.cancel(ctx, b)
	}
	return "", nil
}

// watch ends an in_progress batch whose lines are all finished, or
// whose completion window has passed.
func (p *Processor) watch(ctx context.Context, b jobs.Batch) error {
	st := p.cfg.Store
	prog, err := st.BatchProgress(ctx, b.ID)
	if err != nil {
		return err
	}
	if prog.Unfinished == 0 {
		// Finished within the window, however late this look is: nothing
		// was cut off, so the batch is completed, not expired.
		counts := counts(prog)
		if _, err := st.MoveBatch(ctx, jobs.MoveBatchParams{ID: b.ID, From: jobs.BatchInProgress, To: jobs.BatchFinalizing, Counts: &counts}); err != nil {
			return err
		}
		b.Status = jobs.BatchFinalizing
		return p.finalize(ctx, b, jobs.BatchCompleted)
	}
	if p.cfg.Now().Before(b.ExpiresAt) {
		return nil
	}
	if _, err := st.CancelBatchJobs(ctx, b.ID); err != nil {
		return err
	}
	return p.finalize(ctx, b, jobs.BatchExpired)
}

// cancel stops a cancelling batch's jobs and, once none is left
// running, ends the batch as cancelled.
func (p *Processor) cancel(ctx context.Context, b jobs.Batch) error {
	st := p.cfg.Store
	if _, err := st.CancelBatchJobs(ctx, b.ID); err != nil {
		return err
	}
	prog, err := st.BatchProgress(ctx, b.ID)
	if err != nil {
		return err
	}
	if prog.Unfinished > 0 {
		return nil // a job enqueued meanwhile: the next step cancels it
	}
	return p.finalize(ctx, b, jobs.BatchCancelled)
}

func counts(prog jobs.BatchProgress) jobs.BatchCounts {
	return jobs.BatchCounts{Total: prog.Lines, Completed: prog.Succeeded, Failed: prog.Failed + prog.Cancelled}
}

// finalize writes the batch's output and error files, one line per
// request, and ends the batch (from its current status) as to.
func (p *Processor) finalize(ctx context.Context, b jobs.Batch, to jobs.BatchStatus) error {
	out, err := p.tempFile()
	if err != nil {
		return err
	}
	defer removeTemp(out)
	errf, err := p.tempFile()
	if err != nil {
		return err
	}
	defer removeTemp(errf)
	ow, ew := bufio.NewWriter(out), bufio.NewWriter(errf)
	var c jobs.BatchCounts
	var outN, errN int
	after := ""
	for {
		page, err := p.cfg.Store.BatchResults(ctx, jobs.BatchResultsParams{BatchID: b.ID, After: after, Limit: chunk})
		if err != nil {
			return fmt.Errorf("reading results: %w", err)
		}
		for _, r := range page {
			line, isErr := openaiapi.OutputLine(r, to)
			w := ow
			c.Total++
			if isErr {
				w, errN = ew, errN+1
				c.Failed++
			} else {
				outN++
				c.Completed++
			}
			w.Write(line)
			w.WriteByte('\n')
		}
		if len(page) < chunk {
			break
		}
		after = page[len(page)-1].Prompt.ID
	}
	fp := jobs.FinishBatchParams{ID: b.ID, From: b.Status, To: to, Counts: c}
	if fp.Output, err = rewind(out, ow, outN); err != nil {
		return err
	}
	if fp.Errors, err = rewind(errf, ew, errN); err != nil {
		return err
	}
	done, err := p.cfg.Store.FinishBatch(ctx, fp)
	if err != nil {
		return err
	}
	p.cfg.Logger.Info("batch finished", "batch_id", b.ID, "status", done.Status,
		"total", c.Total, "completed", c.Completed, "failed", c.Failed)
	return nil
}

// rewind flushes a spooled result file and returns it for reading, or a
// nil reader when it has no line: OpenAI omits an empty file.
func rewind(f *os.File, w *bufio.Writer, lines int) (io.Reader, error) {
	if err := w.Flush(); err != nil {
		return nil, fmt.Errorf("spooling results: %w", err)
	}
	if lines == 0 {
		return nil, nil
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return nil, fmt.Errorf("spooling results: %w", err)
	}
	return f, nil
}

func (p *Processor) tempFile() (*os.File, error) {
	f, err := os.CreateTemp(p.cfg.TempDir, tempPattern)
	if err != nil {
		return nil, fmt.Errorf("creating a spool file: %w", err)
	}
	return f, nil
}

func removeTemp(f *os.File) {
	f.Close()
	os.Remove(f.Name())
}

// validate checks a validating batch's input file as OpenAI does and
// either fails the batch naming the bad lines, or enqueues one job per
// line and moves the batch to in_progress. The file is read twice from
// a spooled copy, so no more than one line is held in memory.
func (p *Processor) validate(ctx context.Context, b jobs.Batch) error {
	f, err := p.tempFile()
	if err != nil {
		return err
	}
	defer removeTemp(f)
	err = p.cfg.Store.ReadFile(ctx, b.OrgID, b.InputFileID, f)
	if errors.Is(err, jobs.ErrNotFound) {
		return p.reject(ctx, b, []jobs.BatchError{{Code: CodeFileNotFound, Param: "input_file_id",
			Message: "The input file no longer exists."}})
	}
	if err != nil {
		return fmt.Errorf("reading the input file: %w", err)
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return err
	}
	n, bad, err := p.check(b, f)
	if err != nil {
		return fmt.Errorf("reading the input file: %w", err)
	}
	if len(bad) > 0 {
		return p.reject(ctx, b, bad)
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return err
	}
	if err := p.enqueue(ctx, b, f); err != nil {
		if errors.Is(err, jobs.ErrBatchChanged) {
			return p.changed(ctx, b.ID)
		}
		return err
	}
	_, err = p.cfg.Store.MoveBatch(ctx, jobs.MoveBatchParams{ID: b.ID, From: jobs.BatchValidating, To: jobs.BatchInProgress,
		Counts: &jobs.BatchCounts{Total: n}})
	if errors.Is(err, jobs.ErrBatchChanged) {
		return p.changed(ctx, b.ID)
	}
	if err == nil {
		p.cfg.Logger.Info("batch validated", "batch_id", b.ID, "requests", n)
	}
	return err
}

// changed handles a validating batch that moved while its lines were
// being enqueued: another process validated it (nothing to do), or it
// was cancelled, and the jobs just enqueued must not run.
func (p *Processor) changed(ctx context.Context, id string) error {
	cur, err := p.cfg.Store.GetBatch(ctx, "", id)
	if err != nil {
		return err
	}
	if cur.Status == jobs.BatchCancelling || cur.Status == jobs.BatchCancelled {
		if _, err := p.cfg.Store.CancelBatchJobs(ctx, id); err != nil {
			return err
		}
	}
	return nil
}

// reject fails a validating batch with its errors.
func (p *Processor) reject(ctx context.Context, b jobs.Batch, bad []jobs.BatchError) error {
	_, err := p.cfg.Store.MoveBatch(ctx, jobs.MoveBatchParams{ID: b.ID, From: jobs.BatchValidating, To: jobs.BatchFailed, Errors: bad})
	if err == nil {
		p.cfg.Logger.Info("batch failed validation", "batch_id", b.ID, "errors", len(bad), "first_line", bad[0].Line, "first_code", bad[0].Code)
	}
	return err
}

// errStop ends a pass over the lines early.
var errStop = errors.New("stop")

// check is the validation pass: it returns the number of requests and
// up to MaxErrors errors.
func (p *Processor) check(b jobs.Batch, r io.Reader) (int, []jobs.BatchError, error) {
	seen := map[string]int{} // custom_id → its first line
	n := 0
	var bad []jobs.BatchError
	err := eachLine(r, func(no int, raw []byte) error {
		n++
		if n > MaxLines {
			bad = append(bad, jobs.BatchError{Code: CodeTooMany,
				Message: fmt.Sprintf("The batch has more than %d requests.", MaxLines)})
			return errStop
		}
		params, e := p.line(b, no, raw)
		if e == nil {
			e = p.vet(no, params)
		}
		if e == nil {
			if first, dup := seen[params.CustomID]; dup {
				e = &jobs.BatchError{Code: CodeDuplicate, Param: "custom_id", Line: no,
					Message: fmt.Sprintf("The custom_id of this line is the custom_id of line %d; each must be unique.", first)}
			} else {
				seen[params.CustomID] = no
			}
		}
		if e != nil {
			bad = append(bad, *e)
			if len(bad) == MaxErrors {
				return errStop
			}
		}
		return nil
	})
	if err != nil && !errors.Is(err, errStop) {
		return 0, nil, err
	}
	if n == 0 {
		bad = append(bad, jobs.BatchError{Code: CodeEmptyFile, Param: "input_file_id", Message: "The input file has no requests."})
	}
	return n, bad, nil
}

// enqueue is the second pass: one job per line, in chunks, each under
// an idempotency key naming the batch and line, so a pass repeated after
// a crash or by another process adds nothing twice. It stops with
// jobs.ErrBatchChanged when the batch leaves validating (cancelled).
func (p *Processor) enqueue(ctx context.Context, b jobs.Batch, r io.Reader) error {
	st := p.cfg.Store
	var ps []jobs.EnqueueParams
	flush := func() error {
		if len(ps) == 0 {
			return nil
		}
		cur, err := st.GetBatch(ctx, "", b.ID)
		if err != nil {
			return err
		}
		if cur.Status != jobs.BatchValidating {
			return jobs.ErrBatchChanged
		}
		if _, err := st.EnqueueBatch(ctx, ps); err != nil {
			return fmt.Errorf("enqueueing lines %s–%s: %w", lineOf(ps[0]), lineOf(ps[len(ps)-1]), err)
		}
		ps = ps[:0]
		return nil
	}
	err := eachLine(r, func(no int, raw []byte) error {
		params, e := p.line(b, no, raw)
		if e != nil {
			// The spooled copy passed check a moment ago.
			return fmt.Errorf("line %d changed since validation (%s)", no, e.Code)
		}
		if ps = append(ps, params); len(ps) == chunk {
			return flush()
		}
		return nil
	})
	if err != nil {
		return err
	}
	return flush()
}

// lineOf is the line number in an idempotency key made by line.
func lineOf(p jobs.EnqueueParams) string {
	return p.IdempotencyKey[strings.LastIndexByte(p.IdempotencyKey, '/')+1:]
}

// line parses and checks one input line as OpenAI does and returns its
// job, or why the line is refused. Messages never quote the line.
func (p *Processor) line(b jobs.Batch, no int, raw []byte) (jobs.EnqueueParams, *jobs.BatchError) {
	bad := func(code, param, msg string) (jobs.EnqueueParams, *jobs.BatchError) {
		return jobs.EnqueueParams{}, &jobs.BatchError{Code: code, Param: param, Message: msg, Line: no}
	}
	if len(bytes.TrimSpace(raw)) == 0 {
		return bad(CodeInvalidJSON, "", "This line is empty; only the last lines of the file may be.")
	}
	if !json.Valid(raw) {
		return bad(CodeInvalidJSON, "", "This line is not parseable as valid JSON.")
	}
	l, err := openaiapi.ParseBatchLine(raw)
	if err != nil {
		if re, ok := errors.AsType[*openaiapi.RequestError](err); ok {
			return bad(cmp.Or(re.Code, CodeInvalid), re.Param, re.Message)
		}
		return bad(CodeInvalid, "", "This line is not a valid batch request.")
	}
	switch {
	case l.CustomID == "":
		return bad(CodeInvalid, "custom_id", "custom_id is missing or empty.")
	case l.Method != methodPost:
		return bad(CodeInvalid, "method", "method must be POST.")
	case l.URL != b.Endpoint:
		return bad(CodeURLMismatch, "url", fmt.Sprintf("url must be the batch's endpoint, %s.", b.Endpoint))
	case l.Body.Stream:
		return bad(CodeInvalid, "body.stream", "stream is not supported in a batch.")
	}
	t, ok := p.cfg.Resolve(l.Body.Model)
	if !ok {
		return bad(CodeModelNotFound, "body.model", "The model is not a profile or a model of a configured backend (see GET /v1/models).")
	}
	opts, err := json.Marshal(t.Options)
	if err != nil {
		return bad(CodeInvalid, "body.model", "The model's execution options cannot be encoded.")
	}
	prio := b.Priority
	chat := l.Body.Chat
	return jobs.EnqueueParams{
		OrgID: b.OrgID, CreatedBy: b.CreatedBy,
		Chat: &chat, Profile: t.Profile, ExecutionOptions: opts,
		BatchID: b.ID, CustomID: l.CustomID,
		Priority: &prio, MaxAttempts: p.cfg.MaxAttempts,
		IdempotencyKey: fmt.Sprintf("%s%s/%d", batchKeyPrefix, b.ID, no),
	}, nil
}

// vet refuses, naming the line, a job the store or the engine would
// refuse, instead of failing the enqueue of a whole chunk or every
// attempt of the job.
func (p *Processor) vet(no int, params jobs.EnqueueParams) *jobs.BatchError {
	bad := func(err error) *jobs.BatchError {
		if re, ok := errors.AsType[*openaiapi.RequestError](err); ok {
			return &jobs.BatchError{Code: cmp.Or(re.Code, CodeInvalid), Param: re.Param, Message: re.Message, Line: no}
		}
		return &jobs.BatchError{Code: CodeInvalid, Param: "body", Message: jobs.InvalidMessage(err), Line: no}
	}
	if _, err := params.Normalize(); err != nil {
		return bad(err)
	}
	if p.cfg.Check != nil {
		if err := p.cfg.Check(params); err != nil {
			return bad(err)
		}
	}
	return nil
}

// eachLine calls fn with each line of r (1-based, without its line
// ending). Blank lines at the end of the file are ignored; a blank line
// followed by a request is passed on, for fn to refuse.
func eachLine(r io.Reader, fn func(no int, line []byte) error) error {
	br := bufio.NewReaderSize(r, 64<<10)
	var blanks []int
	for no := 1; ; no++ {
		line, err := br.ReadBytes('\n')
		if len(line) > 0 {
			line = bytes.TrimSuffix(bytes.TrimSuffix(line, []byte("\n")), []byte("\r"))
			if len(bytes.TrimSpace(line)) == 0 {
				blanks = append(blanks, no)
			} else {
				for _, b := range blanks {
					if err := fn(b, nil); err != nil {
						return err
					}
				}
				blanks = blanks[:0]
				if err := fn(no, line); err != nil {
					return err
				}
			}
		}
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
	}
}
