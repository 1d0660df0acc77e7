package jobs

import (
	"math"
	"slices"
	"strings"
	"time"
	"unicode/utf8"
)

// Shared pacing: the engines of every process on one database (each
// `promptkit worker` and `serve`) share, per backend, what their pacers
// learned from the provider, so that N processes pace like one (see
// Store.SyncPacing, promptkit.Engine.SharePacing and docs/retries.md).
// The store keeps, per backend, one row of shared state, merged as
// PacingUpdate says, and one row of presence per process.

// DefaultPacingPeerTTL is PacingSyncParams.PeerTTL when zero: a process
// publishes its presence about once a second while it has demand.
const DefaultPacingPeerTTL = 5 * time.Second

// MaxPacingUpdates bounds PacingSyncParams.Updates; MaxPacingName the
// bytes of a backend or peer name.
const (
	MaxPacingUpdates = 1000
	MaxPacingName    = 256
)

// PacingUpdate is one process's news about one backend.
type PacingUpdate struct {
	// Backend is the backend's ID in the engine's configuration.
	Backend string
	// Demand is how many callers of the process wait for the backend or
	// are in flight on it. It replaces the peer's last one, stamped with
	// the store's time: the peer's presence.
	Demand int
	// PauseUntil is a pause the process was asked for (a provider's
	// Retry-After); zero: none. The shared pause keeps the later end.
	PauseUntil time.Time
	// CooldownUntil is the end of a cooldown the process began: the
	// backend failed as unwell, and model groups avoid it until then
	// (docs/routing.md); zero: none. The shared one keeps the later end.
	CooldownUntil time.Time
	// RateAt, RateCap and RateFloor are a decrease of the learned
	// provider-wide rate made at RateAt, to at most RateCap and at least
	// RateFloor requests per second (see promptkit.LearnedRate); RateAt
	// zero: none. It replaces the shared one when RateAt is later.
	RateCap, RateFloor float64
	RateAt             time.Time
	// Estimate is the peer's part of the decrease made at EstimateAt:
	// how many of its attempts dispatched in the second before the
	// provider admitted (promptkit.RateEstimate); EstimateAt zero: none.
	// It replaces the peer's last one unless that one is later.
	Estimate   int
	EstimateAt time.Time
}

// PacingSyncParams are one sync of one process's pacing.
type PacingSyncParams struct {
	// Peer identifies the process; required with Updates.
	Peer string
	// Updates are the process's news; none only reads.
	Updates []PacingUpdate
	// PeerTTL is how long a peer's presence lasts without news: peers
	// seen longer ago are left out of the answer, and deleted by a sync
	// that writes. Defaults to DefaultPacingPeerTTL.
	PeerTTL time.Duration
}

// BackendPacing is one backend's shared pacing.
type BackendPacing struct {
	Backend    string
	PauseUntil time.Time // zero: never paused
	// CooldownUntil is the latest end of a cooldown; zero: never cooled.
	CooldownUntil time.Time
	// The last decrease of the learned rate; RateAt zero: none yet.
	RateCap, RateFloor float64
	RateAt             time.Time
	// Held is an operator's hold (Store.HoldBackend), distinct from a
	// provider's pause: engines dispatch nothing new to the backend until
	// it is released; calls in flight finish.
	Held bool
	// UpdatedAt is when a pause, cooldown, rate or hold last changed; zero
	// when only presence was published.
	UpdatedAt time.Time
	// Peers are the processes seen within PeerTTL, by Peer.
	Peers []PacingPeer
}

// PacingPeer is one process's presence on a backend.
type PacingPeer struct {
	Peer   string
	Demand int
	SeenAt time.Time
	// Estimate is its part of the decrease made at EstimateAt (zero:
	// none).
	Estimate   int
	EstimateAt time.Time
}

// Normalize checks the parameters: a peer and backend names of 1 to
// MaxPacingName bytes of UTF-8 without NUL, demand and estimate not
// negative, a finite positive RateCap with RateAt and a RateFloor from 0
// to it, at most
// MaxPacingUpdates updates and a PeerTTL not negative. Times are cut to
// microseconds, in UTC; a rate or estimate without its time is dropped.
func (p PacingSyncParams) Normalize() (PacingSyncParams, error) {
	if p.PeerTTL < 0 {
		return p, invalidField("peer_ttl", "must not be negative")
	}
	if p.PeerTTL == 0 {
		p.PeerTTL = DefaultPacingPeerTTL
	}
	if len(p.Updates) > MaxPacingUpdates {
		return p, invalidField("updates", "%d updates, more than %d", len(p.Updates), MaxPacingUpdates)
	}
	if len(p.Updates) > 0 {
		if err := checkPacingName("peer", p.Peer); err != nil {
			return p, err
		}
	}
	ups := make([]PacingUpdate, len(p.Updates))
	for i, u := range p.Updates {
		if err := checkPacingName("backend", u.Backend); err != nil {
			return p, err
		}
		if u.Demand < 0 || u.Estimate < 0 {
			return p, invalidField("demand", "demand and estimate must not be negative")
		}
		if r := u.RateCap; r < 0 || math.IsNaN(r) || math.IsInf(r, 0) || (r == 0 && !u.RateAt.IsZero()) {
			return p, invalidField("rate_cap", "must be a finite positive number with rate_at")
		}
		if r := u.RateFloor; r < 0 || math.IsNaN(r) || r > u.RateCap {
			return p, invalidField("rate_floor", "must be a number from 0 to rate_cap")
		}
		u.PauseUntil = pacingTime(u.PauseUntil)
		u.CooldownUntil = pacingTime(u.CooldownUntil)
		u.RateAt = pacingTime(u.RateAt)
		u.EstimateAt = pacingTime(u.EstimateAt)
		if u.RateAt.IsZero() {
			u.RateCap, u.RateFloor = 0, 0
		}
		if u.EstimateAt.IsZero() {
			u.Estimate = 0
		}
		ups[i] = u
	}
	// By backend: concurrent syncs then lock the rows of several
	// backends in one order.
	slices.SortStableFunc(ups, func(a, b PacingUpdate) int { return strings.Compare(a.Backend, b.Backend) })
	p.Updates = ups
	return p, nil
}

func checkPacingName(field, s string) error {
	switch {
	case s == "":
		return invalidField(field, "required")
	case len(s) > MaxPacingName:
		return invalidField(field, "longer than %d bytes", MaxPacingName)
	case !utf8.ValidString(s):
		return invalidField(field, "not UTF-8")
	case strings.ContainsRune(s, 0):
		return invalidField(field, msgNUL)
	}
	return nil
}

func pacingTime(t time.Time) time.Time {
	if t.IsZero() {
		return t
	}
	return t.UTC().Truncate(time.Microsecond)
}

// News reports whether u changes the backend's shared state (a pause, a
// cooldown or a decrease), beyond the peer's own row.
func (u PacingUpdate) News() bool {
	return !u.PauseUntil.IsZero() || !u.CooldownUntil.IsZero() || !u.RateAt.IsZero()
}

// NormalizeBackend checks the backend of Store.HoldBackend: 1 to
// MaxPacingName bytes of UTF-8 without NUL.
func NormalizeBackend(backend string) (string, error) {
	return backend, checkPacingName("backend", backend)
}
