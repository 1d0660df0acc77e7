package pgstore

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/promptkit/promptkit/jobs"
	"github.com/promptkit/promptkit/jobs/internal/storeops"
)

// Tokens are written outside the event lock: they have no events and no
// place in the job log. The methods of jobs.Store on them are
// storeops.Ops' (embedded in Store), which runs them over opsDB: the
// statements below.

const tokenCols = `id, org_id, user_id, role, created_at, revoked_at`

const (
	// A hash already stored (even revoked) inserts no row.
	insertTokenSQL = `
		INSERT INTO tokens (id, org_id, user_id, role, hash, created_at) VALUES ($1, $2, $3, $4, $5, $6)
		ON CONFLICT (hash) DO NOTHING
		RETURNING ` + tokenCols
	// A second revocation keeps the first one's time.
	revokeTokenSQL = `
		UPDATE tokens SET revoked_at = coalesce(revoked_at, $2) WHERE id = $1
		RETURNING ` + tokenCols
	listTokensSQL  = `SELECT ` + tokenCols + ` FROM tokens WHERE ($1 = '' OR org_id = $1) ORDER BY created_at, id`
	tokenByHashSQL = `SELECT ` + tokenCols + ` FROM tokens WHERE hash = $1 AND revoked_at IS NULL`
	hasTokensSQL   = `SELECT EXISTS (SELECT 1 FROM tokens WHERE revoked_at IS NULL)`
)

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

func (d *opsDB) TokenInsert(ctx context.Context, p storeops.TokenInsertParams) (jobs.Token, bool, error) {
	t, err := scanToken(d.pool.QueryRow(ctx, insertTokenSQL, p.ID, p.OrgID, p.UserID, string(p.Role), p.Hash, d.store().clock()))
	if errors.Is(err, pgx.ErrNoRows) {
		return jobs.Token{}, false, nil
	}
	return t, err == nil, err
}

func (d *opsDB) TokenRevoke(ctx context.Context, id string) (jobs.Token, error) {
	t, err := scanToken(d.pool.QueryRow(ctx, revokeTokenSQL, id, d.store().clock()))
	return t, notFound(err)
}

func (d *opsDB) TokenList(ctx context.Context, orgID string) ([]jobs.Token, error) {
	rows, err := d.pool.Query(ctx, listTokensSQL, orgID)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (jobs.Token, error) { return scanToken(r) })
}

// TokenGetValid is one index lookup.
func (d *opsDB) TokenGetValid(ctx context.Context, hash []byte) (jobs.Token, error) {
	t, err := scanToken(d.pool.QueryRow(ctx, tokenByHashSQL, hash))
	return t, notFound(err)
}

// TokenExistsValid reads the first entry of the partial index
// tokens_valid_idx, if any.
func (d *opsDB) TokenExistsValid(ctx context.Context) (bool, error) {
	var has bool
	err := d.pool.QueryRow(ctx, hasTokensSQL).Scan(&has)
	return has, err
}
