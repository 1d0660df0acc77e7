package jobs_test

import (
	"path/filepath"
	"testing"

	"github.com/promptkit/promptkit/jobs"
	"github.com/promptkit/promptkit/jobs/sqlitestore"
)

// A bulk action pages through the matching jobs: with pages of two, it
// acts on every one of seven jobs in two states, each once. (The
// conformance suite, jobstest, proves the rest on both stores.)
func TestBulkPages(t *testing.T) {
	defer jobs.SetBulkPage(2)()
	ctx := t.Context()
	st, err := sqlitestore.Open(ctx, filepath.Join(t.TempDir(), "jobs.db"), jobs.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	for range 7 {
		if _, err := st.Enqueue(ctx, jobs.EnqueueParams{OrgID: "o", CreatedBy: "u", Text: "x"}); err != nil {
			t.Fatal(err)
		}
	}
	// Three running, four queued: both passes of a cancel page.
	if got, err := st.Claim(ctx, jobs.ClaimParams{Worker: "w", Limit: 3}); err != nil || len(got) != 3 {
		t.Fatalf("Claim: %d, %v", len(got), err)
	}
	f := jobs.JobFilter{OrgID: "o"}
	res, err := jobs.CancelMatching(ctx, st, jobs.BulkParams{Filter: f, By: "test"})
	if err != nil || res.Matched != 7 || res.Done != 7 || res.Skipped != 0 || res.Truncated {
		t.Fatalf("CancelMatching: %+v, %v", res, err)
	}
	res, err = jobs.RetryMatching(ctx, st, jobs.BulkParams{Filter: f, By: "test", Limit: 5})
	if err != nil || res.Matched != 7 || res.Done != 5 || res.Truncated != true {
		t.Fatalf("RetryMatching limit 5: %+v, %v", res, err)
	}
	res, err = jobs.RetryMatching(ctx, st, jobs.BulkParams{Filter: f, By: "test"})
	if err != nil || res.Matched != 2 || res.Done != 2 || res.Truncated {
		t.Fatalf("RetryMatching the rest: %+v, %v", res, err)
	}
	if n, err := st.CountJobs(ctx, jobs.JobFilter{OrgID: "o", State: jobs.Queued}); err != nil || n != 7 {
		t.Errorf("queued retries: %d, %v; want 7", n, err)
	}
}
