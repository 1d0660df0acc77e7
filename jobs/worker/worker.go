package worker

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/promptkit/promptkit"
	"github.com/promptkit/promptkit/internal/lifecycle"
	"github.com/promptkit/promptkit/jobs"
)

// Defaults of Config.
const (
	DefaultConcurrency       = 4
	DefaultPollInterval      = time.Second
	DefaultHeartbeatInterval = 30 * time.Second
	DefaultJobTimeout        = 10 * time.Minute
	DefaultShutdownGrace     = 10 * time.Second
	DefaultHistoryDepth      = 10
)

// Config configures a Worker.
type Config struct {
	// Store holds the jobs. Required.
	Store jobs.Store
	// Notifier wakes the worker when work may have come (it still polls
	// every PollInterval) or a running job changed, and carries the
	// pieces of streamed answers to their readers. Defaults to
	// Store.Notifier().
	Notifier jobs.Notifier
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
	// notification. It must not be negative. Defaults to 1s.
	PollInterval time.Duration
	// HeartbeatInterval is how often running jobs are heart-beaten (and
	// checked for cancellation). It must be below the reclaim threshold
	// (see CheckTimings), and not negative. Defaults to 30s.
	HeartbeatInterval time.Duration
	// JobTimeout bounds one job attempt, retries inside the engine
	// included. It must not be negative. Defaults to 10m.
	JobTimeout time.Duration
	// ShutdownGrace is how long running jobs may finish after Stop (or
	// the end of RunOnce's context) before they are handed back to the
	// queue without spending an attempt. Negative: no grace, they are
	// handed back at once. Defaults to 10s.
	ShutdownGrace time.Duration
	// HistoryDepth is how many ancestor prompts (parent_id) are sent as
	// conversation history, unless a job's options say otherwise.
	// Negative sends none. Defaults to 10.
	HistoryDepth int
	// Logger receives operational messages (never prompt, output or
	// provider text), among them one Info line per settled job attempt.
	// Defaults to slog.Default().
	Logger *slog.Logger
	// KeepProviderDetail keeps the provider's own message for an HTTP
	// error status (a 401's "Incorrect API key provided", say) in the
	// "detail" field of the attempt event of the call that ended the run,
	// redacted and cut like a stored error message (jobs.ErrorMessage).
	// Off by default, as provider text can echo the prompt. It never
	// reaches the job's error message or the logs. Defaults to false.
	KeepProviderDetail bool

	// Budget, if set, is asked before each provider call of a job's run
	// (the first, each retry, failover and repair) to reserve the call's
	// estimated share of the job's org's and token's budgets
	// (quota.Quotas.Call): the worker releases it once the call is in the
	// ledger, after the attempt event that reports it is written (before
	// the next call, or by the settling write). An error matching
	// jobs.ErrBudgetExceeded fails the job as budget_exceeded, with no
	// further call; a *quota.Exceeded of a rate (tokens per minute) puts
	// it back in the queue until its RetryAfter (spending no attempt when
	// the run made no call, failing it rate_limited past its client's
	// deadline); any other error, before the run's first call, is a
	// failed attempt of kind unknown, retried, and, before a later call,
	// lets the call go unreserved (the run was admitted; the spend is in
	// the ledger all the same).
	// Defaults to nil: no budgets.
	Budget func(ctx context.Context, j jobs.Job, est promptkit.CallEstimate) (release func(context.Context) error, err error)

	// Now is the clock the worker stamps times with. Defaults to time.Now.
	Now func() time.Time
	// Jitter(n) returns a uniform duration in [0, n] for the job backoff.
	// Defaults to math/rand.
	Jitter func(time.Duration) time.Duration

	// Observe, if set, is told when the worker claims a job and when it
	// settles one, for metrics. It is called on the worker's goroutines,
	// concurrently for different jobs; it must not block. Defaults to
	// nil: nothing is told.
	Observe func(JobEvent)
	// Observer, if set, receives the engine's execution events of every
	// job this worker runs. An attempt's event is stored later: before
	// the run's next provider call, or with the job's result. It must not block
	// (see promptkit.ExecutionObserver).
	// Defaults to nil: nothing is told.
	Observer promptkit.ExecutionObserver
}

