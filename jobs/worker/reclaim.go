package worker

import (
	"context"
	"log/slog"
	"time"

	"github.com/promptkit/promptkit/jobs"
)

// Reclaimer periodically hands back jobs whose worker stopped
// heart-beating (seed §8): to queued while attempts and time remain, else
// to failed as stuck.
type Reclaimer struct {
	Store jobs.Store
	// Interval between sweeps. Defaults to 1 minute.
	Interval time.Duration
	// ReclaimAfter is the heartbeat age of a dead worker. Defaults to 5m.
	ReclaimAfter time.Duration
	// StuckAfter is the run time after which a dead worker's job fails.
	// Defaults to 15m.
	StuckAfter time.Duration
	// Logger defaults to slog.Default().
	Logger *slog.Logger
}

// Sweep runs one reclaim pass.
func (r *Reclaimer) Sweep(ctx context.Context) (jobs.Reclaimed, error) {
	return r.Store.Reclaim(ctx, jobs.ReclaimParams{ReclaimAfter: or(r.ReclaimAfter, 5*time.Minute), StuckAfter: or(r.StuckAfter, 15*time.Minute)})
}

// Run sweeps every Interval until ctx ends.
func (r *Reclaimer) Run(ctx context.Context) {
	log := r.Logger
	if log == nil {
		log = slog.Default()
	}
	t := time.NewTicker(or(r.Interval, time.Minute))
	defer t.Stop()
	for {
		if got, err := r.Sweep(ctx); err != nil && ctx.Err() == nil {
			log.Warn("reclaim failed", "err", err)
		} else if n := len(got.Requeued) + len(got.Failed); n > 0 {
			log.Info("reclaimed jobs of dead workers", "requeued", len(got.Requeued), "failed_stuck", len(got.Failed))
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func or(d, def time.Duration) time.Duration {
	if d > 0 {
		return d
	}
	return def
}
