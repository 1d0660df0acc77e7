package pgstore

import (
	"io/fs"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"

	"github.com/promptkit/promptkit/internal/pgtest"
	"github.com/promptkit/promptkit/jobs"
)

// TestMigrationSideTablesBackfill upgrades a version-1 database holding a
// queued, a running and a finished job: after migration 2 the first two
// are in job_queue and job_running and the store claims and finishes them;
// migration 2 also goes down and up again.
func TestMigrationSideTablesBackfill(t *testing.T) {
	dsn := pgtest.Schema(t)
	ctx := t.Context()
	cc, err := pgx.ParseConfig(dsn)
	if err != nil {
		t.Fatal(err)
	}
	db := stdlib.OpenDB(*cc)
	defer db.Close()
	sub, err := fs.Sub(migrationFiles, "migrations")
	if err != nil {
		t.Fatal(err)
	}
	p, err := goose.NewProvider(goose.DialectPostgres, db, sub, goose.WithDisableGlobalRegistry(true))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.UpTo(ctx, 1); err != nil {
		t.Fatalf("up to 1: %v", err)
	}
	if _, err := db.ExecContext(ctx, `
		INSERT INTO prompts (id, org_id, created_by, created_at) VALUES ('p', 'o', 'u', now());
		INSERT INTO jobs (id, prompt_id, state, priority, max_attempts, org_id, created_by, created_at, updated_at,
			available_at, worker_claim, running_heartbeat_at, started_at, claimed_at, finished_at)
		VALUES
			('q1', 'p', 'queued', 7, 3, 'o', 'u', now(), now(), now() - interval '1 minute', NULL, NULL, NULL, NULL, NULL),
			('r1', 'p', 'running', 50, 3, 'o', 'u', now(), now(), now(), 'w', now(), now(), now(), NULL),
			('s1', 'p', 'succeeded', 50, 3, 'o', 'u', now(), now(), now(), 'w', now(), now(), now(), now())`); err != nil {
		t.Fatal(err)
	}
	check := func(stage string) {
		t.Helper()
		var queue, running string
		if err := db.QueryRowContext(ctx, `SELECT
			(SELECT string_agg(job_id || ':' || priority, ',') FROM job_queue),
			(SELECT string_agg(job_id, ',') FROM job_running)`).Scan(&queue, &running); err != nil {
			t.Fatalf("%s: %v", stage, err)
		}
		if queue != "q1:7" || running != "r1" {
			t.Fatalf("%s: job_queue %q, job_running %q; want q1:7 and r1", stage, queue, running)
		}
	}
	if _, err := p.Up(ctx); err != nil {
		t.Fatalf("up: %v", err)
	}
	check("after up")
	if _, err := p.DownTo(ctx, 1); err != nil {
		t.Fatalf("down to 1: %v", err)
	}
	if _, err := p.Up(ctx); err != nil {
		t.Fatalf("up again: %v", err)
	}
	check("after down and up")

	s, err := Open(ctx, dsn, jobs.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	got, err := s.Claim(ctx, jobs.ClaimParams{Worker: "w2", Limit: 10})
	if err != nil || len(got) != 1 || got[0].ID != "q1" {
		t.Fatalf("Claim after the upgrade = %v, %v; want q1", got, err)
	}
	if _, err := s.Succeed(ctx, jobs.SucceedParams{JobID: "r1", Worker: "w", Output: "ok"}); err != nil {
		t.Fatalf("Succeed of the job running before the upgrade: %v", err)
	}
	if _, err := s.Succeed(ctx, jobs.SucceedParams{JobID: "q1", Worker: "w2", Output: "ok"}); err != nil {
		t.Fatalf("Succeed of the job claimed after the upgrade: %v", err)
	}
}
