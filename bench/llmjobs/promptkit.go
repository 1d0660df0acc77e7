package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/promptkit/promptkit"
	"github.com/promptkit/promptkit/bench/internal/benchkit"
	"github.com/promptkit/promptkit/jobs"
	"github.com/promptkit/promptkit/jobs/pgstore"
	"github.com/promptkit/promptkit/jobs/sqlitestore"
	"github.com/promptkit/promptkit/jobs/worker"
)

func (e *env) runPromptkit(ctx context.Context, t trial, baseURL string) (time.Duration, error) {
	var st jobs.Store
	switch t.db {
	case dbPostgres:
		schema, drop, err := benchkit.NewSchema(ctx, e.pgURL, "lj_pk")
		if err != nil {
			return 0, err
		}
		defer dropLogged(drop)
		s, err := pgstore.Open(ctx, searchPath(e.pgURL, schema), jobs.Options{})
		if err != nil {
			return 0, err
		}
		st = s
	case dbSQLite:
		path, remove, err := e.newSQLiteFile("pk")
		if err != nil {
			return 0, err
		}
		defer remove()
		s, err := sqlitestore.Open(ctx, path, jobs.Options{})
		if err != nil {
			return 0, err
		}
		st = s
	default:
		return 0, fmt.Errorf("unknown database %q", t.db)
	}
	defer st.Close()

	retries := 0
	eng, err := promptkit.New(promptkit.Config{
		Backends:         []promptkit.Backend{{ID: "fake", BaseURL: baseURL}},
		Profiles:         []promptkit.Profile{{ID: "default", Backend: "fake", Model: "m"}},
		TransientRetries: &retries,
	})
	if err != nil {
		return 0, err
	}

	ps := make([]jobs.EnqueueParams, 0, batch)
	for i := 0; i < t.n; i += batch {
		ps = ps[:0]
		for j := i; j < min(i+batch, t.n); j++ {
			ps = append(ps, jobs.EnqueueParams{Text: fmt.Sprintf("Say hello to job %d.", j)})
		}
		if _, err := st.EnqueueBatch(ctx, ps); err != nil {
			return 0, fmt.Errorf("EnqueueBatch: %w", err)
		}
	}

	// Observe is told after each settlement is written; it must not block.
	var succeeded atomic.Int64
	var once sync.Once
	done := make(chan struct{})
	var bad atomic.Value // first outcome other than succeeded
	finish := func() { once.Do(func() { close(done) }) }
	var lastID atomic.Value
	w, err := worker.New(worker.Config{
		Store: st, Engine: eng, Concurrency: t.w, BatchSize: t.w,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Observe: func(ev worker.JobEvent) {
			switch {
			case ev.Claimed:
			case ev.Outcome == worker.OutcomeSucceeded:
				lastID.Store(ev.Job.ID)
				if succeeded.Add(1) == int64(t.n) {
					finish()
				}
			default:
				bad.CompareAndSwap(nil, fmt.Sprintf("job %s: %s", ev.Job.ID, ev.Outcome))
				finish()
			}
		},
	})
	if err != nil {
		return 0, err
	}

	stopProfile, err := e.startProfile()
	if err != nil {
		return 0, err
	}
	start := time.Now()
	if err := w.Start(ctx); err != nil {
		stopProfile()
		return 0, err
	}
	select {
	case <-done:
	case <-ctx.Done():
	}
	elapsed := time.Since(start)
	stopProfile()
	if err := w.Stop(context.WithoutCancel(ctx)); err != nil {
		return 0, fmt.Errorf("worker stop: %w", err)
	}
	if b := bad.Load(); b != nil {
		return 0, fmt.Errorf("%s", b)
	}
	if got := succeeded.Load(); got < int64(t.n) {
		return 0, fmt.Errorf("%d of %d succeeded: %w", got, t.n, ctx.Err())
	}
	// The answer is stored with the success (checked on the last job).
	id, _ := lastID.Load().(string)
	j, err := st.GetJob(ctx, "", id)
	if err != nil {
		return 0, fmt.Errorf("GetJob: %w", err)
	}
	if j.State != jobs.Succeeded {
		return 0, fmt.Errorf("job %s: state %s", j.ID, j.State)
	}
	r, err := st.GetResponse(ctx, "", j.ResponseID)
	if err != nil || r.Output == "" {
		return 0, fmt.Errorf("job %s: response %q: %v", j.ID, r.Output, err)
	}
	return elapsed, nil
}
