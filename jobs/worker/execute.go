package worker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/promptkit/promptkit"
	"github.com/promptkit/promptkit/jobs"
	"github.com/promptkit/promptkit/jobs/quota"
)

// execute runs one claimed job: prepare builds the engine request, run
// calls the engine, settle decides the store write, apply makes it. When
// claimNext is not nil, it is called as the settling write goes out (see
// runSlot). prompt is the job's prompt when the caller has read it
// already (nil: prepare reads it). It returns the job as the settling
// write left it, and false when no write was made.
func (w *Worker) execute(parent context.Context, j jobs.Job, prompt *jobs.Prompt, claimNext func()) (jobs.Job, bool) {
	start := w.cfg.Now()
	ctx, cancel := context.WithCancelCause(parent)
	defer cancel(nil)
	defer w.track(j, cancel)()
	// Store reads and the finalizing write use a context that survives the
	// run's cancellation: a handed-back job must still be written back.
	fin := context.WithoutCancel(parent)

	t, o := w.prepare(fin, j, prompt)
	if o.err == nil && o.refused == "" {
		o = w.run(ctx, j, t)
	}
	now := w.cfg.Now()
	wr := settle(j, o, w.cfg.Name, now, w.cfg.Jitter)
	if claimNext != nil {
		claimNext()
	}
	settled, err := w.apply(fin, parent, wr)
	// The last call is in the ledger now, with the settling write.
	o.budget.release(fin)
	w.settled(j, wr, err, now.Sub(start))
	return settled, err == nil && wr.op != opDiscard
}

// outcome is what became of one job attempt, as settle needs it.
type outcome struct {
	// res is the engine's result, nil unless the run succeeded. An
	// embeddings call's is made from its EmbedResult (see embedResult).
	res *promptkit.RunResult
	// err is why there is no result: the engine's error, or the request
	// could not be built.
	err error
	// stopped is set when the worker stopped the run: errCancelled (the
	// job is no longer ours) or errShutdown (hand it back).
	stopped error
	// refused, when set, is the kind the job fails with, without a run:
	// its dependency failed. reason says why.
	refused jobs.ErrorKind
	reason  string
	// budget holds the run's last call's reservation until the settling
	// write; nil without Config.Budget.
	budget *callBudget
	// waitUntil, when set, is when the org's or token's rate, reached
	// before a call (Config.Budget), admits the job again; handback: the
	// run made no call.
	waitUntil time.Time
	handback  bool
	// attempts are the attempt events the settling write carries (see
	// attemptLog).
	attempts []json.RawMessage
	// wallStart and clockStart are the run's start on the wall clock
	// (what the engine's Retry-After times are on) and on the worker's
	// clock (what available_at is on).
	wallStart, clockStart time.Time
}

// task is what a job asks of the engine: a run, or, for an embeddings
// prompt (jobs.Prompt.Embedding), an embeddings call.
type task struct {
	run   promptkit.RunRequest
	embed *promptkit.EmbedRequest
}

// prepare checks the job's dependency and builds its engine request: the
// prompt (ad-hoc text, or a named prompt with inputs), the thread history
// and the job's options; or the embeddings call of an embeddings prompt.
func (w *Worker) prepare(ctx context.Context, j jobs.Job, prompt *jobs.Prompt) (task, outcome) {
	if j.DependsOn != "" {
		dep, err := w.store.GetJob(ctx, "", j.DependsOn)
		var depJob *jobs.Job
		switch {
		case err == nil:
			depJob = &dep
		case !errors.Is(err, jobs.ErrNotFound):
			return task{}, outcome{err: fmt.Errorf("reading the dependency: %w", err)}
		}
		if run, reason := jobs.DependencyOutcome(depJob); !run {
			return task{}, outcome{refused: jobs.KindDependencyFailed, reason: reason}
		}
	}
	if prompt == nil {
		p, err := w.store.GetPrompt(ctx, "", j.PromptID)
		if err != nil {
			return task{}, outcome{err: fmt.Errorf("reading the prompt: %w", err)}
		}
		prompt = &p
	}
	p := *prompt
	opts := j.ExecutionOptions
	if p.Embedding != nil {
		req := embedRequest(*p.Embedding, p.Profile, opts)
		return task{embed: &req}, outcome{}
	}
	req, err := Request(p, opts)
	if err != nil {
		return task{}, outcome{err: err}
	}
	depth := w.cfg.HistoryDepth
	if opts.Depth != nil {
		depth = *opts.Depth
	}
	// A chat prompt carries its whole conversation: no thread history.
	if depth > 0 && p.ParentID != "" && p.Chat == nil {
		turns, err := w.store.Thread(ctx, jobs.ThreadParams{PromptID: p.ID, Depth: depth})
		if err != nil {
			return task{}, outcome{err: fmt.Errorf("reading the thread: %w", err)}
		}
		req.History = history(turns)
	}
	return task{run: req}, outcome{}
}

