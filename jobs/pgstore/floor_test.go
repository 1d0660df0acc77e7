package pgstore_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/promptkit/promptkit/internal/testkit"
	"github.com/promptkit/promptkit/jobs"
	"github.com/promptkit/promptkit/jobs/pgstore"
)

// Two processes whose clocks disagree share a database: the reader's
// clock is an hour ahead of the writer's. A change the writer makes after
// the reader's ChangesSince must still be returned by the reader's next
// call, which starts at the AsOf the first call gave: the writer's stamp
// is raised to the floor the reader left (change_floor), not its own
// clock. (Without the floor the writer stamped its own, earlier, time and
// the change was lost to the reader.) Enqueue, Claim and Succeed take the
// one-round-trip path and fall back when they find the floor above their
// clock; Cancel takes the two-round-trip path and reads the floor.
func TestChangesSinceAcrossSkewedClocks(t *testing.T) {
	ctx := context.Background()
	base := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	ahead := testkit.NewClock(base.Add(time.Hour))
	behind := testkit.NewClock(base)
	reader, dsn := open(t, jobs.Options{Now: ahead.Now})
	writer, err := pgstore.Open(ctx, dsn, jobs.Options{Now: behind.Now})
	if err != nil {
		t.Fatal(err)
	}
	defer writer.Close()

	c, err := reader.ChangesSince(ctx, jobs.ChangesParams{})
	if err != nil {
		t.Fatal(err)
	}
	since := c.AsOf
	// follow reads the changes after since and moves since on.
	follow := func(step string) []jobs.Job {
		t.Helper()
		c, err := reader.ChangesSince(ctx, jobs.ChangesParams{Since: since})
		if err != nil {
			t.Fatalf("%s: %v", step, err)
		}
		since = c.AsOf
		return c.Jobs
	}
	seen := func(step string, js []jobs.Job, id string, state jobs.State) {
		t.Helper()
		i := slices.IndexFunc(js, func(j jobs.Job) bool { return j.ID == id })
		if i < 0 || js[i].State != state {
			t.Fatalf("%s: the reader's next ChangesSince returned %d jobs without %s in state %s", step, len(js), id, state)
		}
		if js[i].UpdatedAt.Before(base.Add(time.Hour)) {
			t.Fatalf("%s: stamped %v, below the reader's AsOf", step, js[i].UpdatedAt)
		}
	}

	e, err := writer.Enqueue(ctx, jobs.EnqueueParams{OrgID: "o", CreatedBy: "u", Text: "hi"})
	if err != nil {
		t.Fatal(err)
	}
	seen("enqueue", follow("enqueue"), e.JobID, jobs.Queued)

	ahead.Advance(time.Minute)
	if got, err := writer.Claim(ctx, jobs.ClaimParams{Worker: "w", Limit: 1}); err != nil || len(got) != 1 {
		t.Fatalf("claim = %v, %v", got, err)
	}
	seen("claim", follow("claim"), e.JobID, jobs.Running)

	ahead.Advance(time.Minute)
	if _, err := writer.Succeed(ctx, jobs.SucceedParams{JobID: e.JobID, Worker: "w", Answer: jobs.Answer{Output: "ok"}}); err != nil {
		t.Fatal(err)
	}
	seen("succeed", follow("succeed"), e.JobID, jobs.Succeeded)

	e2, err := writer.Enqueue(ctx, jobs.EnqueueParams{OrgID: "o", CreatedBy: "u", Text: "again"})
	if err != nil {
		t.Fatal(err)
	}
	follow("second enqueue")
	ahead.Advance(time.Minute)
	if _, err := writer.Cancel(ctx, jobs.CancelParams{JobID: e2.JobID}); err != nil {
		t.Fatal(err)
	}
	seen("cancel", follow("cancel"), e2.JobID, jobs.Cancelled)
}

// A job claimed through one Store and finished through another (which
// does not know the job's prompt, so the statement derives the response
// ID in SQL) gets the same response ID as jobs.ResponseID.
func TestSucceedThroughAnotherStore(t *testing.T) {
	ctx := context.Background()
	a, dsn := open(t, jobs.Options{})
	b, err := pgstore.Open(ctx, dsn, jobs.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	var es []jobs.Enqueued
	for range 3 {
		e, err := a.Enqueue(ctx, jobs.EnqueueParams{OrgID: "o", CreatedBy: "u", Text: "hi"})
		if err != nil {
			t.Fatal(err)
		}
		es = append(es, e)
	}
	if got, err := a.Claim(ctx, jobs.ClaimParams{Worker: "w", Limit: 3}); err != nil || len(got) != 3 {
		t.Fatalf("claim = %v, %v", got, err)
	}
	// One through the store that claimed it (which knows the prompt), two
	// through the other.
	for i, s := range []*pgstore.Store{a, b, b} {
		j, err := s.Succeed(ctx, jobs.SucceedParams{JobID: es[i].JobID, Worker: "w", Answer: jobs.Answer{Output: "ok"}})
		if err != nil {
			t.Fatal(err)
		}
		if want := jobs.ResponseID(es[i].PromptID, es[i].JobID); j.ResponseID != want {
			t.Fatalf("job %d: response ID %s, want %s", i, j.ResponseID, want)
		}
		r, err := b.GetResponse(ctx, "o", j.ResponseID)
		if err != nil || r.JobID != es[i].JobID || r.PromptID != es[i].PromptID || r.Output != "ok" {
			t.Fatalf("job %d: response %+v, %v", i, r, err)
		}
	}
}
