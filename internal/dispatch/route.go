package dispatch

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/promptkit/promptkit/internal/llm"
	"github.com/promptkit/promptkit/pktype"
)

// Routing a model group.
//
// A sequence with Routes (a profile naming several backends) chooses a
// backend for every attempt, so that a retry goes where it can succeed:
//
//   - a backend cooling down (it answered 5xx, timed out, could not be
//     reached, or answered 429 until the retries were exhausted),
//     paused (a provider's Retry-After) or held (an operator's hold,
//     State.Held) is skipped while another is available; a held one
//     counts as free again last of all;
//   - after its cooldown a backend is half-open: one probe at a time
//     goes to it (per process), and only an answer clears it; a probe
//     that fails cools it down again, so a dead backend gets about one
//     request per cooldown window per process, not a burst;
//   - among the available primaries, those with a free active permit are
//     preferred, then the choice is a smooth weighted round-robin (the
//     one nginx uses): deterministic, so healthy backends split the
//     attempts exactly by their weights, spread out rather than in runs;
//   - fallbacks are used, in their order, only when no primary is
//     available; when nothing is, the backend whose cooldown or pause
//     ends first is used rather than failing.
//
// A backend's health (cooldown, half-open) is the backend's, not the
// group's: every group and profile using it sees it, and it is shared
// with other processes like a pause (share.go).

// Route is one backend of a model group and the attempt that calls it.
type Route struct {
	// Backend selects the gate.
	Backend string
	// Weight is the route's share among the primaries; at least 1.
	Weight int
	// Fallback routes are used, in order, only when no primary is
	// available.
	Fallback bool
	// Attempt performs exactly one attempt on Backend. It must be safe to
	// call again.
	Attempt func(context.Context) llm.Outcome
}

// heldHorizon is when a held backend counts as available again, for the
// choice among unavailable ones: later than any pause or cooldown.
const heldHorizon = 100 * 365 * 24 * time.Hour

// DefaultCooldown is Backend.Cooldown when zero.
const DefaultCooldown = 30 * time.Second

// health is a backend's cooldown state; gate.mu guards it.
type health struct {
	coolUntil time.Time
	// unwell: the last verdict was a failure; once coolUntil passes, one
	// probe at a time (probing) may go to the backend until one answers.
	unwell, probing bool
	coolNews        bool // coolUntil not yet published (share.go)
}

// rrState is a group's smooth weighted round-robin: each route's current
// weight.
type rrState struct {
	mu  sync.Mutex
	cur []int
}

// rr returns the round-robin state of group, made for n routes.
func (s *Scheduler) rr(group string, n int) *rrState {
	s.groupsMu.Lock()
	defer s.groupsMu.Unlock()
	st := s.groups[group]
	if st == nil || len(st.cur) != n {
		st = &rrState{cur: make([]int, n)}
		s.groups[group] = st
	}
	return st
}

// availability is a route's state at one instant.
type availability struct {
	ok    bool      // may take the attempt now
	probe bool      // ok as the half-open probe
	until time.Time // when it may again, if not ok
	free  bool      // has a free active permit
}

