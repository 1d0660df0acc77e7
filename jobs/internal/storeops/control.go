package storeops

import (
	"context"
	"time"

	"github.com/promptkit/promptkit/jobs"
)

// PauseOrg sets or clears the pause of an org's queue. See jobs.Store.
func (o Ops) PauseOrg(ctx context.Context, org string, paused bool) (jobs.Limit, error) {
	org, err := jobs.NormalizeOrg(org)
	if err != nil {
		return jobs.Limit{}, o.fail("pause org", err)
	}
	out, err := o.db.LimitPause(ctx, org, paused)
	o.db.Wrote(ctx, "pause org", err, err == nil)
	if err != nil {
		return jobs.Limit{}, o.fail("pause org", err)
	}
	if !paused {
		// Its queued jobs are claimable again: wake the idle workers.
		o.db.Changed()
	}
	return out, nil
}

// HoldBackend sets or clears an operator's hold on a backend. See
// jobs.Store.
func (o Ops) HoldBackend(ctx context.Context, backend string, held bool) error {
	backend, err := jobs.NormalizeBackend(backend)
	if err != nil {
		return o.fail("hold backend", err)
	}
	err = o.db.PacingHold(ctx, backend, held)
	o.db.Wrote(ctx, "hold backend", err, err == nil)
	if err != nil {
		return o.fail("hold backend", err)
	}
	o.db.Changed()
	return nil
}

// ReportWorker records a worker's beat. See jobs.Store.
func (o Ops) ReportWorker(ctx context.Context, r jobs.WorkerReport) (bool, error) {
	r, err := r.Normalize()
	if err != nil {
		return false, o.fail("report worker", err)
	}
	draining, err := o.db.WorkerUpsert(ctx, r)
	o.db.Wrote(ctx, "report worker", err, err == nil)
	if err != nil {
		return false, o.fail("report worker", err)
	}
	return draining, nil
}

// Workers lists the workers seen at or after seenSince. See jobs.Store.
func (o Ops) Workers(ctx context.Context, seenSince time.Time) ([]jobs.WorkerInfo, error) {
	out, err := o.db.WorkerList(ctx, seenSince)
	if err != nil {
		return nil, o.fail("workers", err)
	}
	return out, nil
}

// DrainWorker asks a worker to drain, or undoes it. See jobs.Store.
func (o Ops) DrainWorker(ctx context.Context, worker string, drain bool) (jobs.WorkerInfo, error) {
	out, err := o.db.WorkerDrain(ctx, worker, drain)
	o.db.Wrote(ctx, "drain worker", err, err == nil)
	if err != nil {
		return jobs.WorkerInfo{}, o.fail("drain worker", err)
	}
	return out, nil
}
