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

// ArchiverConfig configures an Archiver.
type ArchiverConfig struct {
	// Store holds the jobs. Required.
	Store jobs.Store
	// After is the age of a finished job at which it is archived: deleted
	// with its events and response. Required (positive); 720h (30 days)
	// is a common choice.
	After time.Duration
	// Interval between passes. It must not be negative. Defaults to an
	// hour, or After if shorter.
	Interval time.Duration
	// Logger receives operational messages. Defaults to slog.Default().
	Logger *slog.Logger
	// Now is the clock. Defaults to time.Now.
	Now func() time.Time
}

// Archiver deletes finished jobs once they are older than After.
type Archiver struct {
	cfg ArchiverConfig
	// loop archives from Start until Stop.
	loop *lifecycle.Loop
}

// NewArchiver checks cfg, fills its defaults and returns an Archiver.
func NewArchiver(cfg ArchiverConfig) (*Archiver, error) {
	switch {
	case cfg.Store == nil:
		return nil, errors.New("worker: ArchiverConfig.Store is required")
	case cfg.After <= 0:
		return nil, fmt.Errorf("worker: ArchiverConfig.After %v must be positive", cfg.After)
	case cfg.Interval < 0:
		return nil, fmt.Errorf("worker: ArchiverConfig.Interval %v is negative", cfg.Interval)
	}
	cfg.Interval = cmp.Or(cfg.Interval, min(time.Hour, cfg.After))
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	a := &Archiver{cfg: cfg}
	a.loop = lifecycle.New(func(ctx context.Context) error {
		every(ctx, a.cfg.Interval, func() { a.pass(ctx) })
		return nil
	})
	return a, nil
}

// Archive runs one pass: it deletes the jobs that finished more than
// After ago and returns how many.
func (a *Archiver) Archive(ctx context.Context) (int, error) {
	return a.cfg.Store.Archive(ctx, a.cfg.Now().Add(-a.cfg.After))
}

// Start starts archiving, at once and then every Interval, until Stop. A
// failing pass is logged and tried again at the next. ctx's values reach
// the passes; its end does not stop them: Stop does. An Archiver starts
// once: Start returns an error when it was started or stopped already.
func (a *Archiver) Start(ctx context.Context) error { return a.loop.Start(ctx) }

// Stop stops archiving, cancelling the pass in progress, and waits for
// it to end, for as long as ctx allows (it returns ctx's error when ctx
// ends first). It returns nil once stopped. Stopping twice, or before
// Start, is safe.
func (a *Archiver) Stop(ctx context.Context) error { return a.loop.Stop(ctx) }

// pass is one turn of the archiving loop.
func (a *Archiver) pass(ctx context.Context) {
	if n, err := a.Archive(ctx); err != nil && ctx.Err() == nil {
		a.cfg.Logger.Warn("archiving failed", "archived", n, "err", err)
	} else if n > 0 {
		a.cfg.Logger.Info("archived finished jobs", "jobs", n)
	}
}
