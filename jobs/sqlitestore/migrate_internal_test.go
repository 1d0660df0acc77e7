package sqlitestore

import (
	"context"
	"database/sql"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pressly/goose/v3"

	"github.com/promptkit/promptkit/jobs"
	"github.com/promptkit/promptkit/jobs/internal/listing"
	"github.com/promptkit/promptkit/jobs/internal/storetest"
	"github.com/promptkit/promptkit/jobs/internal/usageq"
)

// Migration 2 moves a profile written into execution_options to the
// prompt (unless the prompt has one) and drops the key; going down puts
// the prompt's profile back into the options. Listing by org and user
// uses its index.
func TestMigrationProfileStoredOnce(t *testing.T) {
	ctx := t.Context()
	db, p := migratedTo(t, filepath.Join(t.TempDir(), "jobs.db"), 1)
	if _, err := db.ExecContext(ctx, `
		INSERT INTO prompts (id, org_id, created_by, profile, created_at) VALUES
			('p1', 'o', 'u', '', 1), ('p2', 'o', 'u', 'mine', 1), ('p3', 'o', 'u', '', 1);
		INSERT INTO jobs (id, prompt_id, execution_options, org_id, created_by, created_at, updated_at, available_at) VALUES
			('j1', 'p1', '{"profile":"fast","model":"m"}', 'o', 'u', 1, 1, 1),
			('j2', 'p2', '{"profile":"other"}', 'o', 'u', 1, 1, 1),
			('j3', 'p3', '{"profile":""}', 'o', 'u', 1, 1, 1)`); err != nil {
		t.Fatal(err)
	}
	// state is every prompt's profile and every job's options.
	state := func() string {
		t.Helper()
		var profiles, opts string
		if err := db.QueryRowContext(ctx, `SELECT
			(SELECT group_concat(id || '=' || profile, ' ') FROM (SELECT id, profile FROM prompts ORDER BY id)),
			(SELECT json_group_object(id, json(execution_options)) FROM (SELECT id, execution_options FROM jobs ORDER BY id))`,
		).Scan(&profiles, &opts); err != nil {
			t.Fatal(err)
		}
		return profiles + " " + opts
	}
	if _, err := p.Up(ctx); err != nil {
		t.Fatal(err)
	}
	if got, want := state(), `p1=fast p2=mine p3= {"j1":{"model":"m"},"j2":{},"j3":{}}`; got != want {
		t.Errorf("after up: %s, want %s", got, want)
	}
	var plan string
	if err := db.QueryRowContext(ctx, `EXPLAIN QUERY PLAN SELECT id FROM jobs WHERE org_id = 'o' AND created_by = 'u'
		ORDER BY created_at DESC, id DESC LIMIT 5`).Scan(new(int), new(int), new(int), &plan); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(plan, "INDEX jobs_org_user_created") {
		t.Errorf("listing by org and user: plan %q", plan)
	}
	if _, err := p.DownTo(ctx, 1); err != nil {
		t.Fatal(err)
	}
	if got, want := state(), `p1=fast p2=mine p3= {"j1":{"model":"m","profile":"fast"},"j2":{"profile":"mine"},"j3":{}}`; got != want {
		t.Errorf("after down: %s, want %s", got, want)
	}
}

