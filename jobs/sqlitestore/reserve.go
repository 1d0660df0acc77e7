package sqlitestore

import (
	"context"
	"database/sql"
	"time"

	"github.com/promptkit/promptkit/jobs"
	"github.com/promptkit/promptkit/jobs/internal/storeops"
)

var (
	qExpireReservations = wq(`DELETE FROM reservations WHERE org_id = ?1 AND expires_at <= ?2`)
	qInsertReservation  = wq(`INSERT INTO reservations (id, org_id, token_id, request, tokens, usd, job_id, claimed_at, expires_at)
		VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)`)
	qDeleteReservation = wq(`DELETE FROM reservations WHERE id = ?1`)
)

// qReserved sums the open reservations of an org, and qReservedToken a
// token's: a job's call counts while the job runs under the claim that
// made it.
const (
	reservedCols = `SELECT count(*) FILTER (WHERE request), min(expires_at) FILTER (WHERE request),
			count(*) FILTER (WHERE NOT request), count(*) FILTER (WHERE NOT request AND usd IS NULL),
			coalesce(sum(tokens) FILTER (WHERE NOT request), 0), coalesce(sum(usd) FILTER (WHERE NOT request), 0.0)
		FROM reservations r`
	reservedLive = ` AND r.expires_at > ?2 AND (r.job_id = '' OR EXISTS (SELECT 1 FROM jobs j
			WHERE j.id = r.job_id AND j.state = 'running' AND j.claimed_at = r.claimed_at))`
	qReserved      = reservedCols + ` WHERE r.org_id = ?1` + reservedLive
	qReservedToken = reservedCols + ` WHERE r.token_id = ?1 AND r.token_id <> ''` + reservedLive
)

func (d *opsDB) ReservationDelete(ctx context.Context, id string) error {
	return d.store().tx(ctx, func(w *wtx) error {
		_, err := w.exec(qDeleteReservation, id)
		return err
	})
}

func (d *opsDB) ReservedRead(ctx context.Context, p jobs.ReservedParams) (jobs.Reserved, error) {
	return d.store().reserved(ctx, p, d.store().nowMicros())
}

// reserved sums the reservations of p open at now.
func (s *Store) reserved(ctx context.Context, p jobs.ReservedParams, now int64) (jobs.Reserved, error) {
	q := qReserved
	if p.Scope == jobs.LimitToken {
		q = qReservedToken
	}
	var r jobs.Reserved
	var next sql.NullInt64
	err := s.readRow(ctx, q, p.Subject, now).
		Scan(&r.Requests, &next, &r.Calls, &r.UnknownCost, &r.Tokens, &r.CostUSD)
	r.NextExpiry = nullTime(next)
	return r, err
}

// ReserveLock implements storeops.Tx: the transaction already holds
// SQLite's write lock, which serialises every write.
func (w *wtx) ReserveLock(org, token string) error { return nil }

// Now implements storeops.Tx.
func (w *wtx) Now() time.Time { return fromMicros(w.now) }

// ReservationsExpire implements storeops.Tx.
func (w *wtx) ReservationsExpire(org string) error {
	_, err := w.exec(qExpireReservations, org, w.now)
	return err
}

// ReservationInsert implements storeops.Tx.
func (w *wtx) ReservationInsert(p storeops.ReservationInsertParams) error {
	_, err := w.exec(qInsertReservation, p.ID, p.OrgID, p.TokenID, p.Request, p.Tokens, p.USD, p.JobID,
		microsOrNull(p.ClaimedAt), p.ExpiresAt.UnixMicro())
	return err
}

// ReservedRead implements storeops.Tx, on the reader pool: with the
// write lock held, the last commit is the state.
func (w *wtx) ReservedRead(p jobs.ReservedParams) (jobs.Reserved, error) {
	return w.s.reserved(w.ctx, p, w.now)
}

// UsageRead implements storeops.Tx, on the reader pool like ReservedRead.
func (w *wtx) UsageRead(p jobs.UsageParams) ([]jobs.UsageBucket, error) {
	return w.s.Usage(w.ctx, p)
}
