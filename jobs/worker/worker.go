package worker

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/promptkit/promptkit"
	"github.com/promptkit/promptkit/jobs"
)

// Config configures a Worker.
type Config struct {
	// Store holds the jobs. Required.
	Store jobs.Store
	// Engine runs the prompts. Required.
	Engine *promptkit.Engine
	// Name identifies this worker in worker_claim. Defaults to
	// host-pid-random, unique per Worker.
	Name string
	// Concurrency is how many jobs run at once. Defaults to 4.
	Concurrency int
	// BatchSize caps one claim. Defaults to Concurrency.
	BatchSize int
	// PriorityCeiling: only jobs with priority <= ceiling. Defaults to 100.
	PriorityCeiling *int
	// PollInterval is how often the queue is checked without a
	// notification. Defaults to 1s.
	PollInterval time.Duration
	// HeartbeatInterval is how often running jobs are heart-beaten (and
	// checked for cancellation). Defaults to 30s.
	HeartbeatInterval time.Duration
	// JobTimeout bounds one job attempt, retries inside the engine
	// included. Defaults to 10m.
	JobTimeout time.Duration
	// ShutdownGrace is how long running jobs may finish after the Run
	// context ends before they are handed back. Defaults to 10s.
	ShutdownGrace time.Duration
	// HistoryDepth is how many ancestor prompts (parent_id) are sent as
	// conversation history, unless a job's options say otherwise.
	// Defaults to 10.
	HistoryDepth int
	// Logger receives operational messages (never prompt or output text).
	// Defaults to slog.Default().
	Logger *slog.Logger

	// Test seams: clock and jitter. Default to time.Now and math/rand.
	Now    func() time.Time
	Jitter func(time.Duration) time.Duration
}

// Options are a job's execution_options.
type Options struct {
	Profile string `json:"profile,omitempty"`
	Model   string `json:"model,omitempty"`
	// Depth overrides Config.HistoryDepth; 0 sends no history.
	Depth *int `json:"depth,omitempty"`
}

// Worker claims and executes jobs.
type Worker struct {
	cfg   Config
	store jobs.Store
	log   *slog.Logger

	mu      sync.Mutex
	running map[string]*inflight
}

type inflight struct {
	job    jobs.Job
	cancel context.CancelCauseFunc
}

// errCancelled is the cause given to a run whose job was cancelled or
// taken away: its result will be discarded.
var errCancelled = errors.New("worker: job no longer claimed")

// errShutdown is the cause given to runs still going when the grace period
// ends: they are handed back without spending an attempt.
var errShutdown = errors.New("worker: shutting down")

