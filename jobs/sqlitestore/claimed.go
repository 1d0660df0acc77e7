package sqlitestore

import (
	"context"
	"encoding/json"
	"fmt"
)

const qClaimed = `SELECT id FROM jobs WHERE state = 'running' AND worker_claim = ?1
	AND id IN (SELECT value FROM json_each(?2))`

// Claimed implements jobs.Store: one read on the reader pool.
func (s *Store) Claimed(ctx context.Context, worker string, ids []string) ([]string, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	list, err := json.Marshal(ids)
	if err != nil {
		return nil, fmt.Errorf("sqlitestore: claimed: %w", err)
	}
	rows, err := s.readQuery(ctx, qClaimed, worker, string(list))
	if err != nil {
		return nil, fmt.Errorf("sqlitestore: claimed: %w", err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return nil, fmt.Errorf("sqlitestore: claimed: %w", err)
		}
		out = append(out, id)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlitestore: claimed: %w", err)
	}
	return out, nil
}