// embedRequest is the engine's embeddings call for a stored embeddings
// request, resolved as a run is: the prompt's profile, the options' model
// and backend. The encoding format is not sent (as POST /v1/embeddings
// does not): the vectors come as numbers and the answer is written as
// the request asked.
func embedRequest(e jobs.EmbeddingRequest, profile string, opts jobs.ExecutionOptions) promptkit.EmbedRequest {
	return promptkit.EmbedRequest{Input: e.Input, ProfileID: profile, Model: opts.Model, Backend: opts.PreferProvider,
		Dimensions: e.Dimensions}
}

// embedResult is an embeddings call's result as the job's: no text, the
// vectors as JSON (Output, stored as the response's parsed value), the
// model and usage. Vectors JSON cannot hold (a NaN from an injected
// client) are a malformed response.
func embedResult(r *promptkit.EmbedResult) (*promptkit.RunResult, error) {
	vectors, err := json.Marshal(r.Embeddings)
	if err != nil {
		return nil, fmt.Errorf("%w: the embeddings are not finite numbers", promptkit.ErrMalformedResponse)
	}
	return &promptkit.RunResult{RunID: r.RunID, ProfileID: r.ProfileID, BackendID: r.BackendID, Model: r.Model,
		Output: vectors, Validation: promptkit.Validation{Status: promptkit.ValidationSkipped}, Usage: r.Usage,
		Attempts: r.Attempts, Timings: r.Timings}, nil
}

// Request is the engine request for a prompt with execution options,
// without its thread history. Submitters call it with Engine.Prepare to
// refuse at submission what the worker could not run. A chat prompt
// (p.Chat) becomes a Messages request with its sampling values and
// response format: json_object asks for a JSON object, json_schema for
// an output valid against its schema. An embeddings prompt is no run:
// ErrInvalid.
func Request(p jobs.Prompt, opts jobs.ExecutionOptions) (promptkit.RunRequest, error) {
	if p.Embedding != nil {
		return promptkit.RunRequest{}, fmt.Errorf("%w: an embeddings prompt is not a run", jobs.ErrInvalid)
	}
	req := promptkit.RunRequest{Text: p.Text, PromptID: p.PromptRef, ProfileID: p.Profile,
		Model: opts.Model, Backend: opts.PreferProvider}
	if c := p.Chat; c != nil {
		req.Messages, req.Sampling, req.ToolUse, req.ResponseFormat = c.Messages, c.Sampling, c.ToolUse, c.Format
		switch c.ResponseFormat {
		case jobs.FormatJSONObject:
			req.JSONObject = true
		case jobs.FormatJSONSchema:
			req.OutputSchema, req.OutputSchemaName = c.Schema, c.SchemaName
		}
	}
	if len(p.Inputs) > 0 {
		if err := json.Unmarshal(p.Inputs, &req.Inputs); err != nil {
			return req, fmt.Errorf("%w: inputs are not a JSON object", jobs.ErrInvalid)
		}
	}
	return req, nil
}

// history turns a thread into conversation messages, oldest first: each
// ad-hoc prompt's text and its answer, when it has one.
func history(turns []jobs.Turn) []promptkit.Message {
	var msgs []promptkit.Message
	for _, t := range turns {
		if t.Text == "" {
			continue // a named prompt's text is not stored
		}
		msgs = append(msgs, promptkit.Message{Role: promptkit.RoleUser, Content: t.Text})
		if t.Answered {
			msgs = append(msgs, promptkit.Message{Role: promptkit.RoleAssistant, Content: t.Answer})
		}
	}
	return msgs
}

// callBudget holds a run's reservation of its job's budgets
// (Config.Budget): one call's at a time, each released once its call is
// in the ledger.
type callBudget struct {
	w   *Worker
	job jobs.Job
	// held releases the reservation of the run's latest call; nil when
	// none is held.
	held func(context.Context) error
	// later is set once the run's first call was reserved.
	later bool
	// spent is the budget's refusal that stopped the run, if one did;
	// rate a rate's (tokens per minute), made before any call when first.
	spent, rate error
	first       bool
}