// New checks cfg and returns a Worker.
func New(cfg Config) (*Worker, error) {
	if cfg.Store == nil || cfg.Engine == nil {
		return nil, errors.New("worker: Store and Engine are required")
	}
	if cfg.Concurrency <= 0 {
		cfg.Concurrency = 4
	}
	if cfg.BatchSize <= 0 {
		cfg.BatchSize = cfg.Concurrency
	}
	if cfg.PollInterval <= 0 {
		cfg.PollInterval = time.Second
	}
	if cfg.HeartbeatInterval <= 0 {
		cfg.HeartbeatInterval = 30 * time.Second
	}
	if cfg.JobTimeout <= 0 {
		cfg.JobTimeout = 10 * time.Minute
	}
	if cfg.ShutdownGrace < 0 {
		cfg.ShutdownGrace = 0
	} else if cfg.ShutdownGrace == 0 {
		cfg.ShutdownGrace = 10 * time.Second
	}
	if cfg.HistoryDepth < 0 {
		cfg.HistoryDepth = 0
	} else if cfg.HistoryDepth == 0 {
		cfg.HistoryDepth = 10
	}
	if cfg.Name == "" {
		cfg.Name = defaultName()
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Worker{cfg: cfg, store: cfg.Store, log: cfg.Logger, running: map[string]*inflight{}}, nil
}

func defaultName() string {
	host, _ := os.Hostname()
	var b [4]byte
	_, _ = rand.Read(b[:])
	return fmt.Sprintf("%s-%d-%s", host, os.Getpid(), hex.EncodeToString(b[:]))
}

// Name returns the worker's claim name.
func (w *Worker) Name() string { return w.cfg.Name }

// Run claims and executes jobs until ctx ends, then stops claiming, lets
// running jobs finish for ShutdownGrace, and hands the rest back to the
// queue without spending an attempt. It wakes on store notifications and
// polls every PollInterval.
func (w *Worker) Run(ctx context.Context) error {
	// Runs get their own context: ending ctx stops claiming, not the jobs.
	runCtx, stopRuns := context.WithCancelCause(context.Background())
	defer stopRuns(nil)
	slots := make(chan struct{}, w.cfg.Concurrency)
	var wg sync.WaitGroup

	hbDone := make(chan struct{})
	hbCtx, stopHB := context.WithCancel(context.Background())
	// Subscribe before the first claim: a cancel right after a claim must
	// not be missed.
	hbWake := w.store.Notify(hbCtx)
	go func() { defer close(hbDone); w.heartbeatLoop(hbCtx, hbWake) }()

	wake := w.store.Notify(ctx)
	poll := time.NewTicker(w.cfg.PollInterval)
	defer poll.Stop()
	// freed says a slot came free, so the next job is claimed at once
	// rather than at the next poll (the finalization's notification may
	// arrive before the slot is released).
	freed := make(chan struct{}, 1)
	for ctx.Err() == nil {
		free := w.cfg.Concurrency - len(slots)
		if free > 0 {
			claimed, err := w.store.Claim(ctx, jobs.ClaimParams{Worker: w.cfg.Name, Limit: min(free, w.cfg.BatchSize), PriorityCeiling: w.cfg.PriorityCeiling})
			if err != nil && ctx.Err() == nil {
				w.log.Warn("claim failed", "worker", w.cfg.Name, "err", err)
			}
			for _, j := range claimed {
				slots <- struct{}{}
				wg.Add(1)
				go func() {
					defer wg.Done()
					defer func() {
						<-slots
						select {
						case freed <- struct{}{}:
						default:
						}
					}()
					w.execute(runCtx, j)
				}()
			}
			if len(claimed) == free {
				continue // there may be more: claim again at once
			}
		}
		select {
		case <-ctx.Done():
		case <-wake:
		case <-freed:
		case <-poll.C:
		}
	}

	// Graceful shutdown: wait for the grace period, then hand back.
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	grace := time.NewTimer(w.cfg.ShutdownGrace)
	defer grace.Stop()
	select {
	case <-done:
	case <-grace.C:
		stopRuns(errShutdown)
		<-done
	}
	stopHB()
	<-hbDone
	return nil
}

// RunOnce claims one batch (up to BatchSize) and executes it to
// completion. It returns how many jobs it claimed.
func (w *Worker) RunOnce(ctx context.Context) (int, error) {
	// Subscribe before claiming: a cancel right after the claim must not
	// be missed.
	hbCtx, stopHB := context.WithCancel(ctx)
	defer stopHB()
	hbWake := w.store.Notify(hbCtx)
	claimed, err := w.store.Claim(ctx, jobs.ClaimParams{Worker: w.cfg.Name, Limit: w.cfg.BatchSize, PriorityCeiling: w.cfg.PriorityCeiling})
	if err != nil {
		return 0, err
	}
	hbDone := make(chan struct{})
	go func() { defer close(hbDone); w.heartbeatLoop(hbCtx, hbWake) }()
	runCtx, stopRuns := context.WithCancelCause(ctx)
	defer stopRuns(nil)
	var wg sync.WaitGroup
	sem := make(chan struct{}, w.cfg.Concurrency)
	for _, j := range claimed {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			w.execute(runCtx, j)
		}()
	}
	wg.Wait()
	stopHB()
	<-hbDone
	return len(claimed), nil
}

// heartbeatLoop heart-beats running jobs and cancels the runs of jobs
// that are no longer running under this worker (cancelled or reclaimed).
//
// A busy store notifies on every transition, so claim checks triggered by
// notifications are coalesced: at most one per cancelCheckInterval.
func (w *Worker) heartbeatLoop(ctx context.Context, wake <-chan struct{}) {
	t := time.NewTicker(w.cfg.HeartbeatInterval)
	defer t.Stop()
	var check <-chan time.Time // non-nil while a check is pending
	var last time.Time
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			w.heartbeat(ctx)
		case <-wake:
			if check != nil {
				continue // already pending
			}
			if wait := cancelCheckInterval - time.Since(last); wait > 0 {
				check = time.After(wait)
				continue
			}
			last = time.Now()
			w.checkClaims(ctx) // a cancel elsewhere notifies: react at once
		case <-check:
			check = nil
			last = time.Now()
			w.checkClaims(ctx)
		}
	}
}

