package pgstore

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/promptkit/promptkit/jobs"
	"github.com/promptkit/promptkit/jobs/internal/storeops"
)

// Shared pacing (migrations 00011 and 00012). The merge rules of jobs.PacingUpdate
// are the upsert's: every SET expression reads the row as it was, and
// the row lock orders concurrent upserts of one backend.
const (
	pacingUpsertSQL = `INSERT INTO pacing (backend, pause_until, rate_cap, rate_at, updated_at, rate_floor, cool_until)
		VALUES ($1, $2, $3, $4, $5, $6, $7)
		ON CONFLICT (backend) DO UPDATE SET
			pause_until = CASE WHEN excluded.pause_until > pacing.pause_until OR pacing.pause_until IS NULL
				THEN coalesce(excluded.pause_until, pacing.pause_until) ELSE pacing.pause_until END,
			cool_until = CASE WHEN excluded.cool_until > pacing.cool_until OR pacing.cool_until IS NULL
				THEN coalesce(excluded.cool_until, pacing.cool_until) ELSE pacing.cool_until END,
			rate_cap = CASE WHEN ` + rateNewerSQL + ` THEN excluded.rate_cap ELSE pacing.rate_cap END,
			rate_floor = CASE WHEN ` + rateNewerSQL + ` THEN excluded.rate_floor ELSE pacing.rate_floor END,
			rate_at = CASE WHEN ` + rateNewerSQL + ` THEN excluded.rate_at ELSE pacing.rate_at END,
			updated_at = excluded.updated_at`
	peerUpsertSQL = `INSERT INTO pacing_peers (backend, peer, demand, seen_at, estimate, estimate_at)
		VALUES ($1, $2, $3, $4, $5, $6)
		ON CONFLICT (backend, peer) DO UPDATE SET demand = excluded.demand, seen_at = excluded.seen_at,
			estimate = CASE WHEN ` + estimateNewerSQL + ` THEN excluded.estimate ELSE pacing_peers.estimate END,
			estimate_at = CASE WHEN ` + estimateNewerSQL + ` THEN excluded.estimate_at ELSE pacing_peers.estimate_at END`
	// rateNewerSQL and estimateNewerSQL: the update's replaces the row's.
	rateNewerSQL     = `(excluded.rate_at IS NOT NULL AND (pacing.rate_at IS NULL OR excluded.rate_at > pacing.rate_at))`
	estimateNewerSQL = `(excluded.estimate_at IS NOT NULL
		AND (pacing_peers.estimate_at IS NULL OR excluded.estimate_at >= pacing_peers.estimate_at))`
	peersExpireSQL = `DELETE FROM pacing_peers WHERE seen_at < $1`
	pacingRowsSQL  = `SELECT backend, pause_until, rate_cap, rate_at, updated_at, rate_floor, cool_until, held FROM pacing ORDER BY backend`
	// pacingHoldSQL sets an operator's hold (migration 00018), leaving the
	// pacers' state as it is.
	// It notifies, so that the idle engines of other processes read the
	// shared state (SharePacingOptions.Wake).
	pacingHoldSQL = `WITH up AS (INSERT INTO pacing (backend, updated_at, held) VALUES ($1, $2, $3)
		ON CONFLICT (backend) DO UPDATE SET held = excluded.held, updated_at = excluded.updated_at RETURNING 1)
		SELECT pg_notify('` + notifyChannel + `', $4) FROM up`
	peerRowsSQL = `SELECT backend, peer, demand, seen_at, estimate, estimate_at FROM pacing_peers
		WHERE seen_at >= $1 ORDER BY backend, peer`
)

// SyncPacing implements jobs.Store in one round trip: a batch, which
// PostgreSQL runs as one implicit transaction, of the upserts, the
// expiry of old peers and the two reads.
func (s *Store) SyncPacing(ctx context.Context, p jobs.PacingSyncParams) ([]jobs.BackendPacing, error) {
	p, err := p.Normalize()
	if err != nil {
		return nil, fmt.Errorf("pgstore: sync pacing: %w", err)
	}
	now := s.clock()
	cutoff := now.Add(-p.PeerTTL)
	b := &pgx.Batch{}
	for _, u := range p.Updates {
		if u.News() {
			b.Queue(pacingUpsertSQL, u.Backend, timeOrNull(u.PauseUntil), u.RateCap, timeOrNull(u.RateAt), now, u.RateFloor, timeOrNull(u.CooldownUntil))
		}
		b.Queue(peerUpsertSQL, u.Backend, p.Peer, u.Demand, now, u.Estimate, timeOrNull(u.EstimateAt))
	}
	if len(p.Updates) > 0 {
		b.Queue(peersExpireSQL, cutoff)
	}
	var states []jobs.BackendPacing
	b.Queue(pacingRowsSQL).Query(func(rows pgx.Rows) error {
		for rows.Next() {
			var st jobs.BackendPacing
			var pauseUntil, rateAt, coolUntil *time.Time
			if err := rows.Scan(&st.Backend, &pauseUntil, &st.RateCap, &rateAt, &st.UpdatedAt, &st.RateFloor, &coolUntil, &st.Held); err != nil {
				return err
			}
			st.PauseUntil, st.RateAt, st.UpdatedAt = utcOrZero(pauseUntil), utcOrZero(rateAt), st.UpdatedAt.UTC()
			st.CooldownUntil = utcOrZero(coolUntil)
			states = append(states, st)
		}
		return rows.Err()
	})
	var peers []storeops.PeerRow
	b.Queue(peerRowsSQL, cutoff).Query(func(rows pgx.Rows) error {
		for rows.Next() {
			var pr storeops.PeerRow
			var estimateAt *time.Time
			if err := rows.Scan(&pr.Backend, &pr.Peer, &pr.Demand, &pr.SeenAt, &pr.Estimate, &estimateAt); err != nil {
				return err
			}
			pr.SeenAt, pr.EstimateAt = pr.SeenAt.UTC(), utcOrZero(estimateAt)
			peers = append(peers, pr)
		}
		return rows.Err()
	})
	if err := s.pool.SendBatch(ctx, b).Close(); err != nil {
		return nil, fmt.Errorf("pgstore: sync pacing: %w", err)
	}
	return storeops.GroupPacing(states, peers), nil
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