// before is the run's BeforeCall, after attemptLog's, which wrote the
// previous call's attempt event: it releases that call's reservation
// and reserves the next call's. A spent budget stops the run, and so
// does a rate reached (the job waits for it); a budget that cannot be
// read stops it before the first call (a failed attempt, retried), and
// lets a later call go (see Config.Budget).
func (b *callBudget) before(ctx context.Context, est promptkit.CallEstimate) error {
	b.release(ctx)
	release, err := b.w.cfg.Budget(ctx, b.job, est)
	first := !b.later
	b.later = true
	var ex *quota.Exceeded
	switch {
	case errors.Is(err, jobs.ErrBudgetExceeded):
		b.spent = err
		return err
	case errors.As(err, &ex):
		b.rate, b.first = err, first
		return err
	case err != nil && first:
		return err
	case err != nil:
		b.w.log.Warn("reserving a call's budget failed; the call goes unreserved", "job", b.job.ID, "err", err)
		return nil
	}
	b.held = release
	return nil
}

// release returns the reservation held, if any. One that cannot be
// returned expires by itself.
func (b *callBudget) release(ctx context.Context) {
	if b == nil || b.held == nil {
		return
	}
	if err := b.held(ctx); err != nil {
		b.w.log.Debug("releasing a call's budget failed; it expires", "job", b.job.ID, "err", err)
	}
	b.held = nil
}

// run calls the engine under the job timeout, recording its attempts:
// Run, or Embed for an embeddings task.
func (w *Worker) run(ctx context.Context, j jobs.Job, t task) outcome {
	rec := &attemptLog{w: w, ctx: context.WithoutCancel(ctx), job: j, embedding: t.embed != nil}
	req := t.run
	req.Observer = chainObservers(rec.observe, w.cfg.Observer)
	if j.ExecutionOptions.Stream {
		// Someone relays the answer as it comes (a streamed chat
		// completion), perhaps in another process.
		req.OnDelta = func(d promptkit.StreamDelta) { w.cfg.Notifier.PublishDelta(j.ID, d) }
	}
	// A provider delay beyond the job's deadline ends the attempt at once;
	// the job is re-queued for that time instead of holding this slot.
	req.NoWaitPastDeadline = true
	if d, ok := j.Deadline(); ok {
		// On the wall clock, as the engine's waits are (see settle).
		req.WaitDeadline = time.Now().Add(d.Sub(w.cfg.Now()))
	}
	o := outcome{wallStart: time.Now(), clockStart: w.cfg.Now()}
	var next promptkit.BeforeCallFunc
	if w.cfg.Budget != nil {
		o.budget = &callBudget{w: w, job: j}
		next = o.budget.before
	}
	req.BeforeCall = rec.beforeCall(next)
	runCtx, stop := context.WithTimeout(ctx, w.cfg.JobTimeout)
	defer stop()
	if e := t.embed; e != nil {
		er := *e
		er.Observer, er.NoWaitPastDeadline, er.BeforeCall = req.Observer, true, req.BeforeCall
		var res *promptkit.EmbedResult
		if res, o.err = w.cfg.Engine.Embed(runCtx, er); o.err == nil {
			o.res, o.err = embedResult(res)
		}
	} else {
		o.res, o.err = w.cfg.Engine.Run(runCtx, req)
	}
	o.attempts = rec.finish(o.err)
	if b := o.budget; b != nil && b.spent != nil && errors.Is(o.err, b.spent) {
		// The job fails with the budget's own words, naming the limit.
		o.refused, o.reason = jobs.KindBudgetExceeded, b.spent.Error()
	}
	var ex *quota.Exceeded
	if b := o.budget; b != nil && b.rate != nil && errors.Is(o.err, b.rate) && errors.As(b.rate, &ex) {
		// The job waits for the window, on the worker's clock, spending no
		// attempt when it made no call.
		o.waitUntil, o.reason, o.handback = w.cfg.Now().Add(ex.RetryAfter), b.rate.Error(), b.first
	}
	if cause := context.Cause(ctx); errors.Is(cause, errCancelled) || errors.Is(cause, errShutdown) {
		o.stopped = cause
	} else if errors.Is(o.err, errCancelled) {
		o.stopped = errCancelled // the store refused an attempt event: the claim is lost
	}
	return o
}

