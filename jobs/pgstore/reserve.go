package pgstore

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/promptkit/promptkit/jobs"
	"github.com/promptkit/promptkit/jobs/internal/storeops"
)

// reserveLockSQL takes the advisory lock of one subject's reservations
// for the transaction. The key is a hash of the scope and subject: two
// subjects sharing a key only wait for each other.
const reserveLockSQL = `SELECT pg_advisory_xact_lock(hashtextextended($1, 7240))`

const (
	expireReservationsSQL = `DELETE FROM reservations WHERE org_id = $1 AND expires_at <= $2`
	insertReservationSQL  = `INSERT INTO reservations (id, org_id, token_id, request, tokens, usd, job_id, claimed_at, expires_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)`
	deleteReservationSQL = `DELETE FROM reservations WHERE id = $1`
	// reservedSQL sums the open reservations of an org, and
	// reservedTokenSQL a token's: a job's call counts while the job runs
	// under the claim that made it.
	reservedCols = `SELECT count(*) FILTER (WHERE request), min(expires_at) FILTER (WHERE request),
			count(*) FILTER (WHERE NOT request), count(*) FILTER (WHERE NOT request AND usd IS NULL),
			coalesce(sum(tokens) FILTER (WHERE NOT request), 0)::bigint, coalesce(sum(usd) FILTER (WHERE NOT request), 0)
		FROM reservations r`
	reservedLive = ` AND r.expires_at > $2 AND (r.job_id = '' OR EXISTS (SELECT 1 FROM jobs j
			WHERE j.id = r.job_id AND j.state = 'running' AND j.claimed_at = r.claimed_at))`
	reservedSQL      = reservedCols + ` WHERE r.org_id = $1` + reservedLive
	reservedTokenSQL = reservedCols + ` WHERE r.token_id = $1 AND r.token_id <> ''` + reservedLive
)

// reserved sums on q the reservations of p that are open at now.
func reserved(ctx context.Context, q interface {
	QueryRow(context.Context, string, ...any) pgx.Row
}, p jobs.ReservedParams, now time.Time) (jobs.Reserved, error) {
	var r jobs.Reserved
	var next *time.Time
	sql := reservedSQL
	if p.Scope == jobs.LimitToken {
		sql = reservedTokenSQL
	}
	err := q.QueryRow(ctx, sql, p.Subject, now).
		Scan(&r.Requests, &next, &r.Calls, &r.UnknownCost, &r.Tokens, &r.CostUSD)
	r.NextExpiry = tm(next).UTC()
	return r, err
}

func (d *opsDB) ReservationDelete(ctx context.Context, id string) error {
	_, err := d.pool.Exec(ctx, deleteReservationSQL, id)
	return err
}

func (d *opsDB) ReservedRead(ctx context.Context, p jobs.ReservedParams) (jobs.Reserved, error) {
	return reserved(ctx, d.pool, p, d.store().clock())
}

// ReserveLock implements storeops.Tx: the org's lock, then the token's,
// in the same order in every transaction.
func (t *batchTx) ReserveLock(org, token string) error {
	if _, err := t.tx.Exec(t.ctx, reserveLockSQL, "org:"+org); err != nil {
		return err
	}
	if token == "" {
		return nil
	}
	_, err := t.tx.Exec(t.ctx, reserveLockSQL, "token:"+token)
	return err
}

// Now implements storeops.Tx.
func (t *batchTx) Now() time.Time { return t.clock() }

// ReservationsExpire implements storeops.Tx.
func (t *batchTx) ReservationsExpire(org string) error {
	_, err := t.tx.Exec(t.ctx, expireReservationsSQL, org, t.clock())
	return err
}

// ReservationInsert implements storeops.Tx.
func (t *batchTx) ReservationInsert(p storeops.ReservationInsertParams) error {
	var claimed *time.Time
	if !p.ClaimedAt.IsZero() {
		claimed = &p.ClaimedAt
	}
	_, err := t.tx.Exec(t.ctx, insertReservationSQL, p.ID, p.OrgID, p.TokenID, p.Request, p.Tokens, p.USD, p.JobID, claimed, p.ExpiresAt)
	return err
}

// ReservedRead implements storeops.Tx.
func (t *batchTx) ReservedRead(p jobs.ReservedParams) (jobs.Reserved, error) {
	return reserved(t.ctx, t.tx, p, t.clock())
}

// UsageRead implements storeops.Tx.
func (t *batchTx) UsageRead(p jobs.UsageParams) ([]jobs.UsageBucket, error) {
	return usage(t.ctx, t.tx, p)
}
