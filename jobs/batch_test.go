package jobs_test

import (
	"bytes"
	"errors"
	"math"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/promptkit/promptkit/jobs"
	"github.com/promptkit/promptkit/pktype"
)

var batchStatuses = []jobs.BatchStatus{jobs.BatchValidating, jobs.BatchInProgress, jobs.BatchFinalizing,
	jobs.BatchCompleted, jobs.BatchFailed, jobs.BatchExpired, jobs.BatchCancelling, jobs.BatchCancelled}

// BatchStatuses lists each valid state once.
func TestBatchStatuses(t *testing.T) {
	got, want := slices.Sorted(slices.Values(jobs.BatchStatuses())), slices.Sorted(slices.Values(batchStatuses))
	if !slices.Equal(got, want) {
		t.Errorf("BatchStatuses() = %v, want %v", got, want)
	}
	for _, s := range jobs.BatchStatuses() {
		if !s.Valid() {
			t.Errorf("%s is not Valid", s)
		}
	}
}

// CancelTo: validating and in_progress move to cancelling, cancelling and
// cancelled stay, the others are past cancelling.
func TestBatchCancelTo(t *testing.T) {
	want := map[jobs.BatchStatus]jobs.BatchStatus{
		jobs.BatchValidating: jobs.BatchCancelling, jobs.BatchInProgress: jobs.BatchCancelling,
		jobs.BatchCancelling: jobs.BatchCancelling, jobs.BatchCancelled: jobs.BatchCancelled,
	}
	for _, s := range append(batchStatuses, "gone") {
		to, err := s.CancelTo()
		if w, ok := want[s]; ok {
			if err != nil || to != w {
				t.Errorf("%q.CancelTo() = %q, %v; want %q", s, to, err, w)
			}
		} else if !errors.Is(err, jobs.ErrBatchChanged) {
			t.Errorf("%q.CancelTo() = %q, %v; want ErrBatchChanged", s, to, err)
		}
	}
}

func TestBatchCountsLive(t *testing.T) {
	for _, s := range batchStatuses {
		want := s == jobs.BatchInProgress || s == jobs.BatchFinalizing || s == jobs.BatchCancelling
		if got := s.CountsLive(); got != want {
			t.Errorf("%q.CountsLive() = %v", s, got)
		}
	}
	p := jobs.BatchProgress{Lines: 9, Succeeded: 3, Failed: 2, Cancelled: 1, Unfinished: 3}
	if got, want := p.Counts(), (jobs.BatchCounts{Total: 9, Completed: 3, Failed: 3}); got != want {
		t.Errorf("Counts() = %+v, want %+v", got, want)
	}
}

// MoveBatchParams refuse statuses that do not exist and a move back to
// validating; FinishBatchParams a target that is not terminal.
func TestBatchMoveRules(t *testing.T) {
	for _, from := range batchStatuses {
		for _, to := range append(batchStatuses, "gone") {
			_, err := jobs.MoveBatchParams{From: from, To: to}.Normalize()
			if ok := to.Valid() && to != jobs.BatchValidating; ok != (err == nil) {
				t.Errorf("MoveBatch %q → %q: %v", from, to, err)
			} else if err != nil && !errors.Is(err, jobs.ErrInvalid) {
				t.Errorf("MoveBatch %q → %q: %v, want ErrInvalid", from, to, err)
			}
			_, err = jobs.FinishBatchParams{From: from, To: to}.Normalize()
			if to.Terminal() != (err == nil) || err != nil && !errors.Is(err, jobs.ErrInvalid) {
				t.Errorf("FinishBatch %q → %q: %v", from, to, err)
			}
		}
	}
	for _, p := range []jobs.MoveBatchParams{{To: jobs.BatchFailed}, {From: "gone", To: jobs.BatchFailed}} {
		if _, err := p.Normalize(); !errors.Is(err, jobs.ErrInvalid) {
			t.Errorf("MoveBatch %q → %q: %v, want ErrInvalid", p.From, p.To, err)
		}
	}
	if _, err := (jobs.FinishBatchParams{To: jobs.BatchCompleted}).Normalize(); !errors.Is(err, jobs.ErrInvalid) {
		t.Errorf("FinishBatch from \"\": %v, want ErrInvalid", err)
	}
	for limit, want := range map[int]int{0: 500, -1: 500, 7: 7, 5000: jobs.MaxListLimit} {
		if p, err := (jobs.BatchResultsParams{Limit: limit}).Normalize(); err != nil || p.Limit != want {
			t.Errorf("BatchResultsParams{Limit: %d}.Normalize() = %d, %v; want %d", limit, p.Limit, err, want)
		}
	}
}

