package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/riverdriver/riversqlite"
	"github.com/riverqueue/river/rivermigrate"

	"github.com/promptkit/promptkit/bench/internal/benchkit"
)

// noopArgs is River's job: no work. T0 (unix ns) is set only by the
// steady-state producers, so a worker can measure insert → start.
type noopArgs struct {
	T0 int64 `json:"t0,omitempty"`
}

func (noopArgs) Kind() string { return "noop" }

type noopWorker struct {
	river.WorkerDefaults[noopArgs]
	onStart func(t0 int64)
}

func (w *noopWorker) Work(ctx context.Context, job *river.Job[noopArgs]) error {
	if w.onStart != nil && job.Args.T0 != 0 {
		w.onStart(job.Args.T0)
	}
	return nil
}

// riverSystem is River v0.51.2 with riverpgxv5 or riversqlite.
type riverSystem struct{}

func (riverSystem) Name() string { return "River" }

func (riverSystem) Open(ctx context.Context, e *env, db string) (instance, error) {
	switch db {
	case dbPostgres:
		schema, drop, err := benchkit.NewSchema(ctx, e.pgURL, "qc_river")
		if err != nil {
			return nil, err
		}
		pool, err := pgxpool.New(ctx, searchPath(e.pgURL, schema))
		if err != nil {
			drop()
			return nil, err
		}
		url := searchPath(e.pgURL, schema)
		inst, err := newRiverInstance[pgx.Tx](ctx, riverpgxv5.New(pool), schema, func() error {
			pool.Close()
			return drop()
		})
		if err != nil {
			pool.Close()
			drop()
			return nil, err
		}
		inst.peer = func(ctx context.Context) (riverdriver.Driver[pgx.Tx], func(), error) {
			p, err := pgxpool.New(ctx, url)
			if err != nil {
				return nil, nil, err
			}
			return riverpgxv5.New(p), p.Close, nil
		}
		inst.describe = fmt.Sprintf("pgxpool MaxConns %d", pool.Config().MaxConns)
		return inst, nil
	case dbSQLite:
		path, remove, err := e.newSQLiteFile("river")
		if err != nil {
			return nil, err
		}
		sdb, err := sql.Open("sqlite", sqliteDSN(path))
		if err != nil {
			remove()
			return nil, err
		}
		// One connection: River's documented setting for SQLite (its
		// single pool is also its only writer).
		sdb.SetMaxOpenConns(1)
		inst, err := newRiverInstance[*sql.Tx](ctx, riversqlite.New(sdb), "", func() error {
			err := sdb.Close()
			if rerr := remove(); err == nil {
				err = rerr
			}
			return err
		})
		if err != nil {
			sdb.Close()
			remove()
			return nil, err
		}
		inst.describe = "database/sql, 1 connection"
		return inst, nil
	}
	return nil, fmt.Errorf("unknown database %q", db)
}

type riverInstance[TTx any] struct {
	driver   riverdriver.Driver[TTx]
	schema   string
	cleanup  func() error
	describe string
	// peer opens a second driver (its own pool) on the same schema
	// (PostgreSQL only).
	peer func(context.Context) (riverdriver.Driver[TTx], func(), error)

	mu      sync.Mutex
	onStart func(int64)
}

func newRiverInstance[TTx any](ctx context.Context, driver riverdriver.Driver[TTx], schema string, cleanup func() error) (*riverInstance[TTx], error) {
	m, err := rivermigrate.New(driver, &rivermigrate.Config{Schema: schema, Logger: quietLogger()})
	if err != nil {
		return nil, fmt.Errorf("rivermigrate: %w", err)
	}
	if _, err := m.Migrate(ctx, rivermigrate.DirectionUp, nil); err != nil {
		return nil, fmt.Errorf("rivermigrate up: %w", err)
	}
	return &riverInstance[TTx]{driver: driver, schema: schema, cleanup: cleanup}, nil
}

func quietLogger() *slog.Logger {
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
}

func (r *riverInstance[TTx]) Describe() string { return r.describe }

func (r *riverInstance[TTx]) client(workers int) (*river.Client[TTx], error) {
	return r.clientOn(r.driver, workers)
}