// cancelCheckInterval bounds how often notifications make a worker look
// for cancelled jobs, and so how late it may notice a cancel.
const cancelCheckInterval = 100 * time.Millisecond

func (w *Worker) snapshot() []*inflight {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make([]*inflight, 0, len(w.running))
	for _, f := range w.running {
		out = append(out, f)
	}
	return out
}

func (w *Worker) heartbeat(ctx context.Context) {
	fs := w.snapshot()
	if len(fs) == 0 {
		return
	}
	ids := make([]string, len(fs))
	for i, f := range fs {
		ids[i] = f.job.ID
	}
	n, err := w.store.Heartbeat(ctx, jobs.HeartbeatParams{Worker: w.cfg.Name, JobIDs: ids})
	if err != nil {
		w.log.Warn("heartbeat failed", "worker", w.cfg.Name, "err", err)
		return
	}
	if n < len(ids) {
		w.checkClaims(ctx)
	}
}

// checkClaims cancels runs whose job left running-under-this-worker.
func (w *Worker) checkClaims(ctx context.Context) {
	for _, f := range w.snapshot() {
		j, err := w.store.GetJob(ctx, "", f.job.ID)
		if err != nil {
			continue
		}
		if j.State != jobs.Running || j.WorkerClaim != w.cfg.Name {
			f.cancel(errCancelled)
		}
	}
}

// execute runs one claimed job and finalizes it.
func (w *Worker) execute(parent context.Context, j jobs.Job) {
	ctx, cancel := context.WithCancelCause(parent)
	defer cancel(nil)
	w.mu.Lock()
	w.running[j.ID] = &inflight{job: j, cancel: cancel}
	w.mu.Unlock()
	defer func() {
		w.mu.Lock()
		delete(w.running, j.ID)
		w.mu.Unlock()
	}()

	// Finalizing writes use a context that survives the run's
	// cancellation: a handed-back job must still be written back.
	fin := context.WithoutCancel(parent)

	if j.DependsOn != "" {
		dep, err := w.store.GetJob(fin, "", j.DependsOn)
		if err != nil || dep.State != jobs.Succeeded {
			state := "missing"
			if err == nil {
				state = string(dep.State)
			}
			w.fail(fin, j, jobs.KindUnknown, fmt.Sprintf("dependency %s is %s", j.DependsOn, state))
			return
		}
	}

	req, err := w.request(fin, j)
	if err != nil {
		w.fail(fin, j, jobs.KindUnknown, "cannot build the request: "+redact(err))
		return
	}
	req.Observer = w.recordAttempts(fin, j)
	// A provider delay beyond the job's deadline ends the attempt at once;
	// the job is re-queued for that time instead of holding this slot.
	req.NoWaitPastDeadline = true
	runCtx, stop := context.WithTimeout(ctx, w.cfg.JobTimeout)
	wallStart, clockStart := time.Now(), w.cfg.Now()
	res, err := w.cfg.Engine.Run(runCtx, req)
	stop()

	switch cause := context.Cause(ctx); {
	case errors.Is(cause, errCancelled):
		w.log.Info("job result discarded: no longer claimed", "job", j.ID)
		return
	case errors.Is(cause, errShutdown):
		w.requeue(fin, j, w.cfg.Now(), jobs.KindNone, "", true)
		return
	}
	if err == nil && res.Validation.Status == promptkit.ValidationInvalid {
		w.finishFailure(fin, j, InvalidOutput, "output does not satisfy the prompt's output schema")
		return
	}
	// The engine resolves Retry-After on the wall clock; available_at is
	// on the worker's (and store's) clock. Carry a wait over, measured
	// from the call's start so it is never shortened.
	onClock := func(t time.Time) time.Time { return clockStart.Add(t.Sub(wallStart)) }
	if nb, ok := promptkit.NotBefore(err); ok && errors.Is(err, promptkit.ErrCapacity) {
		// The backend is paused by the provider past this job's deadline:
		// nothing was sent, so no attempt is spent.
		w.requeue(fin, j, onClock(nb), jobs.KindRateLimit, "backend paused by the provider's Retry-After", true)
		return
	}
	if err != nil {
		d := Classify(err)
		if !d.NotBefore.IsZero() {
			d.NotBefore = onClock(d.NotBefore)
		}
		w.finishFailure(fin, j, d, redact(err))
		return
	}
	params := jobs.SucceedParams{
		JobID: j.ID, Worker: w.cfg.Name, Output: res.Text, Parsed: res.Output, Model: res.Model,
		Usage: res.Usage,
	}
	w.finalize("succeed", j, func() error { _, err := w.store.Succeed(fin, params); return err })
}

