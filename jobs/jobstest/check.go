package jobstest

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/promptkit/promptkit/jobs"
)

// Check passes on a store opened on a database it migrated, and after
// every kind of write succeeded: the probe write works next to them, and
// no success leaves a failure behind.
func testCheck(t *testing.T, h Harness) {
	f := setup(t, h)
	check := func(after string) {
		t.Helper()
		if err := f.store.Check(f.ctx); err != nil {
			t.Fatalf("Check after %s: %v", after, err)
		}
	}
	check("Open")
	check("Check")

	e := f.enqueue(jobs.EnqueueParams{})
	check("Enqueue")
	if _, err := f.store.EnqueueBatch(f.ctx, []jobs.EnqueueParams{
		{CreatedBy: "u", Text: "a"}, {CreatedBy: "u", Text: "b"}, {CreatedBy: "u", Text: "c"},
	}); err != nil {
		t.Fatal(err)
	}
	check("EnqueueBatch")
	claimed := f.claim("w", 4)
	if len(claimed) != 4 {
		t.Fatalf("Claim = %v, want 4 jobs", ids(claimed))
	}
	check("Claim")
	if _, err := f.store.Heartbeat(f.ctx, jobs.HeartbeatParams{Worker: "w", JobIDs: []string{e.JobID}}); err != nil {
		t.Fatal(err)
	}
	check("Heartbeat")
	if err := f.store.AppendAttempt(f.ctx, jobs.AttemptParams{JobID: claimed[0].ID, Worker: "w", Data: []byte(`{"n":1}`)}); err != nil {
		t.Fatal(err)
	}
	check("AppendAttempt")
	if _, err := f.store.Succeed(f.ctx, jobs.SucceedParams{JobID: claimed[0].ID, Worker: "w", Answer: jobs.Answer{Output: "ok"}}); err != nil {
		t.Fatal(err)
	}
	check("Succeed")
	if _, err := f.store.Fail(f.ctx, jobs.FailParams{JobID: claimed[1].ID, Worker: "w", Kind: jobs.KindAuth}); err != nil {
		t.Fatal(err)
	}
	check("Fail")
	if _, err := f.store.Requeue(f.ctx, jobs.RequeueParams{JobID: claimed[2].ID, Worker: "w", AvailableAt: f.now(), Kind: jobs.KindTimeout}); err != nil {
		t.Fatal(err)
	}
	check("Requeue")
	if _, err := f.store.Cancel(f.ctx, jobs.CancelParams{JobID: claimed[2].ID}); err != nil {
		t.Fatal(err)
	}
	check("Cancel")
	if _, err := f.store.Retry(f.ctx, jobs.RetryParams{JobID: claimed[1].ID}); err != nil {
		t.Fatal(err)
	}
	check("Retry")
	f.advance(time.Hour)
	if r, err := f.store.Reclaim(f.ctx, defaultReclaim); err != nil || len(r.Requeued)+len(r.Failed) != 1 {
		t.Fatalf("Reclaim = %+v, %v; want claimed[3] reclaimed", r, err)
	}
	check("Reclaim")
	if n, err := f.store.Archive(f.ctx, f.now()); err != nil || n == 0 {
		t.Fatalf("Archive = %d, %v; want some jobs archived", n, err)
	}
	check("Archive")
	tok, _ := f.newToken(jobs.CreateTokenParams{OrgID: "o", UserID: "u"})
	check("CreateToken")
	if _, err := f.store.RevokeToken(f.ctx, tok.ID); err != nil {
		t.Fatal(err)
	}
	check("RevokeToken")
}

