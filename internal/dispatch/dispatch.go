// Package dispatch is the engine's one scheduler. It owns logical admission
// (how many runs may execute at once) and, per backend, everything that
// gates a request: a provider-requested pause, pacing (a configured
// requests-per-second and tokens-per-minute bound, and what the pacer
// learned from the provider's rate-limit headers and 429s) and the active
// permits (how many requests may be in flight). It runs sequences of
// attempts — a generation, or an embedding call: the loop does not look at
// what an attempt returns beyond its status — with bounded transient
// retries.
//
// The rule that shapes everything here: an active permit is held only while
// one attempt is in flight. It is taken immediately before dispatch and
// released before anything else happens — before recording, before any
// observer callback, before any backoff — so a caller that is waiting never
// blocks a backend. Admission, by contrast, is held by the runner for a
// whole run, repairs included.
package dispatch

import (
	"cmp"
	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/semaphore"
	"golang.org/x/time/rate"

	"github.com/promptkit/promptkit/internal/llm"
	"github.com/promptkit/promptkit/internal/observe"
	"github.com/promptkit/promptkit/pktype"
)

// CapacityError is returned when waiting for admission or a permit ends
// without one. It matches pktype.ErrCapacity and, through Unwrap, the context error
// that ended the wait (if any).
type CapacityError struct {
	What  string // "admission" or "backend permit"
	Cause error  // context error, or nil when refused at once
	// NotBefore is when a backend pause ends, for a wait refused because
	// it would outlast the caller's deadline; zero otherwise.
	NotBefore time.Time
}

func (e *CapacityError) Error() string {
	msg := pktype.ErrCapacity.Error() + ": " + e.What
	if e.Cause != nil {
		msg += ": " + e.Cause.Error()
	}
	return msg
}

// Is reports pktype.ErrCapacity.
func (e *CapacityError) Is(target error) bool { return target == pktype.ErrCapacity }

// Unwrap returns the context error that ended the wait.
func (e *CapacityError) Unwrap() error { return e.Cause }

// Backend sizes one backend's gate.
type Backend struct {
	// MaxActive bounds requests in flight; 0 is unlimited.
	MaxActive int
	// RequestsPerSecond paces dispatches; 0 is unpaced.
	RequestsPerSecond float64
	// TokensPerMinute paces by estimated tokens; 0 is unpaced.
	TokensPerMinute int
	// NoPause keeps a provider's Retry-After to the run that received it
	// instead of pausing the whole backend.
	NoPause bool
	// NoLearn turns off learning the provider's limit from its rate-limit
	// headers and 429s: only the configured rates pace.
	NoLearn bool
	// Cooldown is how long the backend is avoided by model groups after
	// it failed as unwell (route.go); 0 is DefaultCooldown.
	Cooldown time.Duration
}

// Config sizes a Scheduler.
type Config struct {
	// MaxRuns bounds concurrently admitted runs; 0 means unlimited.
	MaxRuns int
	// MaxWaiting bounds runs waiting for admission; past it Admit fails at
	// once. 0 means unlimited.
	MaxWaiting int
	// Backends maps backend id to its limits.
	Backends map[string]Backend

	// Test seams. Now defaults to time.Now; Jitter(n) returns a uniform
	// duration in [0, n] and defaults to math/rand; Wait blocks for d or
	// until ctx ends and defaults to a timer.
	Now    func() time.Time
	Jitter func(n time.Duration) time.Duration
	Wait   func(ctx context.Context, d time.Duration) error
}

// pacingMargin is the share of a configured requests-per-second rate that
// the pacer actually uses.
const pacingMargin = 0.98

// Scheduler coordinates admission and backends. It is safe for concurrent
// use.
type Scheduler struct {
	now    func() time.Time
	jitter func(time.Duration) time.Duration
	wait   func(context.Context, time.Duration) error

	admission  *semaphore.Weighted // nil: unlimited
	maxWaiting int64
	waiting    atomic.Int64

	gates map[string]*gate // fixed after New

	// groupsMu guards groups: each model group's round-robin state, by
	// Sequence.Group.
	groupsMu sync.Mutex
	groups   map[string]*rrState

	// onWait, set only by tests, is called just before a caller blocks.
	onWait func(what string)

	// Sharing (share.go): peer is set once Share runs; news is closed to
	// wake its loop.
	shareMu     sync.Mutex
	peer        string
	news        chan struct{}
	newsPending bool        // a wake not yet taken by the loop
	shareOn     atomic.Bool // peer is set
}

