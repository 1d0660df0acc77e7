package cli

import (
	"bytes"
	"context"
	"errors"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/spf13/cobra"

	"github.com/promptkit/promptkit/jobs"
	"github.com/promptkit/promptkit/jobs/sqlitestore"
)

// outageStore fails GetJob while down is above zero, counting it down.
type outageStore struct {
	jobs.Store
	down atomic.Int32
}

func (s *outageStore) GetJob(ctx context.Context, org, id string) (jobs.Job, error) {
	if s.down.Add(-1) >= 0 {
		return jobs.Job{}, errors.New("connection refused")
	}
	return s.Store.GetJob(ctx, org, id)
}

// TestWaitRidesOutAnOutage: submit --wait keeps waiting through failed
// reads, says so once, and prints the answer when the database answers
// again, instead of failing while its job is still queued.
func TestWaitRidesOutAnOutage(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st, err := sqlitestore.Open(ctx, filepath.Join(t.TempDir(), "w.db"), jobs.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	e, err := st.Enqueue(ctx, jobs.EnqueueParams{Text: "q"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Claim(ctx, jobs.ClaimParams{Worker: "w"}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Succeed(ctx, jobs.SucceedParams{JobID: e.JobID, Worker: "w", Answer: jobs.Answer{Output: "the answer"}}); err != nil {
		t.Fatal(err)
	}
	flaky := &outageStore{Store: st}
	flaky.down.Store(2)
	var out, errOut bytes.Buffer
	cmd := &cobra.Command{}
	cmd.SetOut(&out)
	cmd.SetErr(&errOut)
	cmd.SetContext(ctx)
	if err := waitJob(cmd, flaky, e.JobID, false); err != nil {
		t.Fatalf("waitJob: %v", err)
	}
	if out.String() != "the answer\n" {
		t.Fatalf("stdout %q", out.String())
	}
	if n := strings.Count(errOut.String(), "still waiting"); n != 1 || !strings.Contains(errOut.String(), "again") {
		t.Fatalf("stderr %q: want one retry notice and one recovery", errOut.String())
	}
}
