// Package batch drives OpenAI-style batches (jobs.Batch) through their
// lifecycle: it validates a batch's input file and enqueues one job per
// line, watches the jobs, and writes the output and error files when the
// batch completes, expires or is cancelled. It speaks promptkit's own
// types (jobs.ChatRequest, jobs.BatchResult): a line's wire format is
// the dialect's Codec, injected (internal/openaiapi's is OpenAI's).
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
	"hash/maphash"
	"io"
	"log/slog"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/promptkit/promptkit/internal/lifecycle"
	"github.com/promptkit/promptkit/jobs"
)

// Limits of a batch, OpenAI's.
const (
	// MaxLines is the most requests one batch may hold when
	// Config.MaxLines is 0: OpenAI's cap.
	MaxLines = 50_000
	// MaxErrors is the most validation errors a failed batch reports.
	MaxErrors = 100
	// DefaultInterval is how often a Processor looks at active batches
	// without a notification.
	DefaultInterval = time.Second
	// DefaultMaxBodyBytes caps a line's body when Config.MaxBodyBytes is
	// 0: the value of server.DefaultMaxBodyBytes, the direct endpoint's
	// default cap.
	DefaultMaxBodyBytes = 1 << 20
	// chunk is how many lines are enqueued, or results read, at once.
	chunk = 500
	// lookSpacing is how many times the last count of a batch's jobs
	// took that the stepping loop waits before counting again: the count
	// reads every line's job (seconds for a million lines), so without a
	// spacing the loop, woken by every finished job, would spend a core
	// counting instead of the workers working.
	lookSpacing = 9
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
	// CodeTooLarge refuses one line, not the batch: see
	// Config.MaxBodyBytes.
	CodeTooLarge = "request_too_large"
)

const (
	tempPattern    = "promptkit-batch-*"
	batchKeyPrefix = "batch/"
)

// Codec is a dialect's batch file format: how an input line decodes to
// promptkit's request and how a request's result encodes as an output
// or error line. The processor keeps the rules that are no dialect's
// (line numbering, custom_id uniqueness, the body cap, enqueueing).
type Codec interface {
	// Envelope is a line's custom_id and body members as sent (nil when
	// absent, or when the line is no JSON object): what the body cap
	// reads without decoding the body.
	Envelope(line []byte) (customID, body []byte)
	// DecodeLine decodes an input line of a batch whose endpoint is
	// endpoint: the line's own fields first (a line for another endpoint
	// is refused for that, with CodeURLMismatch, not for its body), then
	// its request. A refusal is a *jobs.RequestError (its Code this
	// package's or the dialect's); any other error refuses the line as
	// no batch request. Messages never quote the line.
	DecodeLine(line []byte, endpoint string) (Line, error)
	// EncodeResult is the line (no trailing newline) of one request of a
	// batch that ended (or is ending) in status, and whether it belongs in
	// the error file rather than the output file.
	EncodeResult(r jobs.BatchResult, status jobs.BatchStatus) (line []byte, isErr bool)
	// EncodeRefused is the error-file line (no trailing newline) of a
	// request refused before it ran, so without a job: id is unique in
	// the batch; code and message say why.
	EncodeRefused(id, customID, code, message string) []byte
}

// Line is a decoded input line in promptkit's terms: exactly one of Chat
// and Embedding is set.
type Line struct {
	CustomID string
	// Model is the line's model as sent (see Config.Resolve).
	Model     string
	Chat      *jobs.ChatRequest
	Embedding *jobs.EmbeddingRequest
}

