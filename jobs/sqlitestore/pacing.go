package sqlitestore

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/promptkit/promptkit/jobs"
	"github.com/promptkit/promptkit/jobs/internal/storeops"
)

// Shared pacing (migrations 8 and 9). The merge rules of jobs.PacingUpdate are
// the upsert's: every SET expression reads the row as it was.
var (
	// A NULL in excluded (no news) compares to nothing: the row's value
	// stays.
	qPacingUpsert = wq(`INSERT INTO pacing (backend, pause_until, rate_cap, rate_at, updated_at, rate_floor, cool_until)
		VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)
		ON CONFLICT (backend) DO UPDATE SET
			pause_until = CASE WHEN excluded.pause_until > coalesce(pacing.pause_until, excluded.pause_until - 1)
				THEN excluded.pause_until ELSE pacing.pause_until END,
			cool_until = CASE WHEN excluded.cool_until > coalesce(pacing.cool_until, excluded.cool_until - 1)
				THEN excluded.cool_until ELSE pacing.cool_until END,
			rate_cap = CASE WHEN ` + rateNewer + ` THEN excluded.rate_cap ELSE pacing.rate_cap END,
			rate_floor = CASE WHEN ` + rateNewer + ` THEN excluded.rate_floor ELSE pacing.rate_floor END,
			rate_at = CASE WHEN ` + rateNewer + ` THEN excluded.rate_at ELSE pacing.rate_at END,
			updated_at = excluded.updated_at`)
	qPeerUpsert = wq(`INSERT INTO pacing_peers (backend, peer, demand, seen_at, estimate, estimate_at)
		VALUES (?1, ?2, ?3, ?4, ?5, ?6)
		ON CONFLICT (backend, peer) DO UPDATE SET demand = excluded.demand, seen_at = excluded.seen_at,
			estimate = CASE WHEN ` + estimateNewer + ` THEN excluded.estimate ELSE pacing_peers.estimate END,
			estimate_at = CASE WHEN ` + estimateNewer + ` THEN excluded.estimate_at ELSE pacing_peers.estimate_at END`)
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

// rateNewer and estimateNewer: the update's replaces the row's
// (jobs.PacingUpdate).
const (
	rateNewer     = `excluded.rate_at > coalesce(pacing.rate_at, excluded.rate_at - 1)`
	estimateNewer = `excluded.estimate_at >= coalesce(pacing_peers.estimate_at, excluded.estimate_at)`
)

const (
	qPacingRows = `SELECT backend, pause_until, rate_cap, rate_at, updated_at, rate_floor, cool_until, held FROM pacing ORDER BY backend`
	qPeerRows   = `SELECT backend, peer, demand, seen_at, estimate, estimate_at FROM pacing_peers
		WHERE seen_at >= ?1 ORDER BY backend, peer`
)

// SyncPacing implements jobs.Store: the updates in one write transaction
// (none without updates), then two reads.
func (s *Store) SyncPacing(ctx context.Context, p jobs.PacingSyncParams) ([]jobs.BackendPacing, error) {
	p, err := p.Normalize()
	if err != nil {
		return nil, fmt.Errorf("sqlitestore: sync pacing: %w", err)
	}
	now := s.nowMicros()
	if len(p.Updates) > 0 {
		err := s.write(ctx, "sync pacing", func(w *wtx) error {
			now = w.now
			for _, u := range p.Updates {
				if u.News() {
					if _, err := w.exec(qPacingUpsert, u.Backend, microsOrNull(u.PauseUntil),
						u.RateCap, microsOrNull(u.RateAt), w.now, u.RateFloor, microsOrNull(u.CooldownUntil)); err != nil {
						return err
					}
				}
				if _, err := w.exec(qPeerUpsert, u.Backend, p.Peer, u.Demand, w.now,
					u.Estimate, microsOrNull(u.EstimateAt)); err != nil {
					return err
				}
			}
			_, err := w.exec(qPeersExpire, w.now-p.PeerTTL.Microseconds())
			return err
		})
		if err != nil {
			return nil, err
		}
	}
	states, err := readAll(ctx, s, scanPacing, qPacingRows)
	if err != nil {
		return nil, fmt.Errorf("sqlitestore: sync pacing: %w", err)
	}
	peers, err := readAll(ctx, s, scanPeer, qPeerRows, now-p.PeerTTL.Microseconds())
	if err != nil {
		return nil, fmt.Errorf("sqlitestore: sync pacing: %w", err)
	}
	return storeops.GroupPacing(states, peers), nil
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
	if err := r.Scan(&b.Backend, &pauseUntil, &b.RateCap, &rateAt, &updatedAt, &b.RateFloor, &coolUntil, &b.Held); err != nil {
		return b, err
	}
	b.PauseUntil, b.RateAt, b.UpdatedAt = nullTime(pauseUntil), nullTime(rateAt), fromMicros(updatedAt)
	b.CooldownUntil = nullTime(coolUntil)
	return b, nil
}

func scanPeer(r scanner) (storeops.PeerRow, error) {
	var (
		p          storeops.PeerRow
		seenAt     int64
		estimateAt sql.NullInt64
	)
	if err := r.Scan(&p.Backend, &p.Peer, &p.Demand, &seenAt, &p.Estimate, &estimateAt); err != nil {
		return p, err
	}
	p.SeenAt, p.EstimateAt = fromMicros(seenAt), nullTime(estimateAt)
	return p, nil
}
