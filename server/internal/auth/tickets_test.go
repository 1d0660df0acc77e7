package auth

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/promptkit/promptkit/jobs"
)

// TestStreamTicketsBounded: expired tickets are dropped when one is
// added; beyond a bound (the identity's, its org's, the server's) live
// ones, issuing stops for whoever reached it until some expire.
func TestStreamTicketsBounded(t *testing.T) {
	t.Parallel()
	lim := DefaultTicketShares
	now := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
	tk := newTickets(func() time.Time { return now }, lim)
	id := Identity{Org: "o0", User: "u", Role: jobs.RoleMember, Key: "k"}
	var first string
	for i := range lim.PerIdentity {
		s, _, err := tk.issue(id)
		if err != nil {
			t.Fatalf("ticket %d: %v", i, err)
		}
		if i == 0 {
			first = s
		}
	}
	if _, _, err := tk.issue(id); !full(err, "the token's limit of 100 ") {
		t.Fatalf("ticket %d of one identity: %v, want the token's limit", lim.PerIdentity+1, err)
	}
	// Others still get tickets, up to the server's bound: each org up to
	// its own.
	for i := lim.PerIdentity; i < lim.Total; i++ {
		other := Identity{Org: fmt.Sprint("o", i/lim.PerOrg), User: "u", Role: jobs.RoleMember, Key: fmt.Sprint("k", i/lim.PerIdentity)}
		if _, _, err := tk.issue(other); err != nil {
			t.Fatalf("ticket %d: %v", i, err)
		}
	}
	if _, _, err := tk.issue(Identity{Org: "new", Key: "new"}); !full(err, "the server's limit of 10000 ") {
		t.Fatalf("ticket %d: %v, want the server's limit", lim.Total+1, err)
	}
	now = now.Add(TicketTTL)
	s, _, err := tk.issue(id)
	if err != nil {
		t.Fatalf("after expiry: %v", err)
	}
	if n, k, o := len(tk.byID), len(tk.held.perKey), len(tk.held.perOrg); n != 1 || tk.held.total != 1 || k != 1 || o != 1 {
		t.Errorf("%d tickets of %d identities of %d orgs held after the others expired, want 1 of 1 of 1", n, k, o)
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
	if len(tk.byID) != 0 || tk.held.total != 0 || len(tk.held.perKey) != 0 || len(tk.held.perOrg) != 0 {
		t.Errorf("counts left after every ticket was spent: %+v", tk.held)
	}
}

// full reports whether err is issue's refusal naming the bound want.
func full(err error, want string) bool {
	var f *ticketsFull
	return errors.As(err, &f) && strings.HasPrefix(f.Error(), want)
}

// TestStreamTicketsFairPerOrg is issue 40's reproduction: an org admin
// mints 101 tokens and takes tickets with each until refused; the org is
// refused at its share, and a member of another org still gets a ticket.
// Spending one gives the org a place again.
func TestStreamTicketsFairPerOrg(t *testing.T) {
	t.Parallel()
	lim := DefaultTicketShares
	now := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
	tk := newTickets(func() time.Time { return now }, lim)
	taken, refused := 0, 0
	var one string
	for tok := range 101 {
		id := Identity{Org: "hog", User: fmt.Sprint("u", tok), Role: jobs.RoleMember, Key: fmt.Sprint("tok", tok)}
		for {
			s, _, err := tk.issue(id)
			if err != nil {
				if !full(err, "the token's") && !full(err, "the organisation's limit of 1000 ") {
					t.Fatalf("token %d: %v", tok, err)
				}
				refused++
				break
			}
			one = s
			taken++
		}
	}
	if taken != lim.PerOrg {
		t.Fatalf("one org took %d tickets, want its share of %d", taken, lim.PerOrg)
	}
	member := Identity{Org: "other", User: "ann", Role: jobs.RoleMember, Key: "ann"}
	if _, _, err := tk.issue(member); err != nil {
		t.Fatalf("another org's member after the hog: %v", err)
	}
	if _, err := tk.redeem(one); err != nil {
		t.Fatal(err)
	}
	if _, _, err := tk.issue(Identity{Org: "hog", Key: "tok100"}); err != nil {
		t.Fatalf("the hog after one of its tickets was spent: %v", err)
	}
}