// gate is one backend's pause, pacing and permits.
type gate struct {
	permits  *semaphore.Weighted // nil: unlimited
	requests *rate.Limiter       // nil: unpaced
	tokens   *rate.Limiter       // nil: unpaced
	learn    *learner

	noPause   bool
	rps       float64 // configured, for Pacing
	tpm       int
	maxActive int           // 0: unlimited
	cooldown  time.Duration // after an unwell failure (route.go)
	// active counts attempts holding a permit: a model group prefers a
	// backend with one free.
	active atomic.Int64

	mu          sync.Mutex
	pausedUntil time.Time
	pauseNews   bool // pausedUntil not yet published (share.go)
	// held: an operator's hold, adopted from the shared state (share.go):
	// callers wait, and model groups skip the backend, until it ends.
	held   bool
	health health
	// changed is closed, and replaced, when a pause begins or the
	// learned rate is cut: callers waiting for pacing look again instead
	// of leaving on a reservation made at the old rate.
	changed chan struct{}

	// Sharing (share.go): demand counts callers waiting for the backend
	// or in flight on it, peak its highest since the last heartbeat,
	// published the demand last published, others the other processes'.
	demand, peak, published, others atomic.Int64
}

// changes returns the channel closed on the backend's next change.
func (g *gate) changes() <-chan struct{} {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.changed == nil {
		g.changed = make(chan struct{})
	}
	return g.changed
}

// change wakes the callers waiting for pacing. Callers hold mu.
func (g *gate) change() {
	if g.changed != nil {
		close(g.changed)
		g.changed = nil
	}
}

// cut wakes the callers waiting for pacing after the learned rate was
// cut.
func (g *gate) cut() {
	g.mu.Lock()
	g.change()
	g.mu.Unlock()
}

// share is this process's part of the backend's rates now; 1 alone.
func (g *gate) share() float64 {
	return share(g.published.Load(), g.demand.Load(), int(g.others.Load()))
}

// enter counts a caller in g's demand until the returned func is called.
// Demand that grew well past what was published wakes the sharing loop.
func (s *Scheduler) enter(g *gate) (leave func()) {
	d := g.demand.Add(1)
	for {
		p := g.peak.Load()
		if d <= p || g.peak.CompareAndSwap(p, d) {
			break
		}
	}
	if s.shareOn.Load() && grown(d, g.published.Load()) {
		s.wake()
	}
	return func() { g.demand.Add(-1) }
}

// setRate sets lim's rate to r × sh, when it differs.
func setRate(lim *rate.Limiter, now time.Time, r, sh float64) {
	if lim == nil {
		return
	}
	if want := rate.Limit(scaled(r, sh)); lim.Limit() != want {
		lim.SetLimitAt(now, want)
	}
}

// New returns a Scheduler for cfg.
func New(cfg Config) *Scheduler {
	s := &Scheduler{
		now:        cfg.Now,
		jitter:     cfg.Jitter,
		wait:       cfg.Wait,
		maxWaiting: int64(cfg.MaxWaiting),
		gates:      map[string]*gate{},
		groups:     map[string]*rrState{},
	}
	if s.now == nil {
		s.now = time.Now
	}
	if s.jitter == nil {
		s.jitter = func(n time.Duration) time.Duration { return time.Duration(rand.Int64N(int64(n) + 1)) }
	}
	if s.wait == nil {
		s.wait = timerWait
	}
	if cfg.MaxRuns > 0 {
		s.admission = semaphore.NewWeighted(int64(cfg.MaxRuns))
	}
	for id, b := range cfg.Backends {
		g := &gate{noPause: b.NoPause, rps: b.RequestsPerSecond, tpm: b.TokensPerMinute,
			maxActive: b.MaxActive, cooldown: cmp.Or(b.Cooldown, DefaultCooldown),
			learn: newLearner(b.NoLearn, b.RequestsPerSecond*pacingMargin)}
		if b.MaxActive > 0 {
			g.permits = semaphore.NewWeighted(int64(b.MaxActive))
		}
		if b.RequestsPerSecond > 0 {
			// Burst 1 spaces requests evenly. The margin absorbs the
			// scheduling jitter between reservation and arrival: at exactly
			// the limit, a provider counting fixed one-second windows sees
			// an occasional 101st request (BENCHMARKS.md, goodput).
			g.requests = rate.NewLimiter(rate.Limit(b.RequestsPerSecond*pacingMargin), 1)
		}
		if b.TokensPerMinute > 0 {
			g.tokens = rate.NewLimiter(rate.Limit(float64(b.TokensPerMinute)/60), b.TokensPerMinute)
		}
		s.gates[id] = g
	}
	return s
}

