package worker

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/promptkit/promptkit/internal/lifecycle"
	"github.com/promptkit/promptkit/jobs"
)

// ReclaimerConfig configures a Reclaimer.
type ReclaimerConfig struct {
	// Store holds the jobs. Required.
	Store jobs.Store
	// ReclaimAfter is the heartbeat age of a dead worker. Defaults to
	// jobs.DefaultReclaimAfter (4m).
	ReclaimAfter time.Duration
	// StuckAfter is the run time after which a dead worker's job fails as
	// stuck instead of going back to the queue. Defaults to 15m.
	StuckAfter time.Duration
	// Interval between sweeps: a dead worker's job is handed back within
	// ReclaimAfter plus Interval. It must not be negative. Defaults to a
	// tenth of ReclaimAfter.
	Interval time.Duration
	// HeartbeatInterval is the workers' heartbeat interval. After a sweep
	// failed (the store was unreachable, so were the workers' heartbeats)
	// sweeps pause until two of them have passed since the store
	// answered again: a live worker's heartbeat and finishing write land
	// first, instead of its job being reclaimed for heartbeats the outage
	// swallowed. It must not be negative. Defaults to 30s.
	HeartbeatInterval time.Duration
	// Logger receives operational messages. Defaults to slog.Default().
	Logger *slog.Logger
}

// Reclaimer hands back the jobs of workers that stopped heart-beating: to
// queued while attempts and time remain, else to failed as stuck (see
// jobs.ReclaimParams.Decide).
type Reclaimer struct {
	store    jobs.Store
	params   jobs.ReclaimParams
	interval time.Duration
	grace    time.Duration
	log      *slog.Logger
	now      func() time.Time // the wall clock; tests replace it
	// down is set while sweeps fail; resume is when sweeping resumes
	// after the store answered again. Only the loop's goroutine uses
	// them.
	down   bool
	resume time.Time
	// loop sweeps from Start until Stop.
	loop *lifecycle.Loop
}

// NewReclaimer checks cfg, fills its defaults and returns a Reclaimer.
func NewReclaimer(cfg ReclaimerConfig) (*Reclaimer, error) {
	if cfg.Store == nil {
		return nil, errors.New("worker: ReclaimerConfig.Store is required")
	}
	if cfg.Interval < 0 || cfg.HeartbeatInterval < 0 {
		return nil, fmt.Errorf("worker: ReclaimerConfig.Interval %v or HeartbeatInterval %v is negative", cfg.Interval, cfg.HeartbeatInterval)
	}
	p, err := jobs.ReclaimParams{ReclaimAfter: cfg.ReclaimAfter, StuckAfter: cfg.StuckAfter}.Normalize()
	if err != nil {
		return nil, fmt.Errorf("worker: reclaimer: %w", err)
	}
	r := &Reclaimer{store: cfg.Store, params: p, interval: cmp.Or(cfg.Interval, p.ReclaimAfter/10),
		grace: 2 * cmp.Or(cfg.HeartbeatInterval, DefaultHeartbeatInterval), log: cfg.Logger, now: time.Now}
	if r.log == nil {
		r.log = slog.Default()
	}
	r.loop = lifecycle.New(func(ctx context.Context) error {
		every(ctx, r.interval, func() { r.tick(ctx) })
		return nil
	})
	return r, nil
}

// Interval returns the time between sweeps.
func (r *Reclaimer) Interval() time.Duration { return r.interval }

// Sweep runs one reclaim pass.
func (r *Reclaimer) Sweep(ctx context.Context) (jobs.Reclaimed, error) {
	return r.store.Reclaim(ctx, r.params)
}

// Start starts sweeping, at once and then every Interval, until Stop. A
// failing sweep is logged once per outage, and after one sweeping pauses
// as HeartbeatInterval says. ctx's values reach the sweeps; its end does
// not stop them: Stop does. A Reclaimer starts once: Start returns an
// error when it was started or stopped already.
func (r *Reclaimer) Start(ctx context.Context) error { return r.loop.Start(ctx) }

// Stop stops the sweeps, cancelling the one in progress, and waits for
// it to end, for as long as ctx allows (it returns ctx's error when ctx
// ends first). It returns nil once stopped. Stopping twice, or before
// Start, is safe.
func (r *Reclaimer) Stop(ctx context.Context) error { return r.loop.Stop(ctx) }

// tick is one turn of the sweeping loop.
func (r *Reclaimer) tick(ctx context.Context) {
	if r.down {
		// Probe with the readiness check, not a sweep: a sweep now would
		// reclaim every job whose heartbeats the outage swallowed.
		if r.store.Check(ctx) != nil {
			return
		}
		r.down, r.resume = false, r.now().Add(r.grace)
		r.log.Info("reclaim: the store answers again; sweeping resumes after a grace", "grace", r.grace)
	}
	if r.now().Before(r.resume) {
		return
	}
	got, err := r.Sweep(ctx)
	switch {
	case err != nil && ctx.Err() == nil:
		r.down = true
		r.log.Warn("reclaim failed; retrying quietly until the store answers", "err", err)
	case len(got.Requeued)+len(got.Failed) > 0:
		r.log.Info("reclaimed jobs of dead workers", "requeued", len(got.Requeued), "failed_stuck", len(got.Failed))
	}
}

// every calls fn at once and then every d until ctx ends.
func every(ctx context.Context, d time.Duration, fn func()) {
	t := time.NewTicker(d)
	defer t.Stop()
	for {
		fn()
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
