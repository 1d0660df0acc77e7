package pgstore_test

import (
	"context"
	"errors"
	"net/url"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/promptkit/promptkit/internal/pgtest"
	"github.com/promptkit/promptkit/jobs"
	"github.com/promptkit/promptkit/jobs/pgstore"
)

func TestOpenRejectsBadURLWithoutEchoingIt(t *testing.T) {
	ctx := context.Background()
	for _, u := range []string{
		"mysql://user:s3cret@host/db",
		"postgres://user:s3cret@host:notaport/db",
		"/var/lib/promptkit.db",
	} {
		_, err := pgstore.Open(ctx, u, jobs.Options{})
		if !errors.Is(err, jobs.ErrInvalid) {
			t.Errorf("Open(%q): error %v, want ErrInvalid", u, err)
		}
		if err != nil && strings.Contains(err.Error(), "s3cret") {
			t.Errorf("Open(%q): error %q contains the password", u, err)
		}
	}
}

// TestOpenCreatesSchema checks that Open creates a missing search_path
// schema, keeps goose's version table in it, and that migrating again
// (another process starting) is a no-op.
func TestOpenCreatesSchema(t *testing.T) {
	base := pgtest.BaseURL(t)
	ctx := context.Background()
	dsn := pgtest.Schema(t)
	u, _ := url.Parse(dsn)
	q := u.Query()
	schema := q.Get("search_path") + "_new"
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	t.Cleanup(func() {
		conn, err := pgx.Connect(ctx, base)
		if err != nil {
			return
		}
		defer conn.Close(ctx)
		conn.Exec(ctx, `DROP SCHEMA IF EXISTS `+pgx.Identifier{schema}.Sanitize()+` CASCADE`)
	})

	s, err := pgstore.Open(ctx, u.String(), jobs.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if applied, err := pgstore.Migrate(ctx, u.String()); err != nil || len(applied) != 0 {
		t.Fatalf("second migration: applied %v, %v", applied, err)
	}
	conn, err := pgx.Connect(ctx, base)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var tables []string
	rows, err := conn.Query(ctx, `SELECT tablename FROM pg_tables WHERE schemaname = $1 ORDER BY 1`, schema)
	if err != nil {
		t.Fatal(err)
	}
	if tables, err = pgx.CollectRows(rows, pgx.RowTo[string]); err != nil {
		t.Fatal(err)
	}
	want := "batches change_floor fair_tags file_chunks files goose_db_version job_events job_queue job_running jobs limits pacing pacing_peers prompts readiness reservations responses tokens usage_ledger workers"
	if got := strings.Join(tables, " "); got != want {
		t.Fatalf("tables in %s: %s, want %s", schema, got, want)
	}
}
