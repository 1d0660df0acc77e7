package pgstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/promptkit/promptkit/jobs"
)

// Tokens are written outside the event lock: they have no events and no
// place in the job log.

const tokenCols = `id, org_id, user_id, role, created_at, revoked_at`

func scanToken(row pgx.Row) (jobs.Token, error) {
	var (
		t       jobs.Token
		role    string
		revoked *time.Time
	)
	if err := row.Scan(&t.ID, &t.OrgID, &t.UserID, &role, &t.CreatedAt, &revoked); err != nil {
		return jobs.Token{}, err
	}
	t.Role = jobs.Role(role)
	t.CreatedAt = t.CreatedAt.UTC()
	t.RevokedAt = tm(revoked)
	return t, nil
}

// CreateToken stores a token's hash. A hash that is already stored (a
// secret used twice, even revoked) is jobs.ErrInvalid. See jobs.Store.
func (s *Store) CreateToken(ctx context.Context, p jobs.CreateTokenParams) (jobs.Token, error) {
	p, err := p.Normalize()
	if err != nil {
		return jobs.Token{}, fmt.Errorf("pgstore: create token: %w", err)
	}
	t, err := scanToken(s.pool.QueryRow(ctx, `
		INSERT INTO tokens (id, org_id, user_id, role, hash, created_at) VALUES ($1, $2, $3, $4, $5, $6)
		ON CONFLICT (hash) DO NOTHING
		RETURNING `+tokenCols, jobs.NewID(), p.OrgID, p.UserID, string(p.Role), p.Hash, s.clock()))
	if errors.Is(err, pgx.ErrNoRows) {
		err = fmt.Errorf("%w: a token with this hash exists", jobs.ErrInvalid)
	}
	s.wrote(ctx, "create token", err, err == nil)
	if err != nil {
		return jobs.Token{}, fmt.Errorf("pgstore: create token: %w", err)
	}
	return t, nil
}

// ListTokens returns the tokens of an org (empty: all), oldest first. See
// jobs.Store.
func (s *Store) ListTokens(ctx context.Context, orgID string) ([]jobs.Token, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+tokenCols+` FROM tokens WHERE ($1 = '' OR org_id = $1) ORDER BY created_at, id`, orgID)
	if err != nil {
		return nil, fmt.Errorf("pgstore: list tokens: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (jobs.Token, error) { return scanToken(r) })
	if err != nil {
		return nil, fmt.Errorf("pgstore: list tokens: %w", err)
	}
	return out, nil
}

// RevokeToken marks a token revoked; a second revocation keeps the first
// one's time. See jobs.Store.
func (s *Store) RevokeToken(ctx context.Context, id string) (jobs.Token, error) {
	t, err := scanToken(s.pool.QueryRow(ctx, `
		UPDATE tokens SET revoked_at = coalesce(revoked_at, $2) WHERE id = $1
		RETURNING `+tokenCols, id, s.clock()))
	err = notFound(err)
	s.wrote(ctx, "revoke token", err, err == nil)
	if err != nil {
		return jobs.Token{}, fmt.Errorf("pgstore: revoke token: %w", err)
	}
	return t, nil
}

// TokenByHash returns the valid token with this hash: one index lookup.
// See jobs.Store.
func (s *Store) TokenByHash(ctx context.Context, hash []byte) (jobs.Token, error) {
	t, err := scanToken(s.pool.QueryRow(ctx, `SELECT `+tokenCols+` FROM tokens WHERE hash = $1 AND revoked_at IS NULL`, hash))
	if err != nil {
		return jobs.Token{}, fmt.Errorf("pgstore: token by hash: %w", notFound(err))
	}
	return t, nil
}

// HasTokens reports whether a valid token exists: the first entry of the
// partial index tokens_valid_idx, if any. See jobs.Store.
func (s *Store) HasTokens(ctx context.Context) (bool, error) {
	var has bool
	if err := s.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM tokens WHERE revoked_at IS NULL)`).Scan(&has); err != nil {
		return false, fmt.Errorf("pgstore: has tokens: %w", err)
	}
	return has, nil
}
