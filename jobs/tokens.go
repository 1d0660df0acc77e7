package jobs

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"strings"
	"time"
)

// Role is what a token may act on: a member on its own prompts, an admin
// on every prompt of its org, an operator as an admin of every org and on
// what all orgs share (backends, workers).
type Role string

// Roles.
const (
	RoleMember   Role = "member"
	RoleAdmin    Role = "admin"
	RoleOperator Role = "operator"
)

// Valid reports whether r is a known role.
func (r Role) Valid() bool { return r == RoleMember || r == RoleAdmin || r == RoleOperator }

// Admin reports whether r may act on every prompt of its org: an admin or
// an operator.
func (r Role) Admin() bool { return r == RoleAdmin || r == RoleOperator }

// Token is a stored API token. The secret is never stored: only its
// SHA-256 (HashToken), which is all a lookup needs, because the secret has
// 256 random bits and cannot be guessed from a fast hash.
type Token struct {
	ID        string    `json:"id"`
	OrgID     string    `json:"org_id"`
	UserID    string    `json:"user_id"`
	Role      Role      `json:"role"`
	CreatedAt time.Time `json:"created_at"`
	// RevokedAt is zero while the token is valid.
	RevokedAt time.Time `json:"revoked_at,omitzero"`
}

// CreateTokenParams describes a token to store.
type CreateTokenParams struct {
	OrgID  string
	UserID string
	// Role defaults to RoleMember.
	Role Role
	// Hash is HashToken of the secret.
	Hash []byte
}

// tokenPrefix marks promptkit tokens, so secret scanners and people can
// tell what a leaked string is.
const tokenPrefix = "pk_"

// NewTokenSecret returns a new random bearer token and its hash.
func NewTokenSecret() (secret string, hash []byte) {
	b := make([]byte, 32)
	_, _ = rand.Read(b) // never fails (crypto/rand panics instead)
	secret = tokenPrefix + base64.RawURLEncoding.EncodeToString(b)
	return secret, HashToken(secret)
}

// HashToken is the stored form of a bearer token.
func HashToken(secret string) []byte {
	h := sha256.Sum256([]byte(strings.TrimSpace(secret)))
	return h[:]
}

// Normalize checks p: org and user set, a known role (default member),
// and a SHA-256 hash.
func (p CreateTokenParams) Normalize() (CreateTokenParams, error) {
	if p.Role == "" {
		p.Role = RoleMember
	}
	switch {
	case strings.TrimSpace(p.OrgID) == "":
		return p, invalid("a token needs an org")
	case strings.TrimSpace(p.UserID) == "":
		return p, invalid("a token needs a user")
	case !p.Role.Valid():
		return p, invalid("unknown role %q (member, admin or operator)", p.Role)
	case len(p.Hash) != sha256.Size:
		return p, invalid("a token hash has %d bytes, not %d", len(p.Hash), sha256.Size)
	}
	if err := checkText("org", p.OrgID); err != nil {
		return p, err
	}
	if err := checkText("user", p.UserID); err != nil {
		return p, err
	}
	return p, nil
}