// finishFailure requeues a retryable failure with attempts left, and
// fails the job otherwise.
func (w *Worker) finishFailure(ctx context.Context, j jobs.Job, d Decision, msg string) {
	if d.Retryable && j.Attempt < j.MaxAttempts {
		w.requeue(ctx, j, Backoff(d, j.Attempt, w.cfg.Now(), w.cfg.Jitter), d.Kind, msg, false)
		return
	}
	w.fail(ctx, j, d.Kind, msg)
}

func (w *Worker) requeue(ctx context.Context, j jobs.Job, at time.Time, kind jobs.ErrorKind, msg string, handback bool) {
	p := jobs.RequeueParams{JobID: j.ID, Worker: w.cfg.Name, AvailableAt: at, Kind: kind, Message: msg, Handback: handback}
	w.finalize("requeue", j, func() error { _, err := w.store.Requeue(ctx, p); return err })
}

func (w *Worker) fail(ctx context.Context, j jobs.Job, kind jobs.ErrorKind, msg string) {
	p := jobs.FailParams{JobID: j.ID, Worker: w.cfg.Name, Kind: kind, Message: msg}
	w.finalize("fail", j, func() error { _, err := w.store.Fail(ctx, p); return err })
}

// finalizeWaits are the pauses between tries of a finalizing write that
// failed for a reason other than a lost claim (a database hiccup): the
// result is in hand, and without it the job would sit in running until
// the reclaim loop runs it again.
var finalizeWaits = []time.Duration{100 * time.Millisecond, 500 * time.Millisecond, 2 * time.Second}

// finalize runs a finalizing write, retrying transient failures.
func (w *Worker) finalize(op string, j jobs.Job, write func() error) {
	for i := 0; ; i++ {
		err := write()
		switch {
		case err == nil:
			return
		case errors.Is(err, jobs.ErrNotClaimed):
			// Another writer won (cancel, reclaim): our result is discarded.
			w.log.Info("job finalization discarded: no longer claimed", "op", op, "job", j.ID)
			return
		case errors.Is(err, jobs.ErrInvalid) || i == len(finalizeWaits):
			w.log.Error("job finalization failed; the reclaim loop will run the job again", "op", op, "job", j.ID, "err", err)
			return
		}
		w.log.Warn("job finalization failed; retrying", "op", op, "job", j.ID, "err", err)
		time.Sleep(finalizeWaits[i])
	}
}

// redact keeps error messages to the engine's error text, which never
// contains prompts, bodies, provider text or credentials (the engine's
// contract); it only bounds the length.
func redact(err error) string {
	s := err.Error()
	if len(s) > 500 {
		s = s[:500]
	}
	return s
}

// recordAttempts turns the engine's attempt observations into durable
// attempt events.
func (w *Worker) recordAttempts(ctx context.Context, j jobs.Job) promptkit.ExecutionObserver {
	return func(ev promptkit.ExecutionEvent) {
		if ev.Kind != promptkit.ExecutionAttempt {
			return
		}
		data, _ := json.Marshal(attemptData{
			JobAttempt: j.Attempt, Generation: ev.Generation, Attempt: ev.Attempt, Dispatched: ev.Dispatched,
			StatusCode: ev.StatusCode, Outcome: string(ev.Outcome), Failure: string(ev.Failure),
			CapacityWaitMS: ev.CapacityWait.Milliseconds(), GenerationMS: ev.GenerationDuration.Milliseconds(),
			Model: ev.Model, Usage: observedUsage(ev.Usage),
		})
		if err := w.store.AppendAttempt(ctx, jobs.AttemptParams{JobID: j.ID, Worker: w.cfg.Name, Data: data}); err != nil && !errors.Is(err, jobs.ErrNotClaimed) {
			w.log.Warn("recording an attempt failed", "job", j.ID, "err", err)
		}
	}
}

