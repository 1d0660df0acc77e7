package pgstore

import (
	"database/sql"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"

	"github.com/promptkit/promptkit/internal/pgtest"
	"github.com/promptkit/promptkit/jobs"
	"github.com/promptkit/promptkit/jobs/internal/storetest"
)

// TestMigrationSideTablesBackfill upgrades a version-1 database holding a
// queued, a running and a finished job: after migration 2 the first two
// are in job_queue and job_running and the store claims and finishes them;
// migration 2 also goes down and up again.
func TestMigrationSideTablesBackfill(t *testing.T) {
	dsn, db, p := migrations(t)
	ctx := t.Context()
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
	if _, err := s.Succeed(ctx, jobs.SucceedParams{JobID: "r1", Worker: "w", Answer: jobs.Answer{Output: "ok"}}); err != nil {
		t.Fatalf("Succeed of the job running before the upgrade: %v", err)
	}
	if _, err := s.Succeed(ctx, jobs.SucceedParams{JobID: "q1", Worker: "w2", Answer: jobs.Answer{Output: "ok"}}); err != nil {
		t.Fatalf("Succeed of the job claimed after the upgrade: %v", err)
	}
}

// migrations returns a fresh schema's DSN, a connection to it and the
// goose provider of the embedded migrations there.
func migrations(t *testing.T) (string, *sql.DB, *goose.Provider) {
	t.Helper()
	dsn := pgtest.Schema(t)
	cc, err := pgx.ParseConfig(dsn)
	if err != nil {
		t.Fatal(err)
	}
	db := stdlib.OpenDB(*cc)
	t.Cleanup(func() { db.Close() })
	p, err := goose.NewProvider(goose.DialectPostgres, db, migrationFS, goose.WithDisableGlobalRegistry(true))
	if err != nil {
		t.Fatal(err)
	}
	return dsn, db, p
}

// Migration 5 moves a profile written into execution_options to the
// prompt (unless the prompt has one) and drops the key; going down puts
// the prompt's profile back into the options. Its listing index leaves
// state out: no index on jobs may cover a column a transition changes.
func TestMigrationProfileStoredOnce(t *testing.T) {
	_, db, p := migrations(t)
	ctx := t.Context()
	if _, err := p.UpTo(ctx, 4); err != nil {
		t.Fatalf("up to 4: %v", err)
	}
	if _, err := db.ExecContext(ctx, `
		INSERT INTO prompts (id, org_id, created_by, profile, created_at) VALUES
			('p1', 'o', 'u', '', now()), ('p2', 'o', 'u', 'mine', now()), ('p3', 'o', 'u', '', now());
		INSERT INTO jobs (id, prompt_id, state, priority, max_attempts, execution_options, org_id, created_by,
			created_at, updated_at, available_at) VALUES
			('j1', 'p1', 'succeeded', 50, 3, '{"profile":"fast","model":"m"}', 'o', 'u', now(), now(), now()),
			('j2', 'p2', 'succeeded', 50, 3, '{"profile":"other"}', 'o', 'u', now(), now(), now()),
			('j3', 'p3', 'succeeded', 50, 3, '{"profile":""}', 'o', 'u', now(), now(), now())`); err != nil {
		t.Fatal(err)
	}
	// state is every prompt's profile and every job's options (jsonb: in
	// its canonical form).
	state := func() string {
		t.Helper()
		var got string
		if err := db.QueryRowContext(ctx, `SELECT
			(SELECT string_agg(id || '=' || profile, ' ' ORDER BY id) FROM prompts) || ' ' ||
			(SELECT jsonb_object_agg(id, execution_options::jsonb)::text FROM jobs)`).Scan(&got); err != nil {
			t.Fatal(err)
		}
		return got
	}
	if _, err := p.Up(ctx); err != nil {
		t.Fatalf("up: %v", err)
	}
	if got, want := state(), `p1=fast p2=mine p3= {"j1": {"model": "m"}, "j2": {}, "j3": {}}`; got != want {
		t.Errorf("after up: %s, want %s", got, want)
	}
	var stateIndexes int
	if err := db.QueryRowContext(ctx, `SELECT count(*) FROM pg_indexes
		WHERE schemaname = current_schema() AND tablename = 'jobs' AND indexdef ~ '\mstate\M'`).Scan(&stateIndexes); err != nil {
		t.Fatal(err)
	}
	if stateIndexes != 0 {
		t.Errorf("%d indexes on jobs cover state: transitions would not be HOT updates", stateIndexes)
	}
	if _, err := p.DownTo(ctx, 4); err != nil {
		t.Fatalf("down to 4: %v", err)
	}
	if got, want := state(), `p1=fast p2=mine p3= {"j1": {"model": "m", "profile": "fast"}, "j2": {"profile": "mine"}, "j3": {}}`; got != want {
		t.Errorf("after down: %s, want %s", got, want)
	}
}

