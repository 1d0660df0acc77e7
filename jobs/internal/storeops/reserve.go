package storeops

import (
	"context"
	"errors"
	"time"

	"github.com/promptkit/promptkit/jobs"
)

// ReservationInsertParams are one reservation's row.
type ReservationInsertParams struct {
	ID, OrgID, TokenID string
	Request            bool
	JobID              string
	ClaimedAt          time.Time
	Tokens             int64
	USD                *float64
	ExpiresAt          time.Time
}

// refused carries a reservation's Check error out of its transaction, so
// that it is returned as it is, and not taken for the database's.
type refused struct{ err error }

func (r refused) Error() string { return r.err.Error() }

// Reserve stores a reservation if its check admits it, under the lock of
// its org and token. See jobs.Store.
func (o Ops) Reserve(ctx context.Context, p jobs.ReserveParams) (string, error) {
	p, err := p.Normalize()
	if err != nil {
		return "", o.fail("reserve", err)
	}
	id := jobs.NewID()
	err = o.db.WriteTx(ctx, func(tx Tx) error {
		if err := tx.ReserveLock(p.OrgID, p.TokenID); err != nil {
			return err
		}
		now := tx.Now()
		if err := tx.ReservationsExpire(p.OrgID); err != nil {
			return err
		}
		if p.Check != nil {
			if err := p.Check(ctx, txReader{tx}, now); err != nil {
				return refused{err}
			}
		}
		usd := p.USD
		if p.Request {
			usd = new(0.0)
		}
		return tx.ReservationInsert(ReservationInsertParams{ID: id, OrgID: p.OrgID, TokenID: p.TokenID, Request: p.Request,
			JobID: p.JobID, ClaimedAt: p.ClaimedAt, Tokens: p.Tokens, USD: usd, ExpiresAt: now.Add(p.TTL)})
	})
	if r, ok := errors.AsType[refused](err); ok {
		return "", r.err
	}
	o.db.Wrote(ctx, "reserve", err, err == nil)
	if err != nil {
		return "", o.fail("reserve", err)
	}
	return id, nil
}

// Release deletes a reservation. See jobs.Store.
func (o Ops) Release(ctx context.Context, id string) error {
	err := o.db.ReservationDelete(ctx, id)
	o.db.Wrote(ctx, "release", err, err == nil)
	if err != nil {
		return o.fail("release", err)
	}
	return nil
}

// Reserved sums an org's or a token's open reservations. See jobs.Store.
func (o Ops) Reserved(ctx context.Context, p jobs.ReservedParams) (jobs.Reserved, error) {
	if !p.Scope.Valid() {
		return jobs.Reserved{}, o.fail("reserved", jobs.ErrInvalid)
	}
	r, err := o.db.ReservedRead(ctx, p)
	if err != nil {
		return jobs.Reserved{}, o.fail("reserved", err)
	}
	return r, nil
}

// txReader is a reservation's check's view: the transaction's reads.
type txReader struct{ tx Tx }

func (r txReader) Usage(_ context.Context, p jobs.UsageParams) ([]jobs.UsageBucket, error) {
	p, err := p.Normalize()
	if err != nil {
		return nil, err
	}
	return r.tx.UsageRead(p)
}

func (r txReader) Reserved(_ context.Context, p jobs.ReservedParams) (jobs.Reserved, error) {
	if !p.Scope.Valid() {
		return jobs.Reserved{}, jobs.ErrInvalid
	}
	return r.tx.ReservedRead(p)
}
