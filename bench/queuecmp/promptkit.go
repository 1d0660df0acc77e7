package main

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/promptkit/promptkit/bench/internal/benchkit"
	"github.com/promptkit/promptkit/jobs"
)

// promptkitSystem is our job store (jobs/pgstore, jobs/sqlitestore),
// driven directly: no engine, no HTTP. Without dispatch every worker
// claims for itself; with dispatch one claimer per process feeds the
// workers, as jobs/worker and River's producer do: it claims up to the
// free worker slots (at most 100) at a time.
type promptkitSystem struct{ dispatch bool }

func (s promptkitSystem) Name() string {
	if s.dispatch {
		return "promptkit-1claimer"
	}
	return "promptkit"
}

func (s promptkitSystem) Open(ctx context.Context, e *env, db string) (instance, error) {
	switch db {
	case dbPostgres:
		schema, drop, err := benchkit.NewSchema(ctx, e.pgURL, "qc_pk")
		if err != nil {
			return nil, err
		}
		st, err := openPGStore(ctx, searchPath(e.pgURL, schema))
		if err != nil {
			drop()
			return nil, err
		}
		url := searchPath(e.pgURL, schema)
		return &pkInstance{store: st, claimLimit: e.opts.ClaimLimit, dispatch: s.dispatch, describe: pgStoreSetup, cleanup: func() error {
			err := st.Close()
			return errors.Join(err, drop())
		}, openPeer: func(ctx context.Context) (jobs.Store, error) { return openPGStore(ctx, url) }}, nil
	case dbSQLite:
		path, remove, err := e.newSQLiteFile("pk")
		if err != nil {
			return nil, err
		}
		st, err := openSQLiteStore(ctx, path)
		if err != nil {
			remove()
			return nil, err
		}
		return &pkInstance{store: st, claimLimit: e.opts.ClaimLimit, dispatch: s.dispatch, describe: sqliteStoreSetup, cleanup: func() error {
			err := st.Close()
			return errors.Join(err, remove())
		}}, nil
	}
	return nil, fmt.Errorf("unknown database %q", db)
}

type pkInstance struct {
	store      jobs.Store
	claimLimit int
	dispatch   bool
	describe   string
	cleanup    func() error
	// openPeer opens a second handle on the same queue (PostgreSQL only).
	openPeer func(context.Context) (jobs.Store, error)
}

func (p *pkInstance) Describe() string { return p.describe }

func noopParams() jobs.EnqueueParams {
	return jobs.EnqueueParams{OrgID: "bench", CreatedBy: "bench", Text: "noop"}
}

func (p *pkInstance) Insert(ctx context.Context, n, batch int) error {
	ps := make([]jobs.EnqueueParams, batch)
	for i := range ps {
		ps[i] = noopParams()
	}
	for done := 0; done < n; {
		k := min(batch, n-done)
		res, err := p.store.EnqueueBatch(ctx, ps[:k])
		if err != nil {
			return err
		}
		if len(res) != k {
			return fmt.Errorf("EnqueueBatch returned %d results for %d jobs", len(res), k)
		}
		done += k
	}
	return nil
}

// Work: each of workers goroutines loops Claim(Limit) → Succeed for each
// claimed job until n jobs have succeeded. A worker whose claim comes back
// empty waits 1 ms (River's FetchCooldown here) before the next.
func (p *pkInstance) Work(ctx context.Context, n, workers int) error {
	var done atomic.Int64
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	if p.dispatch {
		p.dispatchLoop(ctx, p.store, cancel, workers, nil, func(k int) {
			if done.Add(int64(k)) >= int64(n) {
				cancel(nil)
			}
		})
		if got := done.Load(); got < int64(n) {
			return fmt.Errorf("%d of %d succeeded: %w", got, n, context.Cause(ctx))
		}
		return nil
	}
	var wg sync.WaitGroup
	for i := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			worker := "bench-" + strconv.Itoa(i)
			for done.Load() < int64(n) && ctx.Err() == nil {
				js, err := p.store.Claim(ctx, jobs.ClaimParams{Worker: worker, Limit: p.claimLimit})
				if err != nil {
					cancel(fmt.Errorf("claim: %w", err))
					return
				}
				if len(js) == 0 {
					sleepCtx(ctx, time.Millisecond)
					continue
				}
				for _, j := range js {
					if _, err := p.store.Succeed(ctx, jobs.SucceedParams{JobID: j.ID, Worker: worker, Answer: jobs.Answer{Output: "ok"}}); err != nil {
						cancel(fmt.Errorf("succeed: %w", err))
						return
					}
				}
				if done.Add(int64(len(js))) >= int64(n) {
					cancel(nil)
				}
			}
		}()
	}
	wg.Wait()
	if got := done.Load(); got < int64(n) {
		return fmt.Errorf("%d of %d succeeded: %w", got, n, context.Cause(ctx))
	}
	return nil
}

