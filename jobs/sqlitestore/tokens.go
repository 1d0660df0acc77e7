package sqlitestore

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/promptkit/promptkit/jobs"
)

const tokenCols = `id, org_id, user_id, role, created_at, revoked_at`

var (
	// ON CONFLICT DO NOTHING: a hash already stored (even revoked) inserts
	// no row.
	qInsertToken = wq(`INSERT INTO tokens (id, org_id, user_id, role, hash, created_at)
		VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (hash) DO NOTHING`)
	// A second revocation keeps the first one's time.
	qRevokeToken = wq(`UPDATE tokens SET revoked_at = coalesce(revoked_at, ?1) WHERE id = ?2
		RETURNING ` + tokenCols)
)

// Token reads run on the reader pool; the two that every API request
// makes read the partial index tokens_valid (migration 3) and nothing
// else but the row they return.
const (
	qListTokens  = `SELECT ` + tokenCols + ` FROM tokens WHERE (?1 = '' OR org_id = ?1) ORDER BY created_at, id`
	qTokenByHash = `SELECT ` + tokenCols + ` FROM tokens
		WHERE hash = ?1 AND revoked_at IS NULL`
	qHasTokens = `SELECT EXISTS (SELECT 1 FROM tokens WHERE revoked_at IS NULL)`
)

func scanToken(r scanner) (jobs.Token, error) {
	var (
		t         jobs.Token
		role      string
		createdAt int64
		revokedAt sql.NullInt64
	)
	if err := r.Scan(&t.ID, &t.OrgID, &t.UserID, &role, &createdAt, &revokedAt); err != nil {
		return jobs.Token{}, err
	}
	t.Role = jobs.Role(role)
	t.CreatedAt = fromMicros(createdAt)
	t.RevokedAt = nullTime(revokedAt)
	return t, nil
}

// CreateToken implements jobs.Store. A hash that is already stored (a
// secret used twice) is ErrInvalid.
func (s *Store) CreateToken(ctx context.Context, p jobs.CreateTokenParams) (jobs.Token, error) {
	p, err := p.Normalize()
	if err != nil {
		return jobs.Token{}, fmt.Errorf("sqlitestore: create token: %w", err)
	}
	t := jobs.Token{ID: jobs.NewID(), OrgID: p.OrgID, UserID: p.UserID, Role: p.Role}
	err = s.write(ctx, "create token", func(w *wtx) error {
		res, err := w.exec(qInsertToken, t.ID, t.OrgID, t.UserID, string(t.Role), p.Hash, w.now)
		if err != nil {
			return err
		}
		n, err := res.RowsAffected()
		if err != nil {
			return err
		}
		if n == 0 {
			return fmt.Errorf("%w: a token with this hash exists", jobs.ErrInvalid)
		}
		t.CreatedAt = fromMicros(w.now)
		return nil
	})
	s.wrote(ctx, "create token", err, err == nil)
	if err != nil {
		return jobs.Token{}, err
	}
	return t, nil
}

// ListTokens implements jobs.Store.
func (s *Store) ListTokens(ctx context.Context, orgID string) ([]jobs.Token, error) {
	rows, err := s.readQuery(ctx, qListTokens, orgID)
	if err != nil {
		return nil, fmt.Errorf("sqlitestore: list tokens: %w", err)
	}
	var out []jobs.Token
	err = eachRow(rows, func() error {
		t, err := scanToken(rows)
		out = append(out, t)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("sqlitestore: list tokens: %w", err)
	}
	return out, nil
}

// RevokeToken implements jobs.Store.
func (s *Store) RevokeToken(ctx context.Context, id string) (jobs.Token, error) {
	var t jobs.Token
	err := s.write(ctx, "revoke token", func(w *wtx) error {
		var err error
		t, err = scanToken(w.queryRow(qRevokeToken, w.now, id))
		return notFound(err)
	})
	s.wrote(ctx, "revoke token", err, err == nil)
	if err != nil {
		return jobs.Token{}, err
	}
	return t, nil
}

// TokenByHash implements jobs.Store.
func (s *Store) TokenByHash(ctx context.Context, hash []byte) (jobs.Token, error) {
	t, err := scanToken(s.readRow(ctx, qTokenByHash, hash))
	if err != nil {
		return jobs.Token{}, fmt.Errorf("sqlitestore: token by hash: %w", notFound(err))
	}
	return t, nil
}

// HasTokens implements jobs.Store.
func (s *Store) HasTokens(ctx context.Context) (bool, error) {
	var has bool
	if err := s.readRow(ctx, qHasTokens).Scan(&has); err != nil {
		return false, fmt.Errorf("sqlitestore: has tokens: %w", err)
	}
	return has, nil
}
