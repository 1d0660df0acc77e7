package pgstore

import (
	"context"
	"fmt"
)

// LatestEventSeq implements jobs.Store: the primary key's last entry
// (seq order is commit order, see the package doc).
func (s *Store) LatestEventSeq(ctx context.Context) (int64, error) {
	var seq int64
	if err := s.pool.QueryRow(ctx, `SELECT COALESCE(MAX(seq), 0) FROM job_events`).Scan(&seq); err != nil {
		return 0, fmt.Errorf("pgstore: latest event: %w", err)
	}
	return seq, nil
}