// attemptLog turns the engine's attempt observations into durable
// attempt events. The engine calls observe and the run's BeforeCall on
// the goroutine running the job, the one that later calls finish.
//
// One rule, whatever makes the run call again (a transient retry, a
// failover to another backend of a model group, a schema repair, a
// streamed call or an embeddings call alike): an attempt is held until
// the run's next provider call, and written before that call goes out
// (beforeCall, the engine's BeforeCall, which precedes every call); the
// run's last attempt goes with the write that settles the job, in the
// same transaction (finish hands it over): one write per job when the
// first call answers. So at most one call of a run is ever unrecorded,
// the last one: a worker that dies leaves at most one provider call
// without an attempt event, which its reclaim counts, and budgets and the
// ledger can rely on provider calls ≤ attempt events + reclaims. When the
// write fails the next call waits until the store takes it (or the run
// ends); when the store refuses it because the claim is lost, the run
// stops there. An event not written during the run goes with the
// settling write.
//
// With Config.KeepProviderDetail, the last attempt, when the provider
// answered it with an error status, carries the provider's message from
// the run's error. Execution events carry no provider text: it is known
// only from the run's error, and so only for the attempt that ended the
// run.
type attemptLog struct {
	w   *Worker
	ctx context.Context
	job jobs.Job
	// embedding says the run is an embedding call's (no output tokens).
	embedding bool
	// held are the attempts not written yet, oldest first: at most the
	// last one, since every call is preceded by beforeCall.
	held []*jobs.AttemptEvent
	// pending are the attempt events the settling write must carry.
	pending []json.RawMessage
	// failing says a write has failed since the last one that was made,
	// so that an outage is logged once.
	failing bool
}

func (l *attemptLog) observe(ev promptkit.ExecutionEvent) {
	if ev.Kind == promptkit.ExecutionAttempt {
		l.held = append(l.held, new(jobs.NewAttemptEvent(ev, l.job.Attempt, l.embedding)))
	}
}

// beforeCall is the run's BeforeCall: it writes the held attempts, then
// asks next (the budget, when set). Written first, the previous call is
// in the ledger the budget reads.
func (l *attemptLog) beforeCall(next promptkit.BeforeCallFunc) promptkit.BeforeCallFunc {
	return func(ctx context.Context, est promptkit.CallEstimate) error {
		if err := l.flush(ctx); err != nil {
			return err
		}
		if next != nil {
			return next(ctx, est)
		}
		return nil
	}
}

// finish ends the log once the run has returned err: the held attempts
// join pending, the last with the provider's message when
// KeepProviderDetail is set and err is that attempt's answer (the same
// status), redacted and cut like a stored error message
// (jobs.ErrorMessage), the engine having already replaced the backend's
// key. It returns the attempt events for the settling write.
func (l *attemptLog) finish(err error) []json.RawMessage {
	for i, h := range l.held {
		var ge *promptkit.GenerationError
		if i == len(l.held)-1 && l.w.cfg.KeepProviderDetail && h.Dispatched && h.StatusCode != 0 &&
			h.Outcome == string(promptkit.ExecutionOutcomeError) && errors.As(err, &ge) && ge.StatusCode() == h.StatusCode {
			h.Detail = jobs.ErrorMessage(ge.Detail())
		}
		l.pending = append(l.pending, h.JSON())
	}
	l.held = nil
	return l.pending
}

// flush writes the held attempts before the run's next call. A write
// that fails is tried again, after finalizeBackoff's pauses, until the
// store takes it: the call waits, since making it would leave two calls
// unrecorded. It returns errCancelled when the store refuses the write
// because the job is no longer ours (its reclaim or cancel counted the
// call), and ctx's error when the run ends first; the attempts not
// written then stay held for the settling write.
func (l *attemptLog) flush(ctx context.Context) error {
	for len(l.held) > 0 {
		p := jobs.AttemptParams{JobID: l.job.ID, Worker: l.w.cfg.Name, Data: l.held[0].JSON()}
		for i := 0; ; i++ {
			// On l.ctx, which the run's end does not cancel: a write cut
			// short might have been made, and would then be made twice.
			err := l.w.store.AppendAttempt(l.ctx, p)
			if err == nil {
				if l.failing {
					l.failing = false
					l.w.log.Info("attempt event written after the database recovered", "job", l.job.ID, "tries", i+1)
				}
				break
			}
			if errors.Is(err, jobs.ErrNotClaimed) {
				l.held = l.held[1:] // the store will never take it
				return errCancelled
			}
			if !l.failing {
				l.failing = true
				l.w.log.Warn("attempt event write failing; the run's next provider call waits for the database", "job", l.job.ID, "err", err)
			}
			t := time.NewTimer(l.w.backoff(i))
			select {
			case <-ctx.Done():
				t.Stop()
				return ctx.Err()
			case <-t.C:
			}
		}
		l.held = l.held[1:]
	}
	return nil
}

