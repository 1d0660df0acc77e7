package pgstore

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/promptkit/promptkit/jobs"
	"github.com/promptkit/promptkit/jobs/internal/storeops"
)

// Shared pacing (migrations 00011 and 00012). The merge is Go's
// (storeops.Ops.SyncPacing): a sync locks the rows it merges, first making
// sure they exist (a row lock needs a row), and writes plain values.
const (
	pacingEnsureSQL = `INSERT INTO pacing (backend, updated_at) SELECT unnest($1::text[]), $2
		ON CONFLICT (backend) DO NOTHING`
	peersEnsureSQL = `INSERT INTO pacing_peers (backend, peer, demand, seen_at) SELECT unnest($1::text[]), $2, 0, $3
		ON CONFLICT (backend, peer) DO NOTHING`
	pacingCols    = `backend, pause_until, rate_cap, rate_at, updated_at, rate_floor, cool_until, held`
	peerCols      = `backend, peer, demand, seen_at, estimate, estimate_at`
	pacingLockSQL = `SELECT ` + pacingCols + ` FROM pacing WHERE backend = ANY($1) ORDER BY backend FOR UPDATE`
	peersLockSQL  = `SELECT ` + peerCols + ` FROM pacing_peers WHERE backend = ANY($1) AND peer = $2
		ORDER BY backend FOR UPDATE`
	// pacingWriteSQL leaves held alone: only HoldBackend writes it.
	pacingWriteSQL = `INSERT INTO pacing (backend, pause_until, rate_cap, rate_at, updated_at, rate_floor, cool_until)
		VALUES ($1, $2, $3, $4, $5, $6, $7)
		ON CONFLICT (backend) DO UPDATE SET pause_until = excluded.pause_until, rate_cap = excluded.rate_cap,
			rate_at = excluded.rate_at, updated_at = excluded.updated_at, rate_floor = excluded.rate_floor,
			cool_until = excluded.cool_until`
	peerWriteSQL = `INSERT INTO pacing_peers (` + peerCols + `) VALUES ($1, $2, $3, $4, $5, $6)
		ON CONFLICT (backend, peer) DO UPDATE SET demand = excluded.demand, seen_at = excluded.seen_at,
			estimate = excluded.estimate, estimate_at = excluded.estimate_at`
	peersExpireSQL = `DELETE FROM pacing_peers WHERE seen_at < $1`
	pacingRowsSQL  = `SELECT ` + pacingCols + ` FROM pacing ORDER BY backend`
	// pacingHoldSQL sets an operator's hold (migration 00018), leaving the
	// pacers' state as it is.
	// It notifies, so that the idle engines of other processes read the
	// shared state (SharePacingOptions.Wake).
	pacingHoldSQL = `WITH up AS (INSERT INTO pacing (backend, updated_at, held) VALUES ($1, $2, $3)
		ON CONFLICT (backend) DO UPDATE SET held = excluded.held, updated_at = excluded.updated_at RETURNING 1)
		SELECT pg_notify('` + notifyChannel + `', $4) FROM up`
	peerRowsSQL = `SELECT ` + peerCols + ` FROM pacing_peers WHERE seen_at >= $1 ORDER BY backend, peer`
)