// withDefaults checks cfg and fills its zero fields.
func (cfg Config) withDefaults() (Config, error) {
	switch {
	case cfg.Store == nil:
		return cfg, errors.New("worker: Config.Store is required")
	case cfg.Engine == nil:
		return cfg, errors.New("worker: Config.Engine is required")
	case cfg.Concurrency < 0:
		return cfg, fmt.Errorf("worker: Config.Concurrency %d is negative", cfg.Concurrency)
	case cfg.BatchSize < 0:
		return cfg, fmt.Errorf("worker: Config.BatchSize %d is negative", cfg.BatchSize)
	case cfg.PollInterval < 0, cfg.HeartbeatInterval < 0, cfg.JobTimeout < 0:
		return cfg, errors.New("worker: Config.PollInterval, HeartbeatInterval and JobTimeout must not be negative")
	case cfg.PriorityCeiling != nil && (*cfg.PriorityCeiling < jobs.MinPriority || *cfg.PriorityCeiling > jobs.MaxPriority):
		return cfg, fmt.Errorf("worker: Config.PriorityCeiling %d is outside %d–%d", *cfg.PriorityCeiling, jobs.MinPriority, jobs.MaxPriority)
	}
	cfg.Concurrency = cmp.Or(cfg.Concurrency, DefaultConcurrency)
	cfg.BatchSize = cmp.Or(cfg.BatchSize, cfg.Concurrency)
	cfg.PollInterval = cmp.Or(cfg.PollInterval, DefaultPollInterval)
	cfg.HeartbeatInterval = cmp.Or(cfg.HeartbeatInterval, DefaultHeartbeatInterval)
	cfg.JobTimeout = cmp.Or(cfg.JobTimeout, DefaultJobTimeout)
	cfg.ShutdownGrace = max(cmp.Or(cfg.ShutdownGrace, DefaultShutdownGrace), 0)
	cfg.HistoryDepth = max(cmp.Or(cfg.HistoryDepth, DefaultHistoryDepth), 0)
	if cfg.Name == "" {
		cfg.Name = defaultName()
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Notifier == nil {
		cfg.Notifier = cfg.Store.Notifier()
	}
	return cfg, nil
}

// CheckTimings checks that a deployment's timings can work together: a
// live worker heart-beats more often than the reclaim threshold, and a
// job is reclaimed before it counts as stuck. Zero values stand for the
// defaults.
func CheckTimings(heartbeat, reclaimAfter, stuckAfter time.Duration) error {
	heartbeat = cmp.Or(heartbeat, DefaultHeartbeatInterval)
	p, err := jobs.ReclaimParams{ReclaimAfter: reclaimAfter, StuckAfter: stuckAfter}.Normalize()
	if err != nil {
		return err
	}
	if heartbeat >= p.ReclaimAfter {
		return fmt.Errorf("%w: heartbeat interval %v is not below reclaim_after %v: live workers would be reclaimed", jobs.ErrInvalid, heartbeat, p.ReclaimAfter)
	}
	return nil
}

func defaultName() string {
	host, _ := os.Hostname()
	var b [4]byte
	_, _ = rand.Read(b[:])
	return fmt.Sprintf("%s-%d-%s", host, os.Getpid(), hex.EncodeToString(b[:]))
}

// Worker claims and executes jobs.
type Worker struct {
	cfg   Config
	store jobs.Store
	log   *slog.Logger

	mu      sync.Mutex
	running map[string]*inflight
	// slots holds a token per job running (Concurrency at most), taken
	// before a claim; active is the running loop's state for RunNow, nil
	// when the loop is not running. Both under mu for RunNow.
	slots  chan struct{}
	active *active
	// claiming is held by the loop from taking slots for a claim until
	// it gives back those the claim left unused; RunNow waits for it, so
	// that it sees the slots the queue did not need, never the ones a
	// claim holds for a moment.
	claiming sync.Mutex
	// hbFailing and claimsFailing are set while heartbeats or claims fail
	// (see beatFailing, claimFailing).
	hbFailing, claimsFailing atomic.Bool
	// backoff is finalizeBackoff, or a test's.
	backoff func(int) time.Duration

	// draining is set while the store asks this worker to drain (its
	// last report said so: see report); control wakes the loop when it
	// changes. drained is closed once the worker is draining and runs
	// nothing (under mu; replaced when the drain is undone).
	draining  atomic.Bool
	control   chan struct{}
	drained   chan struct{}
	isDrained bool

	// loop runs work from Start until Stop; hurry closes when a Stop's
	// context ends, cutting the shutdown grace short.
	loop      *lifecycle.Loop
	hurry     chan struct{}
	hurryOnce sync.Once
}

type inflight struct {
	job    jobs.Job
	cancel context.CancelCauseFunc
	// beat is when the job's claim was last confirmed (claim or
	// heartbeat), in unix nanoseconds on the worker's clock.
	beat atomic.Int64
}

// errCancelled is the cause given to a run whose job was cancelled or
// taken away: its result will be discarded.
var errCancelled = errors.New("worker: job no longer claimed")

// errShutdown is the cause given to runs still going when the grace period
// ends: they are handed back without spending an attempt.
var errShutdown = errors.New("worker: shutting down")

// New checks cfg, fills its defaults and returns a Worker.
func New(cfg Config) (*Worker, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	w := &Worker{cfg: cfg, store: cfg.Store, log: cfg.Logger, running: map[string]*inflight{}, backoff: finalizeBackoff,
		hurry: make(chan struct{}), slots: make(chan struct{}, cfg.Concurrency),
		control: make(chan struct{}, 1), drained: make(chan struct{})}
	w.loop = lifecycle.New(w.work)
	return w, nil
}

// Name returns the worker's claim name.
func (w *Worker) Name() string { return w.cfg.Name }

// Start starts claiming and executing jobs, Concurrency at a time, until
// Stop. The worker wakes on store notifications and polls every
// PollInterval. ctx's values reach the jobs' contexts; its end does not
// stop the worker: Stop does. A Worker starts once: Start returns an
// error when it was started or stopped already.
func (w *Worker) Start(ctx context.Context) error { return w.loop.Start(ctx) }

// Stop stops the worker gracefully: it stops claiming, lets running jobs
// finish for up to ShutdownGrace, hands the rest back to the queue
// without spending an attempt, and returns nil once everything the worker
// started has stopped. If ctx ends first, the jobs still running are
// handed back at once and Stop returns ctx's error without waiting for
// the hand-back; a later Stop waits for it. Stopping twice, or before
// Start, is safe.
func (w *Worker) Stop(ctx context.Context) error {
	defer context.AfterFunc(ctx, w.hurryUp)()
	err := w.loop.Stop(ctx)
	if ctx.Err() != nil {
		// loop.Stop can see ctx end before the AfterFunc has fired, and
		// the deferred stop of it would then unregister it unfired: the
		// runs would get their whole grace after all. Hurry here too.
		w.hurryUp()
	}
	return err
}

// Run starts the worker, waits for ctx to end and stops it (see Stop);
// it returns nil once everything it started has stopped.
//
// Deprecated: use Start and Stop, the lifecycle every background loop of
// promptkit shares. Run remains for the callers not moved yet.
func (w *Worker) Run(ctx context.Context) error {
	if err := w.Start(ctx); err != nil {
		return err
	}
	<-ctx.Done()
	return w.Stop(context.WithoutCancel(ctx))
}

// hurryUp cuts the shutdown grace short: a Stop's context ended.
func (w *Worker) hurryUp() { w.hurryOnce.Do(func() { close(w.hurry) }) }

// work is the worker's loop, from Start until Stop cancels ctx: it claims
// and executes jobs, then drains the runs.
func (w *Worker) work(ctx context.Context) error {
	hb := newHeartbeat(w)
	if err := hb.Start(ctx); err != nil {
		return err
	}
	defer hb.Stop(context.WithoutCancel(ctx))
	// Runs get their own context: ending ctx stops claiming, not the jobs.
	runCtx, stopRuns := context.WithCancelCause(context.WithoutCancel(ctx))
	defer stopRuns(nil)

	var wg sync.WaitGroup
	wake := w.cfg.Notifier.Notify(ctx)
	poll := time.NewTicker(w.cfg.PollInterval)
	defer poll.Stop()
	// freed says a slot came free without its last claim finding the
	// queue empty, so the next job is claimed at once rather than at the
	// next poll (the finalization's notification may arrive before the
	// slot is released).
	freed := make(chan struct{}, 1)
	w.setActive(&active{ctx: ctx, runCtx: runCtx, wg: &wg, freed: freed})
	for ctx.Err() == nil {
		// Slots are taken before the claim, so that a job claimed never
		// waits for one (RunNow takes them too). A draining worker claims
		// nothing; once its runs are over it is drained.
		w.claiming.Lock()
		n := 0
		if !w.draining.Load() {
			n = w.takeSlots(w.cfg.BatchSize)
		}
		if n > 0 {
			claimed, err := w.claim(ctx, n)
			if ctx.Err() == nil {
				w.claimFailing(err)
			}
			for range n - len(claimed) {
				<-w.slots
			}
			w.claiming.Unlock()
			for _, j := range claimed {
				wg.Go(func() {
					empty := w.runSlot(ctx, runCtx, j)
					w.freeSlot(freed, !empty)
				})
			}
			if len(claimed) == n {
				continue // there may be more: claim again at once
			}
		} else {
			w.claiming.Unlock()
		}
		w.checkDrained()
		select {
		case <-ctx.Done():
		case <-wake:
		case <-freed:
		case <-poll.C:
		case <-w.control:
		}
	}
	w.setActive(nil)
	w.drain(&wg, stopRuns, w.hurry)
	return nil
}

// runSlot executes j in a slot and then, until the worker stops (ctx
// ends) or the queue is empty, the job it claims for the same slot: each
// claim goes out together with the settling write of the job before it
// (the store's group commit often makes them one transaction), instead of
// after the slot is freed and the claim loop wakes. runCtx is the runs'
// context. It reports whether its last claim found the queue empty, so
// that the loop need not claim for the slot before the next notification
// or poll.
func (w *Worker) runSlot(ctx, runCtx context.Context, j jobs.Job) (empty bool) {
	var prompt *jobs.Prompt
	for {
		type claim struct {
			jobs   []jobs.Job
			prompt *jobs.Prompt
		}
		var next chan claim
		claimNext := func() {
			if ctx.Err() != nil || w.draining.Load() {
				return // stopping or draining: no more claims
			}
			next = make(chan claim, 1)
			go func() {
				// An error is the loop's to report: it claims at its next
				// poll, as for a freed slot.
				var c claim
				c.jobs, _ = w.claim(ctx, 1)
				if len(c.jobs) == 1 {
					// Read while the settling write is still going: the
					// next run need not wait for it (prepare reads it
					// again if this fails).
					if p, err := w.store.GetPrompt(ctx, "", c.jobs[0].PromptID); err == nil {
						c.prompt = &p
					}
				}
				next <- c
			}()
		}
		w.execute(runCtx, j, prompt, claimNext)
		if next == nil {
			return false
		}
		c := <-next
		if len(c.jobs) == 0 {
			return ctx.Err() == nil
		}
		j, prompt = c.jobs[0], c.prompt
	}
}

// active is what RunNow needs of the running loop: its context (ended:
// stopping), the runs' context, the runs' wait group and the freed signal.
type active struct {
	ctx, runCtx context.Context
	wg          *sync.WaitGroup
	freed       chan struct{}
}

func (w *Worker) setActive(a *active) {
	w.mu.Lock()
	w.active = a
	w.mu.Unlock()
}

// takeSlots takes up to n free slots, without waiting, and returns how
// many it took.
func (w *Worker) takeSlots(n int) int {
	for i := range n {
		select {
		case w.slots <- struct{}{}:
		default:
			return i
		}
	}
	return n
}

// freeSlot gives a slot back; with claim, the loop is told to claim for
// it at once.
func (w *Worker) freeSlot(freed chan struct{}, claim bool) {
	<-w.slots
	if claim {
		select {
		case freed <- struct{}{}:
		default:
		}
	}
}

// RunNow stores p claimed by this worker (jobs.EnqueueParams.ClaimAs)
// and runs it at once in a free slot, as if the worker had claimed it
// from the queue; see jobs.RunNowFunc for what it returns. It is the
// interactive fast path: a process that receives a prompt while one of
// its slots is free runs it there, without a round trip through the
// queue's wake-up, and the job is stored before the backend is called. A
// slot is free only when the worker's last claim for it found no job
// waiting, so a job run this way overtakes none (RunNow waits for a
// claim in progress to end before it looks for one). The job cannot run now
// (jobs.ErrNoSlot, nothing stored) when no slot is free, the worker is
// not running or draining, p has DependsOn, AvailableAt or a priority
// above PriorityCeiling, or its profile's backends are all held
// (promptkit.Engine.HeldProfiles).
func (w *Worker) RunNow(ctx context.Context, p jobs.EnqueueParams) (jobs.Enqueued, <-chan jobs.Job, error) {
	prio := jobs.DefaultPriority
	if p.Priority != nil {
		prio = *p.Priority
	}
	if p.DependsOn != "" || !p.AvailableAt.IsZero() || w.cfg.PriorityCeiling != nil && prio > *w.cfg.PriorityCeiling ||
		w.draining.Load() || slices.Contains(w.cfg.Engine.HeldProfiles(), p.Profile) {
		return jobs.Enqueued{}, nil, jobs.ErrNoSlot
	}
	a := w.reserve()
	if a == nil {
		return jobs.Enqueued{}, nil, jobs.ErrNoSlot
	}
	p.ClaimAs = w.cfg.Name
	e, err := w.store.Enqueue(ctx, p)
	if err != nil || e.Claimed == nil {
		w.freeSlot(a.freed, false)
		a.wg.Done()
		return e, nil, err
	}
	w.observeClaims([]jobs.Job{*e.Claimed}, true)
	done := make(chan jobs.Job, 1)
	go func() {
		defer a.wg.Done()
		j, ok := w.execute(a.runCtx, *e.Claimed, nil, nil)
		if ok {
			done <- j
		}
		close(done)
		w.freeSlot(a.freed, true)
	}()
	return e, done, nil
}

// reserve takes a free slot for RunNow and joins the loop's runs, or
// returns nil when no slot is free or the loop is not running.
func (w *Worker) reserve() *active {
	w.claiming.Lock()
	defer w.claiming.Unlock()
	w.mu.Lock()
	defer w.mu.Unlock()
	a := w.active
	if a == nil || a.ctx.Err() != nil || w.draining.Load() || w.takeSlots(1) == 0 {
		return nil
	}
	a.wg.Add(1) // under mu: work's drain starts only after setActive(nil)
	return a
}

// drain waits for the runs, for at most ShutdownGrace or until hurry
// closes, then hands the rest back.
func (w *Worker) drain(wg *sync.WaitGroup, stopRuns context.CancelCauseFunc, hurry <-chan struct{}) {
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	grace := time.NewTimer(w.cfg.ShutdownGrace)
	defer grace.Stop()
	select {
	case <-done:
		return
	case <-grace.C:
	case <-hurry:
	}
	stopRuns(errShutdown)
	<-done
}

// RunOnce claims one batch (up to BatchSize) and executes it to
// completion. It returns how many jobs it claimed. When ctx ends first,
// the batch is treated as Stop treats running jobs: the runs get
// ShutdownGrace to finish, then are handed back without spending an
// attempt (a job not started yet too).
func (w *Worker) RunOnce(ctx context.Context) (int, error) {
	hb := newHeartbeat(w)
	if err := hb.Start(ctx); err != nil {
		return 0, err
	}
	defer hb.Stop(context.WithoutCancel(ctx))
	claimed, err := w.claim(ctx, w.cfg.BatchSize)
	if err != nil {
		return 0, err
	}
	// Runs get their own context, as in Start: ending ctx is a shutdown.
	runCtx, stopRuns := context.WithCancelCause(context.WithoutCancel(ctx))
	defer stopRuns(nil)
	var wg sync.WaitGroup
	sem := make(chan struct{}, w.cfg.Concurrency)
	for _, j := range claimed {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			w.execute(runCtx, j, nil, nil)
		})
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
		w.drain(&wg, stopRuns, nil)
	}
	return len(claimed), nil
}

