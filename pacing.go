package promptkit

import (
	"context"
	"slices"
	"time"

	"github.com/promptkit/promptkit/internal/dispatch"
	"github.com/promptkit/promptkit/pktype"
)

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

	// Shared is set while the engine shares its pacing with the engines
	// of other processes (Engine.SharePacing). RequestsPerSecond and
	// TokensPerMinute are then provider-wide, the same in every process,
	// and this engine dispatches Share of them: its demand on the backend
	// (callers waiting for it or in flight on it) over the demand of all
	// the Processes present on it, itself included. Share and Processes
	// are 0 when not shared.
	Shared    bool
	Share     float64
	Processes int
	// PausedUntil is when the backend's pause ends: a provider's
	// Retry-After, received by this engine or, when shared, by another.
	// Zero when not paused.
	PausedUntil time.Time
	// CooldownUntil is when the backend's cooldown ends: model groups
	// avoid it until then after it failed as unwell here or, when
	// shared, in another engine (docs/routing.md). Zero when not cooling
	// down. Unwell says its last verdict was a failure: past
	// CooldownUntil, groups send it one probe at a time until one is
	// answered.
	CooldownUntil time.Time
	Unwell        bool
	// Held says an operator holds the backend (SharedPacing.Held, through
	// Engine.SharePacing): nothing new is dispatched to it until it is
	// released; calls in flight finish. A model group skips it; a call
	// with no other backend waits.
	Held bool
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
			Shared:            p.Shared,
			Share:             p.Share,
			Processes:         p.Processes,
			PausedUntil:       p.PausedUntil,
			CooldownUntil:     p.CooldownUntil,
			Unwell:            p.Unwell,
			Held:              p.Held,
		}
	}
	return m
}

// PacingStore is where engines in several processes share their pacing:
// per backend, a pause a provider asked for (Retry-After), the rate
// learned from its 429s, and each process's demand, so that N processes
// calling one provider pace like one. See Engine.SharePacing;
// jobs/worker.PacingStore makes one of a jobs.Store.
type PacingStore interface {
	// SyncPacing records news published by peer (a process) and returns
	// every backend's shared state. The store merges as
	// SharedPacing.Merge says: a pause, and a cooldown, keep the later
	// end; a decrease (LearnedRate) is replaced by a later one; a peer's
	// demand replaces its last one, its estimate too unless older; and a
	// peer not heard from for a few seconds is gone.
	SyncPacing(ctx context.Context, peer string, news []PacingNews) ([]SharedPacing, error)
}

// The shared pacing's values are pktype's: the engine, the stores
// (jobs.Store.SyncPacing) and their drivers speak the same ones.
type (
	// PacingNews is what one process publishes about one backend.
	PacingNews = pktype.PacingNews
	// LearnedRate is a decrease of a provider-wide request rate learned
	// from 429s (see pktype.LearnedRate).
	LearnedRate = pktype.LearnedRate
	// RateEstimate is one process's part of a decrease.
	RateEstimate = pktype.RateEstimate
	// SharedPacing is one backend's shared state;
	// SharedPacing.RequestsPerSecond is the learned provider-wide rate
	// every engine sharing it follows.
	SharedPacing = pktype.SharedPacing
	// PacingPeer is one process present on a backend.
	PacingPeer = pktype.PacingPeer
)

// SharePacingOptions tune Engine.SharePacing. Zero values take the
// defaults.
type SharePacingOptions struct {
	// Peer identifies this engine to the others; defaults to a random
	// UUID.
	Peer string
	// Interval is how often the others' state is read while any backend
	// has callers; defaults to 200ms. News (a pause, a new rate) is
	// published at once.
	Interval time.Duration
	// Heartbeat is how often this engine's demand is published while it
	// has callers; defaults to 1s. A store forgets a peer not heard from
	// for a few heartbeats.
	Heartbeat time.Duration
	// OnSync, if set, is called after each sync with its error, nil on
	// success: a caller reports failures, once per outage.
	OnSync func(error)
	// Wake, if set, hints that the store changed (jobs.Notifier.Notify):
	// the engine then reads the shared state at once (at most every
	// 20ms) rather than at its next Interval, so that a pause another
	// process received reaches this one sooner.
	Wake <-chan struct{}
}

// SharePacing shares this engine's pacing with the engines of other
// processes through st until ctx ends, then returns nil. While it runs:
//
//   - a Retry-After one engine receives pauses the backend in all;
//   - a backend one engine finds unwell cools down in all: their model
//     groups avoid it until the cooldown ends (docs/routing.md);
//   - the rate learned from 429s is provider-wide: every engine follows
//     it, and each dispatches its share of it (its demand on the backend
//     over all engines' demand), and likewise of the configured
//     requests_per_second and tokens_per_minute, which are then limits
//     of the provider, not of each process;
//   - each engine spends only its share of what the provider's
//     rate-limit headers say is left.
//
// Nothing in the request path waits for st: engines publish news at
// once, their demand once a second while they have callers, and read the
// others' every Interval while they have callers. When st fails, the
// engine paces on what it knows and tries again. When ctx ends it tells
// the others it has left. Call it once per engine, in a goroutine of its
// own; an engine without it paces alone, as before.
func (e *Engine) SharePacing(ctx context.Context, st PacingStore, opts SharePacingOptions) error {
	return e.sched.Share(ctx, st, dispatch.ShareOptions(opts))
}

// HeldProfiles returns, sorted, the IDs of the profiles whose every
// backend (primaries and fallbacks) an operator holds, as this engine
// last read the shared pacing (Engine.SharePacing), and "" as well when
// the default profile is one of them: a run with no profile uses it. A
// worker leaves their jobs queued (jobs.ClaimParams.SkipProfiles). It
// takes no lock but the backends' own, so it is cheap enough to call
// before every claim; without holds it returns nil.
func (e *Engine) HeldProfiles() []string {
	var out []string
	for id, p := range e.profiles {
		if e.profileHeld(p) {
			out = append(out, id)
			if id == e.defaultProfile {
				out = append(out, "")
			}
		}
	}
	slices.Sort(out)
	return out
}

// profileHeld reports whether every backend of p is held; a profile with
// none (an LLMClient's) never is.
func (e *Engine) profileHeld(p Profile) bool {
	if len(p.Backends) == 0 {
		return p.Backend != "" && e.sched.Held(p.Backend)
	}
	for _, b := range p.Backends {
		if !e.sched.Held(b.ID) {
			return false
		}
	}
	return true
}
