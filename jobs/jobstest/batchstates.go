package jobstest

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/promptkit/promptkit/jobs"
)

// The batch state machine as the stores run it: what CancelBatch does in
// each status, what MoveBatch and FinishBatch refuse, and what a finished
// batch holds, whichever order a store writes its rows in.

// batchIn creates a batch of org and moves it to status by the paths the
// batch processor takes (cancelling by MoveBatch, from validating).
func (f *fixture) batchIn(org string, status jobs.BatchStatus) jobs.Batch {
	f.t.Helper()
	paths := map[jobs.BatchStatus][]jobs.BatchStatus{
		jobs.BatchValidating: nil,
		jobs.BatchInProgress: {jobs.BatchInProgress},
		jobs.BatchFinalizing: {jobs.BatchInProgress, jobs.BatchFinalizing},
		jobs.BatchCompleted:  {jobs.BatchInProgress, jobs.BatchFinalizing, jobs.BatchCompleted},
		jobs.BatchFailed:     {jobs.BatchFailed},
		jobs.BatchExpired:    {jobs.BatchInProgress, jobs.BatchExpired},
		jobs.BatchCancelling: {jobs.BatchCancelling},
		jobs.BatchCancelled:  {jobs.BatchCancelling, jobs.BatchCancelled},
	}
	path, ok := paths[status]
	if !ok {
		f.t.Fatalf("batchIn: unknown status %q", status)
	}
	b := f.newBatch(org)
	for _, to := range path {
		b = f.move(b.ID, b.Status, to)
	}
	return b
}

// allBatchStatuses are the eight statuses, in lifecycle order.
var allBatchStatuses = []jobs.BatchStatus{jobs.BatchValidating, jobs.BatchInProgress, jobs.BatchFinalizing,
	jobs.BatchCompleted, jobs.BatchFailed, jobs.BatchExpired, jobs.BatchCancelling, jobs.BatchCancelled}

// fileCount counts org's files of every purpose.
func (f *fixture) fileCount(org string) int {
	f.t.Helper()
	return len(f.listFiles(jobs.FileListParams{OrgID: org, Limit: 100}))
}

// testCancelBatchEachStatus checks CancelBatch from each of the eight
// statuses: validating and in_progress move to cancelling, stamping
// cancelling_at and keeping every other field; cancelling and cancelled
// come back as they are; finalizing, completed, failed and expired are
// ErrBatchChanged and change nothing. A batch CancelBatch returns while
// cancelling shows the counts of its jobs, as GetBatch does.
func testCancelBatchEachStatus(t *testing.T, h Harness) {
	type outcome int
	const (
		moves outcome = iota
		asItIs
		refused
	)
	want := map[jobs.BatchStatus]outcome{
		jobs.BatchValidating: moves, jobs.BatchInProgress: moves,
		jobs.BatchCancelling: asItIs, jobs.BatchCancelled: asItIs,
		jobs.BatchFinalizing: refused, jobs.BatchCompleted: refused, jobs.BatchFailed: refused, jobs.BatchExpired: refused,
	}
	f := setup(t, h)
	for _, from := range allBatchStatuses {
		before := f.batchIn("org-a", from)
		at := f.advance(time.Minute)
		got, err := f.store.CancelBatch(f.ctx, "org-a", before.ID)
		stored := f.batch(before.ID)
		switch want[from] {
		case moves:
			w := before
			w.Status, w.CancellingAt = jobs.BatchCancelling, at
			if err != nil || !sameBatch(got, w) || !sameBatch(stored, w) {
				t.Errorf("CancelBatch of a %s batch = %+v, %v; stored %+v\nwant %+v", from, got, err, stored, w)
			}
		case asItIs:
			if err != nil || !sameBatch(got, before) || !sameBatch(stored, before) {
				t.Errorf("CancelBatch of a %s batch = %+v, %v; stored %+v\nwant it as it was: %+v", from, got, err, stored, before)
			}
		case refused:
			wantErr(t, err, jobs.ErrBatchChanged, "CancelBatch of a "+string(from)+" batch")
			if !sameBatch(stored, before) {
				t.Errorf("a refused CancelBatch of a %s batch changed it: %+v", from, stored)
			}
		}
	}
	_, err := f.store.CancelBatch(f.ctx, "", "batch_unknown")
	wantErr(t, err, jobs.ErrNotFound, "CancelBatch of an unknown batch")

	// The counts of a batch that CancelBatch moves, and of one it returns
	// as it is, are its jobs'.
	b := f.batchIn("org-a", jobs.BatchInProgress)
	ls := f.lines(b, 3)
	f.claimID("w", ls[0].JobID)
	if _, err := f.store.Succeed(f.ctx, jobs.SucceedParams{JobID: ls[0].JobID, Worker: "w", Answer: jobs.Answer{Output: "ok"}}); err != nil {
		t.Fatalf("Succeed: %v", err)
	}
	live := jobs.BatchCounts{Total: 3, Completed: 1}
	for _, what := range []string{"CancelBatch", "CancelBatch again"} {
		got, err := f.store.CancelBatch(f.ctx, "org-a", b.ID)
		if err != nil || got.Status != jobs.BatchCancelling || got.Counts != live {
			t.Errorf("%s of a running batch = %s with counts %+v, %v; want cancelling with %+v", what, got.Status, got.Counts, err, live)
		}
	}
}