func sleepCtx(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}

// Steady: the same worker loop, but an idle worker waits for the store's
// Notify (or 1 s, River's FetchPollInterval default), then at least 1 ms.
// With sp.Cross the workers run on a second store handle.
func (p *pkInstance) Steady(ctx context.Context, sp steadyParams) (steadyResult, error) {
	rec := newSteadyRecorder()
	ws := p.store
	if sp.Cross {
		if p.openPeer == nil {
			return steadyResult{}, errors.New("no second handle on this database")
		}
		peer, err := p.openPeer(ctx)
		if err != nil {
			return steadyResult{}, fmt.Errorf("second handle: %w", err)
		}
		defer peer.Close()
		ws = peer
	}
	wctx, cancel := context.WithCancelCause(ctx)
	var wg sync.WaitGroup
	if p.dispatch {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p.dispatchLoop(wctx, ws, cancel, sp.Workers, rec, nil)
		}()
	}
	for i := range sp.Workers {
		if p.dispatch {
			break
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			worker := "steady-" + strconv.Itoa(i)
			wake := ws.Notifier().Notify(wctx)
			for wctx.Err() == nil {
				js, err := ws.Claim(wctx, jobs.ClaimParams{Worker: worker, Limit: p.claimLimit})
				if err != nil {
					if wctx.Err() == nil {
						cancel(fmt.Errorf("claim: %w", err))
					}
					return
				}
				if len(js) == 0 {
					t := time.NewTimer(time.Second)
					select {
					case <-wake:
					case <-t.C:
					case <-wctx.Done():
					}
					t.Stop()
					sleepCtx(wctx, time.Millisecond)
					continue
				}
				for _, j := range js {
					rec.started(j.AvailableAt.UnixNano())
					if _, err := ws.Succeed(wctx, jobs.SucceedParams{JobID: j.ID, Worker: worker, Answer: jobs.Answer{Output: "ok"}}); err != nil {
						if wctx.Err() == nil {
							cancel(fmt.Errorf("succeed: %w", err))
						}
						return
					}
				}
			}
		}()
	}
	res, err := rec.run(ctx, sp, func(ctx context.Context, t0 time.Time) error {
		// The enqueue time travels as the job's not-before time: the job
		// is available from then on, and the claimer reads it back.
		ep := noopParams()
		ep.AvailableAt = t0
		_, err := p.store.Enqueue(ctx, ep)
		return err
	})
	werr := context.Cause(wctx)
	cancel(nil)
	wg.Wait()
	if err == nil && werr != nil {
		err = werr
	}
	return res, err
}

// dispatchLoop is one claimer feeding workers goroutines: it claims up to
// the free slots (at most 100), waits for a wake-up (or 1 s) when the queue
// is empty, and leaves at least 1 ms between claims.
//
// rec (steady state) records start latencies; succeeded, if non-nil, is
// told of each finished job.
func (p *pkInstance) dispatchLoop(ctx context.Context, st jobs.Store, cancel context.CancelCauseFunc, workers int, rec *steadyRecorder, succeeded func(int)) {
	const worker = "steady-dispatch"
	slots := make(chan struct{}, workers)
	var wg sync.WaitGroup
	defer wg.Wait()
	wake := st.Notifier().Notify(ctx)
	for ctx.Err() == nil {
		// Wait for at least one free slot, then count them all.
		select {
		case slots <- struct{}{}:
		case <-ctx.Done():
			return
		}
		free := 1
		for free < min(workers, 100) {
			select {
			case slots <- struct{}{}:
				free++
				continue
			default:
			}
			break
		}
		js, err := st.Claim(ctx, jobs.ClaimParams{Worker: worker, Limit: free})
		if err != nil {
			if ctx.Err() == nil {
				cancel(fmt.Errorf("claim: %w", err))
			}
			return
		}
		for range free - len(js) {
			<-slots
		}
		for _, j := range js {
			if rec != nil {
				rec.started(j.AvailableAt.UnixNano())
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer func() { <-slots }()
				if _, err := st.Succeed(ctx, jobs.SucceedParams{JobID: j.ID, Worker: worker, Answer: jobs.Answer{Output: "ok"}}); err != nil {
					if ctx.Err() == nil {
						cancel(fmt.Errorf("succeed: %w", err))
					}
				} else if succeeded != nil {
					succeeded(1)
				}
			}()
		}
		if len(js) == 0 {
			t := time.NewTimer(time.Second)
			select {
			case <-wake:
			case <-t.C:
			case <-ctx.Done():
			}
			t.Stop()
		}
		sleepCtx(ctx, time.Millisecond)
	}
}

func (p *pkInstance) Close() error { return p.cleanup() }
