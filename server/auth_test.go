package server

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/promptkit/promptkit/jobs"
	"github.com/promptkit/promptkit/server/internal/auth"
)

func TestTokensRequiredOnceOneExists(t *testing.T) {
	onStores(t, jobs.Options{}, func(t *testing.T, e *env) {
		if r := e.call("GET", "/v1/prompts", "", nil); r.code != 200 {
			t.Fatalf("loopback with no token: %d", r.code)
		}
		tok := e.token("acme", "ann", jobs.RoleMember)
		// The server looks at the tokens at most once per auth.TokensTTL.
		e.clock.Advance(auth.TokensTTL)
		for _, c := range []struct{ name, token string }{{"none", ""}, {"unknown", "pk_nope"}} {
			r := e.call("GET", "/v1/prompts", c.token, nil)
			if r.code != 401 || r.errorCode(t) != "unauthorized" || r.header.Get("WWW-Authenticate") == "" {
				t.Errorf("%s token: %d %s", c.name, r.code, r.body)
			}
		}
		if r := e.call("GET", "/v1/prompts", tok, nil); r.code != 200 {
			t.Fatalf("valid token: %d", r.code)
		}
		// Health and the document stay open.
		if r := e.call("GET", "/healthz", "", nil); r.code != 200 {
			t.Fatalf("healthz: %d", r.code)
		}
		ts, _ := e.st.ListTokens(context.Background(), "acme")
		if _, err := e.st.RevokeToken(context.Background(), ts[0].ID); err != nil {
			t.Fatal(err)
		}
		if r := e.call("GET", "/v1/prompts", tok, nil); r.code != 401 {
			t.Fatalf("revoked token: %d", r.code)
		}
	})
}

func TestNonLoopbackNeedsTokens(t *testing.T) {
	t.Parallel()
	e := setup(t)
	srv, err := New(Config{Store: e.st, Addr: "0.0.0.0:0"})
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Open(context.Background()); !errors.Is(err, ErrNoAuth) {
		t.Fatalf("Open on 0.0.0.0 without tokens: %v", err)
	}
	srv.Close()
	srv, _ = New(Config{Store: e.st, Addr: "0.0.0.0:0", InsecureNoAuth: true})
	if err := srv.Open(context.Background()); err != nil {
		t.Fatalf("Open with InsecureNoAuth: %v", err)
	}
	srv.Close()
	e.token("o", "u", jobs.RoleAdmin)
	srv, _ = New(Config{Store: e.st, Addr: "0.0.0.0:0"})
	if err := srv.Open(context.Background()); err != nil {
		t.Fatalf("Open with a token: %v", err)
	}
	srv.Close()
}

