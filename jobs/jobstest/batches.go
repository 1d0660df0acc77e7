package jobstest

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/promptkit/promptkit/jobs"
)

// newBatch creates a batch of org over a new input file.
func (f *fixture) newBatch(org string) jobs.Batch {
	f.t.Helper()
	in := f.newFile(org, "in.jsonl", "{}\n")
	b, err := f.store.CreateBatch(f.ctx, jobs.CreateBatchParams{OrgID: org, CreatedBy: "alice", InputFileID: in.ID,
		Endpoint: "/v1/chat/completions", CompletionWindow: "24h", Window: 24 * time.Hour})
	if err != nil {
		f.t.Fatalf("CreateBatch: %v", err)
	}
	return b
}

// batch reads a batch.
func (f *fixture) batch(id string) jobs.Batch {
	f.t.Helper()
	b, err := f.store.GetBatch(f.ctx, "", id)
	if err != nil {
		f.t.Fatalf("GetBatch(%s): %v", id, err)
	}
	return b
}

// move moves a batch, failing the test on an error.
func (f *fixture) move(id string, from, to jobs.BatchStatus) jobs.Batch {
	f.t.Helper()
	b, err := f.store.MoveBatch(f.ctx, jobs.MoveBatchParams{ID: id, From: from, To: to})
	if err != nil {
		f.t.Fatalf("MoveBatch %s → %s: %v", from, to, err)
	}
	return b
}

// lines enqueues n lines of batch b (custom IDs line-1…), each a chat
// request, at the batch's priority.
func (f *fixture) lines(b jobs.Batch, n int) []jobs.Enqueued {
	f.t.Helper()
	ps := make([]jobs.EnqueueParams, n)
	for i := range ps {
		ps[i] = jobs.EnqueueParams{OrgID: b.OrgID, CreatedBy: b.CreatedBy, Chat: chatRequest(fmt.Sprint("line ", i+1)),
			BatchID: b.ID, CustomID: fmt.Sprint("line-", i+1), Priority: ptr(b.Priority)}
	}
	out, err := f.store.EnqueueBatch(f.ctx, ps)
	if err != nil {
		f.t.Fatalf("EnqueueBatch: %v", err)
	}
	return out
}

// progress reads a batch's progress.
func (f *fixture) progress(id string) jobs.BatchProgress {
	f.t.Helper()
	p, err := f.store.BatchProgress(f.ctx, id)
	if err != nil {
		f.t.Fatalf("BatchProgress: %v", err)
	}
	return p
}

func batchIDs(bs []jobs.Batch) string {
	out := make([]string, len(bs))
	for i, b := range bs {
		out[i] = b.ID
	}
	return strings.Join(out, " ")
}

// sameBatch compares batches, times by Equal and metadata as JSON.
func sameBatch(a, b jobs.Batch) bool {
	times := func(b jobs.Batch) []time.Time {
		return []time.Time{b.CreatedAt, b.ExpiresAt, b.InProgressAt, b.FinalizingAt, b.CompletedAt, b.FailedAt,
			b.ExpiredAt, b.CancellingAt, b.CancelledAt}
	}
	ta, tb := times(a), times(b)
	for i := range ta {
		if !ta[i].Equal(tb[i]) {
			return false
		}
	}
	ma, mb := a.Metadata, b.Metadata
	if (len(ma) == 0) != (len(mb) == 0) || len(ma) > 0 && !jsonEqual(ma, mb) {
		return false
	}
	a.Metadata, b.Metadata = nil, nil
	for _, x := range []*jobs.Batch{&a, &b} {
		x.CreatedAt, x.ExpiresAt, x.InProgressAt, x.FinalizingAt, x.CompletedAt = time.Time{}, time.Time{}, time.Time{}, time.Time{}, time.Time{}
		x.FailedAt, x.ExpiredAt, x.CancellingAt, x.CancelledAt = time.Time{}, time.Time{}, time.Time{}, time.Time{}
	}
	ea, _ := json.Marshal(a)
	eb, _ := json.Marshal(b)
	return string(ea) == string(eb)
}

