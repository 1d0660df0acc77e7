package server

import (
	"context"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/promptkit/promptkit"
	"github.com/promptkit/promptkit/internal/testkit/enginekit"
	"github.com/promptkit/promptkit/jobs"
	"github.com/promptkit/promptkit/server/internal/auth"
)

// ticket asks POST /v1/events/ticket for a ticket with token.
func (e *env) ticket(token string) ticketAnswer {
	e.t.Helper()
	r := e.call("POST", "/v1/events/ticket", token, nil)
	if r.code != http.StatusOK {
		e.t.Fatalf("ticket: %d %s", r.code, r.body)
	}
	if r.header.Get("Cache-Control") != "no-store" {
		e.t.Errorf("ticket: Cache-Control %q, want no-store", r.header.Get("Cache-Control"))
	}
	var a ticketAnswer
	r.decode(e.t, &a)
	return a
}

// streamQuery opens /v1/events with query parameters and no header; it
// returns the stream when the answer is 200, else the failed answer.
func (e *env) streamQuery(q url.Values) (*stream, resp) {
	e.t.Helper()
	return e.dialEvents(q, nil)
}

// mustStream is streamQuery, failing unless the stream opened.
func (e *env) mustStream(q url.Values) *stream {
	e.t.Helper()
	s, r := e.streamQuery(q)
	if s == nil {
		e.t.Fatalf("events with %v: %d %s", q.Has("ticket"), r.code, r.body)
	}
	return s
}

func ticketQuery(ticket string, lastID string) url.Values {
	q := url.Values{"ticket": {ticket}}
	if lastID != "" {
		q.Set("last_event_id", lastID)
	}
	return q
}

func TestStreamTicket(t *testing.T) {
	onStores(t, jobs.Options{}, func(t *testing.T, e *env) {
		ann := e.token("acme", "ann", jobs.RoleMember)

		// A ticket is random, expires after auth.TicketTTL by the server's
		// clock, and streams the caller's events without a header.
		a := e.ticket(ann)
		if !strings.HasPrefix(a.Ticket, auth.TicketPrefix) || len(a.Ticket) < len(auth.TicketPrefix)+22 {
			t.Fatalf("ticket %q", a.Ticket)
		}
		if want := e.clock.Now().Add(auth.TicketTTL); !a.ExpiresAt.Equal(want) {
			t.Errorf("expires_at %v, want %v", a.ExpiresAt, want)
		}
		if b := e.ticket(ann); b.Ticket == a.Ticket {
			t.Fatal("two tickets are equal")
		}
		s := e.mustStream(ticketQuery(a.Ticket, ""))
		sub := e.submit(ann, map[string]any{"text": "by ticket"})
		if got, _ := collect(s, 1); got[0] != sub.JobID+">queued" {
			t.Fatalf("event %v", got)
		}

		// Single use: the same ticket again is 401, even while its first
		// stream is open.
		if _, r := e.streamQuery(ticketQuery(a.Ticket, "")); r.code != 401 || r.errorCode(t) != "unauthorized" || r.header.Get("WWW-Authenticate") == "" {
			t.Errorf("spent ticket: %d %s", r.code, r.body)
		}
		// Wrong, empty or token-shaped tickets are 401; a ticket
		// parameter is never ignored in favour of a valid header.
		for _, bad := range []string{"", "pkt_nope", ann} {
			if _, r := e.streamQuery(ticketQuery(bad, "")); r.code != 401 {
				t.Errorf("ticket %q: %d %s", bad, r.code, r.body)
			}
		}
		r := e.call("GET", "/v1/events?ticket=pkt_nope", ann, nil)
		if r.code != 401 {
			t.Errorf("bad ticket with a valid bearer token: %d", r.code)
		}
		// Without a ticket or a token (not in local mode: a token exists):
		// 401, and so is asking for a ticket.
		if _, r := e.streamQuery(url.Values{}); r.code != 401 {
			t.Errorf("no ticket, no token: %d", r.code)
		}
		if r := e.call("POST", "/v1/events/ticket", "", nil); r.code != 401 {
			t.Errorf("ticket without a token: %d", r.code)
		}
		if r := e.call("POST", "/v1/events/ticket", "pk_nope", nil); r.code != 401 {
			t.Errorf("ticket with an unknown token: %d", r.code)
		}

		// Expiry: valid until just before expires_at, refused from then.
		early, late := e.ticket(ann), e.ticket(ann)
		e.clock.Advance(auth.TicketTTL - time.Nanosecond)
		e.mustStream(ticketQuery(early.Ticket, ""))
		e.clock.Advance(time.Nanosecond)
		if _, r := e.streamQuery(ticketQuery(late.Ticket, "")); r.code != 401 {
			t.Errorf("expired ticket: %d", r.code)
		}
	})
}

