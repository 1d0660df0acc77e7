// Package dispatch is the engine's one scheduler. It owns logical admission
// (how many runs may execute at once) and, per backend, the active permits
// (how many requests may be in flight at once), and it runs generation
// sequences attempt by attempt.
//
// The rule that shapes everything here: an active permit is held only while
// one attempt is in flight. It is taken immediately before dispatch and
// released before anything else happens — before recording, before any
// later wait — so a caller that is waiting never blocks a backend.
// Admission, by contrast, is held by the runner for a whole run, repairs
// included.
package dispatch

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/semaphore"

	"github.com/promptkit/promptkit/internal/llm"
	"github.com/promptkit/promptkit/internal/observe"
)

// ErrCapacity marks a run refused or interrupted by a capacity limit.
var ErrCapacity = errors.New("promptkit: capacity unavailable")

// CapacityError is returned when waiting for admission or a permit ends
// without one. It matches ErrCapacity and, through Unwrap, the context error
// that ended the wait (if any).
type CapacityError struct {
	What  string // "admission" or "backend permit"
	Cause error  // context error, or nil when refused at once
}

func (e *CapacityError) Error() string {
	msg := ErrCapacity.Error() + ": " + e.What
	if e.Cause != nil {
		msg += ": " + e.Cause.Error()
	}
	return msg
}

// Is reports ErrCapacity.
func (e *CapacityError) Is(target error) bool { return target == ErrCapacity }

// Unwrap returns the context error that ended the wait.
func (e *CapacityError) Unwrap() error { return e.Cause }

// Config sizes a Scheduler.
type Config struct {
	// MaxRuns bounds concurrently admitted runs; 0 means unlimited.
	MaxRuns int
	// MaxWaiting bounds runs waiting for admission; past it Admit fails at
	// once. 0 means unlimited.
	MaxWaiting int
	// Backends maps backend id to its max active requests; 0 is unlimited.
	Backends map[string]int
	// Now is the clock. Defaults to time.Now.
	Now func() time.Time
}

// Scheduler coordinates admission and permits. It is safe for concurrent use.
type Scheduler struct {
	now        func() time.Time
	admission  *semaphore.Weighted // nil: unlimited
	maxWaiting int64
	waiting    atomic.Int64

	mu    sync.Mutex
	pools map[string]*semaphore.Weighted // nil value: unlimited

	// onWait, set only by tests, is called just before a caller blocks.
	onWait func(what string)
}

// New returns a Scheduler for cfg.
func New(cfg Config) *Scheduler {
	s := &Scheduler{now: cfg.Now, maxWaiting: int64(cfg.MaxWaiting), pools: map[string]*semaphore.Weighted{}}
	if s.now == nil {
		s.now = time.Now
	}
	if cfg.MaxRuns > 0 {
		s.admission = semaphore.NewWeighted(int64(cfg.MaxRuns))
	}
	for id, n := range cfg.Backends {
		if n > 0 {
			s.pools[id] = semaphore.NewWeighted(int64(n))
		}
	}
	return s
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
	if s.onWait != nil {
		s.onWait("admission")
	}
	if err := s.admission.Acquire(ctx, 1); err != nil {
		return nil, s.now().Sub(start), &CapacityError{What: "admission", Cause: err}
	}
	return onceRelease(s.admission), s.now().Sub(start), nil
}

// acquire takes one active permit for backend.
func (s *Scheduler) acquire(ctx context.Context, backend string) (release func(), wait time.Duration, err error) {
	s.mu.Lock()
	pool := s.pools[backend]
	s.mu.Unlock()
	if pool == nil {
		return func() {}, 0, nil
	}
	if pool.TryAcquire(1) {
		return onceRelease(pool), 0, nil
	}
	start := s.now()
	if s.onWait != nil {
		s.onWait("backend permit")
	}
	if err := pool.Acquire(ctx, 1); err != nil {
		return nil, s.now().Sub(start), &CapacityError{What: "backend permit", Cause: err}
	}
	return onceRelease(pool), s.now().Sub(start), nil
}

func onceRelease(sem *semaphore.Weighted) func() {
	var once sync.Once
	return func() { once.Do(func() { sem.Release(1) }) }
}

// Sequence is one generation sequence: a frozen request that may be
// attempted once or, with retries, several times.
type Sequence struct {
	// Backend selects the permit pool.
	Backend string
	// Generation is 1 for the initial generation, 2 for the first repair.
	Generation uint64
	// Attempt performs exactly one attempt. It must be safe to call again.
	Attempt func(context.Context) llm.Outcome
}

// Generate runs seq and returns the outcome of its last attempt. Each attempt
// is recorded on the context's recorder after its permit is released.
func (s *Scheduler) Generate(ctx context.Context, seq Sequence) llm.Outcome {
	rec := observe.FromContext(ctx)
	out, rec1 := s.attempt(ctx, seq, 1)
	rec.RecordAttempt(rec1)
	return out
}

// attempt acquires a permit, dispatches once and releases the permit before
// returning, so the caller records and waits without holding it.
func (s *Scheduler) attempt(ctx context.Context, seq Sequence, n uint64) (llm.Outcome, observe.Attempt) {
	a := observe.Attempt{Generation: seq.Generation, Attempt: n}
	if err := ctx.Err(); err != nil {
		a.Err = err
		return llm.Outcome{Err: err}, a
	}
	release, wait, err := s.acquire(ctx, seq.Backend)
	a.CapacityWait = wait
	if err != nil {
		a.Err = err
		return llm.Outcome{Err: err}, a
	}
	defer release() // also on panic in Attempt
	if err := ctx.Err(); err != nil {
		release()
		a.Err = err
		return llm.Outcome{Err: err}, a
	}
	start := s.now()
	out := seq.Attempt(ctx)
	a.Duration = s.now().Sub(start)
	release()
	a.Dispatched = true
	a.StatusCode = out.StatusCode
	a.Usage = out.Usage
	a.Presence = out.Presence
	a.Err = out.Err
	return out, a
}