func timerWait(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// Admit takes one unit of logical admission for a run. The returned release
// is idempotent. wait is how long the run waited.
func (s *Scheduler) Admit(ctx context.Context) (release func(), wait time.Duration, err error) {
	if err := ctx.Err(); err != nil {
		return nil, 0, err
	}
	if s.admission == nil {
		return func() {}, 0, nil
	}
	if s.admission.TryAcquire(1) {
		return onceRelease(s.admission), 0, nil
	}
	if n := s.waiting.Add(1); s.maxWaiting > 0 && n > s.maxWaiting {
		s.waiting.Add(-1)
		return nil, 0, &CapacityError{What: "admission queue full"}
	}
	defer s.waiting.Add(-1)
	start := s.now()
	s.signalWait("admission")
	if err := s.admission.Acquire(ctx, 1); err != nil {
		return nil, s.now().Sub(start), &CapacityError{What: "admission", Cause: err}
	}
	return onceRelease(s.admission), s.now().Sub(start), nil
}

func (s *Scheduler) signalWait(what string) {
	if s.onWait != nil {
		s.onWait(what)
	}
}

// Pacing reports, per backend, the rate its pacer follows now.
func (s *Scheduler) Pacing() map[string]Pacing {
	now := s.now()
	m := make(map[string]Pacing, len(s.gates))
	for id, g := range s.gates {
		p := g.learn.pacing(now, g.rps, g.tpm)
		if p.Shared {
			p.Share = g.share()
		}
		if u := g.until(); u.After(now) {
			p.PausedUntil = u
		}
		g.mu.Lock()
		p.Held = g.held
		if g.health.coolUntil.After(now) {
			p.CooldownUntil = g.health.coolUntil
		}
		p.Unwell = g.health.unwell
		g.mu.Unlock()
		m[id] = p
	}
	return m
}

// ticket is one acquired dispatch: its permit and what it spent of the
// header budgets.
type ticket struct {
	release          func()
	reqCost, tokCost int64
}

// acquire waits for the backend's pause to end, for pacing (configured,
// then learned), for the provider's header budgets and for an active
// permit, in that order, re-checking the pause after a permit wait (a
// pause may have begun meanwhile). tokens is the attempt's estimated token
// cost for tokens-per-minute pacing and token budgets.
func (s *Scheduler) acquire(ctx context.Context, backend string, tokens int, noWaitPastDeadline bool) (release func(), err error) {
	t, err := s.acquireTicket(ctx, backend, tokens, waitLimit{refuse: noWaitPastDeadline})
	return t.release, err
}

// waitLimit says which waits a caller refuses to make, failing at once
// instead: with refuse, one that would end after ctx's deadline or, when
// set, after until.
type waitLimit struct {
	refuse bool
	until  time.Time
}

// past reports whether a wait ending at t is refused.
func (w waitLimit) past(ctx context.Context, t time.Time) bool {
	return w.refuse && (!w.until.IsZero() && t.After(w.until) || pastDeadline(ctx, t))
}

func (s *Scheduler) acquireTicket(ctx context.Context, backend string, tokens int, limit waitLimit) (ticket, error) {
	g := s.gates[backend]
	if g == nil {
		return ticket{release: func() {}}, nil
	}
	for {
		if err := ctx.Err(); err != nil {
			return ticket{}, &CapacityError{What: "backend permit", Cause: err}
		}
		// Taken before the checks: a pause or cut after them ends the
		// pacing waits below.
		changed := g.changes()
		if g.isHeld() {
			// An operator's hold has no known end: wait for its release
			// (adopt closes changed), however long.
			s.signalWait("backend held")
			select {
			case <-ctx.Done():
				return ticket{}, &CapacityError{What: "backend held", Cause: ctx.Err()}
			case <-changed:
			}
			continue
		}
		if d := g.pauseLeft(s.now()); d > 0 {
			if until := g.until(); limit.past(ctx, until) {
				return ticket{}, &CapacityError{What: "backend pause outlasts the deadline", NotBefore: until}
			}
			s.signalWait("backend pause")
			if err := s.wait(ctx, d); err != nil {
				return ticket{}, &CapacityError{What: "backend pause", Cause: err}
			}
			continue
		}
		// This process's share of the backend's rates (1 unless shared
		// with other processes: share.go).
		sh := g.share()
		setRate(g.requests, s.now(), g.rps*pacingMargin, sh)
		setRate(g.tokens, s.now(), float64(g.tpm)/60, sh)
		// The configured rates keep their reservations (a limiter cannot
		// return many in any order): a pause that began meanwhile is
		// checked after them.
		if _, err := s.pace(ctx, g.requests, 1, nil); err != nil {
			return ticket{}, err
		}
		if _, err := s.pace(ctx, g.tokens, tokens, nil); err != nil {
			return ticket{}, err
		}
		// The learned rate, with burst 1: after a pause, callers leave at
		// that rate instead of all at once. A pause or a cut ends the
		// wait, and restarts the limiter (learner.restart).
		if again, err := s.pace(ctx, g.learn.sync(s.now(), sh), 1, changed); err != nil || again {
			if err != nil {
				return ticket{}, err
			}
			continue
		}
		if g.pauseLeft(s.now()) > 0 {
			continue // a pause began while we waited: honour it
		}
		now := s.now()
		d, answered, reqCost, tokCost := g.learn.take(now, tokens, sh)
		if d > 0 {
			// The provider's header budget is spent until its reset, or
			// held by attempts in flight until one answers.
			if until := now.Add(d); answered == nil && limit.past(ctx, until) {
				return ticket{}, &CapacityError{What: "backend rate limit outlasts the deadline", NotBefore: until}
			}
			s.signalWait("backend budget")
			if err := s.waitOr(ctx, d, answered); err != nil {
				return ticket{}, &CapacityError{What: "backend budget", Cause: err}
			}
			continue
		}
		t := ticket{release: func() {}, reqCost: reqCost, tokCost: tokCost}
		if g.permits == nil {
			return t, nil
		}
		if !g.permits.TryAcquire(1) {
			s.signalWait("backend permit")
			if err := g.permits.Acquire(ctx, 1); err != nil {
				g.learn.abandon(reqCost, tokCost)
				return ticket{}, &CapacityError{What: "backend permit", Cause: err}
			}
		}
		t.release = onceRelease(g.permits)
		if g.pauseLeft(s.now()) > 0 || g.isHeld() {
			t.release() // a pause or hold began while we waited: honour it
			g.learn.abandon(reqCost, tokCost)
			continue
		}
		return t, nil
	}
}

// waitOr waits for d, or until early is closed (nil: never).
func (s *Scheduler) waitOr(ctx context.Context, d time.Duration, early <-chan struct{}) error {
	if early == nil {
		return s.wait(ctx, d)
	}
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() { // ends when wctx does, at the latest when waitOr returns
		select {
		case <-early:
			cancel()
		case <-wctx.Done():
		}
	}()
	if err := s.wait(wctx, d); err != nil && ctx.Err() != nil {
		return ctx.Err()
	}
	return nil
}

// pace waits for n tokens from lim; a canceled wait returns its tokens.
// When changed is closed first (a pause began, or the rate was cut), it
// returns them too, and again: the caller looks again.
func (s *Scheduler) pace(ctx context.Context, lim *rate.Limiter, n int, changed <-chan struct{}) (again bool, err error) {
	if lim == nil || n <= 0 {
		return false, nil
	}
	n = min(n, lim.Burst())
	now := s.now()
	r := lim.ReserveN(now, n)
	d := r.DelayFrom(now)
	if d <= 0 {
		return false, nil
	}
	s.signalWait("backend pacing")
	if err := s.waitOr(ctx, d, changed); err != nil {
		r.CancelAt(s.now())
		return false, &CapacityError{What: "backend pacing", Cause: err}
	}
	select {
	case <-changed:
		if r.DelayFrom(s.now()) > 0 {
			r.CancelAt(s.now())
			return true, nil
		}
	default:
	}
	return false, nil
}

// charge consumes tokens the estimate missed, so the next requests wait
// for them; it never blocks.
func (s *Scheduler) charge(backend string, extra int) {
	if g := s.gates[backend]; g != nil && g.tokens != nil && extra > 0 {
		g.tokens.ReserveN(s.now(), min(extra, g.tokens.Burst()))
	}
}

func (g *gate) until() time.Time {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.pausedUntil
}

func (g *gate) pauseLeft(now time.Time) time.Duration { return g.until().Sub(now) }

func (g *gate) isHeld() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.held
}

