package storeops

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/promptkit/promptkit/jobs"
	"github.com/promptkit/promptkit/jobs/internal/health"
)

// readChunks cuts content into FileChunkSize chunks numbered from 0,
// accepts exactly max bytes and refuses one more, reading no further.
func TestReadChunks(t *testing.T) {
	for _, size := range []int{0, 1, jobs.FileChunkSize, jobs.FileChunkSize + 1, 3*jobs.FileChunkSize - 1} {
		data := bytes.Repeat([]byte("0123456789"), size/10+1)[:size]
		var got []byte
		next := 0
		n, err := readChunks(bytes.NewReader(data), int64(size), func(seq int, chunk []byte) error {
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
		_, err = readChunks(r, int64(size), func(int, []byte) error { return nil })
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
	_, err := readChunks(io.MultiReader(bytes.NewReader([]byte("abc")), errReader{broken}), 100,
		func(int, []byte) error { return nil })
	if !errors.Is(err, broken) || !health.Refusal(context.Background(), err, func(error) bool { return false }) {
		t.Errorf("a failing reader: %v, want its error, marked as the caller's", err)
	}
	_, err = readChunks(bytes.NewReader([]byte("abc")), 100, func(int, []byte) error { return broken })
	if !errors.Is(err, broken) || health.Refusal(context.Background(), err, func(error) bool { return false }) {
		t.Errorf("a failing store: %v, want its error, not marked", err)
	}
}

type errReader struct{ err error }

func (r errReader) Read([]byte) (int, error) { return 0, r.err }

// fake is one batch in memory, and a record of the calls made on it, in
// order: fakeDB is the DB on it, fakeTx its transactions.
type fake struct {
	batch    jobs.Batch
	found    bool // whether the batch exists
	progress jobs.BatchProgress
	calls    []string
	wrote    []string
	changed  int
	stored   []int64
}

type (
	fakeDB struct{ *fake }
	fakeTx struct{ *fake }
)

var (
	_ DB = fakeDB{}
	_ Tx = fakeTx{}
)

var errUnused = errors.New("not used by these tests")

func (d fakeDB) WriteTx(ctx context.Context, fn func(Tx) error) error {
	saved := d.batch
	err := fn(fakeTx(d))
	if err != nil {
		d.batch = saved
		d.calls = append(d.calls, "rollback")
	}
	return err
}

func (d fakeDB) Wrote(ctx context.Context, op string, err error, stored bool) {
	d.wrote = append(d.wrote, fmt.Sprintf("%s %v %v", op, err == nil, stored))
}

func (d fakeDB) Changed()                                 { d.changed++ }
func (d fakeDB) StoredFiles(ctx context.Context, n int64) { d.stored = append(d.stored, n) }

func (d fakeDB) BatchProgress(ctx context.Context, id string) (jobs.BatchProgress, error) {
	d.calls = append(d.calls, "progress")
	return d.progress, nil
}

func (d fakeDB) BatchGet(ctx context.Context, p BatchGetParams) (jobs.Batch, error) {
	return fakeTx(d).BatchGet(p)
}

func (fakeDB) FileGet(context.Context, FileGetParams) (jobs.File, error) {
	return jobs.File{}, errUnused
}
func (fakeDB) FileList(context.Context, jobs.FileListParams) ([]jobs.File, error) {
	return nil, errUnused
}
func (fakeDB) FileChunkGet(context.Context, FileChunkGetParams) ([]byte, error) {
	return nil, errUnused
}
func (fakeDB) BatchList(context.Context, jobs.BatchListParams) ([]jobs.Batch, error) {
	return nil, errUnused
}
func (fakeDB) BatchListActive(context.Context) ([]jobs.Batch, error) { return nil, errUnused }
func (fakeDB) BatchPromptList(context.Context, jobs.BatchResultsParams) ([]jobs.Prompt, error) {
	return nil, errUnused
}
func (fakeDB) PromptJobList(context.Context, []string) ([]jobs.Job, error) { return nil, errUnused }
func (fakeDB) ResponseList(context.Context, []string) (map[string]jobs.Response, error) {
	return nil, errUnused
}

func (t fakeTx) BatchGet(p BatchGetParams) (jobs.Batch, error) {
	t.calls = append(t.calls, fmt.Sprintf("get %v", p.ForUpdate))
	if !t.found || p.ID != t.batch.ID || p.OrgID != "" && p.OrgID != t.batch.OrgID {
		return jobs.Batch{}, jobs.ErrNotFound
	}
	return t.batch, nil
}

func (t fakeTx) BatchMove(p BatchMoveParams) (jobs.Batch, error) {
	t.calls = append(t.calls, fmt.Sprintf("move %s→%s errors=%v,%q counts=%v", p.From, p.To, p.SetErrors, p.Errors, p.Counts != nil))
	if !t.found || p.ID != t.batch.ID || t.batch.Status != p.From {
		return jobs.Batch{}, jobs.ErrNotFound
	}
	t.batch.Status = p.To
	if p.Counts != nil {
		t.batch.Counts = *p.Counts
	}
	return t.batch, nil
}

func (t fakeTx) BatchSetOutputs(p BatchSetOutputsParams) (jobs.Batch, error) {
	t.calls = append(t.calls, fmt.Sprintf("outputs %v %v", p.OutputFileID != "", p.ErrorFileID != ""))
	t.batch.OutputFileID, t.batch.ErrorFileID = p.OutputFileID, p.ErrorFileID
	return t.batch, nil
}

func (t fakeTx) FileInsert(p FileInsertParams) error {
	t.calls = append(t.calls, "file "+p.Filename)
	return nil
}

func (t fakeTx) FileChunkInsert(p FileChunkInsertParams) error {
	t.calls = append(t.calls, fmt.Sprintf("chunk %d", p.Seq))
	return nil
}

func (t fakeTx) FileSetBytes(p FileSetBytesParams) (jobs.File, error) {
	t.calls = append(t.calls, fmt.Sprintf("bytes %d", p.Bytes))
	return jobs.File{ID: p.ID, Bytes: p.Bytes}, nil
}

func (fakeDB) TokenInsert(context.Context, TokenInsertParams) (jobs.Token, bool, error) {
	return jobs.Token{}, false, errUnused
}
func (fakeDB) TokenRevoke(context.Context, string) (jobs.Token, error) {
	return jobs.Token{}, errUnused
}
func (fakeDB) TokenList(context.Context, string) ([]jobs.Token, error) { return nil, errUnused }
func (fakeDB) TokenGetValid(context.Context, []byte) (jobs.Token, error) {
	return jobs.Token{}, errUnused
}
func (fakeDB) TokenExistsValid(context.Context) (bool, error) { return false, errUnused }
func (fakeDB) LimitUpsert(context.Context, jobs.Limit) (jobs.Limit, error) {
	return jobs.Limit{}, errUnused
}
func (fakeDB) LimitDelete(context.Context, jobs.LimitScope, string) error { return errUnused }
func (fakeDB) LimitList(context.Context) ([]jobs.Limit, error)            { return nil, errUnused }
func (fakeDB) CallsInsert(context.Context, jobs.RecordCallsParams) error  { return errUnused }
func (fakeDB) ReservationDelete(context.Context, string) error            { return errUnused }
func (fakeDB) ReservedRead(context.Context, jobs.ReservedParams) (jobs.Reserved, error) {
	return jobs.Reserved{}, errUnused
}
func (fakeDB) LimitPause(context.Context, string, bool) (jobs.Limit, error) {
	return jobs.Limit{}, errUnused
}
func (fakeDB) PacingHold(context.Context, string, bool) error { return errUnused }
func (fakeDB) WorkerUpsert(context.Context, jobs.WorkerReport) (bool, error) {
	return false, errUnused
}
func (fakeDB) WorkerList(context.Context, time.Time) ([]jobs.WorkerInfo, error) {
	return nil, errUnused
}
func (fakeDB) WorkerDrain(context.Context, string, bool) (jobs.WorkerInfo, error) {
	return jobs.WorkerInfo{}, errUnused
}

func (fakeTx) BatchInsert(BatchInsertParams) (jobs.Batch, error) { return jobs.Batch{}, errUnused }
func (fakeTx) FileDelete(FileGetParams) error                    { return errUnused }
func (fakeTx) ReserveLock(string, string) error                  { return errUnused }
func (fakeTx) Now() time.Time                                    { return time.Time{} }
func (fakeTx) ReservationsExpire(string) error                   { return errUnused }
func (fakeTx) ReservationInsert(ReservationInsertParams) error   { return errUnused }
func (fakeTx) ReservedRead(jobs.ReservedParams) (jobs.Reserved, error) {
	return jobs.Reserved{}, errUnused
}
func (fakeTx) UsageRead(jobs.UsageParams) ([]jobs.UsageBucket, error) { return nil, errUnused }

func (f *fake) wantCalls(t *testing.T, what string, want ...string) {
	t.Helper()
	if got := strings.Join(f.calls, "; "); got != strings.Join(want, "; ") {
		t.Errorf("%s: calls\n%s\nwant\n%s", what, got, strings.Join(want, "; "))
	}
	f.calls = nil
}

// FinishBatch moves the batch first, then stores the output file and the
// error file, then names them; a batch no longer From stores nothing.
func TestFinishBatchOrder(t *testing.T) {
	ctx := context.Background()
	d := &fake{batch: jobs.Batch{ID: "batch_1", Status: jobs.BatchFinalizing}, found: true}
	ops := NewOps("fake", fakeDB{d})
	p := jobs.FinishBatchParams{ID: "batch_1", From: jobs.BatchFinalizing, To: jobs.BatchCompleted,
		Output: strings.NewReader("out\n"), Errors: strings.NewReader("errors\n"), Counts: jobs.BatchCounts{Total: 2}}
	b, err := ops.FinishBatch(ctx, p)
	if err != nil || b.Status != jobs.BatchCompleted || b.Counts.Total != 2 || fmt.Sprint(d.stored) != "[11]" {
		t.Fatalf("FinishBatch = %+v, %v; stored %v bytes", b, err, d.stored)
	}
	d.wantCalls(t, "FinishBatch", "move finalizing→completed errors=false,\"\" counts=true",
		"file batch_1_output.jsonl", "chunk 0", "bytes 4", "file batch_1_error.jsonl", "chunk 0", "bytes 7",
		"outputs true true")
	if d.changed != 1 || strings.Join(d.wrote, ",") != "finish batch true true" {
		t.Errorf("FinishBatch: changed %d, wrote %v", d.changed, d.wrote)
	}

	d.wrote = nil
	_, err = ops.FinishBatch(ctx, p)
	if !errors.Is(err, jobs.ErrBatchChanged) || !strings.Contains(err.Error(), "batch is completed, not finalizing") {
		t.Errorf("FinishBatch again = %v, want ErrBatchChanged naming both statuses", err)
	}
	d.wantCalls(t, "FinishBatch again", "move finalizing→completed errors=false,\"\" counts=true", "get false", "rollback")
	if d.changed != 1 || strings.Join(d.wrote, ",") != "finish batch false false" {
		t.Errorf("FinishBatch again: changed %d, wrote %v", d.changed, d.wrote)
	}

	d.found = false
	if _, err = ops.FinishBatch(ctx, p); !errors.Is(err, jobs.ErrNotFound) {
		t.Errorf("FinishBatch of an unknown batch = %v, want ErrNotFound", err)
	}
	p.To = jobs.BatchFinalizing
	d.calls = nil
	if _, err = ops.FinishBatch(ctx, p); !errors.Is(err, jobs.ErrInvalid) || len(d.calls) != 0 {
		t.Errorf("FinishBatch to finalizing = %v after %v, want ErrInvalid before any call", err, d.calls)
	}
}

// CancelBatch reads the batch locked and moves it only when CancelTo
// says so; only a move wakes anybody.
func TestCancelBatchCalls(t *testing.T) {
	ctx := context.Background()
	for _, s := range []jobs.BatchStatus{jobs.BatchValidating, jobs.BatchInProgress, jobs.BatchFinalizing,
		jobs.BatchCompleted, jobs.BatchFailed, jobs.BatchExpired, jobs.BatchCancelling, jobs.BatchCancelled} {
		d := &fake{batch: jobs.Batch{ID: "batch_1", OrgID: "o", Status: s}, found: true, progress: jobs.BatchProgress{Lines: 4}}
		b, err := NewOps("fake", fakeDB{d}).CancelBatch(ctx, "o", "batch_1")
		to, cancelErr := s.CancelTo()
		switch {
		case cancelErr != nil:
			if !errors.Is(err, jobs.ErrBatchChanged) || d.changed != 0 {
				t.Errorf("CancelBatch of a %s batch = %v, changed %d", s, err, d.changed)
			}
			d.wantCalls(t, string(s), "get true", "rollback")
		case to == s:
			if err != nil || b.Status != s || d.changed != 0 {
				t.Errorf("CancelBatch of a %s batch = %+v, %v, changed %d", s, b, err, d.changed)
			}
			want := []string{"get true"}
			if s.CountsLive() {
				want = append(want, "progress")
			}
			d.wantCalls(t, string(s), want...)
		default:
			if err != nil || b.Status != jobs.BatchCancelling || b.Counts.Total != 4 || d.changed != 1 {
				t.Errorf("CancelBatch of a %s batch = %+v, %v, changed %d", s, b, err, d.changed)
			}
			d.wantCalls(t, string(s), "get true", "move "+string(s)+"→cancelling errors=false,\"\" counts=false", "progress")
		}
	}
	d := &fake{batch: jobs.Batch{ID: "batch_1", OrgID: "o", Status: jobs.BatchValidating}, found: true}
	if _, err := NewOps("fake", fakeDB{d}).CancelBatch(ctx, "other", "batch_1"); !errors.Is(err, jobs.ErrNotFound) || d.batch.Status != jobs.BatchValidating {
		t.Errorf("CancelBatch from another org = %v", err)
	}
}

// MoveBatch replaces the errors when Errors is not nil, clearing them
// when it is empty.
func TestMoveBatchErrors(t *testing.T) {
	ctx := context.Background()
	d := &fake{batch: jobs.Batch{ID: "batch_1", Status: jobs.BatchValidating}, found: true}
	ops := NewOps("fake", fakeDB{d})
	p := jobs.MoveBatchParams{ID: "batch_1", From: jobs.BatchValidating, To: jobs.BatchFailed}
	for _, c := range []struct {
		errs []jobs.BatchError
		want string
	}{
		{nil, `move validating→failed errors=false,"" counts=false`},
		{[]jobs.BatchError{}, `move validating→failed errors=true,"" counts=false`},
		{[]jobs.BatchError{{Code: "c"}}, `move validating→failed errors=true,"[{\"code\":\"c\",\"message\":\"\"}]" counts=false`},
	} {
		d.batch.Status = jobs.BatchValidating
		p.Errors = c.errs
		if _, err := ops.MoveBatch(ctx, p); err != nil {
			t.Fatalf("MoveBatch: %v", err)
		}
		d.wantCalls(t, fmt.Sprintf("MoveBatch with errors %#v", c.errs), c.want)
	}
}

func (fakeDB) PacingSync(context.Context, PacingSync, func(time.Time, []jobs.BackendPacing, []PeerRow) PacingWrite) ([]jobs.BackendPacing, []PeerRow, error) {
	return nil, nil, errUnused
}
