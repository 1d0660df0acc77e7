package server

import (
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/promptkit/promptkit/jobs"
)

// withMetrics serves the fake metrics with the given access.
func withMetrics(access MetricsAccess) option {
	return func(c *Config) {
		c.Metrics = oasFakeMetrics{}
		c.MetricsAccess = access
	}
}

// scraped reports whether an answer is the metrics themselves.
func scraped(r resp) bool {
	return r.code == http.StatusOK && strings.Contains(string(r.body), "promptkit_up 1")
}

// The default: open in local mode, then an admin token's (any org's: the
// metrics are the deployment's); a member's is 403, none or a bad one 401.
func TestMetricsAuthByDefault(t *testing.T) {
	t.Parallel()
	e := setup(t, withMetrics(""))
	if r := e.call("GET", "/metrics", "", nil); !scraped(r) {
		t.Fatalf("local mode: %d %s, want the metrics", r.code, r.body)
	}

	member := e.token("acme", "ann", jobs.RoleMember)
	admin := e.token("acme", "root", jobs.RoleAdmin)
	otherAdmin := e.token("globex", "root", jobs.RoleAdmin)
	// A member's request proves a token exists: local mode is over.
	if r := e.call("GET", "/metrics", member, nil); r.code != http.StatusForbidden || r.errorCode(t) != "forbidden" {
		t.Errorf("member token: %d %s, want 403 forbidden", r.code, r.body)
	}
	for name, tok := range map[string]string{"no token": "", "unknown token": "pk_nope"} {
		r := e.call("GET", "/metrics", tok, nil)
		if r.code != http.StatusUnauthorized || r.errorCode(t) != "unauthorized" || r.header.Get("WWW-Authenticate") == "" {
			t.Errorf("%s once tokens exist: %d %s, want 401 unauthorized with WWW-Authenticate", name, r.code, r.body)
		}
		if strings.Contains(string(r.body), "promptkit_up") {
			t.Errorf("%s: the refusal holds metrics: %s", name, r.body)
		}
	}
	for name, tok := range map[string]string{"admin": admin, "another org's admin": otherAdmin} {
		if r := e.call("GET", "/metrics", tok, nil); !scraped(r) {
			t.Errorf("%s token: %d %s, want the metrics", name, r.code, r.body)
		}
	}
}

func TestMetricsAuthExplicit(t *testing.T) {
	t.Parallel()
	e := setup(t, withMetrics(MetricsAuth))
	member := e.token("acme", "ann", jobs.RoleMember)
	if r := e.call("GET", "/metrics", member, nil); r.code != http.StatusForbidden {
		t.Errorf("member token: %d, want 403", r.code)
	}
	if r := e.call("GET", "/metrics", "", nil); r.code != http.StatusUnauthorized {
		t.Errorf("no token: %d, want 401", r.code)
	}
}

func TestMetricsOpen(t *testing.T) {
	t.Parallel()
	e := setup(t, withMetrics(MetricsOpen))
	member := e.token("acme", "ann", jobs.RoleMember)
	e.call("GET", "/v1/profiles", member, nil) // local mode is over
	for name, tok := range map[string]string{"no token": "", "member token": member} {
		if r := e.call("GET", "/metrics", tok, nil); !scraped(r) {
			t.Errorf("%s: %d %s, want the metrics", name, r.code, r.body)
		}
	}
}

func TestMetricsOff(t *testing.T) {
	t.Parallel()
	e := setup(t, withMetrics(MetricsOff))
	admin := e.token("acme", "root", jobs.RoleAdmin)
	for name, tok := range map[string]string{"no token": "", "admin token": admin} {
		if r := e.call("GET", "/metrics", tok, nil); r.code != http.StatusNotFound {
			t.Errorf("%s: %d %s, want 404", name, r.code, r.body)
		}
	}
	if slices.Contains(e.srv.patterns, metricsPattern) {
		t.Error("GET /metrics is routed with metrics off")
	}
}

// A metrics address of its own serves the metrics open, and nothing
// else, whatever the API's address does.
func TestMetricsAddr(t *testing.T) {
	t.Parallel()
	e := setup(t, withMetrics(MetricsOff), func(c *Config) { c.MetricsAddr = "127.0.0.1:0" })
	admin := e.token("acme", "root", jobs.RoleAdmin)
	e.call("GET", "/v1/profiles", admin, nil) // local mode is over
	if r := e.call("GET", "/metrics", "", nil); r.code != http.StatusNotFound {
		t.Errorf("/metrics on the API's address: %d, want 404 (off)", r.code)
	}
	base := e.srv.MetricsURL()
	if base == "" || base == e.srv.URL() {
		t.Fatalf("MetricsURL %q (API at %s), want an address of its own", base, e.srv.URL())
	}
	get := func(path string) (int, string) {
		t.Helper()
		res, err := http.Get(base + path)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, err := io.ReadAll(res.Body)
		if err != nil {
			t.Fatal(err)
		}
		return res.StatusCode, string(b)
	}
	if code, body := get("/metrics"); code != http.StatusOK || !strings.Contains(body, "promptkit_up 1") {
		t.Errorf("metrics address without a token: %d %s, want the metrics", code, body)
	}
	for _, path := range []string{"/v1/prompts", "/v1/profiles", "/"} {
		if code, _ := get(path); code != http.StatusNotFound {
			t.Errorf("metrics address %s: %d, want 404 (only /metrics is served there)", path, code)
		}
	}
}

func TestMetricsConfigChecked(t *testing.T) {
	t.Parallel()
	for name, cfg := range map[string]Config{
		"unknown access":           {Store: oasFakeStore{}, Metrics: oasFakeMetrics{}, MetricsAccess: "public"},
		"metrics addr, no metrics": {Store: oasFakeStore{}, MetricsAddr: "127.0.0.1:0"},
	} {
		if _, err := New(cfg); err == nil {
			t.Errorf("%s: New accepted it", name)
		}
	}
	for _, v := range []string{"", "auth", "open", "off"} {
		if _, err := ParseMetricsAccess(v); err != nil {
			t.Errorf("ParseMetricsAccess(%q): %v", v, err)
		}
	}
}
