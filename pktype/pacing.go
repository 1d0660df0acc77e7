package pktype

import (
	"math"
	"slices"
	"time"
)

// Shared pacing: what the engine of one process learns about a backend (a
// pause, a cooldown, a decrease of the learned rate, its demand) and
// shares with the engines of other processes through a store, so that N
// processes pace a provider like one. One shape serves the engine, the
// store interfaces (promptkit.PacingStore, jobs.Store.SyncPacing) and the
// store drivers: news goes in as PacingNews, the stored state comes out
// as SharedPacing, and SharedPacing.Merge is the one merge rule.

// PacingNews is what one process publishes about one backend.
type PacingNews struct {
	// Backend is the backend's ID in the engine's configuration.
	Backend string
	// Demand is how many of the process's callers wait for the backend or
	// are in flight on it: its presence, and its weight in the rates. It
	// replaces the process's last one.
	Demand int
	// PauseUntil is a pause the process was asked for (a provider's
	// Retry-After); zero: none.
	PauseUntil time.Time
	// CooldownUntil is the end of a cooldown the process began (the
	// backend failed as unwell, docs/routing.md); zero: none.
	CooldownUntil time.Time
	// Rate is a decrease of the learned rate made by this process;
	// Rate.At zero: none.
	Rate LearnedRate
	// Estimate is this process's part of the last decrease; At zero:
	// none.
	Estimate RateEstimate
}

// News reports whether n changes the backend's shared state (a pause, a
// cooldown or a decrease), beyond the process's own presence.
func (n PacingNews) News() bool {
	return !n.PauseUntil.IsZero() || !n.CooldownUntil.IsZero() || !n.Rate.At.IsZero()
}

// LearnedRate is a decrease of a provider-wide request rate learned from
// 429s, made At: the rate becomes LearnShare of the attempts the provider
// admitted in the second before (all processes' RateEstimates for At), at
// most Cap and at least Floor requests per second; from there it grows,
// slowly then faster while no 429 comes, as every process computes alike
// (Grown). The engine sets Cap to LearnShare of the rate it cut and Floor
// to half of it (0 when none was in force), so that one 429 never
// collapses the rate. At zero: none.
type LearnedRate struct {
	Cap, Floor float64
	At         time.Time
}

// RateEstimate is one process's part of the decrease made At: Admitted
// of its attempts dispatched in the second before were admitted. At zero:
// none.
type RateEstimate struct {
	Admitted int
	At       time.Time
}

// SharedPacing is one backend's shared state, as a store keeps it.
type SharedPacing struct {
	Backend string
	// PauseUntil is the latest end of a pause any process was asked for;
	// zero: never paused.
	PauseUntil time.Time
	// CooldownUntil is the latest end of a cooldown any process began;
	// zero: never cooled down.
	CooldownUntil time.Time
	// Rate is the last decrease of the learned rate; Rate.At zero: none
	// yet.
	Rate LearnedRate
	// Held is an operator's hold (jobs.Store.HoldBackend), distinct from
	// a provider's pause: engines dispatch nothing new to the backend
	// until a later sync says it is released; calls in flight finish.
	Held bool
	// UpdatedAt is when news (a pause, cooldown or rate) or a hold was
	// last stored; zero when only presence was published.
	UpdatedAt time.Time
	// Peers are the processes present on the backend (seen within the
	// store's time to live), by ID.
	Peers []PacingPeer
}

// PacingPeer is one process's presence on a backend.
type PacingPeer struct {
	// ID identifies the process (promptkit.SharePacingOptions.Peer).
	ID string
	// Demand is its last published demand, stamped SeenAt with the
	// store's time.
	Demand int
	SeenAt time.Time
	// Estimate is its part of the decrease made at Estimate.At.
	Estimate RateEstimate
}

// Merge returns s after peer published n at now (the store's time): the
// one rule every store applies, so that concurrent syncs of one backend,
// in any order, end in the same state.
//
//   - A pause and a cooldown keep the later end; a zero one changes
//     nothing.
//   - A decrease replaces the stored one when made strictly later (at the
//     same time it is the same decrease, or a lost race: keep the first).
//   - News of any of these stamps UpdatedAt with now, even when it changed
//     nothing; presence alone does not.
//   - The peer's demand replaces its last one, stamped SeenAt now; its
//     estimate replaces its last one unless that one is later (the same
//     time: a late answer raised the count).
//   - Held and the other peers are left as they are.
//
// s is not modified: Merge returns a copy with its own Peers.
func (s SharedPacing) Merge(peer string, n PacingNews, now time.Time) SharedPacing {
	if n.News() {
		s.PauseUntil = later(s.PauseUntil, n.PauseUntil)
		s.CooldownUntil = later(s.CooldownUntil, n.CooldownUntil)
		if n.Rate.At.After(s.Rate.At) {
			s.Rate = n.Rate
		}
		s.UpdatedAt = now
	}
	s.Peers = slices.Clone(s.Peers)
	i := slices.IndexFunc(s.Peers, func(p PacingPeer) bool { return p.ID == peer })
	if i < 0 {
		i = len(s.Peers)
		s.Peers = append(s.Peers, PacingPeer{ID: peer})
	}
	p := &s.Peers[i]
	p.Demand, p.SeenAt = n.Demand, now
	if !n.Estimate.At.IsZero() && !n.Estimate.At.Before(p.Estimate.At) {
		p.Estimate = n.Estimate
	}
	return s
}

// later returns the later of a and b; a zero time is earlier than any.
func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// RequestsPerSecond is the learned provider-wide rate at now, as every
// engine sharing it computes it: Rate.Base of the estimates every peer
// published for Rate.At, grown to now; 0 when none was learned or it has
// grown back to unpaced (an engine's configured requests_per_second may
// still bound it).
func (s SharedPacing) RequestsPerSecond(now time.Time) float64 {
	if s.Rate.At.IsZero() {
		return 0
	}
	admitted := 0
	for _, p := range s.Peers {
		if p.Estimate.At.Equal(s.Rate.At) {
			admitted += p.Estimate.Admitted
		}
	}
	if r := s.Rate.Grown(s.Rate.Base(admitted), now); !math.IsInf(r, 1) {
		return r
	}
	return 0
}

// The learned rate's law, shared by every process so that all compute the
// same rate at any time (internal/dispatch's learner follows it):
//
//   - LearnShare: a decrease sets the rate to this part of the attempts
//     the provider admitted in the second before it;
//   - without a 429 the rate grows as base·1.05^((τ/learnPlateau)²), τ
//     the time since the decrease: 5 % after learnPlateau, double after
//     45 s; past learnMaxGrowth times base it is dropped (unpaced again).
const (
	LearnShare     = 0.95
	learnPlateau   = 12 * time.Second
	learnMaxGrowth = 1000
)

// Base is the rate r sets given admitted, the attempts every process
// counted for it: LearnShare of them, at least Floor and at most Cap;
// 0 when none were counted and r keeps no floor.
func (r LearnedRate) Base(admitted int) float64 {
	return min(max(LearnShare*float64(admitted), r.Floor), r.Cap)
}

// Grown is base, set At, grown to now; +Inf when base is 0 or it has
// grown past learnMaxGrowth times base: the backend is unpaced again.
func (r LearnedRate) Grown(base float64, now time.Time) float64 {
	if base == 0 {
		return math.Inf(1)
	}
	tau := float64(now.Sub(r.At)) / float64(learnPlateau)
	g := base * math.Pow(1.05, tau*tau)
	if g > base*learnMaxGrowth {
		return math.Inf(1)
	}
	return g
}
