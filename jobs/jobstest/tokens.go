package jobstest

import (
	"bytes"
	"testing"
	"time"

	"github.com/promptkit/promptkit/jobs"
)

// newToken creates a token with a fresh secret and returns it with its
// hash.
func (f *fixture) newToken(p jobs.CreateTokenParams) (jobs.Token, []byte) {
	f.t.Helper()
	_, p.Hash = jobs.NewTokenSecret()
	tok, err := f.store.CreateToken(f.ctx, p)
	if err != nil {
		f.t.Fatalf("CreateToken: %v", err)
	}
	return tok, p.Hash
}

// hasTokens calls HasTokens.
func (f *fixture) hasTokens() bool {
	f.t.Helper()
	has, err := f.store.HasTokens(f.ctx)
	if err != nil {
		f.t.Fatalf("HasTokens: %v", err)
	}
	return has
}

// listTokens calls ListTokens.
func (f *fixture) listTokens(orgID string) []jobs.Token {
	f.t.Helper()
	ts, err := f.store.ListTokens(f.ctx, orgID)
	if err != nil {
		f.t.Fatalf("ListTokens(%q): %v", orgID, err)
	}
	return ts
}

// sameToken compares tokens, times by Equal.
func sameToken(a, b jobs.Token) bool {
	return a.ID == b.ID && a.OrgID == b.OrgID && a.UserID == b.UserID && a.Role == b.Role &&
		a.CreatedAt.Equal(b.CreatedAt) && a.RevokedAt.Equal(b.RevokedAt)
}

func tokenIDs(ts []jobs.Token) []string {
	out := make([]string, len(ts))
	for i, t := range ts {
		out[i] = t.ID
	}
	return out
}

