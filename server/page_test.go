package server

import (
	"net/http"
	"net/http/httptest"
	"testing"
)

// pageServer is a server whose page and API answer without a database:
// local says whether it accepts requests without a token.
func pageServer(t *testing.T, local bool) *Server {
	t.Helper()
	s, err := New(Config{Store: oasFakeStore{}, InsecureNoAuth: local})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func get(s *Server, path string) *httptest.ResponseRecorder {
	rec := httptest.NewRecorder()
	req := httptest.NewRequest("GET", path, nil)
	req.Host = "localhost" // not httptest's example.com, which local mode refuses
	s.handler.ServeHTTP(rec, req)
	return rec
}

// TestPageRoutes: the page and its assets are routed (the page package
// tests what they hold); paths outside them are not, nor POST /.
func TestPageRoutes(t *testing.T) {
	t.Parallel()
	s := pageServer(t, true)
	for path, code := range map[string]int{
		"/": 200, "/assets/app.js": 200, "/assets/..%2fpage.go": 404, "/assets/..%2f..%2fgo.js": 404,
		"/index.html": 404, "/nothing": 404,
	} {
		if rec := get(s, path); rec.Code != code {
			t.Errorf("%s: %d, want %d", path, rec.Code, code)
		}
	}
	rec := httptest.NewRecorder()
	req := httptest.NewRequest("POST", "/", nil)
	req.Host = "localhost"
	s.handler.ServeHTTP(rec, req)
	if rec.Code != http.StatusMethodNotAllowed {
		t.Errorf("POST /: %d", rec.Code)
	}
}

// TestAnswerHTML: the API's answers carry their rendered HTML, in
// GET /v1/prompts/{id} and /v1/recent (call checks both against
// openapi.json).
func TestAnswerHTML(t *testing.T) {
	t.Parallel()
	e := setup(t)
	s := e.submit("", map[string]any{"text": "hi"})
	e.finish(s.JobID, "**bold** <script>alert(1)</script>")
	var v promptView
	e.call("GET", "/v1/prompts/"+s.PromptID, "", nil).decode(t, &v)
	const want = "<p><strong>bold</strong> &lt;script&gt;alert(1)&lt;/script&gt;</p>\n"
	if v.Answer == nil || v.Answer.HTML != want || v.Answer.Output != "**bold** <script>alert(1)</script>" {
		t.Fatalf("answer: %+v", v.Answer)
	}
	var rec recent
	e.call("GET", "/v1/recent", "", nil).decode(t, &rec)
	if len(rec.Prompts) != 1 || rec.Prompts[0].Answer == nil || rec.Prompts[0].Answer.HTML != want {
		t.Fatalf("recent: %+v", rec.Prompts)
	}
}