// TestStreamTicketTenancy: a ticket acts as the identity that asked for
// it, never as another org or user.
func TestStreamTicketTenancy(t *testing.T) {
	onStores(t, jobs.Options{}, func(t *testing.T, e *env) {
		ann := e.token("acme", "ann", jobs.RoleMember)
		bob := e.token("acme", "bob", jobs.RoleMember)
		boss := e.token("acme", "boss", jobs.RoleAdmin)
		zed := e.token("other", "zed", jobs.RoleAdmin)

		annStream := e.mustStream(ticketQuery(e.ticket(ann).Ticket, ""))
		bossStream := e.mustStream(ticketQuery(e.ticket(boss).Ticket, ""))
		zedStream := e.mustStream(ticketQuery(e.ticket(zed).Ticket, ""))
		// Events are in order: anything another identity's stream should
		// not see would come before what it should.
		o := e.submit(zed, map[string]any{"text": "other org"})
		b := e.submit(bob, map[string]any{"text": "bob's"})
		a := e.submit(ann, map[string]any{"text": "ann's"})
		if got, _ := collect(annStream, 1); got[0] != a.JobID+">queued" {
			t.Errorf("ann's ticket streamed %v, want only ann's job %s", got, a.JobID)
		}
		if got, _ := collect(bossStream, 2); fmt.Sprint(got) != fmt.Sprint([]string{b.JobID + ">queued", a.JobID + ">queued"}) {
			t.Errorf("the admin's ticket streamed %v, want its org's jobs %s %s", got, b.JobID, a.JobID)
		}
		// Zed's stream sees its own job; the next event after it must be
		// zed's again, not acme's.
		o2 := e.submit(zed, map[string]any{"text": "other org again"})
		if got, _ := collect(zedStream, 2); fmt.Sprint(got) != fmt.Sprint([]string{o.JobID + ">queued", o2.JobID + ">queued"}) {
			t.Errorf("the other org's ticket streamed %v, want %s %s", got, o.JobID, o2.JobID)
		}

		// A replay with a ticket is the ticket identity's too.
		all := e.mustStream(ticketQuery(e.ticket(ann).Ticket, "0"))
		e.submit(ann, map[string]any{"text": "marker"})
		if got, _ := collect(all, 2); got[0] != a.JobID+">queued" {
			t.Errorf("ann's replay from 0 streamed %v, want ann's jobs only", got)
		}
	})
}

// TestEventsLastEventIDParameter: ?last_event_id= replays like the
// header, for a client that opens a new stream with a new ticket; the
// header wins when both are sent.
func TestEventsLastEventIDParameter(t *testing.T) {
	onStores(t, jobs.Options{}, func(t *testing.T, e *env) {
		tok := e.token("acme", "ann", jobs.RoleMember)
		s := e.mustStream(ticketQuery(e.ticket(tok).Ticket, ""))
		a := e.submit(tok, map[string]any{"text": "a"})
		e.finish(a.JobID, "ok")
		got, last := collect(s, 1) // a>queued
		s.close()
		b := e.submit(tok, map[string]any{"text": "b"}) // missed

		s = e.mustStream(ticketQuery(e.ticket(tok).Ticket, last))
		c := e.submit(tok, map[string]any{"text": "c"}) // live after the replay
		more, _ := collect(s, 4)
		got = append(got, more...)
		want := append(append(lifecycle(a.JobID), b.JobID+">queued"), c.JobID+">queued")
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("across the reconnect:\n got %v\nwant %v", got, want)
		}

		// With a bearer token too, and the header winning.
		r := e.call("GET", "/v1/events?last_event_id=x", tok, nil)
		if r.code != 400 || r.errorCode(t) != "invalid_request" {
			t.Errorf("last_event_id=x: %d %s", r.code, r.body)
		}
		if _, r := e.streamQuery(ticketQuery(e.ticket(tok).Ticket, "-1")); r.code != 400 {
			t.Errorf("last_event_id=-1 with a ticket: %d", r.code)
		}
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		req, _ := http.NewRequestWithContext(ctx, "GET", e.srv.URL()+"/v1/events?last_event_id=x", nil)
		req.Header.Set("Authorization", "Bearer "+tok)
		req.Header.Set("Last-Event-ID", "0")
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != 200 {
			t.Errorf("Last-Event-ID 0 and last_event_id=x: %d, want the header to win", res.StatusCode)
		}
	})
}

