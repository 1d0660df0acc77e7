package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/riverdriver/riversqlite"
	"github.com/riverqueue/river/rivermigrate"
	"github.com/riverqueue/river/rivertype"
	_ "modernc.org/sqlite"

	"github.com/promptkit/promptkit/bench/internal/benchkit"
)

// promptArgs is River's LLM job: one prompt.
type promptArgs struct {
	Prompt string `json:"prompt"`
}

func (promptArgs) Kind() string { return "llm_prompt" }

// txBeginner opens the transaction the worker completes its job in.
type txBeginner[TTx any] interface {
	begin(ctx context.Context) (TTx, error)
	commit(ctx context.Context, tx TTx) error
	rollback(ctx context.Context, tx TTx)
}

type pgxBeginner struct{ pool *pgxpool.Pool }

func (b pgxBeginner) begin(ctx context.Context) (pgx.Tx, error) { return b.pool.Begin(ctx) }
func (pgxBeginner) commit(ctx context.Context, tx pgx.Tx) error { return tx.Commit(ctx) }
func (pgxBeginner) rollback(ctx context.Context, tx pgx.Tx)     { _ = tx.Rollback(ctx) }

type sqlBeginner struct{ db *sql.DB }

func (b sqlBeginner) begin(ctx context.Context) (*sql.Tx, error) { return b.db.BeginTx(ctx, nil) }
func (sqlBeginner) commit(_ context.Context, tx *sql.Tx) error   { return tx.Commit() }
func (sqlBeginner) rollback(_ context.Context, tx *sql.Tx)       { _ = tx.Rollback() }

// newOpenAI returns the River worker's client and its transport.
func newOpenAI(baseURL string, w int) (openai.Client, *http.Transport) {
	// Retries off: promptkit runs with TransientRetries 0 too, the queue
	// owns a job's retries, and the fake never fails. W idle connections,
	// as promptkit's client keeps (the default 2 would churn connections).
	tr := &http.Transport{MaxIdleConns: w, MaxIdleConnsPerHost: w, IdleConnTimeout: 30 * time.Second}
	return openai.NewClient(
		option.WithBaseURL(baseURL),
		option.WithAPIKey("x"),
		option.WithMaxRetries(0),
		option.WithHTTPClient(&http.Client{Transport: tr}),
	), tr
}

// llmWorker calls the provider through openai-go and completes its job
// with the answer in a transaction: RecordOutput puts the answer in the
// job's metadata, which JobCompleteTx writes with the completion.
type llmWorker[TDriver riverdriver.Driver[TTx], TTx any] struct {
	river.WorkerDefaults[promptArgs]
	ai openai.Client
	tx txBeginner[TTx]
}

func (w *llmWorker[TDriver, TTx]) Work(ctx context.Context, job *river.Job[promptArgs]) error {
	res, err := w.ai.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{
		Model:    "m",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage(job.Args.Prompt)},
	})
	if err != nil {
		return err
	}
	if len(res.Choices) == 0 || res.Choices[0].Message.Content == "" {
		return errors.New("empty reply")
	}
	if err := river.RecordOutput(ctx, res.Choices[0].Message.Content); err != nil {
		return err
	}
	tx, err := w.tx.begin(ctx)
	if err != nil {
		return err
	}
	defer w.tx.rollback(ctx, tx)
	if _, err := river.JobCompleteTx[TDriver](ctx, tx, job); err != nil {
		return err
	}
	return w.tx.commit(ctx, tx)
}

func (e *env) runRiver(ctx context.Context, t trial, baseURL string) (time.Duration, error) {
	switch t.db {
	case dbPostgres:
		schema, drop, err := benchkit.NewSchema(ctx, e.pgURL, "lj_river")
		if err != nil {
			return 0, err
		}
		defer dropLogged(drop)
		pool, err := pgxpool.New(ctx, searchPath(e.pgURL, schema))
		if err != nil {
			return 0, err
		}
		defer pool.Close()
		return riverTrial[*riverpgxv5.Driver](ctx, t, baseURL, riverpgxv5.New(pool), schema, pgxBeginner{pool})
	case dbSQLite:
		path, remove, err := e.newSQLiteFile("river")
		if err != nil {
			return 0, err
		}
		defer remove()
		db, err := sql.Open("sqlite", sqliteDSN(path))
		if err != nil {
			return 0, err
		}
		defer db.Close()
		// One connection, as riversqlite advises: it is also the only
		// writer, like sqlitestore's writer connection.
		db.SetMaxOpenConns(1)
		return riverTrial[*riversqlite.Driver](ctx, t, baseURL, riversqlite.New(db), "", sqlBeginner{db})
	}
	return 0, fmt.Errorf("unknown database %q", t.db)
}

