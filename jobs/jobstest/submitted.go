package jobstest

import (
	"errors"
	"testing"
	"time"

	"github.com/promptkit/promptkit/jobs"
)

// submitted calls Submitted.
func (f *fixture) submitted(p jobs.SubmittedParams) time.Time {
	f.t.Helper()
	at, err := f.store.Submitted(f.ctx, p)
	if err != nil {
		f.t.Fatalf("Submitted(%+v): %v", p, err)
	}
	return at
}

// Submitted: the N-th newest job an org (or a token of it) created at or
// after Since, a retry's job included; zero when there are fewer; other
// orgs' and other tokens' jobs never count.
func testSubmitted(t *testing.T, h Harness) {
	f := setup(t, h)
	var at []time.Time
	var first string
	for i := range 3 {
		if i > 0 {
			f.advance(10 * time.Second)
		}
		e := f.enqueue(jobs.EnqueueParams{OrgID: "org-a"})
		if i == 0 {
			first = e.JobID
		}
		at = append(at, f.now())
	}
	f.enqueue(jobs.EnqueueParams{OrgID: "org-b"})

	for _, c := range []struct {
		since time.Time
		n     int
		want  time.Time
	}{
		{T0, 1, at[2]},
		{T0, 3, at[0]},
		{T0, 4, time.Time{}},
		{at[1], 2, at[1]}, // Since is inclusive
		{at[1].Add(time.Microsecond), 2, time.Time{}},
		{at[2].Add(time.Second), 1, time.Time{}},
	} {
		got := f.submitted(jobs.SubmittedParams{OrgID: "org-a", Since: c.since, N: c.n})
		if !got.Equal(c.want) {
			t.Errorf("Submitted(org-a, since %v, %d) = %v, want %v", c.since.Sub(T0), c.n, got, c.want)
		}
	}
	if got := f.submitted(jobs.SubmittedParams{OrgID: "org-b", Since: T0, N: 2}); !got.IsZero() {
		t.Errorf("Submitted(org-b, 2) = %v, want zero: org-a's jobs counted", got)
	}
	if got := f.submitted(jobs.SubmittedParams{OrgID: "org-c", Since: T0, N: 1}); !got.IsZero() {
		t.Errorf("Submitted(org-c, 1) = %v, want zero", got)
	}

	// A retry creates a job: one submission more.
	f.advance(time.Second)
	if _, err := f.store.Cancel(f.ctx, jobs.CancelParams{JobID: first}); err != nil {
		t.Fatalf("Cancel: %v", err)
	}
	if _, err := f.store.Retry(f.ctx, jobs.RetryParams{JobID: first}); err != nil {
		t.Fatalf("Retry: %v", err)
	}
	if got := f.submitted(jobs.SubmittedParams{OrgID: "org-a", Since: T0, N: 4}); !got.Equal(at[0]) {
		t.Errorf("Submitted(org-a, 4) after a retry = %v, want %v", got, at[0])
	}

	// A token's: only the jobs submitted with it, found through its user.
	tokAt := f.advance(time.Second)
	f.enqueue(jobs.EnqueueParams{OrgID: "org-a", CreatedBy: "user-t", TokenID: "tok-1"})
	f.advance(time.Second)
	f.enqueue(jobs.EnqueueParams{OrgID: "org-a", CreatedBy: "user-t", TokenID: "tok-2"})
	f.enqueue(jobs.EnqueueParams{OrgID: "org-a", CreatedBy: "user-t"})
	f.enqueue(jobs.EnqueueParams{OrgID: "org-b", CreatedBy: "user-t", TokenID: "tok-1"})
	tok := func(token string, n int) time.Time {
		return f.submitted(jobs.SubmittedParams{OrgID: "org-a", CreatedBy: "user-t", TokenID: token, Since: T0, N: n})
	}
	if got := tok("tok-1", 1); !got.Equal(tokAt) {
		t.Errorf("Submitted(tok-1, 1) = %v, want %v", got, tokAt)
	}
	if got := tok("tok-1", 2); !got.IsZero() {
		t.Errorf("Submitted(tok-1, 2) = %v, want zero: another token's, a tokenless or another org's job counted", got)
	}
	if got := tok("tok-3", 1); !got.IsZero() {
		t.Errorf("Submitted(tok-3, 1) = %v, want zero", got)
	}
	if got := f.submitted(jobs.SubmittedParams{OrgID: "org-a", Since: tokAt, N: 4}); !got.IsZero() {
		t.Errorf("Submitted(org-a since the tokens' jobs, 4) = %v, want zero", got)
	}
	if got := f.submitted(jobs.SubmittedParams{OrgID: "org-a", Since: tokAt, N: 3}); !got.Equal(tokAt) {
		t.Errorf("Submitted(org-a since the tokens' jobs, 3) = %v, want %v: the org counts every token's", got, tokAt)
	}

	for _, p := range []jobs.SubmittedParams{
		{Since: T0, N: 1},
		{OrgID: "org-a", TokenID: "tok-1", Since: T0, N: 1},
		{OrgID: "org-a", Since: T0},
		{OrgID: "org-a", Since: T0, N: -1},
	} {
		if _, err := f.store.Submitted(f.ctx, p); !errors.Is(err, jobs.ErrInvalid) {
			t.Errorf("Submitted(%+v) = %v, want ErrInvalid", p, err)
		}
	}
}
