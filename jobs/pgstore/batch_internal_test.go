package pgstore

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"net/url"
	"os"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/promptkit/promptkit/jobs"
	"github.com/promptkit/promptkit/jobs/internal/finish"
)

// openInternal opens a store on a fresh schema for tests that need the
// package's internals.
func openInternal(t *testing.T) *Store {
	t.Helper()
	return openInternalWith(t, nil, nil)
}

// openInternalWith is openInternal with more URL query parameters and a
// hook that adjusts the pool's configuration (see open).
func openInternalWith(t testing.TB, params map[string]string, configure func(*pgxpool.Config)) *Store {
	t.Helper()
	base := os.Getenv("PROMPTKIT_TEST_DATABASE_URL")
	if base == "" {
		t.Skip("PROMPTKIT_TEST_DATABASE_URL not set: skipping PostgreSQL store tests")
	}
	var b [6]byte
	rand.Read(b[:])
	schema := "pkt_" + hex.EncodeToString(b[:])
	u, err := url.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	q.Set("search_path", schema)
	for k, v := range params {
		q.Set(k, v)
	}
	u.RawQuery = q.Encode()
	ctx := context.Background()
	s, err := open(ctx, u.String(), jobs.Options{}, configure)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		s.Close()
		conn, err := pgx.Connect(ctx, base)
		if err != nil {
			return
		}
		defer conn.Close(ctx)
		conn.Exec(ctx, `DROP SCHEMA `+pgx.Identifier{schema}.Sanitize()+` CASCADE`)
	})
	return s
}