// Held reports whether an operator holds backend (State.Held), as last
// read from the shared state; false for an unknown backend.
func (s *Scheduler) Held(backend string) bool {
	g := s.gates[backend]
	return g != nil && g.isHeld()
}

// pause makes every caller of the backend wait until t.
func (s *Scheduler) pause(backend string, t time.Time) {
	g := s.gates[backend]
	if g == nil || g.noPause {
		return
	}
	g.mu.Lock()
	news := false
	if t.After(g.pausedUntil) {
		g.pausedUntil = t
		g.pauseNews, news = true, true
		g.change()
	}
	g.mu.Unlock()
	if news {
		g.learn.restart()
		s.wake()
	}
}

func onceRelease(sem *semaphore.Weighted) func() {
	var once sync.Once
	return func() { once.Do(func() { sem.Release(1) }) }
}

// Sequence is one generation sequence (or embedding call): a frozen
// request attempted once and, when Retries > 0, again after
// retry-eligible failures.
type Sequence struct {
	// Backend selects the gate.
	Backend string
	// Routes, when set, replace Backend and Attempt: a model group, whose
	// every attempt chooses its backend (route.go). Group names the
	// group's round-robin state: sequences of one group share it.
	Routes []Route
	Group  string
	// Generation is 1 for the initial generation, 2 for the first repair.
	Generation uint64
	// Retries is the transient retry budget R: up to R+1 attempts.
	// Injected clients get 0: their own policy owns retries.
	Retries uint64
	// Tokens estimates one attempt's token cost for tokens-per-minute
	// pacing.
	Tokens int
	// NoWaitPastDeadline returns a failure at once, instead of waiting,
	// when a retry wait or a backend pause would end after ctx's deadline,
	// or after WaitDeadline when that is set.
	NoWaitPastDeadline bool
	WaitDeadline       time.Time
	// Before, if set, is called before each attempt, before a backend is
	// chosen or waited for; its error ends the sequence, no call made.
	Before func(context.Context) error
	// Attempt performs exactly one attempt on Backend. It must be safe to
	// call again.
	Attempt func(context.Context) llm.Outcome
	// Recorder receives every attempt and retry wait, with no permit
	// held. Nil records nothing.
	Recorder *observe.Recorder
}