// TestTenancy walks every endpoint with another org's token, a member of
// the same org and an admin of the org, over one prompt.
func TestTenancy(t *testing.T) {
	onStores(t, jobs.Options{}, func(t *testing.T, e *env) {
		ann := e.token("acme", "ann", jobs.RoleMember)
		bob := e.token("acme", "bob", jobs.RoleMember)
		boss := e.token("acme", "boss", jobs.RoleAdmin)
		eve := e.token("evil", "eve", jobs.RoleAdmin)

		annStream := e.openStream(ann, "")
		eveStream := e.openStream(eve, "")
		bobStream := e.openStream(bob, "")

		done := e.submit(ann, map[string]any{"text": "ann's finished"})
		e.finish(done.JobID, "ann's answer")
		sub := e.submit(ann, map[string]any{"text": "ann's secret"})

		for _, who := range []struct {
			name, token string
			sees        bool
		}{{"owner", ann, true}, {"admin", boss, true}, {"other org", eve, false}, {"other member", bob, false}} {
			t.Run(who.name, func(t *testing.T) {
				want := 404
				if who.sees {
					want = 200
				}
				for _, p := range []string{"/v1/prompts/" + sub.PromptID, "/v1/jobs/" + sub.JobID} {
					if r := e.call("GET", p, who.token, nil); r.code != want {
						t.Errorf("GET %s: %d, want %d", p, r.code, want)
					}
				}
				var page promptList
				e.call("GET", "/v1/prompts", who.token, nil).decode(t, &page)
				var rec recent
				e.call("GET", "/v1/recent", who.token, nil).decode(t, &rec)
				n := 0
				if who.sees {
					n = 2
				}
				if len(page.Prompts) != n || len(rec.Prompts) != n {
					t.Errorf("listing %d and recent %d prompts, want %d", len(page.Prompts), len(rec.Prompts), n)
				}
				if who.sees {
					return
				}
				// Writes on ids it cannot see are 404 too, and change nothing.
				if r := e.call("POST", "/v1/jobs/"+sub.JobID+"/cancel", who.token, nil); r.code != 404 {
					t.Errorf("cancel: %d", r.code)
				}
				if r := e.call("POST", "/v1/prompts/"+done.PromptID+"/retry", who.token, nil); r.code != 404 {
					t.Errorf("retry: %d", r.code)
				}
				// A replay from the start of the log holds none of ann's.
				s := e.openStream(who.token, "0")
				mine := e.submit(who.token, map[string]any{"text": "mine"})
				if ev := s.mustNext(); ev.data.JobID != mine.JobID {
					t.Errorf("replayed stream shows %s, want only its own job %s", ev.data.JobID, mine.JobID)
				}
				s.close()
				j, _ := e.st.GetJob(context.Background(), "", mine.JobID)
				if _, err := e.st.Cancel(context.Background(), jobs.CancelParams{JobID: j.ID}); err != nil {
					t.Fatal(err)
				}
			})
		}
		j, err := e.st.GetJob(context.Background(), "", sub.JobID)
		if err != nil || j.State != jobs.Queued {
			t.Fatalf("ann's job after the walk: %s %v", j.State, err)
		}

		// Live streams: each sees its own events, in order, and none of the
		// others' (the others' events come first in the log).
		for _, c := range []struct {
			s    *stream
			want []string
		}{
			{annStream, []string{done.JobID + ">queued", done.JobID + ">running", done.JobID + ">succeeded", sub.JobID + ">queued"}},
		} {
			var got []string
			for range c.want {
				ev := c.s.mustNext()
				got = append(got, ev.data.JobID+">"+string(ev.data.State))
			}
			if fmt.Sprint(got) != fmt.Sprint(c.want) {
				t.Errorf("ann's stream: %v, want %v", got, c.want)
			}
		}
		// eve's and bob's first events are their own submissions from the
		// walk, though ann's came earlier.
		for _, s := range []*stream{eveStream, bobStream} {
			ev := s.mustNext()
			j, err := e.st.GetJob(context.Background(), "", ev.data.JobID)
			if err != nil || j.CreatedBy == "ann" {
				t.Errorf("a stream got ann's event: %+v", ev.data)
			}
		}
	})
}

// TestTokenPresentedEndsLocalMode: without waiting for the next look at
// the tokens, a request presenting a valid token ends local mode at once,
// and one presenting a revoked token makes the server look again.
func TestTokenPresentedEndsLocalMode(t *testing.T) {
	t.Parallel()
	e := setup(t)
	if r := e.call("GET", "/v1/prompts", "", nil); r.code != 200 {
		t.Fatalf("loopback with no token: %d", r.code)
	}
	tok := e.token("acme", "ann", jobs.RoleMember)
	if r := e.call("GET", "/v1/prompts", tok, nil); r.code != 200 {
		t.Fatalf("valid token: %d", r.code)
	}
	if r := e.call("GET", "/v1/prompts", "", nil); r.code != 401 {
		t.Fatalf("no token after one was presented: %d", r.code)
	}
	ts, _ := e.st.ListTokens(context.Background(), "acme")
	if _, err := e.st.RevokeToken(context.Background(), ts[0].ID); err != nil {
		t.Fatal(err)
	}
	if r := e.call("GET", "/v1/prompts", tok, nil); r.code != 401 {
		t.Fatalf("revoked token: %d", r.code)
	}
	if r := e.call("GET", "/v1/prompts", "", nil); r.code != 200 {
		t.Fatalf("no token, none left, after a revoked one was presented: %d", r.code)
	}
}