// Config configures a Processor.
type Config struct {
	// Store holds the batches, files and jobs. Required.
	Store jobs.Store
	// Codec is the batches' wire format (their dialect's). Required.
	Codec Codec
	// Notifier wakes the processor when a job or batch changes, so a step
	// comes sooner than the next Interval. Defaults to Store.Notifier().
	Notifier jobs.Notifier
	// Resolve maps a line's model to the profile and execution options
	// its job runs with; false for a model nothing serves. Required.
	Resolve func(model string) (jobs.Target, bool)
	// Check, when set, refuses a line the engine could not run (the
	// batch fails validation naming the line). Its error's text is shown
	// in the batch's errors, so it must not quote the request. Defaults
	// to nil: only what the store would refuse is refused.
	Check jobs.CheckFunc
	// MaxAttempts of each line's job. It must not be negative. Defaults
	// to the store's default (jobs.DefaultMaxAttempts).
	MaxAttempts int
	// MaxBodyBytes caps a line's body (its "body" value, as sent), as
	// server.Config.MaxBodyBytes caps the same request sent directly: a
	// batch must not run what the endpoint would refuse. A line over it
	// is not run and becomes that line's request_too_large error in the
	// error file; the other lines run. More than MaxErrors such lines
	// fail the batch's validation instead. It must not be negative.
	// Defaults to DefaultMaxBodyBytes (1 MiB).
	MaxBodyBytes int64
	// MaxLines is the most requests one batch may hold; a batch with
	// more fails validation (too_many_tasks) without enqueueing any. It
	// must not be negative. Defaults to MaxLines (50,000, OpenAI's).
	// Validation keeps a 16-byte hash and a line number per request
	// (with the map's slack, 30 to 60 bytes each: 56 MB for a million
	// lines, measured) while a batch is validated.
	MaxLines int
	// Interval between looks at the active batches; the store's
	// notifications wake the processor sooner. It must not be negative.
	// Defaults to DefaultInterval (1s).
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
	// looked is when each batch's jobs were last counted and how long
	// that took (see lookSpacing).
	looked map[string]look
	// loop steps from Start until Stop.
	loop *lifecycle.Loop
}

// New checks cfg, fills its defaults and returns a Processor.
func New(cfg Config) (*Processor, error) {
	switch {
	case cfg.Store == nil:
		return nil, errors.New("batch: Config.Store is required")
	case cfg.Codec == nil:
		return nil, errors.New("batch: Config.Codec is required")
	case cfg.Resolve == nil:
		return nil, errors.New("batch: Config.Resolve is required")
	case cfg.Interval < 0:
		return nil, fmt.Errorf("batch: Config.Interval %v is negative", cfg.Interval)
	case cfg.MaxAttempts < 0:
		return nil, fmt.Errorf("batch: Config.MaxAttempts %d is negative", cfg.MaxAttempts)
	case cfg.MaxBodyBytes < 0:
		return nil, fmt.Errorf("batch: Config.MaxBodyBytes %d is negative", cfg.MaxBodyBytes)
	case cfg.MaxLines < 0:
		return nil, fmt.Errorf("batch: Config.MaxLines %d is negative", cfg.MaxLines)
	}
	cfg.MaxLines = cmp.Or(cfg.MaxLines, MaxLines)
	cfg.Interval = cmp.Or(cfg.Interval, DefaultInterval)
	cfg.MaxBodyBytes = cmp.Or(cfg.MaxBodyBytes, DefaultMaxBodyBytes)
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	p := &Processor{cfg: cfg, logged: map[string]bool{}, looked: map[string]look{}}
	p.loop = lifecycle.New(p.run)
	return p, nil
}

// Start starts stepping, at once and then every Interval, or sooner when
// the store notifies a change, until Stop. Errors are logged (once per
// batch and stage) and retried on the next step. ctx's values reach the
// steps; its end does not stop them: Stop does. A Processor starts once:
// Start returns an error when it was started or stopped already.
func (p *Processor) Start(ctx context.Context) error { return p.loop.Start(ctx) }

// Stop stops stepping, cancelling the step in progress (every change a
// step makes is conditional, so the next Step, here or in another
// process, completes it), and waits for it to end, for as long as ctx
// allows (it returns ctx's error when ctx ends first). It returns nil
// once stopped. Stopping twice, or before Start, is safe.
func (p *Processor) Stop(ctx context.Context) error { return p.loop.Stop(ctx) }

