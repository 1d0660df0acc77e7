package jobs

import (
	"math"
	"strings"
	"time"
)

// LimitScope says what a Limit applies to.
type LimitScope string

// Limit scopes.
const (
	LimitOrg   LimitScope = "org"
	LimitToken LimitScope = "token"
)

// Valid reports whether s is a known scope.
func (s LimitScope) Valid() bool { return s == LimitOrg || s == LimitToken }

// Limit is one organisation's or token's quotas, budgets and share. A zero
// field is no limit.
//
// The store enforces MaxRunning (an org's jobs running at once, counted on
// the database, at every claim), Paused (none at all) and Weight (the org's share of the claims
// among jobs of equal priority: see Store.Claim); the server enforces the
// rates and budgets.
type Limit struct {
	Scope   LimitScope `json:"scope"`
	Subject string     `json:"subject"` // org ID or token ID
	// RequestsPerMinute and TokensPerMinute bound the rate of requests
	// and of model tokens.
	RequestsPerMinute int `json:"requests_per_minute,omitempty"`
	TokensPerMinute   int `json:"tokens_per_minute,omitempty"`
	// MaxRunning bounds the org's jobs running at once (orgs only).
	MaxRunning int `json:"max_running,omitempty"`
	// DailyUSD and MonthlyUSD bound the spend.
	DailyUSD   float64 `json:"daily_usd,omitempty"`
	MonthlyUSD float64 `json:"monthly_usd,omitempty"`
	// Weight is an org's share in fair sharing; 0 means 1; must be 0 for
	// tokens.
	Weight int `json:"weight,omitempty"`
	// Paused holds the org's queued jobs in the queue (orgs only): the
	// store claims none of them, as if its MaxRunning were reached, while
	// its running jobs finish. Only Store.PauseOrg sets it; SetLimit keeps
	// the stored one, and DeleteLimit removes the pause with the limit.
	Paused bool `json:"paused,omitempty"`
	// UpdatedAt is stamped by SetLimit.
	UpdatedAt time.Time `json:"updated_at"`
}

// MaxWeight bounds Limit.Weight: a share beyond it would let one org's
// virtual clock (see Store.Claim) stand still.
const MaxWeight = 1000

// Normalize checks l: a known scope, a subject, no negative or non-finite
// number, and a Weight (at most MaxWeight) and MaxRunning only on an org.
func (l Limit) Normalize() (Limit, error) {
	switch {
	case !l.Scope.Valid():
		return l, invalidField("scope", "unknown scope %q (org or token)", l.Scope)
	case strings.TrimSpace(l.Subject) == "":
		return l, invalidField("subject", "a limit needs an org or token ID")
	case l.RequestsPerMinute < 0:
		return l, invalidField("requests_per_minute", "must not be negative")
	case l.TokensPerMinute < 0:
		return l, invalidField("tokens_per_minute", "must not be negative")
	case l.MaxRunning < 0:
		return l, invalidField("max_running", "must not be negative")
	case l.Weight < 0 || l.Weight > MaxWeight:
		return l, invalidField("weight", "must be between 0 and %d", MaxWeight)
	case l.Scope == LimitToken && l.Weight != 0:
		return l, invalidField("weight", "only an org has a share")
	case l.Scope == LimitToken && l.MaxRunning != 0:
		return l, invalidField("max_running", "only an org has a concurrency limit")
	}
	for _, usd := range []struct {
		field string
		v     float64
	}{{"daily_usd", l.DailyUSD}, {"monthly_usd", l.MonthlyUSD}} {
		if usd.v < 0 || math.IsNaN(usd.v) || math.IsInf(usd.v, 0) {
			return l, invalidField(usd.field, "must be a non-negative amount")
		}
	}
	if err := checkText("subject", l.Subject); err != nil {
		return l, err
	}
	return l, nil
}

// NormalizeOrg checks the org of Store.PauseOrg: not empty, no NUL.
func NormalizeOrg(org string) (string, error) {
	if strings.TrimSpace(org) == "" {
		return org, invalidField("org", "required")
	}
	return org, checkText("org", org)
}
