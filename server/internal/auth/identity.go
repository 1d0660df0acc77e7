// Package auth is who a request acts as, and what it may then do: bearer
// tokens and the local identity, the local-mode guard against web pages,
// the submission budgets per identity and per org, single-use stream
// tickets (bounded per identity, per org and in all), the bounds of an
// org admin's token creation and the admin-only check. Every route of
// the server takes its identity from one Auth.
//
// A request acts as the org, user and role of its bearer token or, when
// no token exists and the server listens on a loopback address (or was
// told InsecureNoAuth), the local identity (org "default", user "local",
// admin). A member acts on its own prompts, an admin on its org's.
package auth

import (
	"context"
	"crypto/sha256"
	"net/http"

	"github.com/promptkit/promptkit/jobs"
)

// The local identity's org and user; the CLI's submit and jobs commands
// use the same, so the shell and the API see the same prompts.
const (
	LocalOrg  = "default"
	LocalUser = "local"
)

// Identity is who a request acts as.
type Identity struct {
	Org, User string
	Role      jobs.Role
	// Key names the identity's submission budget and its tickets: its
	// token's ID, or localKey.
	Key string
	// hash is the token's hash, for looking again whether it was revoked
	// (see Auth.Valid); zero for the local identity.
	hash [sha256.Size]byte
}

// localKey is the local identity's key; token IDs never take it.
const localKey = "local"

// Local is who every request acts as while local mode holds.
var Local = Identity{Org: LocalOrg, User: LocalUser, Role: jobs.RoleAdmin, Key: localKey}

// fromToken is the identity of token t, proved by a secret of this hash.
func fromToken(t jobs.Token, hash []byte) Identity {
	id := Identity{Org: t.OrgID, User: t.UserID, Role: t.Role, Key: t.ID}
	copy(id.hash[:], hash)
	return id
}

// TokenID is the ID of the token the request acts with, which the jobs it
// submits carry for the usage ledger and whose limits apply; "" for the
// local identity.
func (id Identity) TokenID() string {
	if id.Key == localKey {
		return ""
	}
	return id.Key
}

// Whose names the identity in a limit's message: "the token's", or "the
// local identity's".
func (id Identity) Whose() string {
	if id.Key == localKey {
		return "the local identity's"
	}
	return "the token's"
}

// Operator reports whether the identity acts on every org and on what they
// share (backends, workers): an operator token, or the local identity
// (whoever holds the machine).
func (id Identity) Operator() bool { return id.Key == localKey || id.Role == jobs.RoleOperator }

// CreatedBy is the user filter of the identity's reads: a member sees its
// own prompts, an admin every prompt of its org ("").
func (id Identity) CreatedBy() string {
	if id.Role.Admin() {
		return ""
	}
	return id.User
}

// Owns reports whether the identity may see a job, prompt, file or batch
// of this org created by this user.
func (id Identity) Owns(org, createdBy string) bool {
	return org == id.Org && (id.Role.Admin() || createdBy == id.User)
}

type identityKey struct{}

// With returns ctx acting as id.
func With(ctx context.Context, id Identity) context.Context {
	return context.WithValue(ctx, identityKey{}, id)
}

// Of is the identity the request acts as (set by Auth's middleware).
func Of(r *http.Request) Identity {
	id, _ := r.Context().Value(identityKey{}).(Identity)
	return id
}