// finalizeBackoff is the pause after the n-th failed try (from 0) of a
// finalizing write that failed for a reason other than a lost claim (a
// database outage): 100ms doubling up to 5s. The result is in hand, and
// without the write the job would run again at the provider's cost. Tests replace it per worker (Worker.backoff).
func finalizeBackoff(n int) time.Duration {
	return min(100*time.Millisecond<<min(n, 6), 5*time.Second)
}

// apply makes the store write settle decided, on ctx. The write is fenced
// by the job's claim, so it is safe to keep trying through an outage of
// any length: a write failing for another reason is retried, keeping the
// result, until the store answers — and then the store says whether the
// claim still holds. So a result is dropped only when the claim is known
// to be lost (ErrNotClaimed: the job was cancelled, or reclaimed by
// another worker), or when stop ends (the worker stops for good; the
// reclaim loop runs the job again). A write the store refuses as invalid
// cannot heal by retrying: its attempt events are dropped first (they are
// a record, not the result), then the job fails as unstorable instead of
// holding its slot. apply logs the trouble once, not per try. It returns
// the job as the write left it and the last write's error: nil when the
// write was made (or there was none to make), ErrNotClaimed when another
// writer won.
func (w *Worker) apply(ctx, stop context.Context, wr write) (jobs.Job, error) {
	if wr.op == opDiscard {
		return jobs.Job{}, nil // settled logs it
	}
	for i := 0; ; i++ {
		j, err := w.writeOnce(ctx, wr)
		switch {
		case err == nil:
			if i > 0 {
				w.log.Info("job finalized after the database recovered", "op", wr.op, "job", wr.jobID, "tries", i+1)
			}
			return j, nil
		case errors.Is(err, jobs.ErrNotClaimed):
			// Another writer won (cancel, reclaim): our result is
			// discarded, as settled logs.
			return j, err
		case errors.Is(err, jobs.ErrInvalid) && wr.attempts() > 0:
			w.log.Error("attempt events refused by the store; dropped", "job", wr.jobID, "events", wr.attempts(), "err", err)
			wr = wr.dropAttempts()
			i = -1
			continue
		case errors.Is(err, jobs.ErrInvalid) && wr.op != opFail:
			w.log.Error("job result refused by the store; failing the job as unstorable", "op", wr.op, "job", wr.jobID, "err", err)
			wr = write{op: opFail, jobID: wr.jobID, fail: jobs.FailParams{JobID: wr.jobID, Worker: w.cfg.Name,
				Kind: jobs.KindUnstorable, Message: msgUnstorable}}
			i = -1
			continue
		case errors.Is(err, jobs.ErrInvalid):
			w.log.Error("job finalization refused; the reclaim loop will end the job", "op", wr.op, "job", wr.jobID, "err", err)
			return j, err
		}
		if i == 0 {
			w.log.Warn("job finalization failing; keeping the result and retrying until the database answers", "op", wr.op, "job", wr.jobID, "err", err)
		}
		t := time.NewTimer(w.backoff(i))
		select {
		case <-stop.Done():
			t.Stop()
			w.log.Error("job finalization abandoned at shutdown; the reclaim loop will run the job again", "op", wr.op, "job", wr.jobID)
			return j, err
		case <-t.C:
		}
	}
}

// msgUnstorable is the error message of a job whose result the store
// refused; it never repeats the result or the store's words about it.
const msgUnstorable = "the database refused to store the job's result"

func (w *Worker) writeOnce(ctx context.Context, wr write) (jobs.Job, error) {
	switch wr.op {
	case opSucceed:
		return w.store.Succeed(ctx, wr.succeed)
	case opRequeue:
		return w.store.Requeue(ctx, wr.requeue)
	default:
		return w.store.Fail(ctx, wr.fail)
	}
}