// claim claims up to limit jobs, leaving queued those of the profiles
// whose backends an operator holds (promptkit.Engine.HeldProfiles: none
// unless the engine shares its pacing through the store).
func (w *Worker) claim(ctx context.Context, limit int) ([]jobs.Job, error) {
	claimed, err := w.store.Claim(ctx, jobs.ClaimParams{Worker: w.cfg.Name, Limit: limit, PriorityCeiling: w.cfg.PriorityCeiling,
		SkipProfiles: w.cfg.Engine.HeldProfiles()})
	w.observeClaims(claimed, false)
	return claimed, err
}

// newHeartbeat returns the heartbeat of w's running jobs: a loop with
// the lifecycle of every other (Start, Stop), which runs heartbeatLoop.
// Its Start subscribes to notifications before returning, so a cancel
// right after the next claim is not missed.
func newHeartbeat(w *Worker) *lifecycle.Loop {
	return lifecycle.NewSetup(func(ctx context.Context) (func() error, error) {
		wake := w.cfg.Notifier.Notify(ctx)
		return func() error { w.report(ctx); w.heartbeatLoop(ctx, wake); return nil }, nil
	})
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
			w.report(ctx)
		case <-wake:
			if check != nil {
				continue // already pending
			}
			if wait := cancelCheckInterval - time.Since(last); wait > 0 {
				check = time.After(wait)
				continue
			}
			last = time.Now()
			w.checkClaims(ctx, time.Time{}) // a cancel elsewhere notifies: react at once
		case <-check:
			check = nil
			last = time.Now()
			w.checkClaims(ctx, time.Time{})
		}
	}
}