// testCreateBatch checks CreateBatch and GetBatch: the new batch's fields,
// org scoping, and an input file that is unknown or another org's.
func testCreateBatch(t *testing.T, h Harness) {
	f := setup(t, h)
	now := f.now()
	in := f.newFile("org-a", "in.jsonl", "{}\n")
	p := jobs.CreateBatchParams{OrgID: "org-a", CreatedBy: "alice", InputFileID: in.ID, Endpoint: "/v1/chat/completions",
		CompletionWindow: "24h", Window: 24 * time.Hour, Metadata: json.RawMessage(`{"job": "nightly", "n": 1}`)}
	b, err := f.store.CreateBatch(f.ctx, p)
	if err != nil {
		t.Fatalf("CreateBatch: %v", err)
	}
	want := jobs.Batch{ID: b.ID, OrgID: "org-a", CreatedBy: "alice", InputFileID: in.ID, Endpoint: "/v1/chat/completions",
		CompletionWindow: "24h", Metadata: p.Metadata, Priority: jobs.DefaultBatchPriority, Status: jobs.BatchValidating,
		CreatedAt: now, ExpiresAt: now.Add(24 * time.Hour)}
	if !strings.HasPrefix(b.ID, "batch_") || !sameBatch(b, want) {
		t.Errorf("CreateBatch = %+v\nwant %+v", b, want)
	}
	for _, org := range []string{"org-a", ""} {
		if got, err := f.store.GetBatch(f.ctx, org, b.ID); err != nil || !sameBatch(got, want) {
			t.Errorf("GetBatch(%q) = %+v, %v\nwant %+v", org, got, err, want)
		}
	}
	_, err = f.store.GetBatch(f.ctx, "org-b", b.ID)
	wantErr(t, err, jobs.ErrNotFound, "GetBatch from another org")
	_, err = f.store.GetBatch(f.ctx, "", "batch_unknown")
	wantErr(t, err, jobs.ErrNotFound, "GetBatch of an unknown ID")

	p.Priority, p.Metadata = ptr(10), nil
	if b, err := f.store.CreateBatch(f.ctx, p); err != nil || b.Priority != 10 || len(b.Metadata) != 0 {
		t.Errorf("CreateBatch with priority 10 = %+v, %v", b, err)
	}
	for what, id := range map[string]string{"unknown": "file-unknown", "another org's": f.newFile("org-b", "b", "{}").ID} {
		q := p
		q.InputFileID = id
		_, err := f.store.CreateBatch(f.ctx, q)
		wantErr(t, err, jobs.ErrNotFound, "CreateBatch with an "+what+" input file")
	}
	if bs, _, err := f.store.ListBatches(f.ctx, jobs.BatchListParams{}); err != nil || len(bs) != 2 {
		t.Errorf("ListBatches after refusals = %d batches, %v; want 2", len(bs), err)
	}
	for _, q := range []jobs.CreateBatchParams{
		{InputFileID: in.ID, Endpoint: "/v1/chat/completions", Window: time.Hour},
		{OrgID: "org-a", Endpoint: "/v1/chat/completions", Window: time.Hour},
		{OrgID: "org-a", InputFileID: in.ID, Window: time.Hour},
		{OrgID: "org-a", InputFileID: in.ID, Endpoint: "/v1/chat/completions"},
		{OrgID: "org-a", InputFileID: in.ID, Endpoint: "/v1/chat/completions", Window: time.Hour, Metadata: json.RawMessage(`[1]`)},
		{OrgID: "org-a", InputFileID: in.ID, Endpoint: "/v1/chat/completions", Window: time.Hour, Priority: ptr(101)},
	} {
		_, err := f.store.CreateBatch(f.ctx, q)
		wantNormalizeErr(t, err, q, "CreateBatch")
	}
}

// testListBatches checks ListBatches (newest first, paged, per org or
// every org) and ActiveBatches (every org's unfinished batches, oldest
// first).
func testListBatches(t *testing.T, h Harness) {
	f := setup(t, h)
	var all []jobs.Batch // oldest first
	for i := range 5 {
		f.advance(time.Second)
		org := "org-a"
		if i == 3 {
			org = "org-b"
		}
		all = append(all, f.newBatch(org))
	}
	newestFirst := func(bs []jobs.Batch, org string) string {
		var out []jobs.Batch
		for i := len(bs) - 1; i >= 0; i-- {
			if org == "" || bs[i].OrgID == org {
				out = append(out, bs[i])
			}
		}
		return batchIDs(out)
	}
	for _, org := range []string{"org-a", "org-b", ""} {
		for _, limit := range []int{1, 2, 10} {
			var got []jobs.Batch
			p := jobs.BatchListParams{OrgID: org, Limit: limit}
			for {
				page, more, err := f.store.ListBatches(f.ctx, p)
				if err != nil {
					t.Fatalf("ListBatches: %v", err)
				}
				got = append(got, page...)
				if !more {
					break
				}
				if len(page) != limit {
					t.Fatalf("ListBatches: a page of %d (limit %d) says more follow", len(page), limit)
				}
				p.After = page[len(page)-1].ID
			}
			if ids := batchIDs(got); ids != newestFirst(all, org) {
				t.Errorf("ListBatches(%q, limit %d) = %v, want %v", org, limit, ids, newestFirst(all, org))
			}
		}
	}

	f.move(all[1].ID, jobs.BatchValidating, jobs.BatchFailed)
	f.move(all[2].ID, jobs.BatchValidating, jobs.BatchInProgress)
	active, err := f.store.ActiveBatches(f.ctx)
	if err != nil {
		t.Fatalf("ActiveBatches: %v", err)
	}
	if want := batchIDs([]jobs.Batch{all[0], all[2], all[3], all[4]}); batchIDs(active) != want {
		t.Errorf("ActiveBatches = %v, want %v", batchIDs(active), want)
	}
}

