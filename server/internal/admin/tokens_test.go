package admin_test

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/promptkit/promptkit/jobs"
	"github.com/promptkit/promptkit/server/internal/admin"
)

// token stores a token of org for user with role, and returns its ID.
func (f *fixture) token(org, user string, role jobs.Role) string {
	f.t.Helper()
	_, hash := jobs.NewTokenSecret()
	t, err := f.st.CreateToken(context.Background(), jobs.CreateTokenParams{OrgID: org, UserID: user, Role: role, Hash: hash})
	if err != nil {
		f.t.Fatal(err)
	}
	return t.ID
}

// TestCreateToken: an admin's token is created in its own org (named or
// not), as a member unless it says admin, and answered 201 with a secret
// that proves it; another org, the operator role, an unknown role, a
// missing user and an unknown field are refused, and store nothing.
func TestCreateToken(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	var c admin.CreatedToken
	f.ok(&boss, "POST", "/v1/admin/tokens", map[string]any{"user": "zed"}, http.StatusCreated, &c)
	if c.OrgID != "acme" || c.UserID != "zed" || c.Role != jobs.RoleMember || c.ID == "" || c.Secret == "" {
		t.Fatalf("created %+v, want acme's member zed with a secret", c)
	}
	if stored, err := f.st.TokenByHash(ctx, jobs.HashToken(c.Secret)); err != nil || stored.ID != c.ID {
		t.Errorf("the secret finds %+v %v, want token %s", stored, err, c.ID)
	}
	if !f.logs.Contains("token created") || !f.logs.Contains("by=token:tok_boss") || f.logs.Contains(c.Secret) {
		t.Errorf("log %q: want the creation and who created it, never the secret", f.logs.String())
	}
	f.ok(&boss, "POST", "/v1/admin/tokens", map[string]any{"org": "acme", "user": "deputy", "role": "admin"}, http.StatusCreated, &c)
	if c.OrgID != "acme" || c.Role != jobs.RoleAdmin {
		t.Errorf("created %+v, want acme's admin", c)
	}
	f.ok(&operator, "POST", "/v1/admin/tokens", map[string]any{"org": "beta", "user": "root", "role": "operator"}, http.StatusCreated, &c)
	if c.OrgID != "beta" || c.Role != jobs.RoleOperator {
		t.Errorf("the operator created %+v, want beta's operator", c)
	}
	before, err := f.st.ListTokens(ctx, "")
	if err != nil {
		t.Fatal(err)
	}

	f.refused(&boss, "POST", "/v1/admin/tokens", map[string]any{"org": "beta", "user": "x"}, http.StatusForbidden, "forbidden", "own org")
	f.refused(&boss, "POST", "/v1/admin/tokens", map[string]any{"user": "x", "role": "operator"}, http.StatusForbidden, "forbidden", "operator token")
	f.refused(&boss, "POST", "/v1/admin/tokens", map[string]any{"user": "x", "role": "root"}, http.StatusBadRequest, "invalid_request", "root")
	f.refused(&boss, "POST", "/v1/admin/tokens", map[string]any{}, http.StatusBadRequest, "invalid_request", "user")
	f.refused(&operator, "POST", "/v1/admin/tokens", map[string]any{"user": "x"}, http.StatusBadRequest, "invalid_request", "org")
	f.refused(&boss, "POST", "/v1/admin/tokens", `{"user": "x", "expires": "never"}`, http.StatusBadRequest, "invalid_json", "expires")
	after, err := f.st.ListTokens(ctx, "")
	if err != nil || len(after) != len(before) {
		t.Errorf("%d tokens after the refusals, want %d: %v", len(after), len(before), err)
	}
}

// TestTokensListing: an admin lists its own org's member and admin
// tokens, not its org's operator tokens nor another org's; an operator
// every token, or one org's with ?org=; no listing shows a secret.
func TestTokensListing(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	mem := f.token("acme", "ann", jobs.RoleMember)
	adm := f.token("acme", "boss", jobs.RoleAdmin)
	op := f.token("acme", "olga", jobs.RoleOperator)
	bea := f.token("beta", "bea", jobs.RoleMember)
	ids := func(l admin.TokenList) []string {
		var out []string
		for _, t := range l.Tokens {
			out = append(out, t.ID)
		}
		return slices.Sorted(slices.Values(out))
	}
	r := f.call(&boss, "GET", "/v1/admin/tokens", nil)
	var l admin.TokenList
	r.Decode(t, &l)
	if got := ids(l); r.Code != http.StatusOK || !slices.Equal(got, sorted(mem, adm)) {
		t.Errorf("acme's admin lists %v (%d), want acme's member and admin", got, r.Code)
	}
	if strings.Contains(string(r.Body), "secret") || strings.Contains(string(r.Body), "hash") {
		t.Errorf("the listing %s shows a secret", r.Body)
	}
	f.ok(&operator, "GET", "/v1/admin/tokens", nil, http.StatusOK, &l)
	if got := ids(l); !slices.Equal(got, sorted(mem, adm, op, bea)) {
		t.Errorf("the operator lists %v, want all four", got)
	}
	f.ok(&operator, "GET", "/v1/admin/tokens?org=beta", nil, http.StatusOK, &l)
	if got := ids(l); !slices.Equal(got, []string{bea}) {
		t.Errorf("the operator's ?org=beta lists %v, want beta's", got)
	}
	f.refused(&boss, "GET", "/v1/admin/tokens?org=beta", nil, http.StatusForbidden, "forbidden")
}

// TestRevokeToken: an admin revokes its own org's member token (answered
// with the token, revoked); its org's operator token and another org's
// token are answered as unknown and stay valid; an unknown token is a
// 404 for the operator too.
func TestRevokeToken(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	mem := f.token("acme", "ann", jobs.RoleMember)
	op := f.token("acme", "olga", jobs.RoleOperator)
	bea := f.token("beta", "bea", jobs.RoleMember)

	var tok jobs.Token
	f.ok(&boss, "POST", "/v1/admin/tokens/"+mem+"/revoke", nil, http.StatusOK, &tok)
	if tok.ID != mem || tok.RevokedAt.IsZero() {
		t.Errorf("revoke answered %+v, want %s revoked", tok, mem)
	}
	f.refused(&boss, "POST", "/v1/admin/tokens/"+op+"/revoke", nil, http.StatusNotFound, "not_found")
	f.refused(&boss, "POST", "/v1/admin/tokens/"+bea+"/revoke", nil, http.StatusNotFound, "not_found")
	f.refused(&operator, "POST", "/v1/admin/tokens/tok_nope/revoke", nil, http.StatusNotFound, "not_found")
	ts, err := f.st.ListTokens(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	for _, x := range ts {
		if revoked := !x.RevokedAt.IsZero(); revoked != (x.ID == mem) {
			t.Errorf("token %s (%s of %s) revoked %v", x.ID, x.Role, x.OrgID, revoked)
		}
	}
}