// cancelCheckInterval bounds how often notifications make a worker look
// for cancelled jobs, and so how late it may notice a cancel.
const cancelCheckInterval = 100 * time.Millisecond

// snapshot returns the running jobs and their IDs.
func (w *Worker) snapshot() ([]*inflight, []string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	fs, ids := make([]*inflight, 0, len(w.running)), make([]string, 0, len(w.running))
	for id, f := range w.running {
		fs, ids = append(fs, f), append(ids, id)
	}
	return fs, ids
}

// heartbeat confirms every running job's claim. When some were not
// confirmed (the job was cancelled, reclaimed, or has just been finished
// by this worker) it looks at each and stops the runs that are no longer
// ours: a lost claim is noticed within one interval, with or without
// notifications.
func (w *Worker) heartbeat(ctx context.Context) {
	fs, ids := w.snapshot()
	if len(fs) == 0 {
		return
	}
	now := w.cfg.Now()
	_, err := w.store.Heartbeat(ctx, jobs.HeartbeatParams{Worker: w.cfg.Name, JobIDs: ids})
	switch {
	case ctx.Err() != nil:
		return // the worker is stopping
	case err == nil:
		for _, f := range fs {
			f.beat.Store(now.UnixNano())
		}
		w.beatFailing(false, nil)
	case errors.Is(err, jobs.ErrNotClaimed):
		w.beatFailing(false, nil)
		w.checkClaims(ctx, now)
	default:
		w.beatFailing(true, err)
	}
}

