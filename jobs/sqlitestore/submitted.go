package sqlitestore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/promptkit/promptkit/jobs"
)

// The N-th newest job of an org, or of a token (through its user), since
// a time.
const (
	qSubmittedOrg = `SELECT created_at FROM jobs WHERE org_id = ?1 AND created_at >= ?2
		ORDER BY created_at DESC LIMIT 1 OFFSET ?3`
	qSubmittedToken = `SELECT created_at FROM jobs WHERE org_id = ?1 AND created_by = ?4 AND created_at >= ?2 AND token_id = ?5
		ORDER BY created_at DESC LIMIT 1 OFFSET ?3`
)

// Submitted implements jobs.Store: a walk back from the org's newest job
// in jobs_org_submitted, stopping at the N-th one; for a token, from its
// user's newest in jobs_org_user_created, the token checked on each row.
func (s *Store) Submitted(ctx context.Context, p jobs.SubmittedParams) (time.Time, error) {
	p, err := p.Normalize()
	if err != nil {
		return time.Time{}, err
	}
	q, args := qSubmittedOrg, []any{p.OrgID, p.Since.UnixMicro(), p.N - 1}
	if p.TokenID != "" {
		q, args = qSubmittedToken, append(args, p.CreatedBy, p.TokenID)
	}
	var at int64
	err = s.readRow(ctx, q, args...).Scan(&at)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return time.Time{}, nil
	case err != nil:
		return time.Time{}, fmt.Errorf("sqlitestore: submitted: %w", err)
	}
	return fromMicros(at), nil
}
