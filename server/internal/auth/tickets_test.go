package auth

import (
	"fmt"
	"testing"
	"time"

	"github.com/promptkit/promptkit/jobs"
)

// TestStreamTicketsBounded: expired tickets are dropped when one is
// added; beyond maxTickets live ones, issuing stops until some expire.
func TestStreamTicketsBounded(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
	tk := newTickets(func() time.Time { return now })
	id := Identity{Org: "o", User: "u", Role: jobs.RoleMember, Key: "k"}
	var first string
	for i := range maxTicketsPerIdentity {
		s, _, err := tk.issue(id)
		if err != nil {
			t.Fatalf("ticket %d: %v", i, err)
		}
		if i == 0 {
			first = s
		}
	}
	if _, _, err := tk.issue(id); err != errTooManyTickets {
		t.Fatalf("ticket %d of one identity: %v, want errTooManyTickets", maxTicketsPerIdentity+1, err)
	}
	// Others still get tickets, up to the server's bound.
	for i := maxTicketsPerIdentity; i < maxTickets; i++ {
		other := Identity{Org: "o", User: "u", Role: jobs.RoleMember, Key: fmt.Sprint("k", i/maxTicketsPerIdentity)}
		if _, _, err := tk.issue(other); err != nil {
			t.Fatalf("ticket %d: %v", i, err)
		}
	}
	if _, _, err := tk.issue(Identity{Key: "new"}); err != errTooManyTickets {
		t.Fatalf("ticket %d: %v, want errTooManyTickets", maxTickets+1, err)
	}
	now = now.Add(TicketTTL)
	s, _, err := tk.issue(id)
	if err != nil {
		t.Fatalf("after expiry: %v", err)
	}
	if n, k := len(tk.byID), len(tk.perKey); n != 1 || k != 1 {
		t.Errorf("%d tickets of %d identities held after the others expired, want 1 of 1", n, k)
	}
	if _, err := tk.redeem(first); err == nil {
		t.Error("an expired, dropped ticket was accepted")
	}
	if got, err := tk.redeem(s); err != nil || got != id {
		t.Errorf("redeem: %+v %v", got, err)
	}
	if _, err := tk.redeem(s); err == nil {
		t.Error("a spent ticket was accepted")
	}
}
