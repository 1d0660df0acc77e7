package sqlitestore

import (
	"context"
	"database/sql"
	"errors"
	"time"

	"github.com/promptkit/promptkit/jobs"
	"github.com/promptkit/promptkit/jobs/internal/storeops"
)

// Shared pacing (migrations 8 and 9). The merge is Go's
// (storeops.Ops.SyncPacing): a sync reads the rows it merges in its write
// transaction, which the single writer serializes, and writes plain
// values.
var (
	qPacingLock = wq(`SELECT ` + pacingCols + ` FROM pacing WHERE backend = ?1`)
	qPeerLock   = wq(`SELECT ` + peerCols + ` FROM pacing_peers WHERE backend = ?1 AND peer = ?2`)
	// qPacingWrite leaves held alone: only HoldBackend writes it.
	qPacingWrite = wq(`INSERT INTO pacing (backend, pause_until, rate_cap, rate_at, updated_at, rate_floor, cool_until)
		VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)
		ON CONFLICT (backend) DO UPDATE SET pause_until = excluded.pause_until, rate_cap = excluded.rate_cap,
			rate_at = excluded.rate_at, updated_at = excluded.updated_at, rate_floor = excluded.rate_floor,
			cool_until = excluded.cool_until`)
	qPeerWrite = wq(`INSERT INTO pacing_peers (` + peerCols + `) VALUES (?1, ?2, ?3, ?4, ?5, ?6)
		ON CONFLICT (backend, peer) DO UPDATE SET demand = excluded.demand, seen_at = excluded.seen_at,
			estimate = excluded.estimate, estimate_at = excluded.estimate_at`)
	qPeersExpire = wq(`DELETE FROM pacing_peers WHERE seen_at < ?1`)
	// qPacingHold sets an operator's hold (migration 15), leaving the
	// pacers' state as it is.
	qPacingHold = wq(`INSERT INTO pacing (backend, updated_at, held) VALUES (?1, ?2, ?3)
		ON CONFLICT (backend) DO UPDATE SET held = excluded.held, updated_at = excluded.updated_at`)
)

// PacingHold writes in a transaction of its own.
func (d *opsDB) PacingHold(ctx context.Context, backend string, held bool) error {
	return d.store().tx(ctx, func(w *wtx) error {
		_, err := w.exec(qPacingHold, backend, w.now, held)
		return err
	})
}

const (
	pacingCols  = `backend, pause_until, rate_cap, rate_at, updated_at, rate_floor, cool_until, held`
	peerCols    = `backend, peer, demand, seen_at, estimate, estimate_at`
	qPacingRows = `SELECT ` + pacingCols + ` FROM pacing ORDER BY backend`
	qPeerRows   = `SELECT ` + peerCols + ` FROM pacing_peers WHERE seen_at >= ?1 ORDER BY backend, peer`
)

// PacingSync implements storeops.DB: the locked reads (one
// primary-key lookup per row), the writes and the expiry in one write
// transaction (none without updates), then two reads.
func (d *opsDB) PacingSync(ctx context.Context, ps storeops.PacingSync,
	merge func(time.Time, []jobs.BackendPacing, []storeops.PeerRow) storeops.PacingWrite) ([]jobs.BackendPacing, []storeops.PeerRow, error) {
	s := d.store()
	now := s.nowMicros()
	if len(ps.Backends) > 0 {
		err := s.tx(ctx, func(w *wtx) error {
			now = w.now
			var states []jobs.BackendPacing
			for _, b := range ps.News {
				st, err := scanPacing(w.queryRow(qPacingLock, b))
				switch {
				case err == nil:
					states = append(states, st)
				case !errors.Is(err, sql.ErrNoRows):
					return err
				}
			}
			var peers []storeops.PeerRow
			for _, b := range ps.Backends {
				pr, err := scanPeer(w.queryRow(qPeerLock, b, ps.Peer))
				switch {
				case err == nil:
					peers = append(peers, pr)
				case !errors.Is(err, sql.ErrNoRows):
					return err
				}
			}
			wr := merge(fromMicros(w.now), states, peers)
			for _, st := range wr.States {
				if _, err := w.exec(qPacingWrite, st.Backend, microsOrNull(st.PauseUntil), st.Rate.Cap,
					microsOrNull(st.Rate.At), st.UpdatedAt.UnixMicro(), st.Rate.Floor, microsOrNull(st.CooldownUntil)); err != nil {
					return err
				}
			}
			for _, pr := range wr.Peers {
				if _, err := w.exec(qPeerWrite, pr.Backend, pr.ID, pr.Demand, pr.SeenAt.UnixMicro(),
					pr.Estimate.Admitted, microsOrNull(pr.Estimate.At)); err != nil {
					return err
				}
			}
			_, err := w.exec(qPeersExpire, w.now-ps.TTL.Microseconds())
			return err
		})
		if err != nil {
			return nil, nil, err
		}
	}
	states, err := readAll(ctx, s, scanPacing, qPacingRows)
	if err != nil {
		return nil, nil, err
	}
	peers, err := readAll(ctx, s, scanPeer, qPeerRows, now-ps.TTL.Microseconds())
	if err != nil {
		return nil, nil, err
	}
	return states, peers, nil
}

func microsOrNull(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return t.UnixMicro()
}

func scanPacing(r scanner) (jobs.BackendPacing, error) {
	var (
		b                             jobs.BackendPacing
		pauseUntil, rateAt, coolUntil sql.NullInt64
		updatedAt                     int64
	)
	if err := r.Scan(&b.Backend, &pauseUntil, &b.Rate.Cap, &rateAt, &updatedAt, &b.Rate.Floor, &coolUntil, &b.Held); err != nil {
		return b, err
	}
	b.PauseUntil, b.Rate.At, b.UpdatedAt = nullTime(pauseUntil), nullTime(rateAt), fromMicros(updatedAt)
	b.CooldownUntil = nullTime(coolUntil)
	return b, nil
}

func scanPeer(r scanner) (storeops.PeerRow, error) {
	var (
		p          storeops.PeerRow
		seenAt     int64
		estimateAt sql.NullInt64
	)
	if err := r.Scan(&p.Backend, &p.ID, &p.Demand, &seenAt, &p.Estimate.Admitted, &estimateAt); err != nil {
		return p, err
	}
	p.SeenAt, p.Estimate.At = fromMicros(seenAt), nullTime(estimateAt)
	return p, nil
}