// Backoff returns the local delay before retry k (k >= 1): equal jitter in
// [base/2, base] with base = min(500ms × 2^(k-1), 8s).
func (s *Scheduler) Backoff(k uint64) time.Duration {
	const first, ceiling = 500 * time.Millisecond, 8 * time.Second
	base := first
	// Cap before doubling: no shift can overflow.
	for i := uint64(1); i < k && base < ceiling; i++ {
		base *= 2
	}
	base = min(base, ceiling)
	half := base / 2
	return half + min(max(s.jitter(half), 0), half)
}

// Generate runs seq and returns the outcome that ends it: the first
// success, the first failure that is not retry-eligible, a stopped
// context, seq.Before's error (no attempt then), or — when all R+1 attempts (R > 0) failed with eligible
// statuses — the last failure wrapped in *pktype.RetryExhaustedError.
// The outcome's Backend is the backend of its attempt.
//
// Each attempt and each retry wait is recorded on seq.Recorder with no
// permit held. A provider not-before time (Retry-After on 429 or
// 503) pauses the whole backend until then. With Routes, every attempt
// chooses its backend, a failure saying the backend is unwell (a 5xx, a
// transport failure) is retry-eligible while another backend is
// available, and a retry that goes to another backend at once does not
// wait.
func (s *Scheduler) Generate(ctx context.Context, seq Sequence) llm.Outcome {
	rec := seq.Recorder
	for n := uint64(1); ; n++ {
		if seq.Before != nil {
			if err := seq.Before(ctx); err != nil {
				return llm.Outcome{Err: err}
			}
		}
		rt, probe := s.choose(seq)
		out, a := s.attempt(ctx, seq, rt, probe, n)
		rec.RecordAttempt(a)
		if out.Err == nil || !a.Dispatched {
			return out
		}
		moved := s.elsewhere(seq, rt.Backend)
		if !(pktype.RetryableStatus(out.StatusCode) && isStatus(out.Err)) && !(moved && unwell(ctx, out)) {
			return out
		}
		// n counts dispatched attempts (n <= R means a retry is left); a
		// uint64 comparison cannot overflow whatever R is.
		if n > seq.Retries {
			if seq.Retries == 0 {
				return out
			}
			if out.StatusCode == 429 {
				s.cool(rt.Backend) // still limited after every retry: try others
			}
			out.Err = pktype.NewRetryExhaustedError(n, out.Err)
			return out
		}
		if err := ctx.Err(); err != nil {
			return llm.Outcome{Err: err}
		}
		if moved {
			continue // another backend takes the retry now
		}
		now := s.now()
		until := now.Add(s.Backoff(n))
		if out.NotBefore.After(until) {
			until = out.NotBefore // the provider's minimum is never capped
		}
		if seq.limit().past(ctx, until) {
			return out // the caller comes back later, at out.NotBefore
		}
		start := now
		err := s.wait(ctx, until.Sub(now))
		rec.RecordDelay(seq.Generation, n, s.now().Sub(start))
		if err != nil {
			return llm.Outcome{Err: err}
		}
	}
}

