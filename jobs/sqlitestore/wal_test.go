package sqlitestore

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/promptkit/promptkit/jobs"
)

// A file larger than walSizeLimit is written in one transaction, so the
// WAL grows past the limit; CreateFile, and FinishBatch with a big output
// file, leave the -wal file within the limit by the time they return (no
// other connection reads or writes here, so the checkpoint is never
// busy). SQLite alone would keep reusing the big file, never shrinking it.
func TestWALBoundedAfterBigFile(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "jobs.db")
	s, err := Open(t.Context(), path, jobs.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	walAtMostLimit := func(after string) {
		t.Helper()
		fi, err := os.Stat(path + "-wal")
		if err != nil {
			t.Fatal(err)
		}
		if fi.Size() > walSizeLimit {
			t.Errorf("-wal file is %d bytes after %s, want at most %d", fi.Size(), after, walSizeLimit)
		}
	}
	// Any content takes at least its size in WAL frames: SQLite does not
	// compress.
	content := bytes.Repeat([]byte("promptkit wal test\n"), 2*walSizeLimit/19+1)

	f, err := s.CreateFile(t.Context(), jobs.CreateFileParams{OrgID: "org-1", CreatedBy: "alice", Purpose: "batch",
		Filename: "big.jsonl", Content: bytes.NewReader(content), MaxBytes: int64(len(content))})
	if err != nil {
		t.Fatalf("CreateFile: %v", err)
	}
	if f.Bytes != int64(len(content)) {
		t.Fatalf("CreateFile stored %d bytes, want %d", f.Bytes, len(content))
	}
	walAtMostLimit("a big CreateFile")

	b, err := s.CreateBatch(t.Context(), jobs.CreateBatchParams{OrgID: "org-1", CreatedBy: "alice", InputFileID: f.ID,
		Endpoint: "/v1/chat/completions", CompletionWindow: "24h", Window: 24 * time.Hour})
	if err != nil {
		t.Fatalf("CreateBatch: %v", err)
	}
	if _, err := s.FinishBatch(t.Context(), jobs.FinishBatchParams{ID: b.ID, From: jobs.BatchValidating,
		To: jobs.BatchCompleted, Output: bytes.NewReader(content)}); err != nil {
		t.Fatalf("FinishBatch: %v", err)
	}
	walAtMostLimit("a FinishBatch with a big output file")

	// The writer waits for other processes' locks again (truncateWAL
	// turned that off for the checkpoint), and still writes.
	var ms int64
	if err := s.writer.QueryRowContext(t.Context(), "PRAGMA busy_timeout").Scan(&ms); err != nil {
		t.Fatal(err)
	}
	if ms != busyTimeout.Milliseconds() {
		t.Errorf("writer busy_timeout is %d ms, want %d", ms, busyTimeout.Milliseconds())
	}
	if _, err := s.Enqueue(t.Context(), jobs.EnqueueParams{Text: "after"}); err != nil {
		t.Fatalf("Enqueue: %v", err)
	}
}