// Check passes on the schema this build migrates to and fails, naming
// both versions, on a newer one (a newer build migrated the file) and on
// an older one.
func TestCheckSchemaVersion(t *testing.T) {
	ctx := t.Context()
	s, err := Open(ctx, filepath.Join(t.TempDir(), "jobs.db"), jobs.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	p, err := goose.NewProvider(goose.DialectSQLite3, s.writer, migrationFS, goose.WithDisableGlobalRegistry(true))
	if err != nil {
		t.Fatal(err)
	}
	srcs := p.ListSources()
	latest := srcs[len(srcs)-1].Version
	if v, err := latestVersion(); err != nil || v != latest {
		t.Fatalf("latestVersion = %d, %v; want %d", v, err, latest)
	}
	storetest.SchemaVersions(t, s, s.writer, latest, srcs[len(srcs)-2].Version,
		`INSERT INTO goose_db_version (version_id, is_applied) VALUES (?1 + 1, 1)`,
		`DELETE FROM goose_db_version WHERE version_id >= ?1`)
}

// Migration 3 leaves the prompts stored before it without a request hash,
// so a repeat of their keys never conflicts; it goes down and up again.
func TestMigrationTokensRequestHash(t *testing.T) {
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "jobs.db")
	db, p := migratedTo(t, path, 2)
	if _, err := db.ExecContext(ctx, `
		INSERT INTO prompts (id, org_id, created_by, idempotency_key, created_at) VALUES ('p', 'o', 'u', 'k', 1);
		INSERT INTO jobs (id, prompt_id, org_id, created_by, created_at, updated_at, available_at)
		VALUES ('j', 'p', 'o', 'u', 1, 1, 1)`); err != nil {
		t.Fatal(err)
	}
	for _, step := range []func(context.Context) ([]*goose.MigrationResult, error){
		p.Up,
		func(ctx context.Context) ([]*goose.MigrationResult, error) { return p.DownTo(ctx, 2) },
		p.Up,
	} {
		if _, err := step(ctx); err != nil {
			t.Fatal(err)
		}
	}
	s, err := Open(ctx, path, jobs.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	storetest.KeyStoredBefore(t, s, "migration 3")
}

// The reads every API request makes, and the event and change readers',
// use the plans their comments promise.
func TestQueryPlans(t *testing.T) {
	ctx := t.Context()
	s, err := Open(ctx, filepath.Join(t.TempDir(), "jobs.db"), jobs.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for _, c := range []struct {
		q    string
		args []any
		want []string
	}{
		{qTokenByHash, []any{[]byte("h")}, []string{"SEARCH tokens USING INDEX"}},
		{qHasTokens, nil, []string{"INDEX tokens_valid"}},
		{qEventsAfter, []any{0, "o", "u", 10}, []string{"SEARCH e USING INTEGER PRIMARY KEY (rowid>?)", "SEARCH j USING INDEX sqlite_autoindex_jobs_1 (id=?)"}},
		{qChangesFiltered, []any{0, 10, "o", "u"}, []string{"INDEX jobs_updated"}},
		{qChangesTie, []any{0, "j", "o", "u"}, []string{"INDEX jobs_updated"}},
		// Admission: one org's or one token's open reservations.
		{qReserved, []any{"o", 0}, []string{"SEARCH r USING INDEX reservations_org (org_id=? AND expires_at>?)", "SEARCH j USING INDEX sqlite_autoindex_jobs_1 (id=?)"}},
		{qReservedToken, []any{"t", 0}, []string{"SEARCH r USING INDEX reservations_token (token_id=? AND expires_at>?)"}},
		// A budget's check: one org's or one token's spend since a time.
		{usageSQL(jobs.UsageParams{OrgID: "o", From: time.Unix(1, 0)}), []any{int64(1e6), "o"},
			[]string{"SEARCH usage_ledger USING INDEX usage_ledger_org_at (org_id=? AND at>?)"}},
		{usageSQL(jobs.UsageParams{TokenID: "t", From: time.Unix(1, 0)}), []any{int64(1e6), "t"},
			[]string{"SEARCH usage_ledger USING INDEX usage_ledger_token_at (token_id=? AND at>?)"}},
		// The job listing: newest first from an index, no sort, with or
		// without the dashboard's filters; a backend is a probe of the
		// ledger's index per job, a batch's jobs are found from its
		// prompts'.
		{listSQL(jobs.JobFilter{}), listArgs(jobs.JobFilter{}), []string{"SCAN jobs USING INDEX jobs_created"}},
		{listSQL(jobs.JobFilter{OrgID: "o", CreatedBy: "u"}), listArgs(jobs.JobFilter{OrgID: "o", CreatedBy: "u"}), []string{"SEARCH jobs USING INDEX jobs_org_user_created (org_id=? AND created_by=?)"}},
		{listSQL(jobs.JobFilter{Backend: "b"}), listArgs(jobs.JobFilter{Backend: "b"}), []string{"SCAN jobs USING INDEX jobs_created",
			"SEARCH u EXISTS USING COVERING INDEX usage_ledger_backend_job (backend=? AND job_id=?)"}},
		{listSQL(jobs.JobFilter{Profile: "p"}), listArgs(jobs.JobFilter{Profile: "p"}), []string{"SCAN jobs USING INDEX jobs_created", "SEARCH p EXISTS USING INDEX sqlite_autoindex_prompts_1 (id=?)"}},
	} {
		got := queryPlan(t, s, c.q, c.args...)
		for _, w := range c.want {
			if !strings.Contains(got, w) {
				t.Errorf("plan of %s:\n%s\nwant %q", c.q, got, w)
			}
		}
		if strings.Contains(got, "TEMP B-TREE") {
			t.Errorf("plan of %s sorts: %s", c.q, got)
		}
	}
}

// listSQL and listArgs are the ListJobs query of f, its first page.
func listSQL(f jobs.JobFilter) string {
	q, _ := listQuery(f)
	return q
}

func listArgs(f jobs.JobFilter) []any {
	_, args := listQuery(f)
	return args
}

func listQuery(f jobs.JobFilter) (string, []any) {
	p, err := jobs.ListParams{JobFilter: f}.Normalize()
	if err != nil {
		panic(err)
	}
	q, args, _ := listing.Query(p, listDialect, jobCols)
	return q, args
}

// usageSQL is the ledger read of p.
func usageSQL(p jobs.UsageParams) string {
	q, _ := usageq.Query(p, usageDialect)
	return q
}

// Migration 10 gives the jobs queued before it start tags in their old
// claim order (priority, then available_at, created_at, id), per priority,
// and each org its last tag: the store then claims them in that order,
// and a new org's job comes in turn, not behind them all.
func TestMigrationFairTagsBackfill(t *testing.T) {
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "jobs.db")
	db, p := migratedTo(t, path, 8)
	if _, err := db.ExecContext(ctx, `
		INSERT INTO prompts (id, org_id, created_by, created_at) VALUES ('p', 'a', 'u', 1);
		INSERT INTO jobs (id, prompt_id, priority, org_id, created_by, created_at, updated_at, available_at) VALUES
			('a2', 'p', 50, 'a', 'u', 1, 1, 20),
			('a1', 'p', 50, 'a', 'u', 1, 1, 10),
			('a3', 'p', 50, 'a', 'u', 1, 1, 30),
			('u1', 'p', 10, 'a', 'u', 1, 1, 40)`); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Up(ctx); err != nil {
		t.Fatal(err)
	}
	var tags, lasts string
	if err := db.QueryRowContext(ctx, `SELECT
		(SELECT group_concat(id || '=' || fair_tag, ',') FROM (SELECT id, fair_tag FROM jobs ORDER BY id)),
		(SELECT group_concat(priority || ':' || org_id || '=' || last, ',') FROM (SELECT * FROM fair_tags ORDER BY priority))`,
	).Scan(&tags, &lasts); err != nil {
		t.Fatal(err)
	}
	if tags != "a1=1.0,a2=2.0,a3=3.0,u1=1.0" || lasts != "10:a=1.0,50:a=3.0" {
		t.Errorf("after up: tags %s, last tags %s", tags, lasts)
	}
	db.Close()
	s, err := Open(ctx, path, jobs.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	storetest.TagsBackfilled(t, s)
}

// Backend activity reads a recent range of the ledger through its (at)
// index, grouping what it finds, not the whole ledger.
func TestBackendActivityPlan(t *testing.T) {
	ctx := t.Context()
	s, err := Open(ctx, filepath.Join(t.TempDir(), "jobs.db"), jobs.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	q, args := usageq.ActivityQuery(time.Unix(1, 0), usageDialect)
	if got := queryPlan(t, s, q, args...); !strings.Contains(got, "SEARCH usage_ledger USING INDEX usage_ledger_at (at>?)") {
		t.Errorf("plan of %s:\n%s", q, got)
	}
}

// queryPlan returns the details of q's EXPLAIN QUERY PLAN, joined by "; ".
func queryPlan(t *testing.T, s *Store, q string, args ...any) string {
	t.Helper()
	rows, err := s.reader.QueryContext(t.Context(), "EXPLAIN QUERY PLAN "+q, args...)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var plan []string
	for rows.Next() {
		var id, parent, unused int
		var detail string
		if err := rows.Scan(&id, &parent, &unused, &detail); err != nil {
			t.Fatal(err)
		}
		plan = append(plan, detail)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return strings.Join(plan, "; ")
}

// migratedTo opens a database at path migrated up to version, and the
// goose provider that moves it on; both close when the test ends.
func migratedTo(t *testing.T, path string, version int64) (*sql.DB, *goose.Provider) {
	t.Helper()
	db, err := openWriter(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	p, err := goose.NewProvider(goose.DialectSQLite3, db, migrationFS, goose.WithDisableGlobalRegistry(true))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.UpTo(t.Context(), version); err != nil {
		t.Fatal(err)
	}
	return db, p
}

// The active batches are read through the partial index batches_active:
// the query's predicate (batchdb.ActiveWhere) is the index's.
func TestActiveBatchesPlan(t *testing.T) {
	s, err := Open(t.Context(), filepath.Join(t.TempDir(), "jobs.db"), jobs.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if got := queryPlan(t, s, qActiveBatches); !strings.Contains(got, "SCAN batches USING INDEX batches_active") {
		t.Errorf("plan of %s:\n%s", qActiveBatches, got)
	}
}
