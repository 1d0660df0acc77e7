package server

import (
	"fmt"
	"net/http"
	"slices"
	"testing"

	"github.com/promptkit/promptkit/jobs"
	"github.com/promptkit/promptkit/server/internal/admin"
)

// TestTokenRoles is the matrix of who may do what to which token on the
// token routes of the operator's API: an operator acts on every token; an
// org's admin on its own org's member and admin tokens only — an operator
// token of its org is not listed, cannot be created and is answered as
// unknown when revoked, and keeps working; a member on none.
func TestTokenRoles(t *testing.T) {
	onStores(t, jobs.Options{}, func(t *testing.T, e *env) {
		actors := map[jobs.Role]string{
			jobs.RoleOperator: e.token("acme", "olga", jobs.RoleOperator),
			jobs.RoleAdmin:    e.token("acme", "boss", jobs.RoleAdmin),
			jobs.RoleMember:   e.token("acme", "ann", jobs.RoleMember),
		}
		roles := []jobs.Role{jobs.RoleOperator, jobs.RoleAdmin, jobs.RoleMember}
		// What each actor may do to a target of each role: the status of
		// create and revoke, and whether the listing shows the target.
		type want struct {
			list           int
			listed         bool
			create, revoke int
		}
		allowed := want{list: http.StatusOK, listed: true, create: http.StatusCreated, revoke: http.StatusOK}
		member := want{list: http.StatusForbidden, create: http.StatusForbidden, revoke: http.StatusForbidden}
		matrix := map[jobs.Role]map[jobs.Role]want{
			jobs.RoleOperator: {jobs.RoleOperator: allowed, jobs.RoleAdmin: allowed, jobs.RoleMember: allowed},
			jobs.RoleAdmin: {
				jobs.RoleOperator: {list: http.StatusOK, listed: false, create: http.StatusForbidden, revoke: http.StatusNotFound},
				jobs.RoleAdmin:    allowed, jobs.RoleMember: allowed,
			},
			jobs.RoleMember: {jobs.RoleOperator: member, jobs.RoleAdmin: member, jobs.RoleMember: member},
		}
		n := 0
		for _, actor := range roles {
			for _, target := range roles {
				w := matrix[actor][target]
				name := fmt.Sprintf("%s on %s", actor, target)
				n++
				user := fmt.Sprintf("target-%d", n)
				secret := e.token("acme", user, target)
				tokID := e.tokenID("acme", user)

				// List.
				r := e.call("GET", "/v1/admin/tokens", actors[actor], nil)
				if r.code != w.list {
					t.Errorf("%s: list: %d %s, want %d", name, r.code, r.body, w.list)
				} else if r.code == http.StatusOK {
					var l admin.TokenList
					r.decode(t, &l)
					listed := slices.ContainsFunc(l.Tokens, func(x jobs.Token) bool { return x.ID == tokID })
					if listed != w.listed {
						t.Errorf("%s: list shows the target %v, want %v", name, listed, w.listed)
					}
					if actor == jobs.RoleAdmin && slices.ContainsFunc(l.Tokens, func(x jobs.Token) bool { return x.Role == jobs.RoleOperator }) {
						t.Errorf("%s: an admin's listing holds an operator token", name)
					}
				}
				// ?org= names the same scope; it must not widen it.
				if r := e.call("GET", "/v1/admin/tokens?org=acme", actors[actor], nil); r.code == http.StatusOK && actor == jobs.RoleAdmin {
					var l admin.TokenList
					r.decode(t, &l)
					if slices.ContainsFunc(l.Tokens, func(x jobs.Token) bool { return x.Role == jobs.RoleOperator }) {
						t.Errorf("%s: an admin's ?org= listing holds an operator token", name)
					}
				}

				// Create.
				r = e.call("POST", "/v1/admin/tokens", actors[actor], map[string]any{"org": "acme", "user": fmt.Sprintf("made-%d", n), "role": target})
				if r.code != w.create {
					t.Errorf("%s: create: %d %s, want %d", name, r.code, r.body, w.create)
				}

				// Revoke; the target works after a refusal, and is refused
				// after a revocation.
				r = e.call("POST", "/v1/admin/tokens/"+tokID+"/revoke", actors[actor], nil)
				if r.code != w.revoke {
					t.Errorf("%s: revoke: %d %s, want %d", name, r.code, r.body, w.revoke)
				}
				wantAfter := http.StatusOK
				if w.revoke == http.StatusOK {
					wantAfter = http.StatusUnauthorized
				}
				if r := e.call("GET", "/v1/prompts", secret, nil); r.code != wantAfter {
					t.Errorf("%s: the target token after the revoke: %d, want %d", name, r.code, wantAfter)
				}
			}
		}
		// The actors' own tokens were never targets: each still works.
		for role, tok := range actors {
			if r := e.call("GET", "/v1/prompts", tok, nil); r.code != http.StatusOK {
				t.Errorf("the %s's own token after the matrix: %d, want 200", role, r.code)
			}
		}
	})
}
