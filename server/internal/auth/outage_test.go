package auth

import (
	"fmt"
	"testing"
	"time"

	"github.com/promptkit/promptkit/jobs"
)

// The remembered tokens are bounded, a token is trusted for OutageTTL
// after its last check and not before it, and a forgotten one is gone.
func TestCredentials(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)
	id := func(i int) Identity {
		return fromToken(jobs.Token{ID: fmt.Sprint(i), OrgID: "acme", Role: jobs.RoleAdmin}, jobs.HashToken(fmt.Sprint("secret-", i)))
	}
	var c credentials
	for i := range maxCredentials + 10 {
		c.remember(id(i), t0)
	}
	if n := len(c.m); n != maxCredentials {
		t.Fatalf("%d remembered, want at most %d", n, maxCredentials)
	}
	last := id(maxCredentials + 9)
	if got, ok := c.recall(last.hash, t0.Add(OutageTTL)); !ok || got != last {
		t.Fatalf("the newest token at OutageTTL: %v %v", got, ok)
	}
	if _, ok := c.recall(last.hash, t0.Add(OutageTTL+time.Second)); ok {
		t.Error("a token trusted past OutageTTL")
	}
	if _, ok := c.recall(last.hash, t0.Add(-time.Second)); ok {
		t.Error("a token trusted before its check (the clock went back)")
	}
	// Full of expired ones: a new one takes their place.
	later := t0.Add(2 * OutageTTL)
	fresh := id(-1)
	c.remember(fresh, later)
	if _, ok := c.recall(fresh.hash, later); !ok || len(c.m) != 1 {
		t.Errorf("after expiry: %d remembered, fresh recalled %v; want 1 and true", len(c.m), ok)
	}
	c.forget(fresh.hash)
	if _, ok := c.recall(fresh.hash, later); ok {
		t.Error("a forgotten token is recalled")
	}
}
