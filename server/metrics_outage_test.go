package server

import (
	"net/http"
	"strings"
	"testing"

	"github.com/promptkit/promptkit/internal/metrics"
	"github.com/promptkit/promptkit/jobs"
	"github.com/promptkit/promptkit/server/internal/auth"
)

// withStoreMetrics serves the real metrics of the env's store, as serve
// does, on the API's address with the default access (auth).
func withStoreMetrics() option {
	return func(c *Config) {
		c.Metrics = metrics.New(c.Store, metrics.Options{Now: c.Now, Logger: c.Logger})
	}
}

// outage makes the database unreachable for the rest of the test: the
// store is closed, so every call fails as a lost connection does; and the
// clock moves past the server's last look at the tokens.
func (e *env) outage() {
	e.t.Helper()
	if err := e.st.Close(); err != nil {
		e.t.Fatal(err)
	}
	e.clock.Advance(2 * auth.TokensTTL)
}

// storeDown reports whether an answer is the metrics saying the store is
// down.
func storeDown(r resp) bool {
	return r.code == http.StatusOK && strings.Contains(string(r.body), "\npromptkit_store_up 0")
}

// TestMetricsWhileStoreDown: /metrics on the API's address answers while
// the database is down, with promptkit_store_up 0 — in local mode, and
// for a token this process checked before the outage. What cannot be
// checked without the database is a 503, never a 500 and never access.
func TestMetricsWhileStoreDown(t *testing.T) {
	t.Run("local mode", func(t *testing.T) {
		onStores(t, jobs.Options{}, func(t *testing.T, e *env) {
			if r := e.call("GET", "/metrics", "", nil); r.code != http.StatusOK || !strings.Contains(string(r.body), "\npromptkit_store_up 1") {
				t.Fatalf("before the outage: %d %s", r.code, r.body)
			}
			e.outage()
			if r := e.call("GET", "/metrics", "", nil); !storeDown(r) {
				t.Fatalf("local mode, database down: %d %s, want 200 with promptkit_store_up 0", r.code, r.body)
			}
			// The local-mode guard still holds: a page on another name
			// gets nothing.
			req, _ := http.NewRequest("GET", e.srv.URL()+"/metrics", nil)
			req.Host = "attacker.example"
			if r := e.send(req); r.code != http.StatusForbidden {
				t.Errorf("local mode, database down, foreign Host: %d, want 403", r.code)
			}
			if strings.Contains(e.logs.String(), "level=ERROR msg=\"request failed\"") {
				t.Errorf("a scrape failed while the database was down:\n%s", e.logs.String())
			}
		}, withStoreMetrics())
	})
	t.Run("tokens", func(t *testing.T) {
		onStores(t, jobs.Options{}, func(t *testing.T, e *env) {
			admin := e.token("acme", "root", jobs.RoleAdmin)
			member := e.token("acme", "ann", jobs.RoleMember)
			unseen := e.token("acme", "quiet", jobs.RoleAdmin)
			revoked := e.token("acme", "gone", jobs.RoleAdmin)
			for _, tok := range []string{admin, revoked} {
				if r := e.call("GET", "/metrics", tok, nil); r.code != http.StatusOK {
					t.Fatalf("before the outage: %d %s", r.code, r.body)
				}
			}
			if r := e.call("GET", "/metrics", member, nil); r.code != http.StatusForbidden {
				t.Fatalf("member before the outage: %d, want 403", r.code)
			}
			ts, err := e.st.ListTokens(t.Context(), "acme")
			if err != nil {
				t.Fatal(err)
			}
			for _, tk := range ts {
				if tk.UserID == "gone" {
					if _, err := e.st.RevokeToken(t.Context(), tk.ID); err != nil {
						t.Fatal(err)
					}
				}
			}
			if r := e.call("GET", "/metrics", revoked, nil); r.code != http.StatusUnauthorized {
				t.Fatalf("revoked token before the outage: %d, want 401", r.code)
			}

			e.outage()
			if r := e.call("GET", "/metrics", admin, nil); !storeDown(r) {
				t.Fatalf("admin token, database down: %d %s, want 200 with promptkit_store_up 0", r.code, r.body)
			}
			// With tokens the local-mode guard does not apply, also while
			// the database is down: a scraper may use any name.
			req, _ := http.NewRequest("GET", e.srv.URL()+"/metrics", nil)
			req.Host = "promptkit.internal"
			req.Header.Set("Authorization", "Bearer "+admin)
			if r := e.send(req); !storeDown(r) {
				t.Errorf("admin token by name, database down: %d %s, want the metrics", r.code, r.body)
			}
			if r := e.call("GET", "/metrics", member, nil); r.code != http.StatusForbidden {
				t.Errorf("member token, database down: %d %s, want 403", r.code, r.body)
			}
			for name, tok := range map[string]string{"no token": "", "unknown token": "pk_nope", "a token not checked before": unseen, "a revoked token": revoked} {
				r := e.call("GET", "/metrics", tok, nil)
				if r.code != http.StatusServiceUnavailable || r.errorCode(t) != "unavailable" || r.header.Get("Retry-After") == "" {
					t.Errorf("%s, database down: %d %s, want 503 unavailable with Retry-After", name, r.code, r.body)
				}
				if strings.Contains(string(r.body), "promptkit_") {
					t.Errorf("%s: the refusal holds metrics", name)
				}
			}
			if strings.Contains(e.logs.String(), "level=ERROR msg=\"request failed\"") {
				t.Errorf("a scrape failed with a 500 while the database was down:\n%s", e.logs.String())
			}
			// Any other route still needs the database.
			if r := e.call("GET", "/v1/prompts", admin, nil); r.code < 500 {
				t.Errorf("GET /v1/prompts, database down: %d, want a 5xx", r.code)
			}
		}, withStoreMetrics())
	})
}