// testMoveBatchRules checks what MoveBatch refuses as ErrInvalid (no
// batch goes back to validating; a status must be one of the eight) and
// that an Errors that is empty but not nil clears the batch's errors.
func testMoveBatchRules(t *testing.T, h Harness) {
	f := setup(t, h)
	for _, from := range allBatchStatuses {
		b := f.batchIn("org-a", from)
		for _, p := range []jobs.MoveBatchParams{
			{ID: b.ID, From: from, To: jobs.BatchValidating},
			{ID: b.ID, From: from, To: "gone"},
			{ID: b.ID, From: "gone", To: jobs.BatchFailed},
			{ID: b.ID, To: jobs.BatchFailed},
		} {
			_, err := f.store.MoveBatch(f.ctx, p)
			wantNormalizeErr(t, err, p, fmt.Sprintf("MoveBatch %q → %q", p.From, p.To))
		}
		if got := f.batch(b.ID); !sameBatch(got, b) {
			t.Errorf("refused moves changed a %s batch: %+v", from, got)
		}
	}

	b := f.newBatch("org-a")
	errs := []jobs.BatchError{{Code: "too_large", Message: "line 2 is too large", Line: 2, CustomID: "c2"}}
	b, err := f.store.MoveBatch(f.ctx, jobs.MoveBatchParams{ID: b.ID, From: jobs.BatchValidating, To: jobs.BatchInProgress, Errors: errs})
	if err != nil || len(b.Errors) != 1 || b.Errors[0] != errs[0] {
		t.Fatalf("MoveBatch with errors = %+v, %v", b, err)
	}
	b = f.move(b.ID, jobs.BatchInProgress, jobs.BatchFinalizing)
	if len(b.Errors) != 1 || len(f.batch(b.ID).Errors) != 1 {
		t.Errorf("MoveBatch without Errors dropped the batch's errors: %+v", b.Errors)
	}
	b, err = f.store.MoveBatch(f.ctx, jobs.MoveBatchParams{ID: b.ID, From: jobs.BatchFinalizing, To: jobs.BatchFailed,
		Errors: []jobs.BatchError{}})
	if err != nil || len(b.Errors) != 0 || len(f.batch(b.ID).Errors) != 0 {
		t.Errorf("MoveBatch with empty Errors = %+v, %v; want the errors cleared", b, err)
	}
}