// TestRunWritesMixedWithBadCall checks that one bad call in a shared
// transaction (an enqueue naming a missing dependency) fails alone: the
// shared transaction rolls back and every call runs again on its own.
func TestRunWritesMixedWithBadCall(t *testing.T) {
	s := openInternal(t)
	ctx := context.Background()
	a, err := s.Enqueue(ctx, jobs.EnqueueParams{OrgID: "o", Text: "a"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Enqueue(ctx, jobs.EnqueueParams{OrgID: "o", Text: "b"}); err != nil {
		t.Fatal(err)
	}
	got, err := s.Claim(ctx, jobs.ClaimParams{Worker: "w"})
	if err != nil || len(got) != 1 || got[0].ID != a.JobID {
		t.Fatalf("claim = %v, %v", got, err)
	}
	ok := finish.Succeed(jobs.SucceedParams{JobID: a.JobID, Worker: "w", Answer: jobs.Answer{Output: "ok"}})
	reqs := []*writeReq{
		{enqueue: enqueueCall(t, jobs.EnqueueParams{OrgID: "o", Text: "c"})},
		{enqueue: enqueueCall(t, jobs.EnqueueParams{OrgID: "o", Text: "bad", DependsOn: "missing"})},
		{claim: newClaimReq(jobs.ClaimParams{Worker: "w2", Limit: 5, PriorityCeiling: new(100)})},
		{finish: &finishReq{w: ok}},
		{finish: &finishReq{w: finish.Fail(jobs.FailParams{JobID: jobs.NewID(), Worker: "w"})}},
	}
	errs := s.runWrites(ctx, reqs)
	if errs[0] != nil || reqs[0].enqueue.out.JobID == "" {
		t.Errorf("good enqueue: %v %+v", errs[0], reqs[0].enqueue.out)
	}
	if !errors.Is(errs[1], jobs.ErrInvalid) {
		t.Errorf("bad enqueue: %v, want ErrInvalid", errs[1])
	}
	if errs[2] != nil || len(reqs[2].claim.out) != 2 {
		t.Errorf("claim: %v, %d jobs, want 2 (b and c)", errs[2], len(reqs[2].claim.out))
	}
	if errs[3] != nil || reqs[3].finish.job.State != jobs.Succeeded {
		t.Errorf("succeed: %v %+v", errs[3], reqs[3].finish.job)
	}
	if !errors.Is(errs[4], jobs.ErrNotClaimed) {
		t.Errorf("fail of an unknown job: %v, want ErrNotClaimed", errs[4])
	}
}

// TestRunWritesShared checks a mixed batch that succeeds as one
// transaction: claims see the queue as it was before the batch.
func TestRunWritesShared(t *testing.T) {
	s := openInternal(t)
	ctx := context.Background()
	a, err := s.Enqueue(ctx, jobs.EnqueueParams{OrgID: "o", Text: "a"})
	if err != nil {
		t.Fatal(err)
	}
	if got, err := s.Claim(ctx, jobs.ClaimParams{Worker: "w"}); err != nil || len(got) != 1 {
		t.Fatalf("claim = %v, %v", got, err)
	}
	before := len(s.allEventsForTest(t))
	reqs := []*writeReq{
		{enqueue: enqueueCall(t, jobs.EnqueueParams{OrgID: "o", Text: "c"})},
		{claim: newClaimReq(jobs.ClaimParams{Worker: "w2", Limit: 5, PriorityCeiling: new(100)})},
		{finish: &finishReq{w: finish.Requeue(jobs.RequeueParams{JobID: a.JobID, Worker: "w", Kind: jobs.KindTimeout})}},
	}
	errs := s.runWrites(ctx, reqs)
	if errs[0] != nil || errs[1] != nil || errs[2] != nil {
		t.Fatalf("errors: %v", errs)
	}
	if len(reqs[1].claim.out) != 0 {
		t.Errorf("claim in the batch took %d jobs created or requeued by the same batch", len(reqs[1].claim.out))
	}
	if reqs[2].finish.job.State != jobs.Queued || reqs[2].finish.job.Attempt != 2 {
		t.Errorf("requeued job: %+v", reqs[2].finish.job)
	}
	if n := len(s.allEventsForTest(t)) - before; n != 2 {
		t.Errorf("batch appended %d events, want 2 (enqueue, requeue)", n)
	}
}

// enqueueCall is an Enqueue call as Enqueue hands it to the group commit.
func enqueueCall(t *testing.T, p jobs.EnqueueParams) *enqueueReq {
	t.Helper()
	p, err := p.Normalize()
	if err != nil {
		t.Fatal(err)
	}
	return &enqueueReq{p: p}
}

func (s *Store) allEventsForTest(t *testing.T) []jobs.Event {
	t.Helper()
	ev, err := s.EventsAfter(context.Background(), jobs.EventsParams{Limit: 100000})
	if err != nil {
		t.Fatal(err)
	}
	return ev
}

// TestRunWritesIdempotencyConflict checks that an enqueue whose request
// hash contradicts its key's prompt, stored or inserted by an earlier call
// of the same group, fails alone, in a group of enqueues and in a mixed
// one.
func TestRunWritesIdempotencyConflict(t *testing.T) {
	s := openInternal(t)
	ctx := context.Background()
	a, err := s.Enqueue(ctx, jobs.EnqueueParams{OrgID: "o", Text: "a", IdempotencyKey: "k", RequestHash: "h1"})
	if err != nil {
		t.Fatal(err)
	}
	for _, mixed := range []bool{false, true} {
		key := "k2"
		if mixed {
			key = "k3"
		}
		reqs := []*writeReq{
			{enqueue: enqueueCall(t, jobs.EnqueueParams{OrgID: "o", Text: "c"})},
			{enqueue: enqueueCall(t, jobs.EnqueueParams{OrgID: "o", Text: "a", IdempotencyKey: "k", RequestHash: "h2"})},
			{enqueue: enqueueCall(t, jobs.EnqueueParams{OrgID: "o", Text: "a", IdempotencyKey: "k", RequestHash: "h1"})},
			{enqueue: enqueueCall(t, jobs.EnqueueParams{OrgID: "o", Text: "x", IdempotencyKey: key, RequestHash: "hx"})},
			{enqueue: enqueueCall(t, jobs.EnqueueParams{OrgID: "o", Text: "y", IdempotencyKey: key, RequestHash: "hy"})},
		}
		if mixed {
			reqs = append(reqs, &writeReq{claim: newClaimReq(jobs.ClaimParams{Worker: "w", Limit: 1, PriorityCeiling: new(100)})})
		}
		errs := s.runWrites(ctx, reqs)
		if errs[0] != nil || reqs[0].enqueue.out.JobID == "" || reqs[0].enqueue.out.Existing {
			t.Errorf("mixed %v: plain enqueue: %v %+v", mixed, errs[0], reqs[0].enqueue.out)
		}
		if !errors.Is(errs[1], jobs.ErrIdempotencyConflict) {
			t.Errorf("mixed %v: conflicting enqueue: %v", mixed, errs[1])
		}
		if out := reqs[2].enqueue.out; errs[2] != nil || out.JobID != a.JobID || !out.Existing {
			t.Errorf("mixed %v: agreeing repeat: %v %+v", mixed, errs[2], out)
		}
		if out := reqs[3].enqueue.out; errs[3] != nil || out.JobID == "" || out.Existing {
			t.Errorf("mixed %v: first of a new key: %v %+v", mixed, errs[3], out)
		}
		if !errors.Is(errs[4], jobs.ErrIdempotencyConflict) {
			t.Errorf("mixed %v: second of a new key, with another hash: %v", mixed, errs[4])
		}
		if mixed && (errs[5] != nil || len(reqs[5].claim.out) != 1) {
			t.Errorf("claim: %v, %d jobs, want 1", errs[5], len(reqs[5].claim.out))
		}
	}
}
