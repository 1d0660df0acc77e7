package batchdb

import (
	"bytes"
	"context"
	"errors"
	"io"
	"testing"

	"github.com/promptkit/promptkit/jobs"
	"github.com/promptkit/promptkit/jobs/internal/health"
)

// ReadChunks cuts content into FileChunkSize chunks numbered from 0,
// accepts exactly max bytes and refuses one more, reading no further.
func TestReadChunks(t *testing.T) {
	for _, size := range []int{0, 1, jobs.FileChunkSize, jobs.FileChunkSize + 1, 3*jobs.FileChunkSize - 1} {
		data := bytes.Repeat([]byte("0123456789"), size/10+1)[:size]
		var got []byte
		next := 0
		n, err := ReadChunks(bytes.NewReader(data), int64(size), func(seq int, chunk []byte) error {
			if seq != next || len(chunk) == 0 || len(chunk) > jobs.FileChunkSize {
				t.Errorf("size %d: chunk %d of %d bytes, want chunk %d", size, seq, len(chunk), next)
			}
			next++
			got = append(got, chunk...)
			return nil
		})
		if err != nil || n != int64(size) || !bytes.Equal(got, data) {
			t.Errorf("size %d: read %d bytes, %v; content equal %v", size, n, err, bytes.Equal(got, data))
		}
		if want := (size + jobs.FileChunkSize - 1) / jobs.FileChunkSize; next != want {
			t.Errorf("size %d: %d chunks, want %d", size, next, want)
		}

		r := bytes.NewReader(append(data, 'x', 'y'))
		_, err = ReadChunks(r, int64(size), func(int, []byte) error { return nil })
		if !errors.Is(err, jobs.ErrFileTooLarge) {
			t.Errorf("size %d + 2 over a limit of %d: %v, want ErrFileTooLarge", size, size, err)
		}
		if r.Len() != 1 {
			t.Errorf("size %d: %d bytes left unread, want 1 (read at most max+1)", size, r.Len())
		}
	}
}

// A failing reader's error is the caller's, and a failing store's is
// returned as it is.
func TestReadChunksErrors(t *testing.T) {
	broken := errors.New("broken")
	_, err := ReadChunks(io.MultiReader(bytes.NewReader([]byte("abc")), errReader{broken}), 100,
		func(int, []byte) error { return nil })
	if !errors.Is(err, broken) || !health.Refusal(context.Background(), err, func(error) bool { return false }) {
		t.Errorf("a failing reader: %v, want its error, marked as the caller's", err)
	}
	_, err = ReadChunks(bytes.NewReader([]byte("abc")), 100, func(int, []byte) error { return broken })
	if !errors.Is(err, broken) || health.Refusal(context.Background(), err, func(error) bool { return false }) {
		t.Errorf("a failing store: %v, want its error, not marked", err)
	}
}

type errReader struct{ err error }

func (r errReader) Read([]byte) (int, error) { return 0, r.err }

func TestChecks(t *testing.T) {
	for _, p := range []jobs.MoveBatchParams{
		{From: jobs.BatchInProgress, To: jobs.BatchValidating},
		{From: "", To: jobs.BatchFailed},
		{From: jobs.BatchValidating, To: "gone"},
	} {
		if err := CheckMove(p); !errors.Is(err, jobs.ErrInvalid) {
			t.Errorf("CheckMove(%q → %q) = %v, want ErrInvalid", p.From, p.To, err)
		}
	}
	if err := CheckMove(jobs.MoveBatchParams{From: jobs.BatchValidating, To: jobs.BatchInProgress}); err != nil {
		t.Errorf("CheckMove(validating → in_progress) = %v", err)
	}
	for _, to := range []jobs.BatchStatus{jobs.BatchFinalizing, jobs.BatchInProgress, "gone"} {
		if err := CheckFinish(jobs.FinishBatchParams{From: jobs.BatchFinalizing, To: to}); !errors.Is(err, jobs.ErrInvalid) {
			t.Errorf("CheckFinish(→ %q) = %v, want ErrInvalid", to, err)
		}
	}
	if got := ResultsLimit(0); got != 500 {
		t.Errorf("ResultsLimit(0) = %d", got)
	}
	if got := ResultsLimit(5000); got != jobs.MaxListLimit {
		t.Errorf("ResultsLimit(5000) = %d", got)
	}
}
