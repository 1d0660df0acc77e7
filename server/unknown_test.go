package server

import (
	"net/http"
	"strings"
	"testing"

	"github.com/promptkit/promptkit/jobs"
)

// TestUnknownRoutes: under /v1, a path no route serves is a 404 and a
// method its path does not take a 405 with Allow, in JSON: promptkit's
// error on the paths of its REST routes, OpenAI's error object on every
// other; no token is needed to be told so. Outside /v1, ServeMux's plain
// text, as before.
func TestUnknownRoutes(t *testing.T) {
	t.Parallel()
	e := setup(t)
	tok := e.token("acme", "ann", jobs.RoleMember) // tokens exist: routes need one
	for _, c := range []struct {
		method, path string
		status       int
		openai       bool
		allow, code  string
	}{
		{"GET", "/v1/completions", 404, true, "", "not_found"},
		{"POST", "/v1/conversations", 404, true, "", "not_found"},
		{"PUT", "/v1/responses/resp_x", 405, true, "GET, HEAD, DELETE", "method_not_allowed"},
		{"GET", "/v1", 404, true, "", "not_found"},
		{"GET", "/v1/", 404, true, "", "not_found"},
		{"GET", "/v1/chat/completions/x", 404, true, "", "not_found"},
		{"GET", "/v1/chat/completions", 405, true, "POST", "method_not_allowed"},
		{"PUT", "/v1/chat/completions", 405, true, "POST", "method_not_allowed"},
		{"DELETE", "/v1/models", 405, true, "GET, HEAD", "method_not_allowed"},
		{"PATCH", "/v1/files/file-1", 405, true, "GET, HEAD, DELETE", "method_not_allowed"},
		{"GET", "/v1/batches/b/cancel", 405, true, "POST", "method_not_allowed"},
		// promptkit's own families.
		{"GET", "/v1/prompts/p/answers", 404, false, "", "not_found"},
		{"GET", "/v1/events/nope", 404, false, "", "not_found"},
		{"PUT", "/v1/prompts", 405, false, "GET, HEAD, POST", "method_not_allowed"},
		{"DELETE", "/v1/jobs/j", 405, false, "GET, HEAD", "method_not_allowed"},
		{"GET", "/v1/prompts/p/retry", 405, false, "POST", "method_not_allowed"},
	} {
		req, err := http.NewRequest(c.method, e.srv.URL()+c.path, nil)
		if err != nil {
			t.Fatal(err)
		}
		r := e.send(req)
		name := c.method + " " + c.path
		if r.code != c.status || r.header.Get("Allow") != c.allow || !strings.HasPrefix(r.header.Get("Content-Type"), "application/json") {
			t.Errorf("%s: %d, Allow %q, %s %s", name, r.code, r.header.Get("Allow"), r.header.Get("Content-Type"), r.body)
			continue
		}
		if c.openai {
			if err := oasValidate(t, "/components/schemas/OpenAIError", r.body); err != nil {
				t.Errorf("%s: %v", name, err)
			}
			er := r.oaErr(t)
			if er.Type != "invalid_request_error" || deref(er.Code) != c.code || er.Param != nil || !strings.Contains(er.Message, name) {
				t.Errorf("%s: %s", name, r.body)
			}
			continue
		}
		if err := oasValidate(t, "/components/schemas/Error", r.body); err != nil {
			t.Errorf("%s: %v", name, err)
		}
		if got := r.errorCode(t); got != c.code {
			t.Errorf("%s: code %q, want %q", name, got, c.code)
		}
	}

	// The routes themselves still answer, and still need their token.
	if r := e.call("GET", "/v1/models", "", nil); r.code != 401 {
		t.Errorf("GET /v1/models without a token: %d", r.code)
	}
	if r := e.call("GET", "/v1/models", tok, nil); r.code != 200 {
		t.Errorf("GET /v1/models: %d %s", r.code, r.body)
	}

	// Outside /v1, as ServeMux always answered; the probes' 405 is
	// documented.
	for _, c := range []struct {
		method, path string
		status       int
		allow        string
	}{
		{"GET", "/nope", 404, ""},
		{"GET", "/v1x", 404, ""},
		{"POST", "/healthz", 405, "GET, HEAD"},
	} {
		req, _ := http.NewRequest(c.method, e.srv.URL()+c.path, nil)
		r := e.send(req)
		if r.code != c.status || r.header.Get("Allow") != c.allow || !strings.HasPrefix(r.header.Get("Content-Type"), "text/plain") {
			t.Errorf("%s %s: %d %v %s", c.method, c.path, r.code, r.header, r.body)
		}
		if c.status == 405 {
			checkResponse(t, "GET "+c.path, r.code, r.header, r.body)
		}
	}
}

// TestUnknownRoutesLocalMode: in local mode an unknown route is answered
// whatever the Host (it tells only what /openapi.json does), while a
// route's guard still refuses a foreign Host.
func TestUnknownRoutesLocalMode(t *testing.T) {
	t.Parallel()
	e := setup(t)
	for path, want := range map[string]int{"/v1/completions": 404, "/v1/models": 403} {
		req, _ := http.NewRequest("GET", e.srv.URL()+path, nil)
		req.Host = "evil.example"
		if r := e.send(req); r.code != want {
			t.Errorf("%s from a foreign Host: %d, want %d: %s", path, r.code, want, r.body)
		}
	}
}
