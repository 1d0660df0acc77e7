package cli

import (
	"encoding/json"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/promptkit/promptkit/jobs"
	"github.com/promptkit/promptkit/jobs/sqlitestore"
)

// `jobs metrics --by-org` prints each org's jobs by state and its
// failures in the window; --json carries them as org_counts.
func TestJobsMetricsByOrgCounts(t *testing.T) {
	t.Parallel()
	db := filepath.Join(t.TempDir(), "jobs.db")
	st, err := sqlitestore.Open(t.Context(), db, jobs.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	for _, org := range []string{"org-b", "org-a", "org-a", "org-a"} {
		if _, err := st.Enqueue(t.Context(), jobs.EnqueueParams{OrgID: org, CreatedBy: "u", Text: "t " + org}); err != nil {
			t.Fatal(err)
		}
	}
	// Claim in age order: org-b's job runs, then one of org-a's fails.
	for i, worker := range []string{"w1", "w2"} {
		got, err := st.Claim(t.Context(), jobs.ClaimParams{Worker: worker, Limit: 1})
		if err != nil || len(got) != 1 {
			t.Fatalf("claim %d: %v, %v", i, got, err)
		}
		if i == 1 {
			if _, err := st.Fail(t.Context(), jobs.FailParams{JobID: got[0].ID, Worker: worker, Kind: jobs.KindParse}); err != nil {
				t.Fatal(err)
			}
		}
	}

	code, out, errOut := run(t, "jobs", "metrics", "--by-org", "--database", db)
	if code != 0 {
		t.Fatalf("jobs metrics --by-org: %d %s", code, errOut)
	}
	if !regexp.MustCompile(`(?m)^ORG\s+QUEUED\s+RUNNING\s+SUCCEEDED\s+FAILED\s+CANCELLED\s+SUPERSEDED\s+FAILED IN WINDOW\n` +
		`org-a\s+2\s+0\s+0\s+1\s+0\s+0\s+1\n` +
		`org-b\s+0\s+1\s+0\s+0\s+0\s+0\s+0\n`).MatchString(out) {
		t.Errorf("jobs metrics --by-org lacks the org counts:\n%s", out)
	}

	code, out, errOut = run(t, "jobs", "metrics", "--by-org", "--json", "--database", db)
	var m struct {
		OrgCounts []jobs.OrgCounts `json:"org_counts"`
	}
	if code != 0 || json.Unmarshal([]byte(out), &m) != nil {
		t.Fatalf("jobs metrics --by-org --json: %d %s %s", code, out, errOut)
	}
	if len(m.OrgCounts) != 2 || m.OrgCounts[0].OrgID != "org-a" || m.OrgCounts[0].Counts[jobs.Queued] != 2 ||
		m.OrgCounts[0].FailedInWindow != 1 || m.OrgCounts[1].Counts[jobs.Running] != 1 || len(m.OrgCounts[1].Counts) != 6 {
		t.Errorf("org_counts = %+v", m.OrgCounts)
	}
}
