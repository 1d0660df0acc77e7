package sqlitestore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/promptkit/promptkit/jobs"
)

// Submitted implements jobs.Store: a walk of jobs_org_created from the
// org's newest job, stopping at the N-th one.
func (s *Store) Submitted(ctx context.Context, p jobs.SubmittedParams) (time.Time, error) {
	p, err := p.Normalize()
	if err != nil {
		return time.Time{}, err
	}
	var at int64
	err = s.readRow(ctx, `SELECT created_at FROM jobs WHERE org_id = ? AND created_at >= ?
		ORDER BY created_at DESC, id DESC LIMIT 1 OFFSET ?`, p.OrgID, p.Since.UnixMicro(), p.N-1).Scan(&at)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return time.Time{}, nil
	case err != nil:
		return time.Time{}, fmt.Errorf("sqlitestore: submitted: %w", err)
	}
	return fromMicros(at), nil
}