// clientOn is a client on driver: with workers > 0, one that works the
// default queue with that many workers.
func (r *riverInstance[TTx]) clientOn(driver riverdriver.Driver[TTx], workers int) (*river.Client[TTx], error) {
	ws := river.NewWorkers()
	river.AddWorker(ws, &noopWorker{onStart: func(t0 int64) {
		r.mu.Lock()
		f := r.onStart
		r.mu.Unlock()
		if f != nil {
			f(t0)
		}
	}})
	cfg := &river.Config{
		// Lowered from the 100 ms default (to River's minimum): with the
		// default both databases stop near 950 jobs/s.
		FetchCooldown: time.Millisecond,
		Logger:        quietLogger(),
		Schema:        r.schema,
		Workers:       ws,
	}
	if workers > 0 {
		cfg.Queues = map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: workers}}
	}
	return river.NewClient(driver, cfg)
}

func (r *riverInstance[TTx]) Insert(ctx context.Context, n, batch int) error {
	c, err := r.client(0)
	if err != nil {
		return err
	}
	params := make([]river.InsertManyParams, batch)
	for i := range params {
		params[i] = river.InsertManyParams{Args: noopArgs{}}
	}
	for done := 0; done < n; {
		k := min(batch, n-done)
		res, err := c.InsertMany(ctx, params[:k])
		if err != nil {
			return err
		}
		if len(res) != k {
			return fmt.Errorf("InsertMany returned %d results for %d jobs", len(res), k)
		}
		done += k
	}
	return nil
}

func (r *riverInstance[TTx]) Work(ctx context.Context, n, workers int) error {
	c, err := r.client(workers)
	if err != nil {
		return err
	}
	events, cancel := c.SubscribeConfig(&river.SubscribeConfig{
		ChanSize: n + 1000,
		Kinds:    []river.EventKind{river.EventKindJobCompleted, river.EventKindJobFailed},
	})
	defer cancel()
	if err := c.Start(ctx); err != nil {
		return err
	}
	defer stopRiver(c)
	for done := 0; done < n; {
		select {
		case ev := <-events:
			if ev.Kind != river.EventKindJobCompleted {
				return fmt.Errorf("job %d: %s", ev.Job.ID, ev.Kind)
			}
			done++
		case <-ctx.Done():
			return fmt.Errorf("%d of %d completed: %w", done, n, ctx.Err())
		}
	}
	return nil
}

func stopRiver[TTx any](c *river.Client[TTx]) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := c.Stop(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "queuecmp: River stop:", err)
	}
}

func (r *riverInstance[TTx]) Steady(ctx context.Context, p steadyParams) (steadyResult, error) {
	rec := newSteadyRecorder()
	r.mu.Lock()
	r.onStart = rec.started
	r.mu.Unlock()
	defer func() {
		r.mu.Lock()
		r.onStart = nil
		r.mu.Unlock()
	}()
	c, err := r.client(p.Workers)
	if err != nil {
		return steadyResult{}, err
	}
	ins := c
	if p.Cross {
		// The workers run on a client of their own pool; the producers
		// insert through an insert-only client on the first pool.
		if r.peer == nil {
			return steadyResult{}, errors.New("no second pool on this database")
		}
		driver, closePool, err := r.peer(ctx)
		if err != nil {
			return steadyResult{}, fmt.Errorf("second pool: %w", err)
		}
		defer closePool()
		if c, err = r.clientOn(driver, p.Workers); err != nil {
			return steadyResult{}, err
		}
		if ins, err = river.NewClient(r.driver, &river.Config{Logger: quietLogger(), Schema: r.schema}); err != nil {
			return steadyResult{}, err
		}
	}
	if err := c.Start(ctx); err != nil {
		return steadyResult{}, err
	}
	defer stopRiver(c)
	return rec.run(ctx, p, func(ctx context.Context, t0 time.Time) error {
		_, err := ins.Insert(ctx, noopArgs{T0: t0.UnixNano()}, nil)
		return err
	})
}

func (r *riverInstance[TTx]) Close() error { return r.cleanup() }