func TestRetryPriorityOf(t *testing.T) {
	old := jobs.Job{Priority: 30}
	zero, ten := 0, 10
	for _, c := range []struct {
		p    *int
		want int
	}{{nil, 30}, {&zero, 0}, {&ten, 10}} {
		if got := (jobs.RetryParams{Priority: c.p}).PriorityOf(old); got != c.want {
			t.Errorf("PriorityOf with %v = %d, want %d", c.p, got, c.want)
		}
	}
}

// Replacement copies the prompt, budget, options, dependency and owners,
// and resets the rest: queued at attempt 1, superseding the old job, at
// now, with no claim, times or error.
func TestRetryReplacement(t *testing.T) {
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	now := at.Add(time.Hour)
	depth, ten := 2, 10
	old := jobs.Job{ID: "old", PromptID: "p", State: jobs.Failed, Priority: 30, Attempt: 3, MaxAttempts: 4,
		ExecutionOptions: jobs.ExecutionOptions{Depth: &depth}, WorkerClaim: "w", ClaimedAt: at, StartedAt: at,
		HeartbeatAt: at, FinishedAt: at, ResponseID: "r", ErrorKind: jobs.KindAuth, ErrorMessage: "no",
		Supersedes: "older", DependsOn: "parent", OrgID: "o", CreatedBy: "u", TokenID: "t",
		CreatedAt: at, UpdatedAt: at, AvailableAt: at.Add(time.Minute)}
	want := jobs.Job{ID: "new", PromptID: "p", State: jobs.Queued, Priority: 30, Attempt: 1, MaxAttempts: 4,
		ExecutionOptions: jobs.ExecutionOptions{Depth: &depth}, Supersedes: "old", DependsOn: "parent",
		OrgID: "o", CreatedBy: "u", TokenID: "t", CreatedAt: now, UpdatedAt: now, AvailableAt: now}
	if got := (jobs.RetryParams{JobID: "old"}).Replacement(old, "new", now); !reflect.DeepEqual(got, want) {
		t.Errorf("Replacement =\n%+v\nwant\n%+v", got, want)
	}
	want.Priority = 10
	if got := (jobs.RetryParams{JobID: "old", Priority: &ten}).Replacement(old, "new", now); !reflect.DeepEqual(got, want) {
		t.Errorf("Replacement with priority 10 =\n%+v\nwant\n%+v", got, want)
	}
}

// EncodeChat and DecodeChat: none is nil both ways, a request comes back
// byte for byte, and one JSON cannot hold is ErrInvalid.
func TestChatStoredForm(t *testing.T) {
	if b, err := jobs.EncodeChat(nil); b != nil || err != nil {
		t.Errorf("EncodeChat(nil) = %q, %v", b, err)
	}
	if c, err := jobs.DecodeChat(nil); c != nil || err != nil {
		t.Errorf("DecodeChat(nil) = %+v, %v", c, err)
	}
	temp := 0.5
	c := &jobs.ChatRequest{Messages: []pktype.Message{{Role: pktype.RoleUser, Content: "hi"}}, Sampling: pktype.Sampling{Temperature: &temp},
		ResponseFormat: jobs.FormatJSONSchema, Schema: []byte(`{"type":"object","required":["b","a"]}`)}
	b, err := jobs.EncodeChat(c)
	if err != nil {
		t.Fatal(err)
	}
	back, err := jobs.DecodeChat(b)
	if err != nil {
		t.Fatal(err)
	}
	again, err := jobs.EncodeChat(back)
	if err != nil || !bytes.Equal(again, b) {
		t.Errorf("EncodeChat(DecodeChat(%s)) = %s, %v", b, again, err)
	}
	nan := math.NaN()
	c.Temperature = &nan
	if _, err := jobs.EncodeChat(c); !errors.Is(err, jobs.ErrInvalid) {
		t.Errorf("EncodeChat with a NaN temperature: %v, want ErrInvalid", err)
	}
	if _, err := jobs.DecodeChat([]byte("{")); err == nil {
		t.Error("DecodeChat of broken JSON: no error")
	}
}