// testFinishBatchRefusals checks what FinishBatch refuses: a target that
// is not terminal or a status that does not exist (ErrInvalid), a batch
// not in From (ErrBatchChanged), an unknown batch (ErrNotFound), and a
// content reader that fails (its error). Each stores nothing: no file,
// no move; and Check still passes.
func testFinishBatchRefusals(t *testing.T, h Harness) {
	f := setup(t, h)
	b := f.batchIn("org-a", jobs.BatchFinalizing)
	files := f.fileCount("org-a")
	unchanged := func(what string) {
		t.Helper()
		if got := f.batch(b.ID); !sameBatch(got, b) {
			t.Errorf("%s changed the batch: %+v", what, got)
		}
		if n := f.fileCount("org-a"); n != files {
			t.Errorf("%s: %d files, want %d", what, n, files)
		}
	}
	finish := func(p jobs.FinishBatchParams) error {
		_, err := f.store.FinishBatch(f.ctx, p)
		return err
	}
	f.advance(time.Minute)

	for _, to := range []jobs.BatchStatus{jobs.BatchValidating, jobs.BatchInProgress, jobs.BatchFinalizing, jobs.BatchCancelling, "gone", ""} {
		p := jobs.FinishBatchParams{ID: b.ID, From: jobs.BatchFinalizing, To: to, Output: strings.NewReader("out\n")}
		wantNormalizeErr(t, finish(p), p, fmt.Sprintf("FinishBatch to %q", to))
		unchanged(fmt.Sprintf("FinishBatch to %q", to))
	}
	for _, from := range []jobs.BatchStatus{"gone", ""} {
		p := jobs.FinishBatchParams{ID: b.ID, From: from, To: jobs.BatchCompleted, Output: strings.NewReader("out\n")}
		wantNormalizeErr(t, finish(p), p, fmt.Sprintf("FinishBatch from %q", from))
		unchanged(fmt.Sprintf("FinishBatch from %q", from))
	}
	for _, from := range []jobs.BatchStatus{jobs.BatchInProgress, jobs.BatchCancelling, jobs.BatchCompleted} {
		err := finish(jobs.FinishBatchParams{ID: b.ID, From: from, To: jobs.BatchCompleted,
			Output: strings.NewReader("out\n"), Errors: strings.NewReader("err\n")})
		wantErr(t, err, jobs.ErrBatchChanged, "FinishBatch from "+string(from)+" of a finalizing batch")
		unchanged("FinishBatch from " + string(from))
	}
	err := finish(jobs.FinishBatchParams{ID: "batch_unknown", From: jobs.BatchFinalizing, To: jobs.BatchCompleted,
		Output: strings.NewReader("out\n")})
	wantErr(t, err, jobs.ErrNotFound, "FinishBatch of an unknown batch")
	unchanged("FinishBatch of an unknown batch")

	// A reader that fails, the output's or the error file's (read after
	// the output file is stored, on a store that stores it first): the
	// whole call is undone.
	big := func() io.Reader { return bytes.NewReader(make([]byte, jobs.FileChunkSize+1)) }
	for _, c := range []struct {
		what           string
		output, errors io.Reader
	}{
		{"a failing output reader", io.MultiReader(big(), failingReader{}), strings.NewReader("err\n")},
		{"a failing error-file reader", big(), io.MultiReader(big(), failingReader{})},
	} {
		_, err := f.store.FinishBatch(f.ctx, jobs.FinishBatchParams{ID: b.ID, From: jobs.BatchFinalizing,
			To: jobs.BatchCompleted, Output: c.output, Errors: c.errors})
		if !errors.Is(err, errReader) {
			t.Errorf("FinishBatch with %s: %v, want its error", c.what, err)
		}
		unchanged("FinishBatch with " + c.what)
	}
	if err := f.store.Check(f.ctx); err != nil {
		t.Errorf("Check after refused FinishBatch calls: %v", err)
	}
	if _, err := f.store.FinishBatch(f.ctx, jobs.FinishBatchParams{ID: b.ID, From: jobs.BatchFinalizing, To: jobs.BatchCompleted}); err != nil {
		t.Errorf("FinishBatch after the refusals: %v", err)
	}
}

