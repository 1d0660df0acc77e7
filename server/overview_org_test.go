package server

import (
	"net/http"
	"strings"
	"testing"

	"github.com/promptkit/promptkit/jobs"
	"github.com/promptkit/promptkit/server/internal/admin"
)

// TestOverviewOrg: ?org= narrows the overview to that org, as it does the
// other admin listings: for an operator any org, for an org's admin its
// own only (another org's is 403, as on /v1/admin/jobs).
func TestOverviewOrg(t *testing.T) {
	onStores(t, jobs.Options{}, func(t *testing.T, e *env) {
		e.queue("acme", 2, jobs.EnqueueParams{})
		e.queue("beta", 1, jobs.EnqueueParams{})
		// A paused org with no jobs shows in the whole view only.
		if r := e.call("POST", "/v1/admin/orgs/gamma/pause", "", nil); r.code != http.StatusOK {
			t.Fatalf("pause gamma: %d %s", r.code, r.body)
		}
		overview := func(token, query string) (admin.Overview, int) {
			t.Helper()
			r := e.call("GET", "/v1/admin/overview"+query, token, nil)
			var o admin.Overview
			if r.code == http.StatusOK {
				r.decode(t, &o)
			}
			return o, r.code
		}
		orgs := func(o admin.Overview) string {
			var s []string
			for _, v := range o.Orgs {
				s = append(s, v.OrgID)
			}
			return strings.Join(s, ",")
		}

		if o, _ := overview("", ""); orgs(o) != "acme,beta,gamma" || o.Counts[jobs.Queued] != 3 {
			t.Errorf("local mode, every org: orgs %s, queued %d; want acme,beta,gamma and 3", orgs(o), o.Counts[jobs.Queued])
		}
		if o, _ := overview("", "?org=beta"); orgs(o) != "beta" || o.Counts[jobs.Queued] != 1 {
			t.Errorf("local mode, ?org=beta: orgs %s, queued %d; want beta and 1", orgs(o), o.Counts[jobs.Queued])
		}

		op := e.token("ops", "olga", jobs.RoleOperator)
		boss := e.token("acme", "boss", jobs.RoleAdmin)
		if o, _ := overview(op, "?org=acme"); orgs(o) != "acme" || o.Counts[jobs.Queued] != 2 || !o.Operator {
			t.Errorf("operator, ?org=acme: orgs %s, queued %d, operator %v; want acme, 2, true", orgs(o), o.Counts[jobs.Queued], o.Operator)
		}
		if o, _ := overview(op, "?org=gamma"); orgs(o) != "gamma" || o.Counts[jobs.Queued] != 0 || !o.Orgs[0].Paused {
			t.Errorf("operator, ?org=gamma: %+v; want gamma alone, paused, nothing queued", o)
		}
		for _, q := range []string{"", "?org=acme"} {
			if o, _ := overview(boss, q); orgs(o) != "acme" || o.Counts[jobs.Queued] != 2 {
				t.Errorf("acme's admin %q: orgs %s, queued %d; want acme and 2", q, orgs(o), o.Counts[jobs.Queued])
			}
		}
		if _, code := overview(boss, "?org=beta"); code != http.StatusForbidden {
			t.Errorf("acme's admin asking for beta's overview: %d, want 403", code)
		}
	})
}

// TestScheduledForParseError: a scheduled_for that is not an RFC 3339 time
// is a 400 that names the field and the format and quotes nothing of the
// request.
func TestScheduledForParseError(t *testing.T) {
	t.Parallel()
	e := setup(t)
	for name, v := range map[string]string{
		"words":        `"tomorrow SECRET-7q"`,
		"out of range": `"2026-13-01T00:00:00SECRET-7q"`,
		"not a string": `7`,
	} {
		r := e.call("POST", "/v1/prompts", "", `{"text": "x", "scheduled_for": `+v+`}`)
		if r.code != http.StatusBadRequest || r.errorCode(t) != "invalid_json" {
			t.Errorf("%s: %d %s, want 400 invalid_json", name, r.code, r.body)
			continue
		}
		var b apiError
		r.decode(t, &b)
		msg := b.Error.Message
		if !strings.Contains(msg, "scheduled_for") || !strings.Contains(msg, "RFC 3339") {
			t.Errorf("%s: message %q, want it to name scheduled_for and RFC 3339", name, msg)
		}
		for _, quoted := range []string{"SECRET", "tomorrow", "2026-13", "parsing time", "UnmarshalJSON"} {
			if strings.Contains(msg, quoted) {
				t.Errorf("%s: message %q quotes the request (%s)", name, msg, quoted)
			}
		}
	}
	// A good one and a null still pass.
	for _, v := range []string{`"2099-01-01T00:00:00Z"`, `null`} {
		if r := e.call("POST", "/v1/prompts", "", `{"text": "x", "scheduled_for": `+v+`}`); r.code != http.StatusAccepted {
			t.Errorf("scheduled_for %s: %d %s, want 202", v, r.code, r.body)
		}
	}
}
