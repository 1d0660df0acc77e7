package pgstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/promptkit/promptkit/jobs"
)

// Submitted implements jobs.Store: a walk of jobs_org_created_idx from
// the org's newest job, stopping at the N-th one.
func (s *Store) Submitted(ctx context.Context, p jobs.SubmittedParams) (time.Time, error) {
	p, err := p.Normalize()
	if err != nil {
		return time.Time{}, err
	}
	var at time.Time
	err = s.pool.QueryRow(ctx, `SELECT created_at FROM jobs WHERE org_id = $1 AND created_at >= $2
		ORDER BY created_at DESC, id DESC OFFSET $3 LIMIT 1`, p.OrgID, p.Since, p.N-1).Scan(&at)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return time.Time{}, nil
	case err != nil:
		return time.Time{}, fmt.Errorf("pgstore: submitted: %w", err)
	}
	return at.UTC(), nil
}
