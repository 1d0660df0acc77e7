package sqlitestore

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/pressly/goose/v3"
)

// Migration 2 moves a profile written into execution_options to the
// prompt (unless the prompt has one) and drops the key; going down puts
// the prompt's profile back into the options. Listing by org and user
// uses its index.
func TestMigrationProfileStoredOnce(t *testing.T) {
	ctx := t.Context()
	db, err := openWriter(filepath.Join(t.TempDir(), "jobs.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	p, err := goose.NewProvider(goose.DialectSQLite3, db, migrationFS, goose.WithDisableGlobalRegistry(true))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.UpTo(ctx, 1); err != nil {
		t.Fatal(err)
	}
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
