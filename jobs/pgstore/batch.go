package pgstore

import (
	"context"
	"time"

	"github.com/promptkit/promptkit/jobs"
)

// writeReq is one Enqueue, Claim or finishing call (Succeed, Fail,
// Requeue, AppendAttempt) waiting for the group commit. Exactly one field
// is set.
type writeReq struct {
	enqueue *enqueueReq
	claim   *claimReq
	finish  *finishReq
}

// key keeps two finishing calls for one job out of the same batch, so the
// second sees the first's outcome (and gets jobs.ErrNotClaimed).
func (r *writeReq) key() string {
	if r.finish != nil {
		return r.finish.w.JobID
	}
	return ""
}

// writeBatchMax bounds one group-committed transaction.
const writeBatchMax = 256

// runWrites commits a batch of calls in one transaction. Before the event
// lock: the enqueued prompts are inserted and the jobs being finished are
// locked. Under it: the claims (so they see the queue as it was before
// this transaction), then the enqueued jobs, then the finishing writes.
// If the shared transaction fails, nothing was stored, and each kind of
// call runs again in a transaction of its own, which sorts out whose
// error it was.
func (s *Store) runWrites(ctx context.Context, reqs []*writeReq) []error {
	var (
		enqs             []*enqueueReq
		claims           []*claimReq
		finishes         []*finishReq
		eIdx, cIdx, fIdx []int
	)
	for i, r := range reqs {
		switch {
		case r.enqueue != nil:
			enqs, eIdx = append(enqs, r.enqueue), append(eIdx, i)
		case r.claim != nil:
			claims, cIdx = append(claims, r.claim), append(cIdx, i)
		default:
			finishes, fIdx = append(finishes, r.finish), append(fIdx, i)
		}
	}
	errs := make([]error, len(reqs))
	spread := func(idx []int, sub []error) {
		for k, i := range idx {
			errs[i] = sub[k]
		}
	}
	// A batch of one kind needs no sharing logic.
	switch {
	case len(enqs) == len(reqs):
		spread(eIdx, s.runEnqueue(ctx, enqs))
		return errs
	case len(claims) == len(reqs):
		spread(cIdx, s.runClaim(ctx, claims))
		return errs
	case len(finishes) == len(reqs):
		spread(fIdx, s.runFinish(ctx, finishes))
		return errs
	}

	var eb *enqueueBatch
	if len(enqs) > 0 {
		ps := make([]jobs.EnqueueParams, len(enqs))
		for i, r := range enqs {
			ps[i] = r.p
		}
		eb = newEnqueueBatch(ps, s.clock(), s.schema)
	}
	cb := &claimBatch{reqs: claims, schema: s.schema}
	var fb *finishBatch
	if len(finishes) > 0 {
		fb = newFinishBatch(finishes, s.schema)
	}
	err := s.chooseTrips(eb != nil && eb.readsFirst())(ctx, func(p *phase) {
		if eb != nil {
			eb.pre(p)
		}
		if fb != nil {
			fb.pre(p)
		}
	}, func(p *phase, now time.Time) {
		cb.locked(p, now)
		if eb != nil {
			eb.locked(p, now)
		}
		if fb != nil {
			fb.locked(p, now)
		}
	})
	if err != nil {
		for _, r := range claims {
			r.out = nil
		}
		if len(enqs) > 0 {
			spread(eIdx, s.runEnqueue(ctx, enqs))
		}
		if len(claims) > 0 {
			spread(cIdx, s.runClaim(ctx, claims))
		}
		if len(finishes) > 0 {
			spread(fIdx, s.runFinish(ctx, finishes))
		}
		return errs
	}
	if eb != nil {
		for k, out := range eb.results() {
			enqs[k].out = out
		}
	}
	if fb != nil {
		spread(fIdx, fb.errs)
	}
	cb.remember(&s.prompts)
	if (eb != nil && eb.changed()) || cb.claimed() > 0 || (fb != nil && fb.changed) {
		s.notify.Broadcast()
	}
	return errs
}
