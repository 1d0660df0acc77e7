package cli

import (
	"context"
	"encoding/json"
	"path/filepath"
	"regexp"
	"slices"
	"testing"

	"github.com/promptkit/promptkit/jobs"
	"github.com/promptkit/promptkit/jobs/sqlitestore"
)

// withDB opens the SQLite job database at path for fn, then closes it, so
// that the commands a test runs in between see what fn wrote.
func withDB(t *testing.T, path string, fn func(ctx context.Context, st jobs.Store)) {
	t.Helper()
	ctx := context.Background()
	st, err := sqlitestore.Open(ctx, path, jobs.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	fn(ctx, st)
}

// jobs cancel and jobs retry with filter flags instead of a job ID count
// first and act only with --yes, each job with an event naming the OS
// user and the bulk action; jobs list takes the same flags.
func TestJobsBulkCancelRetry(t *testing.T) {
	t.Parallel()
	db := filepath.Join(t.TempDir(), "bulk.db")
	var acme []string
	var other, urgent string
	withDB(t, db, func(ctx context.Context, st jobs.Store) {
		for range 3 {
			e, err := st.Enqueue(ctx, jobs.EnqueueParams{OrgID: "acme", CreatedBy: "u", Text: "x", Profile: "fast"})
			if err != nil {
				t.Fatal(err)
			}
			acme = append(acme, e.JobID)
		}
		e, err := st.Enqueue(ctx, jobs.EnqueueParams{OrgID: "other", CreatedBy: "u", Text: "x"})
		if err != nil {
			t.Fatal(err)
		}
		other = e.JobID
		e, err = st.Enqueue(ctx, jobs.EnqueueParams{OrgID: "other", CreatedBy: "u", Text: "x", Priority: new(5)})
		if err != nil {
			t.Fatal(err)
		}
		urgent = e.JobID
	})
	dbf := []string{"--database", db}
	args := func(a ...string) []string { return append(a, dbf...) }

	// The shared filter flags on jobs list.
	out := expect(t, 0, args("jobs", "list", "--org", "acme", "--profile", "fast", "--json"))
	var listed []jobs.Job
	if err := json.Unmarshal([]byte(out), &listed); err != nil || len(listed) != 3 {
		t.Fatalf("jobs list --profile: %v\n%s", err, out)
	}
	out = expect(t, 0, args("jobs", "list", "--max-priority", "10", "--json"))
	if err := json.Unmarshal([]byte(out), &listed); err != nil || len(listed) != 1 || listed[0].ID != urgent {
		t.Fatalf("jobs list --max-priority 10: %v\n%s", err, out)
	}
	expect(t, 2, args("jobs", "list", "--min-priority", "60", "--max-priority", "40"), "min_priority 60 is above max_priority 40")
	expect(t, 2, args("jobs", "list", "--state", "done"), `--state "done"`)

	// Counting changes nothing.
	expect(t, 0, args("jobs", "cancel", "--state", "queued", "--org", "acme"), "3 jobs match; add --yes to cancel them")
	withDB(t, db, func(ctx context.Context, st jobs.Store) {
		if n, err := st.CountJobs(ctx, jobs.JobFilter{State: jobs.Queued}); err != nil || n != 5 {
			t.Fatalf("after counting: %d queued, %v", n, err)
		}
	})
	expect(t, 2, args("jobs", "cancel", "--state", "succeeded", "--org", "acme", "--yes"), "a cancel acts on queued or running jobs")
	expect(t, 2, args("jobs", "cancel", "--org", "acme", "--yes", "--limit", "0"), "--limit 0")

	out = expect(t, 0, args("jobs", "cancel", "--state", "queued", "--org", "acme", "--yes"), "cancelled 3 of 3 (0 changed meanwhile); bulk action ")
	cancelBulk := regexp.MustCompile(`bulk action (\S+)`).FindStringSubmatch(out)[1]
	by := cliActor()
	withDB(t, db, func(ctx context.Context, st jobs.Store) {
		for _, id := range acme {
			checkAudit(t, ctx, st, id, jobs.Cancelled, by, cancelBulk)
		}
		for _, id := range []string{other, urgent} {
			if j, err := st.GetJob(ctx, "", id); err != nil || j.State != jobs.Queued {
				t.Errorf("job %s of another org: %s, %v", id, j.State, err)
			}
		}
	})

	// Retry: count, refuse --priority, then act on at most --limit.
	expect(t, 0, args("jobs", "retry", "--org", "acme"), "3 jobs match; add --yes to retry them")
	expect(t, 2, args("jobs", "retry", "--org", "acme", "--priority", "3", "--yes"), "--priority applies to one job")
	out = expect(t, 0, args("jobs", "retry", "--org", "acme", "--yes", "--limit", "2"), "retried 2 of 3 (0 changed meanwhile)", "run it again for the rest")
	retryBulk := regexp.MustCompile(`bulk action (\S+)`).FindStringSubmatch(out)[1]
	expect(t, 0, args("jobs", "retry", "--org", "acme", "--yes"), "retried 1 of 1 (0 changed meanwhile)")
	withDB(t, db, func(ctx context.Context, st jobs.Store) {
		var fromFirst int
		for _, id := range acme {
			evs, err := st.JobEvents(ctx, "", id)
			if err != nil {
				t.Fatal(err)
			}
			last := evs[len(evs)-1]
			var d jobs.TransitionData
			if err := json.Unmarshal(last.Data, &d); err != nil || last.To != jobs.Superseded || d.By != by {
				t.Errorf("job %s: last event %+v (%v)", id, last, err)
			}
			if d.Bulk == retryBulk {
				fromFirst++
			}
		}
		if fromFirst != 2 {
			t.Errorf("%d jobs name the first retry's bulk action, want 2", fromFirst)
		}
	})

	// One job by ID still works, and names the user too.
	expect(t, 0, args("jobs", "cancel", other), other+" cancelled")
	withDB(t, db, func(ctx context.Context, st jobs.Store) {
		checkAudit(t, ctx, st, other, jobs.Cancelled, by, "")
	})
}

// checkAudit checks a job's last transition: to state, by and bulk in its
// data.
func checkAudit(t *testing.T, ctx context.Context, st jobs.Store, id string, to jobs.State, by, bulk string) {
	t.Helper()
	evs, err := st.JobEvents(ctx, "", id)
	if err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(evs, func(e jobs.Event) bool { return e.To == to })
	if i < 0 {
		t.Fatalf("job %s: no event to %s in %+v", id, to, evs)
	}
	var d jobs.TransitionData
	if err := json.Unmarshal(evs[i].Data, &d); err != nil || d.By != by || d.Bulk != bulk {
		t.Errorf("job %s: event to %s with data %s, want by %q bulk %q", id, to, evs[i].Data, by, bulk)
	}
}