// claimFailing logs the start and the end of a run of failed claims (the
// database is unreachable), once each rather than every poll.
func (w *Worker) claimFailing(err error) {
	if w.claimsFailing.Swap(err != nil) == (err != nil) {
		return
	}
	if err != nil {
		w.log.Warn("claiming jobs failing; retrying every poll interval", "worker", w.cfg.Name, "err", err)
	} else {
		w.log.Info("claiming jobs again", "worker", w.cfg.Name)
	}
}

// beatFailing logs the start and the end of a run of failed heartbeats,
// once each rather than every interval.
func (w *Worker) beatFailing(failing bool, err error) {
	if w.hbFailing.Swap(failing) == failing {
		return
	}
	if failing {
		w.log.Warn("heartbeat failing; running jobs keep running and their results are kept", "worker", w.cfg.Name, "err", err)
	} else {
		w.log.Info("heartbeat working again", "worker", w.cfg.Name)
	}
}

// checkClaims cancels runs whose job left running-under-this-worker, and
// marks the others confirmed at now (zero: not confirmed). One read
// answers for every run; when it fails, nothing is decided.
func (w *Worker) checkClaims(ctx context.Context, now time.Time) {
	fs, ids := w.snapshot()
	if len(fs) == 0 {
		return
	}
	held, err := w.store.Claimed(ctx, w.cfg.Name, ids)
	if err != nil {
		return
	}
	for _, f := range fs {
		if !slices.Contains(held, f.job.ID) {
			f.cancel(errCancelled)
			continue
		}
		if !now.IsZero() {
			// Still ours, so the heartbeat that reported another job's
			// lost claim did confirm this one: a claim never comes back.
			f.beat.Store(now.UnixNano())
		}
	}
}

