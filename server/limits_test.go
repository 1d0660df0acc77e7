package server

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/promptkit/promptkit/jobs"
)

// TestInputLimits: one set of limits, the same answer on both stores — a
// 400 naming the field, in words with no package prefixes — and nothing
// stored for a refused request.
func TestInputLimits(t *testing.T) {
	onStores(t, jobs.Options{}, func(t *testing.T, e *env) {
		for _, c := range []struct {
			body  string
			field string
		}{
			{`{"text":"a\u0000b"}`, "text"},
			{`{"text":"x","execution_options":{"model":"m\u0000x"}}`, "execution_options"},
			{`{"text":"x","idempotency_key":"k\u0000"}`, "idempotency"},
			{`{"text":"x","max_attempts":0}`, "max_attempts"},
			{`{"text":"x","max_attempts":26}`, "max_attempts"},
			{`{"text":"x","max_attempts":2147483648}`, "max_attempts"},
			{`{"text":"x","max_attempts":1000000000}`, "max_attempts"},
			{`{"text":"x","max_attempts":-1}`, "max_attempts"},
			{`{"text":"x","priority":101}`, "priority"},
			{`{"text":"x","execution_options":{"depth":1001}}`, "depth"},
		} {
			r := e.call("POST", "/v1/prompts", "", c.body)
			var body apiError
			_ = json.Unmarshal(r.body, &body)
			if r.code != 400 || !strings.Contains(body.Error.Message, c.field) {
				t.Errorf("%s: %d %s, want 400 naming %s", c.body, r.code, r.body, c.field)
			}
			for _, internal := range []string{"sqlitestore", "pgstore", "jobs:", "SQLSTATE", "0x00"} {
				if strings.Contains(body.Error.Message, internal) {
					t.Errorf("%s: the message shows %q: %s", c.body, internal, body.Error.Message)
				}
			}
		}
		r := e.call("POST", "/v1/chat/completions", "", `{"model":"default","messages":[{"role":"user","content":"a\u0000b"}]}`)
		if er := r.oaErr(t); r.code != 400 || deref(er.Param) != "messages[0].content" {
			t.Errorf("NUL in a chat message: %d %s", r.code, r.body)
		}
		// Reads with a NUL in the path or query find nothing, or are
		// refused; never a 500.
		for path, code := range map[string]int{
			"/v1/prompts/a%00b":      404,
			"/v1/jobs/a%00b":         404,
			"/v1/prompts?state=%00":  400,
			"/v1/prompts?cursor=%00": 400,
		} {
			if r := e.call("GET", path, "", nil); r.code != code {
				t.Errorf("GET %s: %d %s, want %d", path, r.code, r.body, code)
			}
		}
		for _, path := range []string{"/v1/jobs/a%00b/cancel", "/v1/prompts/a%00b/retry", "/v1/batches/a%00b/cancel"} {
			if r := e.call("POST", path, "", nil); r.code != 404 {
				t.Errorf("POST %s: %d %s, want 404", path, r.code, r.body)
			}
		}
		page, err := e.st.ListJobs(context.Background(), jobs.ListParams{})
		if err != nil || len(page.Jobs) != 0 {
			t.Fatalf("refused requests stored %d jobs (%v)", len(page.Jobs), err)
		}
		// The bounds themselves are accepted.
		for _, n := range []int{1, 25} {
			e.submit("", map[string]any{"text": "x", "max_attempts": n})
		}
	})
}

// TestReferencesFollowVisibility: a member may continue or wait for only
// the prompts and jobs it can read; another member's answer as 400 the
// way an unknown id does, and an admin may use any of its org's.
func TestReferencesFollowVisibility(t *testing.T) {
	onStores(t, jobs.Options{}, func(t *testing.T, e *env) {
		amy := e.token("acme", "amy", jobs.RoleMember)
		alice := e.token("acme", "alice", jobs.RoleMember)
		boss := e.token("acme", "boss", jobs.RoleAdmin)
		hers := e.submit(amy, map[string]any{"text": "amy's secret thread"})
		if r := e.call("GET", "/v1/prompts/"+hers.PromptID, alice, nil); r.code != 404 {
			t.Fatalf("alice reads amy's prompt: %d", r.code)
		}
		for field, body := range map[string]map[string]any{
			"parent_id":  {"text": "go on", "parent_id": hers.PromptID},
			"depends_on": {"text": "after", "depends_on": hers.JobID},
		} {
			r := e.call("POST", "/v1/prompts", alice, body)
			var b apiError
			_ = json.Unmarshal(r.body, &b)
			if r.code != 400 || !strings.HasPrefix(b.Error.Message, field) {
				t.Errorf("alice's %s to amy's: %d %s", field, r.code, r.body)
			}
		}
		mine := e.submit(alice, map[string]any{"text": "alice's own"})
		e.submit(alice, map[string]any{"text": "go on", "parent_id": mine.PromptID, "depends_on": mine.JobID})
		e.submit(boss, map[string]any{"text": "go on", "parent_id": hers.PromptID, "depends_on": hers.JobID})
		page, err := e.st.ListJobs(context.Background(), jobs.ListParams{})
		if err != nil || len(page.Jobs) != 4 {
			t.Fatalf("%d jobs stored (%v), want 4", len(page.Jobs), err)
		}
	})
}