// TestTicketsNeverLogged: neither a ticket nor the query holding it
// reaches the log, whatever the request's outcome.
func TestTicketsNeverLogged(t *testing.T) {
	t.Parallel()
	e := setup(t)
	tok := e.token("acme", "ann", jobs.RoleMember)
	a := e.ticket(tok)
	s := e.mustStream(ticketQuery(a.Ticket, ""))
	e.submit(tok, map[string]any{"text": "x"})
	collect(s, 1)
	e.streamQuery(ticketQuery(a.Ticket, "")) // spent: 401
	e.streamQuery(ticketQuery(a.Ticket+"x", "nope"))
	s.close()
	if logs := e.logs.String(); strings.Contains(logs, a.Ticket) || strings.Contains(logs, "ticket=") {
		t.Errorf("a ticket was logged:\n%s", logs)
	}
}

func TestProfiles(t *testing.T) {
	t.Parallel()
	// The simulated engine of the harness.
	e := setup(t)
	r := e.call("GET", "/v1/profiles", "", nil)
	if r.code != 200 {
		t.Fatalf("profiles: %d %s", r.code, r.body)
	}
	var got profileList
	r.decode(t, &got)
	if want := e.eng.Profiles(); !slices.Equal(got.Profiles, want) || len(want) == 0 {
		t.Errorf("profiles %v, want the engine's %v", got.Profiles, want)
	}
	p, err := e.eng.Prepare(context.Background(), promptkit.RunRequest{Text: "x"})
	if err != nil || got.Default != p.ProfileID || !slices.Contains(got.Profiles, got.Default) {
		t.Errorf("default %q, want the engine's %v (%v)", got.Default, p, err)
	}

	for _, c := range []struct {
		name        string
		def         string
		ids         []string // nil: no engine
		profiles    []string
		defaultProf string
	}{
		{"no engine", "", nil, []string{}, ""},
		{"a configured default", "b", []string{"b", "c", "a"}, []string{"a", "b", "c"}, "b"},
		{"the one profile", "", []string{"solo"}, []string{"solo"}, "solo"},
		{"no default profile", "", []string{"x", "y"}, []string{"x", "y"}, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			var eng *promptkit.Engine
			if c.ids != nil {
				eng = engineWith(t, c.def, c.ids...)
			}
			e := setup(t, func(cfg *Config) { cfg.Engine = eng })
			r := e.call("GET", "/v1/profiles", "", nil)
			var got profileList
			r.decode(t, &got)
			if r.code != 200 || !slices.Equal(got.Profiles, c.profiles) || got.Default != c.defaultProf {
				t.Errorf("%d %s, want profiles %v, default %q", r.code, r.body, c.profiles, c.defaultProf)
			}
		})
	}

	// Each profile has a label for people: the configured one, else one
	// made from its id; the ids stay the values.
	t.Run("labels", func(t *testing.T) {
		t.Parallel()
		eng := enginekit.Simulated(t, enginekit.Profiles("default", "long-context", "gpt_4o.mini", "careful"), func(c *promptkit.Config) {
			c.Profiles[3].Label = "Careful (slower, cheaper)"
		})
		e := setup(t, func(cfg *Config) { cfg.Engine = eng })
		var got profileList
		e.call("GET", "/v1/profiles", "", nil).decode(t, &got)
		want := map[string]string{"default": "Default", "long-context": "Long context", "gpt_4o.mini": "Gpt 4o mini", "careful": "Careful (slower, cheaper)"}
		if !maps.Equal(got.Labels, want) {
			t.Errorf("labels %v, want %v", got.Labels, want)
		}
	})

	// Like every /v1 route, it needs an identity.
	tok := e.token("acme", "ann", jobs.RoleMember)
	e.clock.Advance(auth.TokensTTL)
	if r := e.call("GET", "/v1/profiles", "", nil); r.code != 401 {
		t.Errorf("without a token: %d", r.code)
	}
	if r := e.call("GET", "/v1/profiles", tok, nil); r.code != 200 {
		t.Errorf("with a token: %d", r.code)
	}
}

// engineWith is an engine with these profiles on the simulated backend
// and def as Config.DefaultProfile.
func engineWith(t *testing.T, def string, ids ...string) *promptkit.Engine {
	t.Helper()
	return enginekit.Simulated(t, enginekit.Profiles(ids...), func(c *promptkit.Config) { c.DefaultProfile = def })
}