// run is the stepping loop, from Start until Stop cancels ctx.
func (p *Processor) run(ctx context.Context) error {
	n := p.cfg.Notifier
	if n == nil {
		n = p.cfg.Store.Notifier()
	}
	notify := n.Notify(ctx)
	t := time.NewTicker(p.cfg.Interval)
	defer t.Stop()
	// A busy queue notifies on every job; one early step per interval is
	// enough to notice a new batch or the last line finishing promptly.
	wake := notify
	for {
		_ = p.step(ctx, true)
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
func (p *Processor) Step(ctx context.Context) error { return p.step(ctx, false) }

// step is Step; spaced, it counts a batch's jobs no more often than
// lookSpacing allows (the stepping loop's way), else at every step.
func (p *Processor) step(ctx context.Context, spaced bool) error {
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
		stage, err := p.process(ctx, b, spaced)
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
	for id := range p.looked {
		if !active[id] {
			delete(p.looked, id)
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
func (p *Processor) process(ctx context.Context, b jobs.Batch, spaced bool) (stage string, err error) {
	switch b.Status {
	case jobs.BatchValidating:
		return "validating", p.validate(ctx, b)
	case jobs.BatchInProgress:
		return "watching", p.watch(ctx, b, spaced)
	case jobs.BatchFinalizing:
		return "finalizing", p.finalize(ctx, b, jobs.BatchCompleted)
	case jobs.BatchCancelling:
		return "cancelling", p.cancel(ctx, b, spaced)
	}
	return "", nil
}

// look is when a batch's jobs were last counted, and how long it took.
type look struct {
	at   time.Time
	took time.Duration
}

// progress counts a batch's jobs; ok is false, with no count, when
// spaced and the last count was too recent (see lookSpacing).
func (p *Processor) progress(ctx context.Context, id string, spaced bool) (prog jobs.BatchProgress, ok bool, err error) {
	start := p.cfg.Now()
	if l, seen := p.looked[id]; spaced && seen && start.Before(l.at.Add(lookSpacing*l.took)) {
		return prog, false, nil
	}
	if prog, err = p.cfg.Store.BatchProgress(ctx, id); err != nil {
		return prog, false, err
	}
	end := p.cfg.Now()
	p.looked[id] = look{at: end, took: end.Sub(start)}
	return prog, true, nil
}

// watch ends an in_progress batch whose lines are all finished, or
// whose completion window has passed.
func (p *Processor) watch(ctx context.Context, b jobs.Batch, spaced bool) error {
	st := p.cfg.Store
	prog, ok, err := p.progress(ctx, b.ID, spaced)
	if err != nil {
		return err
	}
	if ok && prog.Unfinished == 0 {
		// Finished within the window, however late this look is: nothing
		// was cut off, so the batch is completed, not expired.
		counts := prog.Counts()
		n := len(refused(b))
		counts.Total, counts.Failed = counts.Total+n, counts.Failed+n
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
func (p *Processor) cancel(ctx context.Context, b jobs.Batch, spaced bool) error {
	st := p.cfg.Store
	if _, err := st.CancelBatchJobs(ctx, b.ID); err != nil {
		return err
	}
	prog, ok, err := p.progress(ctx, b.ID, spaced)
	if err != nil {
		return err
	}
	if !ok || prog.Unfinished > 0 {
		// Not counted (too soon), or a job enqueued meanwhile: the next
		// step looks again and cancels it.
		return nil
	}
	return p.finalize(ctx, b, jobs.BatchCancelled)
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
			line, isErr := p.cfg.Codec.EncodeResult(r, to)
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
	// The lines refused at validation have no job: their errors were
	// kept with the batch.
	for _, e := range refused(b) {
		ew.Write(p.cfg.Codec.EncodeRefused(fmt.Sprintf("%s_line_%d", strings.TrimPrefix(b.ID, "batch_"), e.Line), e.CustomID, e.Code, e.Message))
		ew.WriteByte('\n')
		errN++
		c.Total++
		c.Failed++
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

// refused are the errors of a batch's lines that validation refused
// without failing the batch (CodeTooLarge).
func refused(b jobs.Batch) []jobs.BatchError {
	var out []jobs.BatchError
	for _, e := range b.Errors {
		if e.Code == CodeTooLarge && e.Line > 0 {
			out = append(out, e)
		}
	}
	return out
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
	n, errs, failed, err := p.check(ctx, b, f)
	if err != nil {
		return fmt.Errorf("reading the input file: %w", err)
	}
	if failed {
		return p.reject(ctx, b, errs[:min(len(errs), MaxErrors)])
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
	// errs are the refused lines now: kept with the batch for finalize.
	_, err = p.cfg.Store.MoveBatch(ctx, jobs.MoveBatchParams{ID: b.ID, From: jobs.BatchValidating, To: jobs.BatchInProgress,
		Errors: errs, Counts: &jobs.BatchCounts{Total: n}})
	if errors.Is(err, jobs.ErrBatchChanged) {
		return p.changed(ctx, b.ID)
	}
	if err == nil {
		p.cfg.Logger.Info("batch validated", "batch_id", b.ID, "requests", n, "refused", len(errs))
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

// check is the validation pass: it returns the number of requests,
// the errors in line order, and whether they fail the batch. When they
// do, the first MaxErrors are complete; when not, they are the refused
// lines (CodeTooLarge), at most MaxErrors.
func (p *Processor) check(ctx context.Context, b jobs.Batch, r io.Reader) (int, []jobs.BatchError, bool, error) {
	// custom_id's hash → its first line: a 24-byte entry a line (plus
	// the map's slack), however long the ids, where keeping the ids
	// would cost their length again (72 bytes a line for "req-123456").
	// Two seeded 64-bit hashes make a false duplicate among a million
	// lines a chance of about 10^-27.
	seen := map[[2]uint64]int{}
	seeds := [2]maphash.Seed{maphash.MakeSeed(), maphash.MakeSeed()}
	n := 0
	var errs []jobs.BatchError
	invalid := 0 // the errors that are not refused lines
	failed := func() bool { return invalid > 0 || len(errs) > MaxErrors }
	err := eachLine(r, func(no int, raw []byte) error {
		n++
		if n > p.cfg.MaxLines {
			errs = append(errs, jobs.BatchError{Code: CodeTooMany,
				Message: fmt.Sprintf("The batch has more than %d requests.", p.cfg.MaxLines)})
			invalid++
			return errStop
		}
		params, e := p.line(ctx, b, no, raw)
		if e == nil {
			e = p.vet(ctx, no, params)
		}
		id := params.CustomID
		switch {
		case e == nil:
		case e.Code == CodeTooLarge:
			// A refused line's custom_id is in the error file: it must
			// be unique too.
			id = e.CustomID
		default:
			id = ""
		}
		if id != "" {
			k := [2]uint64{maphash.String(seeds[0], id), maphash.String(seeds[1], id)}
			if first, dup := seen[k]; dup {
				e = &jobs.BatchError{Code: CodeDuplicate, Param: "custom_id", Line: no,
					Message: fmt.Sprintf("The custom_id of this line is the custom_id of line %d; each must be unique.", first)}
			} else {
				seen[k] = no
			}
		}
		if e != nil {
			errs = append(errs, *e)
			if e.Code != CodeTooLarge {
				invalid++
			}
			if failed() && len(errs) >= MaxErrors {
				return errStop
			}
		}
		return nil
	})
	if err != nil && !errors.Is(err, errStop) {
		return 0, nil, false, err
	}
	if n == 0 {
		errs = append(errs, jobs.BatchError{Code: CodeEmptyFile, Param: "input_file_id", Message: "The input file has no requests."})
		invalid++
	}
	return n, errs, failed(), nil
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
		params, e := p.line(ctx, b, no, raw)
		if e != nil && e.Code == CodeTooLarge {
			return nil // refused: its error is kept with the batch
		}
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

// line parses (Config.Codec) and checks one input line and returns its
// job's params, normalized (the store's rules), or why the line is
// refused. Messages never quote the line.
func (p *Processor) line(ctx context.Context, b jobs.Batch, no int, raw []byte) (jobs.EnqueueParams, *jobs.BatchError) {
	bad := func(code, param, msg string) (jobs.EnqueueParams, *jobs.BatchError) {
		return jobs.EnqueueParams{}, &jobs.BatchError{Code: code, Param: param, Message: msg, Line: no}
	}
	if len(bytes.TrimSpace(raw)) == 0 {
		return bad(CodeInvalidJSON, "", "This line is empty; only the last lines of the file may be.")
	}
	if !json.Valid(raw) {
		return bad(CodeInvalidJSON, "", "This line is not parseable as valid JSON.")
	}
	// The body's size first, as the endpoint reads no more of a body
	// than its cap.
	if e := p.tooLarge(no, raw); e != nil {
		return jobs.EnqueueParams{}, e
	}
	l, err := p.cfg.Codec.DecodeLine(raw, b.Endpoint)
	if err != nil {
		re, ok := errors.AsType[*jobs.RequestError](err)
		if !ok {
			return bad(CodeInvalid, "", "This line is not a valid batch request.")
		}
		return bad(cmp.Or(re.Code, CodeInvalid), re.Param, re.Message)
	}
	t, ok := p.cfg.Resolve(l.Model)
	if !ok {
		return bad(CodeModelNotFound, "body.model", "The model is not a profile or a model of a configured backend (see GET /v1/models).")
	}
	prio := b.Priority
	params := jobs.EnqueueParams{
		OrgID: b.OrgID, CreatedBy: b.CreatedBy, TokenID: b.TokenID,
		Profile: t.Profile, ExecutionOptions: t.Options,
		BatchID: b.ID, CustomID: l.CustomID,
		Priority: &prio, MaxAttempts: p.cfg.MaxAttempts,
		IdempotencyKey: fmt.Sprintf("%s%s/%d", batchKeyPrefix, b.ID, no),
	}
	// An embeddings line (for the batch's endpoint: DecodeLine checked
	// it) computes vectors.
	params.Chat, params.Embedding = l.Chat, l.Embedding
	params, err = params.Normalize()
	if err != nil {
		// What the store would refuse, refused here instead of failing
		// the enqueue of a whole chunk.
		return params, lineError(no, err)
	}
	return params, nil
}

// tooLarge refuses a line whose body is over MaxBodyBytes, naming the
// line and its custom_id (which the error file needs); nil when the
// line is within the cap or is no object with a body (Codec.DecodeLine
// says what is wrong with it).
func (p *Processor) tooLarge(no int, raw []byte) *jobs.BatchError {
	if int64(len(raw)) <= p.cfg.MaxBodyBytes {
		return nil // the body is part of the line: no need to look
	}
	rawID, body := p.cfg.Codec.Envelope(raw)
	if int64(len(body)) <= p.cfg.MaxBodyBytes {
		return nil
	}
	var id string
	if json.Unmarshal(rawID, &id) != nil || id == "" {
		return &jobs.BatchError{Code: CodeInvalid, Param: "custom_id", Line: no, Message: "custom_id is missing or empty."}
	}
	if strings.IndexByte(id, 0) >= 0 {
		return &jobs.BatchError{Code: CodeInvalid, Param: "custom_id", Line: no, Message: "custom_id contains a NUL character."}
	}
	return &jobs.BatchError{Code: CodeTooLarge, Param: "body", Line: no, CustomID: id,
		Message: fmt.Sprintf("Line %d (custom_id %q): the body is %d bytes, over the limit of %d bytes; the line was not run.",
			no, id, len(body), p.cfg.MaxBodyBytes)}
}

// vet refuses, naming the line, a job (normalized by line) the engine
// would refuse, instead of failing every attempt of the job.
func (p *Processor) vet(ctx context.Context, no int, params jobs.EnqueueParams) *jobs.BatchError {
	if p.cfg.Check != nil {
		if err := p.cfg.Check(ctx, params); err != nil {
			return lineError(no, err)
		}
	}
	return nil
}

// lineError is the error of line no refused by the store's rules or the
// engine.
func lineError(no int, err error) *jobs.BatchError {
	if re, ok := errors.AsType[*jobs.RequestError](err); ok {
		return &jobs.BatchError{Code: cmp.Or(re.Code, CodeInvalid), Param: re.Param, Message: re.Message, Line: no}
	}
	return &jobs.BatchError{Code: CodeInvalid, Param: "body", Message: jobs.InvalidMessage(err), Line: no}
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
