package sqlitestore

import (
	"context"
	"database/sql"

	"github.com/promptkit/promptkit/jobs"
	"github.com/promptkit/promptkit/jobs/internal/storeops"
)

// The methods of jobs.Store on tokens are storeops.Ops' (embedded in
// Store), which runs them over opsDB: the statements below.

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

// TokenInsert writes in a transaction of its own; the token is made of
// its row's values, which a conflict leaves unwritten.
func (d *opsDB) TokenInsert(ctx context.Context, p storeops.TokenInsertParams) (jobs.Token, bool, error) {
	t := jobs.Token{ID: p.ID, OrgID: p.OrgID, UserID: p.UserID, Role: p.Role}
	inserted := false
	err := d.store().tx(ctx, func(w *wtx) error {
		res, err := w.exec(qInsertToken, p.ID, p.OrgID, p.UserID, string(p.Role), p.Hash, w.now)
		if err != nil {
			return err
		}
		n, err := res.RowsAffected()
		inserted, t.CreatedAt = n > 0, fromMicros(w.now)
		return err
	})
	return t, inserted && err == nil, err
}

func (d *opsDB) TokenRevoke(ctx context.Context, id string) (jobs.Token, error) {
	var t jobs.Token
	err := d.store().tx(ctx, func(w *wtx) error {
		var err error
		t, err = scanToken(w.queryRow(qRevokeToken, w.now, id))
		return notFound(err)
	})
	return t, err
}

func (d *opsDB) TokenList(ctx context.Context, orgID string) ([]jobs.Token, error) {
	return readAll(ctx, d.store(), scanToken, qListTokens, orgID)
}

func (d *opsDB) TokenGetValid(ctx context.Context, hash []byte) (jobs.Token, error) {
	t, err := scanToken(d.store().readRow(ctx, qTokenByHash, hash))
	return t, notFound(err)
}

func (d *opsDB) TokenExistsValid(ctx context.Context) (bool, error) {
	var has bool
	err := d.store().readRow(ctx, qHasTokens).Scan(&has)
	return has, err
}
