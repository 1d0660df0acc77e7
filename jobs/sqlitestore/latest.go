package sqlitestore

import (
	"context"
	"fmt"
)

// LatestEventSeq implements jobs.Store: the primary key's last entry.
func (s *Store) LatestEventSeq(ctx context.Context) (int64, error) {
	var seq int64
	if err := s.readRow(ctx, `SELECT COALESCE(MAX(seq), 0) FROM job_events`).Scan(&seq); err != nil {
		return 0, fmt.Errorf("sqlitestore: latest event: %w", err)
	}
	return seq, nil
}