// PacingSync implements storeops.DB. A read is one round trip, a
// batch that PostgreSQL runs as one implicit transaction. A sync that
// writes takes two: BEGIN, the rows made sure of and locked (FOR UPDATE,
// by backend, so that concurrent syncs of several backends lock them in
// one order); then, once merge has decided, the writes, the expiry of
// old peers, the reads and COMMIT. The rows stay locked for that one
// round trip: syncs of a backend queue behind it, as they did behind the
// upsert's row lock.
func (d *opsDB) PacingSync(ctx context.Context, ps storeops.PacingSync,
	merge func(time.Time, []jobs.BackendPacing, []storeops.PeerRow) storeops.PacingWrite) ([]jobs.BackendPacing, []storeops.PeerRow, error) {
	s := d.store()
	now := s.clock()
	cutoff := now.Add(-ps.TTL)
	var states []jobs.BackendPacing
	var peers []storeops.PeerRow
	if len(ps.Backends) == 0 {
		b := &pgx.Batch{}
		b.Queue(pacingRowsSQL).Query(func(rows pgx.Rows) (err error) {
			states, err = scanPacingRows(rows)
			return err
		})
		b.Queue(peerRowsSQL, cutoff).Query(func(rows pgx.Rows) (err error) {
			peers, err = scanPeerRows(rows)
			return err
		})
		if err := s.pool.SendBatch(ctx, b).Close(); err != nil {
			return nil, nil, err
		}
		return states, peers, nil
	}
	err := s.inTx(ctx, func(conn *pgxpool.Conn) error {
		var first phase
		first.exec("BEGIN")
		if len(ps.News) > 0 {
			first.exec(pacingEnsureSQL, ps.News, now)
		}
		first.exec(peersEnsureSQL, ps.Backends, ps.Peer, now)
		var locked []jobs.BackendPacing
		var lockedPeers []storeops.PeerRow
		if len(ps.News) > 0 {
			first.query(pacingLockSQL, []any{ps.News}, func(rows pgx.Rows) (err error) {
				locked, err = scanPacingRows(rows)
				return err
			})
		}
		first.query(peersLockSQL, []any{ps.Backends, ps.Peer}, func(rows pgx.Rows) (err error) {
			lockedPeers, err = scanPeerRows(rows)
			return err
		})
		if err := first.send(ctx, conn); err != nil {
			return err
		}
		w := merge(now, locked, lockedPeers)
		var second phase
		for _, st := range w.States {
			second.exec(pacingWriteSQL, st.Backend, timeOrNull(st.PauseUntil), st.Rate.Cap, timeOrNull(st.Rate.At),
				st.UpdatedAt, st.Rate.Floor, timeOrNull(st.CooldownUntil))
		}
		for _, pr := range w.Peers {
			second.exec(peerWriteSQL, pr.Backend, pr.ID, pr.Demand, pr.SeenAt, pr.Estimate.Admitted, timeOrNull(pr.Estimate.At))
		}
		second.exec(peersExpireSQL, cutoff)
		second.query(pacingRowsSQL, nil, func(rows pgx.Rows) (err error) {
			states, err = scanPacingRows(rows)
			return err
		})
		second.query(peerRowsSQL, []any{cutoff}, func(rows pgx.Rows) (err error) {
			peers, err = scanPeerRows(rows)
			return err
		})
		second.commit()
		return second.send(ctx, conn)
	})
	if err != nil {
		return nil, nil, err
	}
	return states, peers, nil
}

// scanPacingRows reads rows of pacingCols.
func scanPacingRows(rows pgx.Rows) ([]jobs.BackendPacing, error) {
	var out []jobs.BackendPacing
	for rows.Next() {
		var st jobs.BackendPacing
		var pauseUntil, rateAt, coolUntil *time.Time
		if err := rows.Scan(&st.Backend, &pauseUntil, &st.Rate.Cap, &rateAt, &st.UpdatedAt, &st.Rate.Floor, &coolUntil, &st.Held); err != nil {
			return nil, err
		}
		st.PauseUntil, st.Rate.At, st.UpdatedAt = utcOrZero(pauseUntil), utcOrZero(rateAt), st.UpdatedAt.UTC()
		st.CooldownUntil = utcOrZero(coolUntil)
		out = append(out, st)
	}
	return out, rows.Err()
}

// scanPeerRows reads rows of peerCols.
func scanPeerRows(rows pgx.Rows) ([]storeops.PeerRow, error) {
	var out []storeops.PeerRow
	for rows.Next() {
		var pr storeops.PeerRow
		var estimateAt *time.Time
		if err := rows.Scan(&pr.Backend, &pr.ID, &pr.Demand, &pr.SeenAt, &pr.Estimate.Admitted, &estimateAt); err != nil {
			return nil, err
		}
		pr.SeenAt, pr.Estimate.At = pr.SeenAt.UTC(), utcOrZero(estimateAt)
		out = append(out, pr)
	}
	return out, rows.Err()
}

func (d *opsDB) PacingHold(ctx context.Context, backend string, held bool) error {
	_, err := d.pool.Exec(ctx, pacingHoldSQL, backend, d.store().clock(), held, d.store().schema)
	return err
}

func timeOrNull(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return t
}

func utcOrZero(t *time.Time) time.Time {
	if t == nil {
		return time.Time{}
	}
	return t.UTC()
}
