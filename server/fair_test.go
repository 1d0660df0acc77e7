package server

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/promptkit/promptkit/jobs"
	"github.com/promptkit/promptkit/server/internal/admin"
	"github.com/promptkit/promptkit/server/internal/auth"
	"github.com/promptkit/promptkit/server/internal/events"
)

// Issue 40, defect 3: one org must not take what every other org needs.
// Each test is the reproduction with small bounds: an org admin mints
// tokens through the API and takes with each until refused; the refusal
// names the org's bound, and another org's member still gets served.

// mint has the admin boss create n member tokens of its org through POST
// /v1/admin/tokens and returns their secrets.
func (e *env) mint(boss string, n int) []string {
	e.t.Helper()
	var out []string
	for i := range n {
		r := e.call("POST", "/v1/admin/tokens", boss, map[string]any{"user": fmt.Sprint("minted", i)})
		if r.code != http.StatusCreated {
			e.t.Fatalf("minting token %d: %d %s", i, r.code, r.body)
		}
		var c admin.CreatedToken
		r.decode(e.t, &c)
		out = append(out, c.Secret)
	}
	return out
}

// mustLimit fails unless r is a 429 naming want with the Retry-After
// retry.
func mustLimit(t *testing.T, what string, r resp, want, retry string) {
	t.Helper()
	var body apiError
	r.decode(t, &body)
	if r.code != http.StatusTooManyRequests || body.Error.Code != "rate_limited" || !strings.HasPrefix(body.Error.Message, want) ||
		r.header.Get("Retry-After") != retry {
		t.Fatalf("%s: %d Retry-After %q %s; want 429 naming %q, Retry-After %s", what, r.code, r.header.Get("Retry-After"), r.body, want, retry)
	}
}

func TestFairStreamTickets(t *testing.T) {
	onStores(t, jobs.Options{}, func(t *testing.T, e *env) {
		boss := e.token("hog", "boss", jobs.RoleAdmin)
		taken := 0
		var refused resp
		for _, tok := range append(e.mint(boss, 5), boss) {
			for {
				r := e.call("POST", "/v1/events/ticket", tok, nil)
				if r.code != http.StatusOK {
					refused = r
					break
				}
				taken++
			}
		}
		if taken != 10 {
			t.Fatalf("one org's 6 tokens took %d tickets, want the org's 10", taken)
		}
		mustLimit(t, "the org's tickets", refused, "the organisation's limit of 10 unspent stream tickets is reached", "60")
		ann := e.token("acme", "ann", jobs.RoleMember)
		s := e.mustStream(ticketQuery(e.ticket(ann).Ticket, ""))
		sub := e.submit(ann, map[string]any{"text": "still served"})
		if got, _ := collect(s, 1); got[0] != sub.JobID+">queued" {
			t.Fatalf("the other org's stream: %v", got)
		}
	}, func(c *Config) { c.fair.tickets = auth.Shares{Total: 40, PerOrg: 10, PerIdentity: 4} })
}

// tryStream opens /v1/events with a bearer token: the stream when it
// opened, else the refusal.
func (e *env) tryStream(token string) (*stream, resp) {
	e.t.Helper()
	return e.dialEvents(nil, http.Header{"Authorization": {"Bearer " + token}})
}

func TestFairEventStreams(t *testing.T) {
	onStores(t, jobs.Options{}, func(t *testing.T, e *env) {
		boss := e.token("hog", "boss", jobs.RoleAdmin)
		minted := e.mint(boss, 3)
		// A token alone is held to its own bound first.
		for range 2 {
			if s, r := e.tryStream(minted[0]); s == nil {
				t.Fatalf("stream: %d %s", r.code, r.body)
			}
		}
		s, r := e.tryStream(minted[0])
		if s != nil {
			t.Fatal("a token opened a stream past its bound")
		}
		mustLimit(t, "the token's streams", r, "the token's limit of 2 open event streams is reached", "25")
		opened := 2
		for _, tok := range append(minted[1:], boss) {
			// Bounded: without the bounds every stream would open.
			for range 10 {
				s, r2 := e.tryStream(tok)
				if s == nil {
					r = r2
					break
				}
				opened++
			}
		}
		if opened != 5 {
			t.Fatalf("one org's 4 tokens opened %d streams, want the org's 5", opened)
		}
		mustLimit(t, "the org's streams", r, "the organisation's limit of 5 open event streams is reached", "25")
		ann := e.token("acme", "ann", jobs.RoleMember)
		s, r = e.tryStream(ann)
		if s == nil {
			t.Fatalf("another org's member after the hog: %d %s", r.code, r.body)
		}
		sub := e.submit(ann, map[string]any{"text": "still served"})
		if got, _ := collect(s, 1); got[0] != sub.JobID+">queued" {
			t.Fatalf("the other org's stream: %v", got)
		}
	}, func(c *Config) { c.fair.streams = auth.Shares{Total: 20, PerOrg: 5, PerIdentity: 2} })
}

