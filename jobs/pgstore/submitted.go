package pgstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/promptkit/promptkit/jobs"
)

// The N-th newest job of an org, or of a token (through its user), since
// a time.
const (
	qSubmittedOrg = `SELECT created_at FROM jobs WHERE org_id = $1 AND created_at >= $2
		ORDER BY created_at DESC OFFSET $3 LIMIT 1`
	qSubmittedToken = `SELECT created_at FROM jobs WHERE org_id = $1 AND created_by = $4 AND created_at >= $2 AND token_id = $5
		ORDER BY created_at DESC OFFSET $3 LIMIT 1`
)

// Submitted implements jobs.Store: a walk back from the org's newest job
// in jobs_org_submitted_idx, stopping at the N-th one; for a token, from
// its user's newest in jobs_org_user_created_idx, the token checked on
// each row.
func (s *Store) Submitted(ctx context.Context, p jobs.SubmittedParams) (time.Time, error) {
	p, err := p.Normalize()
	if err != nil {
		return time.Time{}, err
	}
	q, args := qSubmittedOrg, []any{p.OrgID, p.Since, p.N - 1}
	if p.TokenID != "" {
		q, args = qSubmittedToken, append(args, p.CreatedBy, p.TokenID)
	}
	var at time.Time
	err = s.pool.QueryRow(ctx, q, args...).Scan(&at)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return time.Time{}, nil
	case err != nil:
		return time.Time{}, fmt.Errorf("pgstore: submitted: %w", err)
	}
	return at.UTC(), nil
}