// The errors by which a store refuses a call, and a call whose context
// ended, say nothing about whether the database accepts writes: Check
// still passes after each.
func testCheckAfterRefusals(t *testing.T, h Harness) {
	f := setup(t, h)
	succeeded, worker := f.jobIn(jobs.Succeeded)
	keyed := f.enqueue(jobs.EnqueueParams{OrgID: "org-1", IdempotencyKey: "k", RequestHash: "h1"})
	ended, cancel := context.WithCancel(f.ctx)
	cancel()
	for _, c := range []struct {
		what string
		call func() error
	}{
		{"ErrNotClaimed (Succeed of a finished job)", func() error {
			_, err := f.store.Succeed(f.ctx, jobs.SucceedParams{JobID: succeeded.ID, Worker: worker, Answer: jobs.Answer{Output: "again"}})
			return err
		}},
		{"ErrNotClaimed (Heartbeat of an unknown job)", func() error {
			_, err := f.store.Heartbeat(f.ctx, jobs.HeartbeatParams{Worker: worker, JobIDs: []string{jobs.NewID()}})
			return err
		}},
		{"ErrInvalid (unknown parent)", func() error {
			_, err := f.store.Enqueue(f.ctx, jobs.EnqueueParams{OrgID: "org-1", CreatedBy: "u", Text: "x", ParentID: jobs.NewID()})
			return err
		}},
		{"ErrInvalid (a token hash stored twice)", func() error {
			_, hash := jobs.NewTokenSecret()
			p := jobs.CreateTokenParams{OrgID: "o", UserID: "u", Hash: hash}
			if _, err := f.store.CreateToken(f.ctx, p); err != nil {
				return fmt.Errorf("first CreateToken: %w", err)
			}
			_, err := f.store.CreateToken(f.ctx, p)
			return err
		}},
		{"ErrNotFound (Cancel of an unknown job)", func() error {
			_, err := f.store.Cancel(f.ctx, jobs.CancelParams{JobID: jobs.NewID()})
			return err
		}},
		{"ErrNotFound (RevokeToken of an unknown token)", func() error {
			_, err := f.store.RevokeToken(f.ctx, jobs.NewID())
			return err
		}},
		{"TransitionError (Cancel of a succeeded job)", func() error {
			_, err := f.store.Cancel(f.ctx, jobs.CancelParams{JobID: succeeded.ID})
			return err
		}},
		{"ErrIdempotencyConflict", func() error {
			_, err := f.store.Enqueue(f.ctx, jobs.EnqueueParams{OrgID: "org-1", CreatedBy: "u", Text: "x",
				IdempotencyKey: "k", RequestHash: "h2"})
			return err
		}},
		{"a context that ended (Enqueue)", func() error {
			_, err := f.store.Enqueue(ended, jobs.EnqueueParams{CreatedBy: "u", Text: "x"})
			return err
		}},
		{"a context that ended (Cancel)", func() error {
			_, err := f.store.Cancel(ended, jobs.CancelParams{JobID: keyed.JobID})
			return err
		}},
	} {
		if err := c.call(); err == nil {
			t.Errorf("%s: the call did not fail", c.what)
			continue
		}
		if err := f.store.Check(f.ctx); err != nil {
			t.Errorf("Check after %s: %v", c.what, err)
		}
	}
}

// Check's probe write waits its turn behind writes running at the same
// time, in this process: every Check and every write succeeds.
func testCheckConcurrentWrites(t *testing.T, h Harness) {
	f := setupRealClock(t, h)
	const writers, checkers, rounds = 4, 4, 25
	var wg sync.WaitGroup
	for i := range writers {
		worker := fmt.Sprintf("worker-%d", i)
		wg.Go(func() {
			for range rounds {
				if _, err := f.store.Enqueue(f.ctx, jobs.EnqueueParams{CreatedBy: "u", Text: "x"}); err != nil {
					t.Errorf("Enqueue: %v", err)
					return
				}
				got, err := f.store.Claim(f.ctx, jobs.ClaimParams{Worker: worker})
				if err != nil {
					t.Errorf("Claim: %v", err)
					return
				}
				for _, j := range got {
					if _, err := f.store.Succeed(f.ctx, jobs.SucceedParams{JobID: j.ID, Worker: worker, Answer: jobs.Answer{Output: "ok"}}); err != nil {
						t.Errorf("Succeed: %v", err)
						return
					}
				}
			}
		})
	}
	for range checkers {
		wg.Go(func() {
			for range rounds {
				if err := f.store.Check(f.ctx); err != nil {
					t.Errorf("Check during writes: %v", err)
					return
				}
			}
		})
	}
	wg.Wait()
}

// Check looks at the database: it fails once its context has ended, and
// on a closed store.
func testCheckClosed(t *testing.T, h Harness) {
	f := setup(t, h)
	ended, cancel := context.WithCancel(f.ctx)
	cancel()
	if err := f.store.Check(ended); err == nil {
		t.Error("Check with a context that ended passed")
	}
	if err := f.store.Check(f.ctx); err != nil {
		t.Fatalf("Check: %v", err)
	}
	if err := f.store.Close(); err != nil {
		t.Fatal(err)
	}
	if err := f.store.Check(f.ctx); err == nil {
		t.Error("Check on a closed store passed")
	}
}