// testFinishBatchOutcomes checks what a finished batch holds, for each
// terminal status from the status the batch processor ends it from: the
// status, its time stamped and no other, the counts given (not its
// jobs'), the files given and only those, and the other fields kept.
func testFinishBatchOutcomes(t *testing.T, h Harness) {
	f := setup(t, h)
	stamp := func(b *jobs.Batch, s jobs.BatchStatus) *time.Time {
		return map[jobs.BatchStatus]*time.Time{jobs.BatchCompleted: &b.CompletedAt, jobs.BatchFailed: &b.FailedAt,
			jobs.BatchExpired: &b.ExpiredAt, jobs.BatchCancelled: &b.CancelledAt}[s]
	}
	for i, c := range []struct {
		from, to       jobs.BatchStatus
		output, errors string // "-": no reader
	}{
		{jobs.BatchFinalizing, jobs.BatchCompleted, "a\nb\n", "c\n"},
		{jobs.BatchInProgress, jobs.BatchExpired, "a\n", "-"},
		{jobs.BatchCancelling, jobs.BatchCancelled, "-", "c\n"},
		{jobs.BatchValidating, jobs.BatchFailed, "-", "-"},
		{jobs.BatchFinalizing, jobs.BatchCompleted, "", ""},
	} {
		what := fmt.Sprintf("case %d: FinishBatch %s → %s", i, c.from, c.to)
		before := f.batchIn("org-a", c.from)
		f.lines(before, 2) // jobs whose counts a finished batch does not show
		at := f.advance(time.Minute)
		counts := jobs.BatchCounts{Total: 7, Completed: 4, Failed: 3}
		p := jobs.FinishBatchParams{ID: before.ID, From: c.from, To: c.to, Counts: counts}
		if c.output != "-" {
			p.Output = strings.NewReader(c.output)
		}
		if c.errors != "-" {
			p.Errors = strings.NewReader(c.errors)
		}
		done, err := f.store.FinishBatch(f.ctx, p)
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		want := before
		want.Status, want.Counts, want.OutputFileID, want.ErrorFileID = c.to, counts, done.OutputFileID, done.ErrorFileID
		*stamp(&want, c.to) = at
		if !sameBatch(done, want) {
			t.Errorf("%s = %+v\nwant %+v", what, done, want)
		}
		if got := f.batch(before.ID); !sameBatch(got, want) {
			t.Errorf("%s: GetBatch = %+v\nwant %+v", what, got, want)
		}
		for _, file := range []struct{ kind, id, content string }{
			{"output", done.OutputFileID, c.output}, {"error", done.ErrorFileID, c.errors},
		} {
			if (file.id == "") != (file.content == "-") {
				t.Errorf("%s: %s file %q, given %q", what, file.kind, file.id, file.content)
				continue
			}
			if file.id == "" {
				continue
			}
			if got := f.content("org-a", file.id); string(got) != file.content {
				t.Errorf("%s: %s file content %q, want %q", what, file.kind, got, file.content)
			}
		}
	}
}

// testFinishBatchConcurrent checks that of two FinishBatch calls racing
// on one batch from the same status, exactly one finishes it, and only
// its files are stored: the other is ErrBatchChanged and stores nothing.
func testFinishBatchConcurrent(t *testing.T, h Harness) {
	f := setup(t, h)
	for round := range 3 {
		b := f.batchIn("org-a", jobs.BatchFinalizing)
		files := f.fileCount("org-a")
		var wg sync.WaitGroup
		results := make([]jobs.Batch, 2)
		errs := make([]error, 2)
		for i := range 2 {
			wg.Go(func() {
				results[i], errs[i] = f.store.FinishBatch(f.ctx, jobs.FinishBatchParams{ID: b.ID, From: jobs.BatchFinalizing,
					To: jobs.BatchCompleted, Output: strings.NewReader(fmt.Sprint("output ", i, "\n")),
					Errors: strings.NewReader(fmt.Sprint("errors ", i, "\n")), Counts: jobs.BatchCounts{Total: i}})
			})
		}
		wg.Wait()
		won := -1
		for i, err := range errs {
			switch {
			case err == nil && won < 0:
				won = i
			case err == nil:
				t.Fatalf("round %d: both FinishBatch calls finished the batch", round)
			default:
				wantErr(t, err, jobs.ErrBatchChanged, fmt.Sprintf("round %d: the FinishBatch that lost", round))
			}
		}
		if won < 0 {
			t.Fatalf("round %d: neither FinishBatch finished the batch: %v", round, errs)
		}
		got := f.batch(b.ID)
		if !sameBatch(got, results[won]) || got.Counts.Total != won {
			t.Errorf("round %d: GetBatch = %+v, want the winner's %+v", round, got, results[won])
		}
		if n := f.fileCount("org-a"); n != files+2 {
			t.Errorf("round %d: %d files after the race, want %d", round, n, files+2)
		}
		if c := f.content("org-a", got.OutputFileID); string(c) != fmt.Sprint("output ", won, "\n") {
			t.Errorf("round %d: output %q, want the winner's", round, c)
		}
		if c := f.content("org-a", got.ErrorFileID); string(c) != fmt.Sprint("errors ", won, "\n") {
			t.Errorf("round %d: error file %q, want the winner's", round, c)
		}
	}
}