// sqliteDSN is River's SQLite connection: the same pragmas as
// sqlitestore's writer (WAL, synchronous NORMAL, busy timeout, foreign
// keys).
func sqliteDSN(path string) string {
	return "file:" + path + "?_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)&_pragma=synchronous(NORMAL)&_pragma=foreign_keys(1)"
}

func riverTrial[TDriver riverdriver.Driver[TTx], TTx any](ctx context.Context, t trial, baseURL string, driver TDriver, schema string, txb txBeginner[TTx]) (time.Duration, error) {
	quiet := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	m, err := rivermigrate.New(driver, &rivermigrate.Config{Schema: schema, Logger: quiet})
	if err != nil {
		return 0, fmt.Errorf("rivermigrate: %w", err)
	}
	if _, err := m.Migrate(ctx, rivermigrate.DirectionUp, nil); err != nil {
		return 0, fmt.Errorf("rivermigrate up: %w", err)
	}
	ai, tr := newOpenAI(baseURL, t.w)
	defer tr.CloseIdleConnections()
	workers := river.NewWorkers()
	river.AddWorker(workers, &llmWorker[TDriver, TTx]{ai: ai, tx: txb})
	c, err := river.NewClient(driver, &river.Config{
		FetchCooldown: time.Millisecond,
		Logger:        quiet,
		Schema:        schema,
		Workers:       workers,
		Queues:        map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: t.w}},
	})
	if err != nil {
		return 0, err
	}

	params := make([]river.InsertManyParams, 0, batch)
	for i := 0; i < t.n; i += batch {
		params = params[:0]
		for j := i; j < min(i+batch, t.n); j++ {
			params = append(params, river.InsertManyParams{Args: promptArgs{Prompt: fmt.Sprintf("Say hello to job %d.", j)}})
		}
		if _, err := c.InsertMany(ctx, params); err != nil {
			return 0, fmt.Errorf("InsertMany: %w", err)
		}
	}

	events, cancel := c.SubscribeConfig(&river.SubscribeConfig{
		ChanSize: t.n + 1000,
		Kinds:    []river.EventKind{river.EventKindJobCompleted, river.EventKindJobFailed, river.EventKindJobCancelled},
	})
	defer cancel()
	start := time.Now()
	if err := c.Start(ctx); err != nil {
		return 0, err
	}
	defer func() {
		sctx, scancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer scancel()
		if err := c.Stop(sctx); err != nil {
			fmt.Fprintln(os.Stderr, "llmjobs: River stop:", err)
		}
	}()
	var last *rivertype.JobRow
	for done := 0; done < t.n; {
		select {
		case ev := <-events:
			if ev.Kind != river.EventKindJobCompleted {
				return 0, fmt.Errorf("job %d: %s: %v", ev.Job.ID, ev.Kind, ev.Job.Errors)
			}
			last = ev.Job
			done++
		case <-ctx.Done():
			return 0, fmt.Errorf("%d of %d completed: %w", done, t.n, ctx.Err())
		}
	}
	elapsed := time.Since(start)
	// The answer went in with the completion (checked on the last job,
	// read back from the database).
	row, err := c.JobGet(ctx, last.ID)
	if err != nil {
		return 0, fmt.Errorf("JobGet: %w", err)
	}
	if row.State != rivertype.JobStateCompleted || len(row.Output()) <= 2 {
		return 0, fmt.Errorf("job %d: state %s, output %q", row.ID, row.State, row.Output())
	}
	return elapsed, nil
}
