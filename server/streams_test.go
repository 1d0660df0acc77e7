package server

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/promptkit/promptkit/jobs"
	"github.com/promptkit/promptkit/server/internal/auth"
)

// recheckOften makes streams look at their identity every few
// milliseconds, so a test waits for a revocation to end a stream briefly.
func recheckOften(c *Config) { c.TokenRecheck = 5 * time.Millisecond }

// mustEnd reads s until it ends and fails unless the server ended it: a
// clean end of the body, not the test's deadlock guard, and no event
// after the end was due.
func (s *stream) mustEnd(what string) {
	s.t.Helper()
	for {
		ev, ok := s.next()
		if !ok {
			break
		}
		s.t.Errorf("%s: an event after the end was due: %+v", what, ev.data)
	}
	if err := s.lines.Err(); err != nil {
		s.t.Fatalf("%s: the stream did not end by the server's hand: %v", what, err)
	}
}

// TestRevokeEndsStreams: revoking a token ends its open streams, however
// they were opened (bearer header or ticket), and voids its unspent
// tickets; another token's stream goes on.
func TestRevokeEndsStreams(t *testing.T) {
	onStores(t, jobs.Options{}, func(t *testing.T, e *env) {
		ann := e.token("acme", "ann", jobs.RoleMember)
		bob := e.token("acme", "bob", jobs.RoleMember)
		byHeader := e.openStream(ann, "")
		byTicket := e.mustStream(ticketQuery(e.ticket(ann).Ticket, ""))
		unspent := e.ticket(ann)
		bobs := e.openStream(bob, "")

		tok, err := e.st.TokenByHash(context.Background(), jobs.HashToken(ann))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := e.st.RevokeToken(context.Background(), tok.ID); err != nil {
			t.Fatal(err)
		}
		byHeader.mustEnd("the revoked token's stream")
		byTicket.mustEnd("the revoked token's ticket stream")
		if _, r := e.streamQuery(ticketQuery(unspent.Ticket, "")); r.code != 401 {
			t.Errorf("a ticket of a revoked token: %d %s", r.code, r.body)
		}

		sub := e.submit(bob, map[string]any{"text": "still here"})
		if got, _ := collect(bobs, 1); got[0] != sub.JobID+">queued" {
			t.Fatalf("bob's stream: %v", got)
		}
	}, recheckOften)
}

// TestLocalModeEndEndsStreams: a stream opened without a token in local
// mode ends once a token exists, as a request without one would then be
// refused.
func TestLocalModeEndEndsStreams(t *testing.T) {
	onStores(t, jobs.Options{}, func(t *testing.T, e *env) {
		s := e.openStream("", "")
		e.token("acme", "ann", jobs.RoleAdmin)
		// Local mode trusts its last look at the tokens for auth.TokensTTL.
		e.clock.Advance(auth.TokensTTL)
		s.mustEnd("the local stream")
	}, recheckOften)
}

// TestBurstKeepsStream: a burst far larger than a stream's buffer does
// not end the stream: the stream falls behind, catches up from the store
// and goes on live, every event once and in order.
func TestBurstKeepsStream(t *testing.T) {
	onStores(t, jobs.Options{}, func(t *testing.T, e *env) {
		s := e.openStream("", "")
		const n = 300
		ps := make([]jobs.EnqueueParams, n)
		for i := range ps {
			ps[i] = jobs.EnqueueParams{OrgID: LocalOrg, CreatedBy: LocalUser, Text: fmt.Sprint("burst ", i)}
		}
		subs, err := e.st.EnqueueBatch(context.Background(), ps)
		if err != nil {
			t.Fatal(err)
		}
		var want []string
		for _, sub := range subs {
			want = append(want, sub.JobID+">queued")
		}
		got, _ := collect(s, n)
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("the burst:\n got %v\nwant %v", got, want)
		}
		after := e.submit("", map[string]any{"text": "after the burst"})
		if got, _ := collect(s, 1); got[0] != after.JobID+">queued" {
			t.Fatalf("after the burst: %v", got)
		}
	}, func(c *Config) { c.sseBuffer = 1 })
}