// Check passes on the schema this build migrates to and fails, naming
// both versions, on a newer one (a newer build migrated the database) and
// on an older one.
func TestCheckSchemaVersion(t *testing.T) {
	dsn, db, p := migrations(t)
	ctx := t.Context()
	srcs := p.ListSources()
	latest := srcs[len(srcs)-1].Version
	if v, err := latestVersion(); err != nil || v != latest {
		t.Fatalf("latestVersion = %d, %v; want %d", v, err, latest)
	}
	s, err := Open(ctx, dsn, jobs.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	storetest.SchemaVersions(t, s, db, latest, srcs[len(srcs)-2].Version,
		`INSERT INTO goose_db_version (version_id, is_applied) VALUES ($1 + 1, true)`,
		`DELETE FROM goose_db_version WHERE version_id >= $1`)
}

// Migration 6 leaves the prompts stored before it without a request hash,
// so a repeat of their keys never conflicts; it goes down and up again.
func TestMigrationTokensRequestHash(t *testing.T) {
	dsn, db, p := migrations(t)
	ctx := t.Context()
	if _, err := p.UpTo(ctx, 5); err != nil {
		t.Fatalf("up to 5: %v", err)
	}
	if _, err := db.ExecContext(ctx, `
		INSERT INTO prompts (id, org_id, created_by, idempotency_key, created_at) VALUES ('p', 'o', 'u', 'k', now());
		INSERT INTO jobs (id, prompt_id, state, priority, max_attempts, org_id, created_by, created_at, updated_at, available_at)
		VALUES ('j', 'p', 'succeeded', 50, 3, 'o', 'u', now(), now(), now())`); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Up(ctx); err != nil {
		t.Fatalf("up: %v", err)
	}
	if _, err := p.DownTo(ctx, 5); err != nil {
		t.Fatalf("down to 5: %v", err)
	}
	if _, err := p.Up(ctx); err != nil {
		t.Fatalf("up again: %v", err)
	}
	s, err := Open(ctx, dsn, jobs.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	storetest.KeyStoredBefore(t, s, "migration 6")
}

// Migration 13 gives the jobs queued before it start tags in their old
// claim order (priority, then available_at, created_at, id), per priority,
// and each org its last tag: the store then claims them in that order,
// and a new org's job comes in turn, not behind them all.
func TestMigrationFairTagsBackfill(t *testing.T) {
	dsn, db, p := migrations(t)
	ctx := t.Context()
	if _, err := p.UpTo(ctx, 11); err != nil {
		t.Fatalf("up to 11: %v", err)
	}
	if _, err := db.ExecContext(ctx, `
		INSERT INTO prompts (id, org_id, created_by, created_at) VALUES ('p', 'a', 'u', now());
		INSERT INTO jobs (id, prompt_id, state, priority, max_attempts, org_id, created_by, created_at, updated_at, available_at)
		VALUES
			('a2', 'p', 'queued', 50, 3, 'a', 'u', now(), now(), now() - interval '1 minute'),
			('a1', 'p', 'queued', 50, 3, 'a', 'u', now(), now(), now() - interval '2 minutes'),
			('a3', 'p', 'queued', 50, 3, 'a', 'u', now(), now(), now() - interval '30 seconds'),
			('u1', 'p', 'queued', 10, 3, 'a', 'u', now(), now(), now());
		INSERT INTO job_queue (job_id, priority, available_at, created_at)
		SELECT id, priority, available_at, created_at FROM jobs`); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Up(ctx); err != nil {
		t.Fatalf("up: %v", err)
	}
	var tags, lasts string
	if err := db.QueryRowContext(ctx, `SELECT
		(SELECT string_agg(j.id || '=' || j.fair_tag || '/' || q.tag, ',' ORDER BY j.id) FROM jobs j JOIN job_queue q ON q.job_id = j.id),
		(SELECT string_agg(priority || ':' || org_id || '=' || last, ',' ORDER BY priority) FROM fair_tags)`).Scan(&tags, &lasts); err != nil {
		t.Fatal(err)
	}
	if tags != "a1=1/1,a2=2/2,a3=3/3,u1=1/1" || lasts != "10:a=1,50:a=3" {
		t.Errorf("after up: tags %s, last tags %s", tags, lasts)
	}
	s, err := Open(ctx, dsn, jobs.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	storetest.TagsBackfilled(t, s)
}
