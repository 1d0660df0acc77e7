package pgstore

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/promptkit/promptkit/internal/pgtest"
	"github.com/promptkit/promptkit/jobs"
	"github.com/promptkit/promptkit/jobs/internal/storetest"
	"github.com/promptkit/promptkit/jobs/jobstest"
)

// readOnlySQLState is read_only_sql_transaction.
const readOnlySQLState = "25006"

// openOneConn opens a store on a fresh schema, on a fake clock, with a
// pool of one connection, so a session setting made through the pool
// holds for every later statement of the store: the way to make this
// store's writes fail, and only this store's, on a shared database. It
// also returns the schema's URL (without the pool setting).
func openOneConn(t *testing.T) (*Store, *jobstest.Clock, string) {
	t.Helper()
	dsn := pgtest.Schema(t)
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	q.Set("pool_max_conns", "1")
	u.RawQuery = q.Encode()
	clock := jobstest.NewClock(jobstest.T0)
	s, err := Open(t.Context(), u.String(), jobs.Options{Now: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s, clock, dsn
}

// setReadOnly makes the store's only connection start read-only
// transactions (on) or writing ones (off).
func setReadOnly(t *testing.T, s *Store, on bool) {
	t.Helper()
	v := "off"
	if on {
		v = "on"
	}
	if _, err := s.pool.Exec(t.Context(), "SET default_transaction_read_only = "+v); err != nil {
		t.Fatal(err)
	}
}

// sqlState is the SQLSTATE err carries, or "".
func sqlState(err error) string {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return pgErr.Code
	}
	return ""
}

// While writes are refused, the probe fails too, and its failure is not
// remembered. A real write that failed for a database reason keeps Check
// failing once writes work again (storetest.FailedWrites).
func TestCheckRemembersFailedWrites(t *testing.T) {
	s, clock, _ := openOneConn(t)
	ctx := t.Context()
	refused := func(err error) bool { return sqlState(err) == readOnlySQLState }
	setReadOnly(t, s, true)
	if err := s.Check(ctx); !refused(err) || !strings.Contains(fmt.Sprint(err), "probe") {
		t.Fatalf("Check on a read-only connection = %v, want the probe's %s", err, readOnlySQLState)
	}
	setReadOnly(t, s, false)
	if err := s.Check(ctx); err != nil {
		t.Fatalf("Check once writes work again (the probe's failure is not remembered): %v", err)
	}
	storetest.FailedWrites{
		Store:  s,
		Clock:  clock,
		Break:  func(t *testing.T) { setReadOnly(t, s, true) },
		Mend:   func(t *testing.T) { setReadOnly(t, s, false) },
		Failed: refused,
		Write:  jobs.EnqueueParams{CreatedBy: "u", Text: "x"},
	}.Run(t)
}

// Each store probes its own row, so probes never wait for one another:
// with another store's row locked (its probe in flight), and a stale row
// locked too, Check passes at once. It deletes the rows of stores that
// have not probed for an hour, except one another transaction holds.
func TestProbeRows(t *testing.T) {
	a, clock, dsn := openOneConn(t)
	ctx := t.Context()
	b, err := Open(ctx, dsn, jobs.Options{Now: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	for _, s := range []*Store{a, b} {
		if err := s.Check(ctx); err != nil {
			t.Fatal(err)
		}
	}
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	rows := func() string {
		t.Helper()
		var got string
		if err := conn.QueryRow(ctx, `SELECT coalesce(string_agg(store, ' ' ORDER BY store), '') FROM readiness`).Scan(&got); err != nil {
			t.Fatal(err)
		}
		return got
	}
	// In byte order (COLLATE "C"), as string_agg lists them.
	sorted := func(keys ...string) string {
		slices.Sort(keys)
		return strings.Join(keys, " ")
	}
	if got, want := rows(), sorted(a.probeKey, b.probeKey); got != want {
		t.Fatalf("readiness rows = %q, want %q (one per store)", got, want)
	}
	now := clock.Advance(time.Second)
	if err := a.Check(ctx); err != nil {
		t.Fatal(err)
	}
	var at time.Time
	if err := conn.QueryRow(ctx, `SELECT at FROM readiness WHERE store = $1`, a.probeKey).Scan(&at); err != nil {
		t.Fatal(err)
	}
	if !at.Equal(now) {
		t.Fatalf("readiness.at = %v, want the clock's %v", at, now)
	}
	stale := clock.Now().Add(-time.Hour - time.Microsecond)
	if _, err := conn.Exec(ctx, `INSERT INTO readiness (store, at) VALUES ('gone', $1), ('held', $1)`, stale); err != nil {
		t.Fatal(err)
	}

	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, `SELECT 1 FROM readiness WHERE store = ANY($1) FOR UPDATE`, []string{b.probeKey, "held"}); err != nil {
		t.Fatal(err)
	}
	// A wait for either lock would run into the deadline.
	short, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := a.Check(short); err != nil {
		t.Fatalf("Check while another store's probe and a stale row are locked: %v", err)
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if got, want := rows(), sorted(a.probeKey, b.probeKey, "held"); got != want {
		t.Fatalf("readiness rows = %q, want %q: the stale row deleted, the held one skipped", got, want)
	}
}
