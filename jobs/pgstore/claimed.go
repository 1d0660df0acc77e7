package pgstore

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// Claimed implements jobs.Store: one read.
func (s *Store) Claimed(ctx context.Context, worker string, ids []string) ([]string, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	rows, _ := s.pool.Query(ctx, `SELECT id FROM jobs WHERE id = ANY($1) AND state = 'running' AND worker_claim = $2`,
		ids, worker)
	out, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("pgstore: claimed: %w", err)
	}
	return out, nil
}