// track registers a running job so the heartbeat covers it and a cancel
// reaches it; the returned func forgets it.
func (w *Worker) track(j jobs.Job, cancel context.CancelCauseFunc) (untrack func()) {
	f := &inflight{job: j, cancel: cancel}
	f.beat.Store(w.cfg.Now().UnixNano())
	w.mu.Lock()
	w.running[j.ID] = f
	w.mu.Unlock()
	return func() {
		w.mu.Lock()
		delete(w.running, j.ID)
		w.mu.Unlock()
	}
}

// report tells the store about this worker (jobs.Store.ReportWorker), on
// every heartbeat tick, idle or not, so that operators see it, and
// learns whether it is asked to drain. A failed report changes nothing:
// the heartbeat's own failures are the ones logged.
func (w *Worker) report(ctx context.Context) {
	w.mu.Lock()
	running := len(w.running)
	w.mu.Unlock()
	draining, err := w.store.ReportWorker(ctx, jobs.WorkerReport{Worker: w.cfg.Name, Host: hostname, PID: os.Getpid(), Running: running})
	if err != nil {
		if ctx.Err() == nil {
			w.log.Debug("reporting the worker failed", "worker", w.cfg.Name, "err", err)
		}
		return
	}
	if w.draining.Swap(draining) != draining {
		if draining {
			w.log.Info("draining: claiming no more jobs; running jobs finish", "worker", w.cfg.Name, "running", running)
		} else {
			w.log.Info("drain undone: claiming jobs again", "worker", w.cfg.Name)
		}
		select {
		case w.control <- struct{}{}:
		default:
		}
	}
}

var hostname, _ = os.Hostname()

// Draining reports whether the store asked this worker to drain
// (jobs.Store.DrainWorker), as of its last report: it claims nothing,
// RunNow included, while its running jobs finish.
func (w *Worker) Draining() bool { return w.draining.Load() }

// Drained returns a channel closed once the worker is draining and runs
// no job. When the drain is undone, the worker claims again and the next
// call returns a new channel. `promptkit worker` exits on it.
func (w *Worker) Drained() <-chan struct{} {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.drained
}

// checkDrained closes drained when the worker is draining with no slot
// taken (no run, no RunNow), and makes a new one once it is undone.
func (w *Worker) checkDrained() {
	draining := w.draining.Load()
	w.mu.Lock()
	defer w.mu.Unlock()
	switch {
	case draining && !w.isDrained && len(w.slots) == 0:
		w.isDrained = true
		close(w.drained)
	case !draining && w.isDrained:
		w.isDrained = false
		w.drained = make(chan struct{})
	}
}
