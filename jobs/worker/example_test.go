package worker_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/promptkit/promptkit"
	"github.com/promptkit/promptkit/jobs"
	"github.com/promptkit/promptkit/jobs/sqlitestore"
	"github.com/promptkit/promptkit/jobs/worker"
	"github.com/promptkit/promptkit/providertest"
)

// A prompt is enqueued in a SQLite job store and executed by a worker,
// as `promptkit submit` and `promptkit worker --once` do.
func ExampleWorker_RunOnce() {
	ctx := context.Background()
	dir, _ := os.MkdirTemp("", "promptkit-example-")
	defer os.RemoveAll(dir)
	store, err := sqlitestore.Open(ctx, filepath.Join(dir, "jobs.db"), jobs.Options{})
	if err != nil {
		panic(err)
	}
	defer store.Close()

	provider := providertest.NewServer()
	defer provider.Close()
	provider.Enqueue(providertest.Reply("Bonjour !"))
	engine, err := promptkit.New(promptkit.Config{
		Backends: []promptkit.Backend{{ID: "local", BaseURL: provider.URL}},
		Profiles: []promptkit.Profile{{ID: "default", Backend: "local", Model: "some-model"}},
	})
	if err != nil {
		panic(err)
	}

	queued, err := store.Enqueue(ctx, jobs.EnqueueParams{OrgID: "acme", CreatedBy: "ada", Text: "Say hello in French."})
	if err != nil {
		panic(err)
	}
	w, err := worker.New(worker.Config{Store: store, Engine: engine, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		panic(err)
	}
	n, err := w.RunOnce(ctx)
	if err != nil {
		panic(err)
	}
	job, _ := store.GetJob(ctx, "acme", queued.JobID)
	answer, _ := store.GetResponse(ctx, "acme", job.ResponseID)
	fmt.Println(n, job.State, answer.Output)
	// Output: 1 succeeded Bonjour !
}

// A long-running worker, as `promptkit serve` and `promptkit worker` run
// one: Start starts claiming jobs, Stop stops gracefully — running jobs
// get Config.ShutdownGrace to finish, the rest go back to the queue
// without spending an attempt. The reclaimer, the archiver and the batch
// processor start and stop the same way.
func ExampleWorker_Start() {
	ctx := context.Background()
	dir, _ := os.MkdirTemp("", "promptkit-example-")
	defer os.RemoveAll(dir)
	store, err := sqlitestore.Open(ctx, filepath.Join(dir, "jobs.db"), jobs.Options{})
	if err != nil {
		panic(err)
	}
	defer store.Close()

	provider := providertest.NewServer()
	defer provider.Close()
	provider.Enqueue(providertest.Reply("Bonjour !"))
	engine, err := promptkit.New(promptkit.Config{
		Backends: []promptkit.Backend{{ID: "local", BaseURL: provider.URL}},
		Profiles: []promptkit.Profile{{ID: "default", Backend: "local", Model: "some-model"}},
	})
	if err != nil {
		panic(err)
	}

	settled := make(chan string, 1)
	w, err := worker.New(worker.Config{
		Store: store, Engine: engine, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Observe: func(e worker.JobEvent) {
			if !e.Claimed {
				settled <- e.Outcome
			}
		},
	})
	if err != nil {
		panic(err)
	}
	if err := w.Start(ctx); err != nil {
		panic(err)
	}
	queued, err := store.Enqueue(ctx, jobs.EnqueueParams{OrgID: "acme", CreatedBy: "ada", Text: "Say hello in French."})
	if err != nil {
		panic(err)
	}
	fmt.Println(<-settled)
	if err := w.Stop(ctx); err != nil {
		panic(err)
	}
	job, _ := store.GetJob(ctx, "acme", queued.JobID)
	answer, _ := store.GetResponse(ctx, "acme", job.ResponseID)
	fmt.Println(job.State, answer.Output)
	// Output:
	// succeeded
	// succeeded Bonjour !
}