// attemptData is the JSON of an attempt event.
type attemptData struct {
	JobAttempt     int                       `json:"job_attempt"`
	Generation     uint64                    `json:"generation"`
	Attempt        uint64                    `json:"attempt"`
	Dispatched     bool                      `json:"dispatched"`
	StatusCode     int                       `json:"status_code,omitempty"`
	Outcome        string                    `json:"outcome"`
	Failure        string                    `json:"failure,omitempty"`
	CapacityWaitMS int64                     `json:"capacity_wait_ms"`
	GenerationMS   int64                     `json:"generation_ms"`
	Model          string                    `json:"model,omitempty"`
	Usage          map[string]*observedCount `json:"usage,omitempty"`
}

type observedCount struct {
	Value int `json:"value"`
}

// observedUsage keeps only the counts the provider reported.
func observedUsage(u promptkit.ObservedTokenUsage) map[string]*observedCount {
	out := map[string]*observedCount{}
	add := func(name string, c promptkit.ObservedTokenCount) {
		if c.Known {
			out[name] = &observedCount{Value: c.Value}
		}
	}
	add("prompt_tokens", u.PromptTokens)
	add("completion_tokens", u.CompletionTokens)
	add("total_tokens", u.TotalTokens)
	add("cached_tokens", u.CachedTokens)
	add("reasoning_tokens", u.ReasoningTokens)
	if len(out) == 0 {
		return nil
	}
	return out
}

// request builds the engine request for a job: the prompt (ad-hoc text or
// a named prompt with inputs), its thread history, and the job's options.
func (w *Worker) request(ctx context.Context, j jobs.Job) (promptkit.RunRequest, error) {
	var opts Options
	if len(j.ExecutionOptions) > 0 {
		if err := json.Unmarshal(j.ExecutionOptions, &opts); err != nil {
			return promptkit.RunRequest{}, fmt.Errorf("execution_options are not valid JSON: %w", jobs.ErrInvalid)
		}
	}
	p, err := w.store.GetPrompt(ctx, "", j.PromptID)
	if err != nil {
		return promptkit.RunRequest{}, err
	}
	req := promptkit.RunRequest{Text: p.Text, PromptID: p.PromptRef, ProfileID: p.Profile, Model: opts.Model}
	if opts.Profile != "" {
		req.ProfileID = opts.Profile
	}
	if len(p.Inputs) > 0 {
		if err := json.Unmarshal(p.Inputs, &req.Inputs); err != nil {
			return promptkit.RunRequest{}, fmt.Errorf("inputs are not a JSON object: %w", jobs.ErrInvalid)
		}
	}
	depth := w.cfg.HistoryDepth
	if opts.Depth != nil {
		depth = max(*opts.Depth, 0)
	}
	req.History, err = w.history(ctx, p, depth)
	return req, err
}

// history returns up to depth ancestor turns, oldest first: each
// ancestor's text and its latest successful answer.
func (w *Worker) history(ctx context.Context, p jobs.Prompt, depth int) ([]promptkit.Message, error) {
	var turns [][]promptkit.Message
	for id := p.ParentID; id != "" && len(turns) < depth; {
		anc, err := w.store.GetPrompt(ctx, "", id)
		if err != nil {
			return nil, fmt.Errorf("parent prompt: %w", err)
		}
		var turn []promptkit.Message
		if anc.Text != "" {
			turn = append(turn, promptkit.Message{Role: promptkit.RoleUser, Content: anc.Text})
			if answer, ok := w.answer(ctx, anc.ID); ok {
				turn = append(turn, promptkit.Message{Role: promptkit.RoleAssistant, Content: answer})
			}
		}
		turns = append(turns, turn)
		id = anc.ParentID
	}
	var msgs []promptkit.Message
	for i := len(turns) - 1; i >= 0; i-- {
		msgs = append(msgs, turns[i]...)
	}
	return msgs, nil
}

// answer returns the output of a prompt's latest succeeded job.
func (w *Worker) answer(ctx context.Context, promptID string) (string, bool) {
	js, err := w.store.PromptJobs(ctx, "", promptID)
	if err != nil {
		return "", false
	}
	for i := len(js) - 1; i >= 0; i-- {
		if js[i].State == jobs.Succeeded && js[i].ResponseID != "" {
			r, err := w.store.GetResponse(ctx, "", js[i].ResponseID)
			if err == nil {
				return r.Output, true
			}
		}
	}
	return "", false
}