// testMoveBatch checks MoveBatch: the status moves only from From, the
// new status's time is stamped (expires_at stays), errors and counts are
// replaced only when given.
func testMoveBatch(t *testing.T, h Harness) {
	f := setup(t, h)
	b := f.newBatch("org-a")
	at := f.advance(time.Minute)
	moved := f.move(b.ID, jobs.BatchValidating, jobs.BatchInProgress)
	if moved.Status != jobs.BatchInProgress || !moved.InProgressAt.Equal(at) || !moved.ExpiresAt.Equal(b.ExpiresAt) ||
		!moved.CreatedAt.Equal(b.CreatedAt) || !moved.CancelledAt.IsZero() {
		t.Errorf("MoveBatch → in_progress = %+v", moved)
	}
	if got := f.batch(b.ID); !sameBatch(got, moved) {
		t.Errorf("GetBatch after MoveBatch = %+v, want %+v", got, moved)
	}
	f.advance(time.Minute)
	_, err := f.store.MoveBatch(f.ctx, jobs.MoveBatchParams{ID: b.ID, From: jobs.BatchValidating, To: jobs.BatchFailed})
	wantErr(t, err, jobs.ErrBatchChanged, "MoveBatch from a status the batch left")
	if got := f.batch(b.ID); !sameBatch(got, moved) {
		t.Errorf("a refused MoveBatch changed the batch: %+v", got)
	}
	_, err = f.store.MoveBatch(f.ctx, jobs.MoveBatchParams{ID: "batch_unknown", From: jobs.BatchValidating, To: jobs.BatchFailed})
	wantErr(t, err, jobs.ErrNotFound, "MoveBatch of an unknown batch")
	for _, p := range []jobs.MoveBatchParams{
		{ID: b.ID, From: jobs.BatchInProgress, To: jobs.BatchValidating},
		{ID: b.ID, From: jobs.BatchInProgress, To: "done"},
		{ID: b.ID, From: "", To: jobs.BatchFailed},
	} {
		_, err := f.store.MoveBatch(f.ctx, p)
		wantErr(t, err, jobs.ErrInvalid, fmt.Sprintf("MoveBatch %q → %q", p.From, p.To))
	}

	// Errors and counts: replaced when given, kept otherwise.
	v := f.newBatch("org-a")
	errs := []jobs.BatchError{{Code: "invalid_json", Message: "line 2 is not JSON", Line: 2},
		{Code: "duplicate_custom_id", Message: "custom_id repeats", Param: "custom_id", Line: 3}}
	at = f.advance(time.Minute)
	failed, err := f.store.MoveBatch(f.ctx, jobs.MoveBatchParams{ID: v.ID, From: jobs.BatchValidating, To: jobs.BatchFailed,
		Errors: errs, Counts: &jobs.BatchCounts{Total: 4, Failed: 4}})
	if err != nil {
		t.Fatalf("MoveBatch → failed: %v", err)
	}
	got := f.batch(v.ID)
	for what, b := range map[string]jobs.Batch{"MoveBatch": failed, "GetBatch": got} {
		if e, _ := json.Marshal(b.Errors); string(e) != string(must(json.Marshal(errs))) {
			t.Errorf("%s: errors %s, want %s", what, e, must(json.Marshal(errs)))
		}
		if b.Counts != (jobs.BatchCounts{Total: 4, Failed: 4}) || !b.FailedAt.Equal(at) || b.Status != jobs.BatchFailed {
			t.Errorf("%s: %+v", what, b)
		}
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// testCancelBatch checks CancelBatch: validating and in_progress batches
// move to cancelling; cancelling and cancelled ones come back as they
// are; finalizing and other finished ones are ErrBatchChanged.
func testCancelBatch(t *testing.T, h Harness) {
	f := setup(t, h)
	for _, from := range []jobs.BatchStatus{jobs.BatchValidating, jobs.BatchInProgress} {
		b := f.newBatch("org-a")
		if from != jobs.BatchValidating {
			f.move(b.ID, jobs.BatchValidating, from)
		}
		at := f.advance(time.Minute)
		got, err := f.store.CancelBatch(f.ctx, "org-a", b.ID)
		if err != nil || got.Status != jobs.BatchCancelling || !got.CancellingAt.Equal(at) {
			t.Errorf("CancelBatch of a %s batch = %+v, %v", from, got, err)
		}
		f.advance(time.Minute)
		again, err := f.store.CancelBatch(f.ctx, "", b.ID)
		if err != nil || !sameBatch(again, got) {
			t.Errorf("CancelBatch again = %+v, %v; want it unchanged: %+v", again, err, got)
		}
		done := f.move(b.ID, jobs.BatchCancelling, jobs.BatchCancelled)
		if got, err := f.store.CancelBatch(f.ctx, "org-a", b.ID); err != nil || !sameBatch(got, done) {
			t.Errorf("CancelBatch of a cancelled batch = %+v, %v; want %+v", got, err, done)
		}
	}
	for _, to := range []jobs.BatchStatus{jobs.BatchFinalizing, jobs.BatchCompleted, jobs.BatchFailed, jobs.BatchExpired} {
		b := f.newBatch("org-a")
		from := jobs.BatchValidating
		if to != jobs.BatchFailed {
			f.move(b.ID, from, jobs.BatchInProgress)
			from = jobs.BatchInProgress
		}
		before := f.move(b.ID, from, to)
		_, err := f.store.CancelBatch(f.ctx, "org-a", b.ID)
		wantErr(t, err, jobs.ErrBatchChanged, "CancelBatch of a "+string(to)+" batch")
		if got := f.batch(b.ID); !sameBatch(got, before) {
			t.Errorf("a refused CancelBatch changed the batch: %+v", got)
		}
	}
	b := f.newBatch("org-a")
	_, err := f.store.CancelBatch(f.ctx, "org-b", b.ID)
	wantErr(t, err, jobs.ErrNotFound, "CancelBatch from another org")
	if got := f.batch(b.ID); got.Status != jobs.BatchValidating {
		t.Errorf("another org's CancelBatch moved the batch to %s", got.Status)
	}
}

// testFinishBatch checks FinishBatch: both files are stored, owned like
// the batch, and named in it, with the counts and the finish time; a
// second call from the same status is ErrBatchChanged and stores no file.
func testFinishBatch(t *testing.T, h Harness) {
	f := setup(t, h)
	b := f.newBatch("org-a")
	f.move(b.ID, jobs.BatchValidating, jobs.BatchInProgress)
	f.move(b.ID, jobs.BatchInProgress, jobs.BatchFinalizing)
	at := f.advance(time.Minute)
	counts := jobs.BatchCounts{Total: 3, Completed: 2, Failed: 1}
	p := jobs.FinishBatchParams{ID: b.ID, From: jobs.BatchFinalizing, To: jobs.BatchCompleted,
		Output: strings.NewReader("{\"custom_id\":\"a\"}\n{\"custom_id\":\"b\"}\n"),
		Errors: strings.NewReader("{\"custom_id\":\"c\"}\n"), Counts: counts}
	done, err := f.store.FinishBatch(f.ctx, p)
	if err != nil {
		t.Fatalf("FinishBatch: %v", err)
	}
	if done.Status != jobs.BatchCompleted || !done.CompletedAt.Equal(at) || done.Counts != counts ||
		done.OutputFileID == "" || done.ErrorFileID == "" {
		t.Errorf("FinishBatch = %+v", done)
	}
	if got := f.batch(b.ID); !sameBatch(got, done) {
		t.Errorf("GetBatch after FinishBatch = %+v, want %+v", got, done)
	}
	for _, c := range []struct{ id, kind, content string }{
		{done.OutputFileID, "output", "{\"custom_id\":\"a\"}\n{\"custom_id\":\"b\"}\n"},
		{done.ErrorFileID, "error", "{\"custom_id\":\"c\"}\n"},
	} {
		file, err := f.store.GetFile(f.ctx, "org-a", c.id)
		if err != nil {
			t.Fatalf("GetFile(%s file): %v", c.kind, err)
		}
		want := jobs.File{ID: c.id, OrgID: "org-a", CreatedBy: "alice", Purpose: jobs.PurposeBatchOutput,
			Filename: b.ID + "_" + c.kind + ".jsonl", Bytes: int64(len(c.content)), CreatedAt: at}
		if !sameFile(file, want) {
			t.Errorf("%s file = %+v, want %+v", c.kind, file, want)
		}
		if got := f.content("org-a", c.id); string(got) != c.content {
			t.Errorf("%s file content = %q, want %q", c.kind, got, c.content)
		}
	}
	outputs := func() int {
		return len(f.listFiles(jobs.FileListParams{OrgID: "org-a", Purpose: jobs.PurposeBatchOutput, Limit: 10}))
	}
	p.Output, p.Errors = strings.NewReader("again\n"), strings.NewReader("again\n")
	_, err = f.store.FinishBatch(f.ctx, p)
	wantErr(t, err, jobs.ErrBatchChanged, "FinishBatch twice")
	if n := outputs(); n != 2 {
		t.Errorf("%d output files after a refused FinishBatch, want 2", n)
	}
	if got := f.batch(b.ID); !sameBatch(got, done) {
		t.Errorf("a refused FinishBatch changed the batch: %+v", got)
	}

	// No error file; a batch cancelled; a target that is not terminal.
	c := f.newBatch("org-a")
	f.move(c.ID, jobs.BatchValidating, jobs.BatchCancelling)
	cancelled, err := f.store.FinishBatch(f.ctx, jobs.FinishBatchParams{ID: c.ID, From: jobs.BatchCancelling,
		To: jobs.BatchCancelled, Output: strings.NewReader("")})
	if err != nil || cancelled.Status != jobs.BatchCancelled || cancelled.OutputFileID == "" || cancelled.ErrorFileID != "" ||
		!cancelled.CancelledAt.Equal(at) {
		t.Errorf("FinishBatch without an error file = %+v, %v", cancelled, err)
	}
	_, err = f.store.FinishBatch(f.ctx, jobs.FinishBatchParams{ID: c.ID, From: jobs.BatchCancelled, To: jobs.BatchFinalizing})
	wantErr(t, err, jobs.ErrInvalid, "FinishBatch to a status that is not terminal")
	_, err = f.store.FinishBatch(f.ctx, jobs.FinishBatchParams{ID: "batch_unknown", From: jobs.BatchFinalizing, To: jobs.BatchCompleted})
	wantErr(t, err, jobs.ErrNotFound, "FinishBatch of an unknown batch")
	if err := f.store.Check(f.ctx); err != nil {
		t.Errorf("Check after refused batch writes: %v", err)
	}
}

// testBatchProgress checks BatchProgress and the counts GetBatch computes
// while a batch runs, through claims, successes, failures, cancels and a
// retry; once finished, a batch shows its stored counts.
func testBatchProgress(t *testing.T, h Harness) {
	f := setup(t, h)
	b := f.newBatch("org-a")
	f.move(b.ID, jobs.BatchValidating, jobs.BatchInProgress)
	other := f.enqueue(jobs.EnqueueParams{OrgID: "org-a", Priority: ptr(0)}) // no line of the batch
	f.claimID("w", other.JobID)
	if _, err := f.store.Succeed(f.ctx, jobs.SucceedParams{JobID: other.JobID, Worker: "w", Answer: jobs.Answer{Output: "x"}}); err != nil {
		t.Fatalf("Succeed: %v", err)
	}
	ls := f.lines(b, 5)
	check := func(what string, want jobs.BatchProgress) {
		t.Helper()
		if got := f.progress(b.ID); got != want {
			t.Errorf("%s: BatchProgress = %+v, want %+v", what, got, want)
		}
		counts := jobs.BatchCounts{Total: want.Lines, Completed: want.Succeeded, Failed: want.Failed + want.Cancelled}
		if got := f.batch(b.ID).Counts; got != counts {
			t.Errorf("%s: GetBatch counts = %+v, want %+v", what, got, counts)
		}
	}
	check("enqueued", jobs.BatchProgress{Lines: 5, Unfinished: 5})
	for _, l := range ls[:3] {
		f.claimID("w", l.JobID)
	}
	if _, err := f.store.Succeed(f.ctx, jobs.SucceedParams{JobID: ls[0].JobID, Worker: "w", Answer: jobs.Answer{Output: "ok"}}); err != nil {
		t.Fatalf("Succeed: %v", err)
	}
	if _, err := f.store.Fail(f.ctx, jobs.FailParams{JobID: ls[1].JobID, Worker: "w", Kind: jobs.KindProvider4xx, Message: "no"}); err != nil {
		t.Fatalf("Fail: %v", err)
	}
	if _, err := f.store.Cancel(f.ctx, jobs.CancelParams{JobID: ls[3].JobID}); err != nil {
		t.Fatalf("Cancel: %v", err)
	}
	check("some finished", jobs.BatchProgress{Lines: 5, Succeeded: 1, Failed: 1, Cancelled: 1, Unfinished: 2})
	if _, err := f.store.Retry(f.ctx, jobs.RetryParams{JobID: ls[1].JobID}); err != nil {
		t.Fatalf("Retry: %v", err)
	}
	check("after a retry", jobs.BatchProgress{Lines: 5, Succeeded: 1, Cancelled: 1, Unfinished: 3})

	f.move(b.ID, jobs.BatchInProgress, jobs.BatchFinalizing)
	check("finalizing", jobs.BatchProgress{Lines: 5, Succeeded: 1, Cancelled: 1, Unfinished: 3})
	stored := jobs.BatchCounts{Total: 5, Completed: 1, Failed: 4}
	done, err := f.store.FinishBatch(f.ctx, jobs.FinishBatchParams{ID: b.ID, From: jobs.BatchFinalizing,
		To: jobs.BatchCompleted, Counts: stored})
	if err != nil {
		t.Fatalf("FinishBatch: %v", err)
	}
	if done.Counts != stored || f.batch(b.ID).Counts != stored {
		t.Errorf("a finished batch's counts = %+v (FinishBatch), %+v (GetBatch); want %+v", done.Counts, f.batch(b.ID).Counts, stored)
	}
	if p := f.progress(b.ID); p.Lines != 5 {
		t.Errorf("BatchProgress of a finished batch = %+v", p)
	}
	if p := f.progress(f.newBatch("org-a").ID); p != (jobs.BatchProgress{}) {
		t.Errorf("BatchProgress of a batch without lines = %+v", p)
	}
	_, err = f.store.BatchProgress(f.ctx, "batch_unknown")
	wantErr(t, err, jobs.ErrNotFound, "BatchProgress of an unknown batch")
}

// testCancelBatchJobs checks CancelBatchJobs: the batch's queued and
// running jobs are cancelled as Cancel cancels them (events,
// notification), a running job's worker then gets ErrNotClaimed, and
// jobs of other prompts are left alone.
func testCancelBatchJobs(t *testing.T, h Harness) {
	f := setup(t, h)
	b := f.newBatch("org-a")
	ls := f.lines(b, 4)
	other := f.enqueue(jobs.EnqueueParams{OrgID: "org-a", Priority: ptr(100)})
	f.claimID("w", ls[0].JobID)
	f.claimID("w", ls[1].JobID)
	if _, err := f.store.Succeed(f.ctx, jobs.SucceedParams{JobID: ls[1].JobID, Worker: "w", Answer: jobs.Answer{Output: "done"}}); err != nil {
		t.Fatalf("Succeed: %v", err)
	}
	ctx, cancel := context.WithCancel(f.ctx)
	defer cancel()
	ch := f.store.Notifier().Notify(ctx)
	before := len(f.allEvents())
	at := f.advance(time.Minute)
	n, err := f.store.CancelBatchJobs(f.ctx, b.ID)
	if err != nil || n != 3 {
		t.Fatalf("CancelBatchJobs = %d, %v; want 3", n, err)
	}
	recv(t, ch, "Notify after CancelBatchJobs")
	for i, from := range map[int]jobs.State{0: jobs.Running, 2: jobs.Queued, 3: jobs.Queued} {
		j := f.job(ls[i].JobID)
		if j.State != jobs.Cancelled || !j.FinishedAt.Equal(at) {
			t.Errorf("line %d after CancelBatchJobs: %s, finished %v", i+1, j.State, j.FinishedAt)
		}
		f.expectTransition(j.ID, from, jobs.Cancelled)
	}
	if got := len(f.allEvents()) - before; got != 3 {
		t.Errorf("CancelBatchJobs appended %d events, want 3", got)
	}
	if j := f.job(ls[1].JobID); j.State != jobs.Succeeded {
		t.Errorf("a succeeded line is %s after CancelBatchJobs", j.State)
	}
	if j := f.job(other.JobID); j.State != jobs.Queued {
		t.Errorf("a job of no batch is %s after CancelBatchJobs", j.State)
	}
	_, err = f.store.Succeed(f.ctx, jobs.SucceedParams{JobID: ls[0].JobID, Worker: "w", Answer: jobs.Answer{Output: "late"}})
	wantErr(t, err, jobs.ErrNotClaimed, "Succeed of a running line after CancelBatchJobs")
	if n, err := f.store.CancelBatchJobs(f.ctx, b.ID); err != nil || n != 0 {
		t.Errorf("CancelBatchJobs again = %d, %v; want 0", n, err)
	}
}

// testBatchResults checks BatchResults: a batch's lines in prompt order,
// paged with After, each with its newest job (a retry's, not the job it
// superseded) and that job's response when it succeeded.
func testBatchResults(t *testing.T, h Harness) {
	f := setup(t, h)
	b := f.newBatch("org-a")
	ls := f.lines(b, 5)
	f.lines(f.newBatch("org-a"), 2) // another batch's lines
	f.claimID("w", ls[0].JobID)
	f.claimID("w", ls[1].JobID)
	if _, err := f.store.Succeed(f.ctx, jobs.SucceedParams{JobID: ls[0].JobID, Worker: "w", Answer: jobs.Answer{Output: "one",
		FinishReason: "stop"}}); err != nil {
		t.Fatalf("Succeed: %v", err)
	}
	if _, err := f.store.Fail(f.ctx, jobs.FailParams{JobID: ls[1].JobID, Worker: "w", Kind: jobs.KindTimeout, Message: "slow"}); err != nil {
		t.Fatalf("Fail: %v", err)
	}
	retry, err := f.store.Retry(f.ctx, jobs.RetryParams{JobID: ls[1].JobID, Priority: ptr(0)})
	if err != nil {
		t.Fatalf("Retry: %v", err)
	}
	f.claimID("w", retry.ID)
	if _, err := f.store.Succeed(f.ctx, jobs.SucceedParams{JobID: retry.ID, Worker: "w", Answer: jobs.Answer{Output: "two"}}); err != nil {
		t.Fatalf("Succeed: %v", err)
	}

	var got []jobs.BatchResult
	p := jobs.BatchResultsParams{BatchID: b.ID, Limit: 2}
	for {
		page, err := f.store.BatchResults(f.ctx, p)
		if err != nil {
			t.Fatalf("BatchResults: %v", err)
		}
		if len(page) > p.Limit {
			t.Fatalf("BatchResults: %d lines, limit %d", len(page), p.Limit)
		}
		if len(page) == 0 {
			break
		}
		got = append(got, page...)
		p.After = page[len(page)-1].Prompt.ID
	}
	all, err := f.store.BatchResults(f.ctx, jobs.BatchResultsParams{BatchID: b.ID})
	if err != nil || len(all) != 5 {
		t.Fatalf("BatchResults with the default limit = %d lines, %v; want 5", len(all), err)
	}
	if len(got) != 5 {
		t.Fatalf("BatchResults paged = %d lines, want 5", len(got))
	}
	wantJobs := []string{ls[0].JobID, retry.ID, ls[2].JobID, ls[3].JobID, ls[4].JobID}
	wantOutput := []string{"one", "two", "", "", ""}
	for i, r := range got {
		if r.Prompt.ID != ls[i].PromptID || r.Prompt.CustomID != fmt.Sprint("line-", i+1) || r.Prompt.BatchID != b.ID ||
			r.Prompt.Chat == nil || r.Job.ID != wantJobs[i] || r.Job.PromptID != ls[i].PromptID {
			t.Errorf("line %d: prompt %s (%q), job %s; want prompt %s, job %s", i+1, r.Prompt.ID, r.Prompt.CustomID,
				r.Job.ID, ls[i].PromptID, wantJobs[i])
		}
		if r.Prompt.Chat != nil {
			sameChat(t, fmt.Sprint("line ", i+1), r.Prompt.Chat, chatRequest(fmt.Sprint("line ", i+1)))
		}
		switch {
		case wantOutput[i] == "" && r.Response != nil:
			t.Errorf("line %d has a response: %+v", i+1, r.Response)
		case wantOutput[i] != "" && (r.Response == nil || r.Response.Output != wantOutput[i] || r.Response.JobID != r.Job.ID):
			t.Errorf("line %d: response %+v, want output %q of job %s", i+1, r.Response, wantOutput[i], r.Job.ID)
		}
		if all[i].Prompt.ID != r.Prompt.ID || all[i].Job.ID != r.Job.ID {
			t.Errorf("line %d differs between the paged and the whole read", i+1)
		}
	}
	if got[0].Response != nil && got[0].Response.FinishReason != "stop" {
		t.Errorf("line 1: finish reason %q, want stop", got[0].Response.FinishReason)
	}
	if none, err := f.store.BatchResults(f.ctx, jobs.BatchResultsParams{BatchID: "batch_unknown"}); err != nil || len(none) != 0 {
		t.Errorf("BatchResults of an unknown batch = %v, %v; want none", none, err)
	}
}

// testArchiveKeepsBatches checks that Archive archives a batch's lines
// like any other prompts and leaves files and batches alone.
func testArchiveKeepsBatches(t *testing.T, h Harness) {
	f := setup(t, h)
	b := f.newBatch("org-a")
	ls := f.lines(b, 2)
	for _, l := range ls {
		f.claimID("w", l.JobID)
		if _, err := f.store.Succeed(f.ctx, jobs.SucceedParams{JobID: l.JobID, Worker: "w", Answer: jobs.Answer{Output: "ok"}}); err != nil {
			t.Fatalf("Succeed: %v", err)
		}
	}
	f.move(b.ID, jobs.BatchValidating, jobs.BatchInProgress)
	f.move(b.ID, jobs.BatchInProgress, jobs.BatchFinalizing)
	done, err := f.store.FinishBatch(f.ctx, jobs.FinishBatchParams{ID: b.ID, From: jobs.BatchFinalizing,
		To: jobs.BatchCompleted, Output: strings.NewReader("out\n"), Counts: jobs.BatchCounts{Total: 2, Completed: 2}})
	if err != nil {
		t.Fatalf("FinishBatch: %v", err)
	}
	n, err := f.store.Archive(f.ctx, f.advance(time.Hour))
	if err != nil || n != 2 {
		t.Fatalf("Archive = %d, %v; want the 2 lines' jobs", n, err)
	}
	if got := f.batch(b.ID); !sameBatch(got, done) {
		t.Errorf("GetBatch after Archive = %+v, want %+v", got, done)
	}
	if c := f.content("org-a", done.OutputFileID); string(c) != "out\n" {
		t.Errorf("the output file after Archive = %q", c)
	}
	if c := f.content("org-a", b.InputFileID); string(c) != "{}\n" {
		t.Errorf("the input file after Archive = %q", c)
	}
	if rs, err := f.store.BatchResults(f.ctx, jobs.BatchResultsParams{BatchID: b.ID}); err != nil || len(rs) != 0 {
		t.Errorf("BatchResults after Archive = %d lines, %v; want none", len(rs), err)
	}
	if p := f.progress(b.ID); p != (jobs.BatchProgress{}) {
		t.Errorf("BatchProgress after Archive = %+v, want none", p)
	}
}

// testBatchNotify checks that every batch status change (MoveBatch,
// CancelBatch, FinishBatch) wakes Notify, on the store that made it and
// on another store on the same database (another serve): a read waiting
// for a batch to end (GET /v1/batches/{id}?wait=) relies on it, in
// whichever process it runs.
func testBatchNotify(t *testing.T, h Harness) {
	f := setup(t, h)
	ctx, cancel := context.WithCancel(f.ctx)
	defer cancel()
	ch := f.store.Notifier().Notify(ctx)
	b := f.newBatch("org-a")
	if _, err := f.store.MoveBatch(f.ctx, jobs.MoveBatchParams{ID: b.ID, From: jobs.BatchValidating, To: jobs.BatchInProgress}); err != nil {
		t.Fatalf("MoveBatch: %v", err)
	}
	recv(t, ch, "Notify after MoveBatch")
	if _, err := f.store.CancelBatch(f.ctx, "org-a", b.ID); err != nil {
		t.Fatalf("CancelBatch: %v", err)
	}
	recv(t, ch, "Notify after CancelBatch")
	if _, err := f.store.FinishBatch(f.ctx, jobs.FinishBatchParams{ID: b.ID, From: jobs.BatchCancelling, To: jobs.BatchCancelled}); err != nil {
		t.Fatalf("FinishBatch: %v", err)
	}
	recv(t, ch, "Notify after FinishBatch")

	// Another store on the database. Each change gets an observer store of
	// its own, subscribed before it and waited on until its first wake (it
	// watches the database from then on, see the readings above), and made
	// nothing else: so the wake after the change can only come from the
	// change, not from the observer's start nor from an earlier change.
	b = f.newBatch("org-a")
	for _, c := range []struct {
		name   string
		change func() error
	}{
		{"MoveBatch", func() error {
			_, err := f.store.MoveBatch(f.ctx, jobs.MoveBatchParams{ID: b.ID, From: jobs.BatchValidating, To: jobs.BatchInProgress})
			return err
		}},
		{"CancelBatch", func() error {
			_, err := f.store.CancelBatch(f.ctx, "org-a", b.ID)
			return err
		}},
		{"FinishBatch", func() error {
			_, err := f.store.FinishBatch(f.ctx, jobs.FinishBatchParams{ID: b.ID, From: jobs.BatchCancelling, To: jobs.BatchCancelled,
				Output: strings.NewReader("{}\n")})
			return err
		}},
	} {
		func() {
			other, err := h.Open(f.ctx, f.dsn, jobs.Options{})
			if err != nil {
				t.Fatalf("Harness.Open (second store): %v", err)
			}
			defer func() {
				if err := other.Close(); err != nil {
					t.Errorf("Close (second store): %v", err)
				}
			}()
			ctx, cancel := context.WithCancel(f.ctx)
			defer cancel()
			wake := other.Notifier().Notify(ctx)
			recv(t, wake, "second store's first Notify wake")
			if err := c.change(); err != nil {
				t.Fatalf("%s: %v", c.name, err)
			}
			recv(t, wake, "second store's Notify after "+c.name+" through the first")
		}()
	}
}
