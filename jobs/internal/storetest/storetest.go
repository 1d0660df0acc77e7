// Package storetest holds the scenarios both job stores' internal tests
// run where jobstest cannot reach: each needs a hand on the database (to
// make its writes fail, to rewrite its schema version), which only the
// store's own package has.
package storetest

import (
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/promptkit/promptkit/jobs"
	"github.com/promptkit/promptkit/jobs/internal/health"
	"github.com/promptkit/promptkit/jobs/internal/schema"
	"github.com/promptkit/promptkit/jobs/jobstest"
)

// FailedWrites is the scenario of a real write that failed for a database
// reason: it keeps Check failing, naming it, once writes work again, until
// a write stores something or health.Window passes. A write that stores
// nothing (an empty Claim poll, which succeeds with writes broken), a
// refusal and Check itself change nothing.
type FailedWrites struct {
	// Store is a new store on Clock.
	Store jobs.Store
	Clock *jobstest.Clock
	// Break makes the store's writes fail for a database reason, Mend
	// makes them work again.
	Break, Mend func(t *testing.T)
	// Failed reports whether err carries the failure Break causes.
	Failed func(err error) bool
	// Write is an enqueue that fails while writes are broken.
	Write jobs.EnqueueParams
	// Broken, when set, runs while writes are broken and the first write
	// has failed: the store's own checks of that moment.
	Broken func(t *testing.T)
}

// Run runs the scenario.
func (c FailedWrites) Run(t *testing.T) {
	t.Helper()
	ctx := t.Context()
	s := c.Store
	if err := s.Check(ctx); err != nil {
		t.Fatalf("Check on a new store: %v", err)
	}
	wantFailing := func(when string) {
		t.Helper()
		if err := s.Check(ctx); !c.Failed(err) || !strings.Contains(fmt.Sprint(err), "enqueue") {
			t.Fatalf("Check %s = %v, want the enqueue's failure", when, err)
		}
	}
	failWrite := func(what string) {
		t.Helper()
		if _, err := s.Enqueue(ctx, c.Write); !c.Failed(err) {
			t.Fatalf("%s with writes broken = %v, want the failure", what, err)
		}
	}

	c.Break(t)
	failWrite("Enqueue")
	if got, err := s.Claim(ctx, jobs.ClaimParams{Worker: "w"}); err != nil || len(got) != 0 {
		t.Fatalf("empty Claim with writes broken = %v, %v; want nothing, no error", got, err)
	}
	if c.Broken != nil {
		c.Broken(t)
	}
	c.Mend(t)
	wantFailing("after a failed enqueue and an empty Claim poll")
	wantFailing("again")
	if _, err := s.Succeed(ctx, jobs.SucceedParams{JobID: jobs.NewID(), Worker: "w"}); !errors.Is(err, jobs.ErrNotClaimed) {
		t.Fatalf("Succeed of an unknown job = %v, want ErrNotClaimed", err)
	}
	wantFailing("after a refused Succeed")

	c.Clock.Advance(health.Window - time.Microsecond)
	wantFailing("just before the window ends")
	c.Clock.Advance(time.Microsecond)
	if err := s.Check(ctx); err != nil {
		t.Fatalf("Check once the window has passed without writes: %v", err)
	}

	c.Break(t)
	failWrite("A second Enqueue")
	c.Mend(t)
	wantFailing("once writes work again, before any write")
	if _, err := s.Enqueue(ctx, c.Write); err != nil {
		t.Fatalf("Enqueue once writes work: %v", err)
	}
	if err := s.Check(ctx); err != nil {
		t.Fatalf("Check after a write stored something: %v", err)
	}
}

// SchemaVersions checks that Check passes on the schema this build
// migrates to, latest, and fails, naming both versions, on a newer one (a
// newer build migrated the database) and on an older one. db is the
// store's database; newer and older are the statements that make its
// schema version latest+1 and previous (the migration before latest; the
// numbers may have gaps), given latest.
func SchemaVersions(t *testing.T, s jobs.Store, db *sql.DB, latest, previous int64, newer, older string) {
	t.Helper()
	ctx := t.Context()
	if err := s.Check(ctx); err != nil {
		t.Fatalf("Check after Open: %v", err)
	}
	for _, c := range []struct {
		what string
		sql  string
		have int64
	}{{"newer", newer, latest + 1}, {"older", older, previous}} {
		if _, err := db.ExecContext(ctx, c.sql, latest); err != nil {
			t.Fatal(err)
		}
		if c.what == "older" {
			// The migration before the latest: numbers may skip (ones
			// reserved for work that lands later).
			if err := db.QueryRowContext(ctx, `SELECT max(version_id) FROM goose_db_version`).Scan(&c.have); err != nil {
				t.Fatal(err)
			}
		}
		err := s.Check(ctx)
		var ve *schema.VersionError
		if !errors.As(err, &ve) || ve.Have != c.have || ve.Want != latest {
			t.Errorf("Check on a %s schema = %v, want a VersionError %d ≠ %d", c.what, err, c.have, latest)
		} else if msg := err.Error(); !strings.Contains(msg, fmt.Sprint(c.have)) || !strings.Contains(msg, fmt.Sprint(latest)) || !strings.Contains(msg, c.what) {
			t.Errorf("Check on a %s schema: %q should say so and name both versions", c.what, msg)
		}
	}
}

// KeyStoredBefore checks, on a store opened on a database where an older
// migration stored prompt "p" of org "o" with idempotency key "k" and job
// "j" (and no request hash), that a repeat of the key with a request hash
// gets job j: a key stored before request hashes never conflicts.
func KeyStoredBefore(t *testing.T, s jobs.Store, migration string) {
	t.Helper()
	e, err := s.Enqueue(t.Context(), jobs.EnqueueParams{OrgID: "o", Text: "x", IdempotencyKey: "k", RequestHash: "h"})
	if err != nil || !e.Existing || e.JobID != "j" {
		t.Errorf("repeat of a key stored before %s = %+v, %v; want job j", migration, e, err)
	}
}

// TagsBackfilled checks, on a store opened on a database where the
// migration that gave queued jobs start tags backfilled those of org "a"
// (a1, a2, a3 at priority 50, and u1 at priority 10, in that claim
// order), that the store claims them in that order and that a new org's
// job comes in turn, not behind them all: it shares a2's tag, and its ID
// (a UUIDv7) sorts first.
func TagsBackfilled(t *testing.T, s jobs.Store) {
	t.Helper()
	ctx := t.Context()
	b, err := s.Enqueue(ctx, jobs.EnqueueParams{OrgID: "b", CreatedBy: "u", Text: "x"})
	if err != nil {
		t.Fatal(err)
	}
	got, err := s.Claim(ctx, jobs.ClaimParams{Worker: "w", Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	var order []string
	for _, j := range got {
		order = append(order, j.ID)
	}
	if want := []string{"u1", "a1", b.JobID, "a2", "a3"}; strings.Join(order, " ") != strings.Join(want, " ") {
		t.Errorf("claim order after the upgrade %v, want %v", order, want)
	}
}
