package admin

import (
	"net/http"
	"slices"

	"github.com/promptkit/promptkit/jobs"
	"github.com/promptkit/promptkit/server/internal/auth"
	"github.com/promptkit/promptkit/server/internal/httpapi"
)

// TokenList is GET /v1/admin/tokens: the tokens of the scope, revoked
// ones included, oldest first. Secrets are never stored, so never shown.
type TokenList struct {
	Tokens []jobs.Token `json:"tokens"`
}

// Tokens answers GET /v1/admin/tokens (?org= narrows an operator's list).
// An admin's list leaves out its org's operator tokens, which it may not
// act on (actsOn).
func (a *API) Tokens(w http.ResponseWriter, r *http.Request) error {
	org, err := queryOrg(r)
	if err != nil {
		return err
	}
	ts, err := a.Store.ListTokens(r.Context(), org)
	if err != nil {
		return httpapi.About("tokens", err)
	}
	id := auth.Of(r)
	ts = slices.DeleteFunc(ts, func(t jobs.Token) bool { return !actsOn(id, t) })
	httpapi.WriteJSON(w, http.StatusOK, TokenList{Tokens: httpapi.NonNil(ts)})
	return nil
}

// actsOn reports whether id may see and act on token t: an operator on
// every token; an org's admin on its own org's member and admin tokens,
// not on an operator's, whose reach is wider than the admin's own.
func actsOn(id auth.Identity, t jobs.Token) bool {
	if id.Operator() {
		return true
	}
	return id.Role.Admin() && t.OrgID == id.Org && t.Role != jobs.RoleOperator
}

// NewToken is the body of POST /v1/admin/tokens.
type NewToken struct {
	Org  string    `json:"org"`
	User string    `json:"user"`
	Role jobs.Role `json:"role,omitempty"`
}

// CreatedToken is a token just created, with its secret: the only time
// the secret is shown.
type CreatedToken struct {
	jobs.Token
	Secret string `json:"secret"`
}

// CreateToken answers POST /v1/admin/tokens. An admin creates tokens of
// its own org, as member or admin; an operator any.
func (a *API) CreateToken(w http.ResponseWriter, r *http.Request) error {
	id, scopeOrg, err := scope(r)
	if err != nil {
		return err
	}
	var req NewToken
	if err := httpapi.ReadJSON(w, r, a.MaxBody, &req, false); err != nil {
		return err
	}
	org, err := orgScope(scopeOrg, req.Org)
	if err != nil {
		return err
	}
	if req.Role == jobs.RoleOperator && !id.Operator() {
		return notOperator
	}
	secret, hash := jobs.NewTokenSecret()
	p, err := jobs.CreateTokenParams{OrgID: org, UserID: req.User, Role: req.Role, Hash: hash}.Normalize()
	if err != nil {
		return err
	}
	t, err := a.Store.CreateToken(r.Context(), p)
	if err != nil {
		return httpapi.About("token", err)
	}
	a.Log.Info("token created", "token", t.ID, "org", t.OrgID, "role", t.Role, "by", actor(id))
	httpapi.WriteJSON(w, http.StatusCreated, CreatedToken{Token: t, Secret: secret})
	return nil
}

// RevokeToken answers POST /v1/admin/tokens/{id}/revoke.
func (a *API) RevokeToken(w http.ResponseWriter, r *http.Request) error {
	id, scopeOrg, err := scope(r)
	if err != nil {
		return err
	}
	tid := r.PathValue("id")
	if scopeOrg != "" {
		// An admin may revoke only the tokens it may list (actsOn): look
		// first, and answer another org's, or an operator's, as unknown,
		// as the listing does not show them.
		ts, err := a.Store.ListTokens(r.Context(), scopeOrg)
		if err != nil {
			return httpapi.About("token", err)
		}
		if !slices.ContainsFunc(ts, func(t jobs.Token) bool { return t.ID == tid && actsOn(id, t) }) {
			return httpapi.NotFound("token")
		}
	}
	t, err := a.Store.RevokeToken(r.Context(), tid)
	if err != nil {
		return httpapi.About("token", err)
	}
	a.Log.Info("token revoked", "token", t.ID, "by", actor(id))
	httpapi.WriteJSON(w, http.StatusOK, t)
	return nil
}

// BatchList is a page of GET /v1/admin/batches.
type BatchList struct {
	Batches []jobs.Batch `json:"batches"`
	// NextCursor continues the listing; empty on the last page.
	NextCursor string `json:"next_cursor,omitempty"`
}

// Batches answers GET /v1/admin/batches: batches, newest first, with
// their progress. A batch's lines are its jobs: GET /v1/admin/jobs?batch=.
func (a *API) Batches(w http.ResponseWriter, r *http.Request) error {
	org, err := queryOrg(r)
	if err != nil {
		return err
	}
	limit, err := httpapi.Limit(r, jobs.MaxListLimit)
	if err != nil {
		return err
	}
	bs, more, err := a.Store.ListBatches(r.Context(), jobs.BatchListParams{OrgID: org, After: r.URL.Query().Get("cursor"), Limit: limit})
	if err != nil {
		return httpapi.About("batches", err)
	}
	out := BatchList{Batches: httpapi.NonNil(bs)}
	if more && len(bs) > 0 {
		out.NextCursor = bs[len(bs)-1].ID
	}
	httpapi.WriteJSON(w, http.StatusOK, out)
	return nil
}
