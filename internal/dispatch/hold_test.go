package dispatch

import (
	"testing"
	"time"

	"github.com/promptkit/promptkit/pktype"
)

// An idle process reads the shared state on a wake (a store's change
// notification), at most once a heartbeat, a wake too soon staying
// pending: it learns of an operator's hold, and of its release, without
// callers of its own.
func TestShareIdleReadsHoldOnWake(t *testing.T) {
	t.Parallel()
	c := newClock()
	m := newMemShared()
	s := learnSched(c, Backend{})
	sr := sharing(s, m, "p")
	sr.step(t.Context()) // the first sync reads in any case
	m.mu.Lock()
	m.states["b"] = pktype.SharedPacing{Backend: "b", Held: true}
	m.mu.Unlock()
	sr.step(t.Context())
	if n := m.count(); n != 1 || s.Held("b") {
		t.Fatalf("idle, not woken: %d syncs, held %v; want 1 and not held", n, s.Held("b"))
	}
	sr.woken = true
	sr.step(t.Context())
	if n := m.count(); n != 1 {
		t.Fatalf("woken within a heartbeat of the last read: %d syncs, want 1", n)
	}
	c.Advance(DefaultShareHeartbeat)
	sr.step(t.Context()) // the pending wake
	if n := m.count(); n != 2 || !s.Held("b") || !s.Pacing()["b"].Held {
		t.Fatalf("the pending wake: %d syncs, held %v; want 2 and held", n, s.Held("b"))
	}
	m.mu.Lock()
	m.states["b"] = pktype.SharedPacing{Backend: "b"}
	m.mu.Unlock()
	c.Advance(DefaultShareHeartbeat)
	sr.step(t.Context())
	if n := m.count(); n != 2 {
		t.Fatalf("idle without a wake: %d syncs, want 2", n)
	}
	sr.woken = true
	sr.step(t.Context())
	if s.Held("b") {
		t.Fatal("the release was not adopted")
	}
}

// A held member of a group counts as available after every pause and
// cooldown: the group uses the others, and one cooling down before it.
func TestAvailabilityHeld(t *testing.T) {
	t.Parallel()
	c := newClock()
	s := New(Config{Backends: map[string]Backend{"a": {}, "b": {}}, Now: c.Now, Jitter: jitterNone, Wait: c.Wait})
	s.adopt("p", []pktype.SharedPacing{{Backend: "a", Held: true}, {Backend: "b", CooldownUntil: c.Now().Add(time.Hour)}})
	routes := []Route{{Backend: "a", Weight: 1}, {Backend: "b", Weight: 1}}
	if r, _ := s.choose(Sequence{Group: "g", Routes: routes}); r.Backend != "b" {
		t.Fatalf("held a and b cooling down an hour: chose %s, want b", r.Backend)
	}
	s.adopt("p", []pktype.SharedPacing{{Backend: "a", Held: true}})
	c.Advance(2 * time.Hour)
	for range 3 {
		if r, _ := s.choose(Sequence{Group: "g", Routes: routes}); r.Backend != "b" {
			t.Fatalf("held a: chose %s, want b", r.Backend)
		}
	}
}