// limit is the waits seq refuses.
func (seq Sequence) limit() waitLimit {
	return waitLimit{refuse: seq.NoWaitPastDeadline, until: seq.WaitDeadline}
}

// pastDeadline reports whether t is after ctx's deadline.
func pastDeadline(ctx context.Context, t time.Time) bool {
	d, ok := ctx.Deadline()
	return ok && t.After(d)
}

func isStatus(err error) bool {
	var ge *pktype.GenerationError
	return errors.As(err, &ge)
}

// attempt acquires a permit on rt's backend, dispatches once and releases
// the permit before returning, so the caller records and waits without
// holding it. It settles the backend's health (route.go), releasing the
// half-open probe the attempt holds, if any, also when Attempt panics.
func (s *Scheduler) attempt(ctx context.Context, seq Sequence, rt Route, probe bool, n uint64) (out llm.Outcome, a observe.Attempt) {
	a = observe.Attempt{Generation: seq.Generation, Attempt: n, Backend: rt.Backend}
	settled := false
	defer func() {
		if !settled {
			s.settle(ctx, rt.Backend, probe, false, llm.Outcome{})
		}
	}()
	fail := func(err error) (llm.Outcome, observe.Attempt) {
		a.Failure = pktype.Classify(err)
		return llm.Outcome{Err: err, Backend: rt.Backend}, a
	}
	if err := ctx.Err(); err != nil {
		return fail(err)
	}
	g := s.gates[rt.Backend]
	if g != nil {
		defer s.enter(g)()
	}
	start := s.now()
	tk, err := s.acquireTicket(ctx, rt.Backend, seq.Tokens, seq.limit())
	a.CapacityWait = s.now().Sub(start)
	if err != nil {
		return fail(err)
	}
	release := tk.release
	if g != nil {
		g.active.Add(1)
		release = sync.OnceFunc(func() { g.active.Add(-1); tk.release() })
	}
	defer release() // also when Attempt panics
	if err := ctx.Err(); err != nil {
		release()
		if g != nil {
			g.learn.abandon(tk.reqCost, tk.tokCost)
		}
		return fail(err)
	}
	start = s.now()
	answered := false
	if g != nil {
		g.learn.dispatched(start)
		defer func() {
			if !answered { // Attempt panicked: what it spent is not in flight
				g.learn.abandon(tk.reqCost, tk.tokCost)
			}
		}()
	}
	out = rt.Attempt(ctx)
	out.Backend = rt.Backend
	answered = true
	a.Duration = s.now().Sub(start)
	if !out.FirstDelta.IsZero() {
		a.FirstDelta = out.FirstDelta.Sub(start)
	}
	// Learn, pause and charge before the permit goes, so a caller waiting
	// for it already sees them.
	if g != nil {
		news, cut := g.learn.observe(out, start, s.now(), tk.reqCost, tk.tokCost, g.share())
		if cut {
			g.cut()
		}
		if news {
			s.wake() // a new rate to publish
		}
	}
	if out.Err != nil && !out.NotBefore.IsZero() && (out.StatusCode == 429 || out.StatusCode == 503) {
		s.pause(rt.Backend, out.NotBefore)
	}
	if out.Presence.TotalTokens && out.Usage.TotalTokens > seq.Tokens {
		s.charge(rt.Backend, out.Usage.TotalTokens-seq.Tokens)
	}
	s.settle(ctx, rt.Backend, probe, true, out)
	settled = true
	release()
	a.Dispatched = true
	a.StatusCode = out.StatusCode
	a.Usage = out.Usage
	a.Presence = out.Presence
	a.Failure = pktype.Classify(out.Err)
	return out, a
}
