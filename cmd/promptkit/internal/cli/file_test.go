package cli

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/spf13/cobra"

	"github.com/promptkit/promptkit/jobs"
	"github.com/promptkit/promptkit/jobs/sqlitestore"
)

// batchFailStore fails the n-th EnqueueBatch call (from 1).
type batchFailStore struct {
	jobs.Store
	calls, failOn atomic.Int32
}

func (s *batchFailStore) EnqueueBatch(ctx context.Context, ps []jobs.EnqueueParams) ([]jobs.Enqueued, error) {
	if s.calls.Add(1) == s.failOn.Load() {
		return nil, errors.New("disk I/O error")
	}
	return s.Store.EnqueueBatch(ctx, ps)
}

// TestSubmitFileRepeatable: a file whose submission failed part-way is
// submitted again with the same command, and every line ends up stored
// exactly once; the failure said how many were stored.
func TestSubmitFileRepeatable(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	st, err := sqlitestore.Open(ctx, filepath.Join(dir, "f.db"), jobs.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	var lines strings.Builder
	for i := range 1200 {
		fmt.Fprintf(&lines, "{\"text\": \"line %d\"}\n", i)
	}
	fmt.Fprintf(&lines, "{\"text\": \"own key\", \"idempotency_key\": \"mine\"}\n")
	path := filepath.Join(dir, "p.jsonl")
	if err := os.WriteFile(path, []byte(lines.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	noCheck := func(context.Context, jobs.EnqueueParams) error { return nil }
	submit := func(s jobs.Store) (string, error) {
		var summary bytes.Buffer
		cmd := &cobra.Command{}
		cmd.SetOut(&bytes.Buffer{})
		cmd.SetErr(&summary)
		cmd.SetContext(ctx)
		err := submitFile(cmd, s, noCheck, path, "o", "u", false)
		return summary.String(), err
	}

	failing := &batchFailStore{Store: st}
	failing.failOn.Store(2)
	if _, err := submit(failing); err == nil || !strings.Contains(err.Error(), "500 of 1201 lines are stored") {
		t.Fatalf("first run: %v", err)
	}
	out, err := submit(st)
	if err != nil || !strings.HasSuffix(out, "promptkit: queued 701 prompts (500 lines were already stored by an earlier run of this file)\n") {
		t.Fatalf("second run: %q %v", out, err)
	}
	out, err = submit(st)
	if err != nil || !strings.Contains(out, "promptkit: queued 0 prompts") {
		t.Fatalf("third run: %q %v", out, err)
	}
	page, err := st.ListJobs(ctx, jobs.ListParams{Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	n := len(page.Jobs)
	if page.Next != "" {
		more, _ := st.ListJobs(ctx, jobs.ListParams{Limit: 1000, After: page.Next})
		n += len(more.Jobs)
	}
	if n != 1201 {
		t.Fatalf("%d jobs for 1201 lines", n)
	}
}