func (s *Scheduler) availability(backend string, now time.Time) availability {
	g := s.gates[backend]
	if g == nil {
		return availability{ok: true, free: true}
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	a := availability{free: g.maxActive == 0 || g.active.Load() < int64(g.maxActive)}
	blocked := g.health.coolUntil
	if g.pausedUntil.After(blocked) {
		blocked = g.pausedUntil
	}
	switch {
	case g.held:
		// No known end: after every pause and cooldown.
		a.until = now.Add(heldHorizon)
	case blocked.After(now):
		a.until = blocked
	case g.health.unwell && g.health.probing:
		a.until = now.Add(g.cooldown) // unknown: the probe's answer decides
	default:
		a.ok, a.probe = true, g.health.unwell
	}
	return a
}

// choose picks the route of seq's next attempt; probe reports that it
// holds the backend's half-open probe, which settle releases. A sequence
// without Routes, or with one, has nothing to choose.
func (s *Scheduler) choose(seq Sequence) (r Route, probe bool) {
	switch len(seq.Routes) {
	case 0:
		return Route{Backend: seq.Backend, Weight: 1, Attempt: seq.Attempt}, false
	case 1:
		return seq.Routes[0], false
	}
	st := s.rr(seq.Group, len(seq.Routes))
	st.mu.Lock()
	defer st.mu.Unlock()
	for {
		now := s.now()
		av := make([]availability, len(seq.Routes))
		for i, rt := range seq.Routes {
			av[i] = s.availability(rt.Backend, now)
		}
		i := pick(seq.Routes, av, st.cur)
		if !av[i].ok || !av[i].probe {
			return seq.Routes[i], false
		}
		if s.claimProbe(seq.Routes[i].Backend, now) {
			return seq.Routes[i], true
		}
		// Another caller took the probe meanwhile: look again.
	}
}

// pick chooses among routes given their availability, advancing the
// round-robin state cur when it chooses among primaries.
func pick(routes []Route, av []availability, cur []int) int {
	eligible := func(i int) bool { return av[i].ok }
	primaries := false
	freeOnes := false
	for i, rt := range routes {
		if !rt.Fallback && eligible(i) {
			primaries = true
			freeOnes = freeOnes || av[i].free
		}
	}
	if primaries {
		best, total := -1, 0
		for i, rt := range routes {
			if rt.Fallback || !eligible(i) || (freeOnes && !av[i].free) {
				continue
			}
			cur[i] += rt.Weight
			total += rt.Weight
			if best < 0 || cur[i] > cur[best] {
				best = i
			}
		}
		cur[best] -= total
		return best
	}
	first := -1
	for i, rt := range routes {
		if rt.Fallback && eligible(i) {
			if av[i].free {
				return i
			}
			if first < 0 {
				first = i
			}
		}
	}
	if first >= 0 {
		return first
	}
	// Nothing is available: the backend free again first.
	best := 0
	for i := range routes {
		if av[i].until.Before(av[best].until) {
			best = i
		}
	}
	return best
}

// claimProbe takes backend's half-open probe, if it is still free.
func (s *Scheduler) claimProbe(backend string, now time.Time) bool {
	g := s.gates[backend]
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.health.unwell || g.health.probing || g.health.coolUntil.After(now) || g.pausedUntil.After(now) {
		return false
	}
	g.health.probing = true
	return true
}

// unwell reports whether out says that its backend is unwell rather than
// that the request is wrong: a 5xx, or a transport failure (refused
// connection, timeout) not caused by the caller's context ending.
func unwell(ctx context.Context, out llm.Outcome) bool {
	switch {
	case out.Err == nil:
		return false
	case out.StatusCode >= 500:
		return true
	case out.StatusCode == 0 && errors.Is(out.Err, pktype.ErrTransport):
		return ctx.Err() == nil
	}
	return false
}

// settle records what an attempt on backend says about its health: an
// answer (any status but 429 and 5xx) clears it, an unwell failure cools
// it down. probe releases the half-open probe the attempt held.
func (s *Scheduler) settle(ctx context.Context, backend string, probe, dispatched bool, out llm.Outcome) {
	g := s.gates[backend]
	if g == nil {
		return
	}
	switch {
	case !dispatched:
	case unwell(ctx, out):
		s.cool(backend)
	case out.Err == nil || (out.StatusCode != 0 && out.StatusCode != 429):
		g.mu.Lock()
		g.health.unwell = false
		g.mu.Unlock()
	}
	if probe {
		g.mu.Lock()
		g.health.probing = false
		g.mu.Unlock()
	}
}

// cool starts backend's cooldown, unless one is running: failures during
// it do not extend it, so that a busy dead backend publishes one
// cooldown per window.
func (s *Scheduler) cool(backend string) {
	g := s.gates[backend]
	if g == nil {
		return
	}
	now := s.now()
	g.mu.Lock()
	g.health.unwell = true
	news := !g.health.coolUntil.After(now)
	if news {
		g.health.coolUntil = now.Add(g.cooldown)
		g.health.coolNews = true
	}
	g.mu.Unlock()
	if news {
		s.wake()
	}
}

// elsewhere reports whether, with backend just failed, seq's next attempt
// would go to another backend at once: backend is cooling down or
// paused, and another route is available.
func (s *Scheduler) elsewhere(seq Sequence, backend string) bool {
	if len(seq.Routes) < 2 {
		return false
	}
	now := s.now()
	if s.availability(backend, now).ok {
		return false
	}
	for _, rt := range seq.Routes {
		if rt.Backend != backend && s.availability(rt.Backend, now).ok {
			return true
		}
	}
	return false
}
