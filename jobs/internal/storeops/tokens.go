package storeops

import (
	"context"
	"fmt"

	"github.com/promptkit/promptkit/jobs"
)

// CreateToken stores a token's hash. A hash that is already stored (a
// secret used twice, even revoked) is jobs.ErrInvalid. See jobs.Store.
func (o Ops) CreateToken(ctx context.Context, p jobs.CreateTokenParams) (jobs.Token, error) {
	p, err := p.Normalize()
	if err != nil {
		return jobs.Token{}, o.fail("create token", err)
	}
	t, inserted, err := o.db.TokenInsert(ctx, TokenInsertParams{ID: jobs.NewID(), OrgID: p.OrgID, UserID: p.UserID,
		Role: p.Role, Hash: p.Hash})
	if err == nil && !inserted {
		err = fmt.Errorf("%w: a token with this hash exists", jobs.ErrInvalid)
	}
	o.db.Wrote(ctx, "create token", err, err == nil)
	if err != nil {
		return jobs.Token{}, o.fail("create token", err)
	}
	return t, nil
}

// ListTokens returns the tokens of an org (empty: all), oldest first. See
// jobs.Store.
func (o Ops) ListTokens(ctx context.Context, orgID string) ([]jobs.Token, error) {
	out, err := o.db.TokenList(ctx, orgID)
	if err != nil {
		return nil, o.fail("list tokens", err)
	}
	return out, nil
}

// RevokeToken marks a token revoked; a second revocation keeps the first
// one's time. See jobs.Store.
func (o Ops) RevokeToken(ctx context.Context, id string) (jobs.Token, error) {
	t, err := o.db.TokenRevoke(ctx, id)
	o.db.Wrote(ctx, "revoke token", err, err == nil)
	if err != nil {
		return jobs.Token{}, o.fail("revoke token", err)
	}
	return t, nil
}

// TokenByHash returns the valid token with this hash. See jobs.Store.
func (o Ops) TokenByHash(ctx context.Context, hash []byte) (jobs.Token, error) {
	t, err := o.db.TokenGetValid(ctx, hash)
	if err != nil {
		return jobs.Token{}, o.fail("token by hash", err)
	}
	return t, nil
}

// HasTokens reports whether a valid token exists. See jobs.Store.
func (o Ops) HasTokens(ctx context.Context) (bool, error) {
	has, err := o.db.TokenExistsValid(ctx)
	if err != nil {
		return false, o.fail("has tokens", err)
	}
	return has, nil
}