func TestFairSubmitBurst(t *testing.T) {
	onStores(t, jobs.Options{}, func(t *testing.T, e *env) {
		boss := e.token("hog", "boss", jobs.RoleAdmin)
		admitted := 0
		var r resp
		for _, tok := range append(e.mint(boss, 4), boss) {
			for {
				r = e.call("POST", "/v1/prompts", tok, `{"text": "x"}`)
				if r.code != http.StatusAccepted {
					break
				}
				admitted++
			}
		}
		if admitted != 6 {
			t.Fatalf("one org's 5 tokens had %d submissions admitted, want the org's burst of 6", admitted)
		}
		mustLimit(t, "the org's burst", r, "the organisation's submission rate of 1 a second, in bursts of 6 is reached", "1")
		// The OpenAI routes take from the same buckets, and name the
		// bound in OpenAI's shape.
		r = e.call("POST", "/v1/embeddings", boss, `{"model": "default", "input": "x"}`)
		if er := r.oaErr(t); r.code != http.StatusTooManyRequests || deref(er.Code) != "rate_limit_exceeded" ||
			er.Message != "The organisation's submission rate of 1 a second, in bursts of 6 is reached; retry after the Retry-After delay." {
			t.Fatalf("embeddings over the org's burst: %d %s", r.code, r.body)
		}
		ann := e.token("acme", "ann", jobs.RoleMember)
		e.submit(ann, map[string]any{"text": "still served"})
		e.clock.Advance(time.Second)
		e.submit(boss, map[string]any{"text": "the org's bucket refilled"})
	}, func(c *Config) { c.SubmitRate, c.SubmitBurst, c.OrgSubmitRate, c.OrgSubmitBurst = 1, 2, 1, 6 })
}

func TestFairTokenCreation(t *testing.T) {
	onStores(t, jobs.Options{}, func(t *testing.T, e *env) {
		boss := e.token("hog", "boss", jobs.RoleAdmin)
		e.mint(boss, 3)
		r := e.call("POST", "/v1/admin/tokens", boss, map[string]any{"user": "one-more"})
		mustLimit(t, "minting past the rate", r, "the organisation's token creation rate of 3 a minute is reached", "20")
		// Another org's admin and an operator are not held up by it.
		e.mint(e.token("acme", "ann", jobs.RoleAdmin), 1)
		op := e.token("ops", "olga", jobs.RoleOperator)
		if r := e.call("POST", "/v1/admin/tokens", op, map[string]any{"org": "hog", "user": "by-operator"}); r.code != http.StatusCreated {
			t.Fatalf("an operator's token for the org: %d %s", r.code, r.body)
		}
		// The org now holds 5 live tokens, its bound: past the rate's
		// wait, its admin is refused until one is revoked.
		e.clock.Advance(20 * time.Second)
		r = e.call("POST", "/v1/admin/tokens", boss, map[string]any{"user": "one-more"})
		if r.code != http.StatusConflict || r.errorCode(t) != "conflict" ||
			!strings.Contains(string(r.body), "the organisation's limit of 5 live tokens is reached") {
			t.Fatalf("past the live tokens: %d %s", r.code, r.body)
		}
		var l admin.TokenList
		e.call("GET", "/v1/admin/tokens", boss, nil).decode(t, &l)
		if r := e.call("POST", "/v1/admin/tokens/"+l.Tokens[len(l.Tokens)-1].ID+"/revoke", boss, nil); r.code != http.StatusOK {
			t.Fatalf("revoke: %d %s", r.code, r.body)
		}
		e.mint(boss, 1)
	}, func(c *Config) { c.fair.tokens = auth.TokenLimits{PerMinute: 3, Live: 5} })
}

// TestFairDefaults: the bounds documented are the ones served.
func TestFairDefaults(t *testing.T) {
	t.Parallel()
	c, err := Config{Store: oasFakeStore{}}.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	if c.SubmitRate != 20 || c.SubmitBurst != 100 || c.OrgSubmitRate != 100 || c.OrgSubmitBurst != 500 {
		t.Errorf("submissions: %v/%d a token, %v/%d an org", c.SubmitRate, c.SubmitBurst, c.OrgSubmitRate, c.OrgSubmitBurst)
	}
	if c, _ := (Config{Store: oasFakeStore{}, SubmitRate: -1}).withDefaults(); c.OrgSubmitRate >= 0 {
		t.Errorf("no limit per token, yet %v an org", c.OrgSubmitRate)
	}
	if d := auth.DefaultTicketShares; d != (auth.Shares{Total: 10000, PerOrg: 1000, PerIdentity: 100}) {
		t.Errorf("tickets %+v", d)
	}
	if d := events.DefaultStreamShares; d != (auth.Shares{Total: 10000, PerOrg: 1000, PerIdentity: 100}) {
		t.Errorf("streams %+v", d)
	}
	if d := auth.DefaultTokenLimits; d != (auth.TokenLimits{PerMinute: 20, Live: 1000}) {
		t.Errorf("tokens %+v", d)
	}
}