func testTokens(t *testing.T, h Harness) {
	f := setup(t, h)
	if f.hasTokens() {
		t.Error("HasTokens on a new store = true")
	}
	if ts := f.listTokens(""); len(ts) != 0 {
		t.Errorf("ListTokens on a new store = %+v", ts)
	}

	now := f.now()
	member, memberHash := f.newToken(jobs.CreateTokenParams{OrgID: "org-a", UserID: "alice"})
	if member.ID == "" || member.OrgID != "org-a" || member.UserID != "alice" || member.Role != jobs.RoleMember ||
		!member.RevokedAt.IsZero() {
		t.Errorf("CreateToken = %+v, want a valid member token of alice in org-a", member)
	}
	sameTime(t, "token CreatedAt", member.CreatedAt, now)
	if !f.hasTokens() {
		t.Error("HasTokens after CreateToken = false")
	}
	f.advance(time.Second)
	admin, adminHash := f.newToken(jobs.CreateTokenParams{OrgID: "org-a", UserID: "root", Role: jobs.RoleAdmin})
	f.advance(time.Second)
	other, _ := f.newToken(jobs.CreateTokenParams{OrgID: "org-b", UserID: "bob"})
	if admin.Role != jobs.RoleAdmin || admin.ID == member.ID || other.ID == admin.ID {
		t.Errorf("tokens %+v, %+v, %+v", member, admin, other)
	}

	got, err := f.store.TokenByHash(f.ctx, memberHash)
	if err != nil || !sameToken(got, member) {
		t.Errorf("TokenByHash = %+v, %v; want %+v", got, err, member)
	}
	if got, err := f.store.TokenByHash(f.ctx, adminHash); err != nil || got.ID != admin.ID || got.Role != jobs.RoleAdmin {
		t.Errorf("TokenByHash(admin) = %+v, %v", got, err)
	}
	_, err = f.store.TokenByHash(f.ctx, jobs.HashToken("pk_unknown"))
	wantErr(t, err, jobs.ErrNotFound, "TokenByHash of an unknown secret")

	if g := tokenIDs(f.listTokens("")); len(g) != 3 || g[0] != member.ID || g[1] != admin.ID || g[2] != other.ID {
		t.Errorf("ListTokens(all) = %v, want %v oldest first", g, []string{member.ID, admin.ID, other.ID})
	}
	if g := tokenIDs(f.listTokens("org-a")); len(g) != 2 || g[0] != member.ID || g[1] != admin.ID {
		t.Errorf("ListTokens(org-a) = %v", g)
	}
	if g := f.listTokens("org-c"); len(g) != 0 {
		t.Errorf("ListTokens(org-c) = %+v", g)
	}

	// A secret is stored once, whatever its org.
	_, err = f.store.CreateToken(f.ctx, jobs.CreateTokenParams{OrgID: "org-b", UserID: "eve", Hash: memberHash})
	wantErr(t, err, jobs.ErrInvalid, "CreateToken with a stored hash")

	revokedAt := f.advance(time.Second)
	r, err := f.store.RevokeToken(f.ctx, member.ID)
	if err != nil {
		t.Fatalf("RevokeToken: %v", err)
	}
	if r.ID != member.ID || r.UserID != "alice" || r.Role != jobs.RoleMember || !r.CreatedAt.Equal(member.CreatedAt) {
		t.Errorf("RevokeToken = %+v", r)
	}
	sameTime(t, "RevokedAt", r.RevokedAt, revokedAt)
	_, err = f.store.TokenByHash(f.ctx, memberHash)
	wantErr(t, err, jobs.ErrNotFound, "TokenByHash of a revoked token")
	f.advance(time.Second)
	again, err := f.store.RevokeToken(f.ctx, member.ID)
	if err != nil || !sameToken(again, r) {
		t.Errorf("second RevokeToken = %+v, %v; want no change %+v", again, err, r)
	}
	_, err = f.store.RevokeToken(f.ctx, jobs.NewID())
	wantErr(t, err, jobs.ErrNotFound, "RevokeToken of an unknown ID")
	_, err = f.store.CreateToken(f.ctx, jobs.CreateTokenParams{OrgID: "org-a", UserID: "alice", Hash: memberHash})
	wantErr(t, err, jobs.ErrInvalid, "CreateToken with a revoked token's hash")

	// Revoked tokens are listed, as revoked.
	all := f.listTokens("org-a")
	if len(all) != 2 || !sameToken(all[0], r) || !all[1].RevokedAt.IsZero() {
		t.Errorf("ListTokens(org-a) after a revocation = %+v", all)
	}
	if !f.hasTokens() {
		t.Error("HasTokens with two valid tokens = false")
	}
	for _, id := range []string{admin.ID, other.ID} {
		if _, err := f.store.RevokeToken(f.ctx, id); err != nil {
			t.Fatalf("RevokeToken: %v", err)
		}
	}
	if f.hasTokens() {
		t.Error("HasTokens with every token revoked = true")
	}
	if n := len(f.listTokens("")); n != 3 {
		t.Errorf("ListTokens after revoking all: %d tokens, want 3", n)
	}
}

// Every token the rules refuse is ErrInvalid, with Normalize's error, and
// stores nothing.
func testTokensInvalid(t *testing.T, h Harness) {
	f := setup(t, h)
	_, hash := jobs.NewTokenSecret()
	for _, p := range []jobs.CreateTokenParams{
		{UserID: "u", Hash: hash},
		{OrgID: " ", UserID: "u", Hash: hash},
		{OrgID: "o", Hash: hash},
		{OrgID: "o", UserID: "u", Role: "owner", Hash: hash},
		{OrgID: "o", UserID: "u"},
		{OrgID: "o", UserID: "u", Hash: hash[:16]},
		{OrgID: "o", UserID: "u", Hash: append(bytes.Clone(hash), 0)},
	} {
		_, err := f.store.CreateToken(f.ctx, p)
		wantNormalizeErr(t, err, p, "CreateToken")
	}
	if f.hasTokens() || len(f.listTokens("")) != 0 {
		t.Error("an invalid CreateToken stored a token")
	}
}
