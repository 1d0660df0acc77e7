package jobs

import "time"

// LimitScope says what a Limit applies to.
type LimitScope string

// Limit scopes.
const (
	LimitOrg   LimitScope = "org"
	LimitToken LimitScope = "token"
)

// Limit is one organisation's or token's quotas, budgets and share. A zero
// field is no limit.
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
	// Weight is an org's share in fair sharing; 0 means 1.
	Weight int `json:"weight,omitempty"`
	// UpdatedAt is stamped by SetLimit.
	UpdatedAt time.Time `json:"updated_at"`
}
