package promptkit

import "time"

// Pacing is what one backend's pacer follows now; see Engine.Pacing and
// docs/retries.md.
type Pacing struct {
	// RequestsPerSecond is the request rate in force: the lower of the
	// configured requests_per_second (less its 2 % margin) and the rate
	// learned from 429s. 0 means unpaced.
	RequestsPerSecond float64
	// TokensPerMinute is the configured tokens_per_minute; 0 means
	// unpaced by configuration.
	TokensPerMinute float64
	// Source says where the pacing comes from: PacingHeaders when the
	// provider's rate-limit headers govern (see Requests and Tokens),
	// Pacing429 when RequestsPerSecond was learned from 429s,
	// PacingConfigured when it is the configured rate, PacingNone when
	// the backend is unpaced.
	Source string
	// Requests and Tokens are the provider's header budgets as the pacer
	// counts them: Remaining (less what was dispatched since the last
	// answer) may be dispatched before ResetAt. Known is false when the
	// provider sent no such header.
	Requests, Tokens RateBudget
}

// RateBudget is one rate-limit header budget; see Pacing.
type RateBudget struct {
	Known     bool
	Limit     int64
	Remaining int64
	ResetAt   time.Time
}

// Pacing sources.
const (
	PacingNone       = ""
	PacingConfigured = "configured"
	PacingHeaders    = "headers"
	Pacing429        = "429"
)

// Pacing reports, per backend ID, what the backend's pacer follows now: the
// rate it learned from the provider (unless the backend's LearnRate is
// off) or its configured rate. It is cheap and safe to call concurrently,
// for example from a metrics collector.
func (e *Engine) Pacing() map[string]Pacing {
	m := map[string]Pacing{}
	for id, p := range e.sched.Pacing() {
		m[id] = Pacing{
			RequestsPerSecond: p.RequestsPerSecond,
			TokensPerMinute:   p.TokensPerMinute,
			Source:            p.Source,
			Requests:          RateBudget(p.Requests),
			Tokens:            RateBudget(p.Tokens),
		}
	}
	return m
}
