package page

import (
	"context"
	"io/fs"
	"log/slog"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"

	"github.com/promptkit/promptkit/server/internal/httpapi"
)

// get answers GET path as the server would: the page or an asset.
func get(t *testing.T, local bool, path string) *httptest.ResponseRecorder {
	t.Helper()
	rec := httptest.NewRecorder()
	req := httptest.NewRequest("GET", path, nil)
	if path == "/" {
		p := Page{LocalMode: func(context.Context) (bool, error) { return local, nil }, Log: slog.Default()}
		httpapi.REST.Handler(slog.Default(), p.Index)(rec, req)
		return rec
	}
	if name, ok := strings.CutPrefix(path, "/assets/"); ok {
		req.SetPathValue("file", name)
	}
	Asset(rec, req)
	return rec
}

func TestPageServed(t *testing.T) {
	t.Parallel()
	for _, local := range []bool{true, false} {
		rec := get(t, local, "/")
		if rec.Code != 200 || rec.Header().Get("Content-Type") != "text/html; charset=utf-8" {
			t.Fatalf("GET /: %d %s", rec.Code, rec.Header().Get("Content-Type"))
		}
		h := rec.Header()
		if h.Get("Content-Security-Policy") != pageCSP || h.Get("X-Content-Type-Options") != "nosniff" || h.Get("Cache-Control") != "no-store" {
			t.Errorf("GET / headers: %v", h)
		}
		body := rec.Body.String()
		for _, want := range []string{
			`data-local="` + map[bool]string{true: "true", false: "false"}[local] + `"`,
			`data-poll-ms="2000"`,
			`data-idle-poll-ms="20000"`,
			`<script type="module" src="/assets/app.js"></script>`,
			`<link rel="stylesheet" href="/assets/style.css">`,
			`aria-live="polite"`,
		} {
			if !strings.Contains(body, want) {
				t.Errorf("local %v: the page lacks %s", local, want)
			}
		}
		if !regexp.MustCompile(`data-now="\d{4}-\d\d-\d\dT[0-9:.]+Z"`).MatchString(body) {
			t.Errorf("the page has no data-now time")
		}
	}
}

func TestPageAssets(t *testing.T) {
	t.Parallel()
	for path, ct := range map[string]string{
		"/assets/app.js":    "text/javascript; charset=utf-8",
		"/assets/api.js":    "text/javascript; charset=utf-8",
		"/assets/live.js":   "text/javascript; charset=utf-8",
		"/assets/style.css": "text/css; charset=utf-8",
	} {
		rec := get(t, true, path)
		if rec.Code != 200 || rec.Header().Get("Content-Type") != ct || rec.Body.Len() == 0 {
			t.Errorf("%s: %d %q (%d bytes)", path, rec.Code, rec.Header().Get("Content-Type"), rec.Body.Len())
		}
	}
	for _, path := range []string{"/assets/index.html", "/assets/nothing.js", "/assets/../page.go", "/assets/../../go.js", "/assets/"} {
		if rec := get(t, true, path); rec.Code != 404 {
			t.Errorf("%s: %d, want 404", path, rec.Code)
		}
	}
}

// TestPageFilesAreLocal: every module the page imports is served, and no
// file names another origin (the page makes no outside request).
func TestPageFilesAreLocal(t *testing.T) {
	t.Parallel()
	imports := regexp.MustCompile(`from '\./([a-z]+\.js)'`)
	err := fs.WalkDir(webFiles, "web", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := fs.ReadFile(webFiles, path)
		if err != nil {
			return err
		}
		text := string(b)
		for _, bad := range []string{"http://", "https://", "@import", "url("} {
			if strings.Contains(text, bad) {
				t.Errorf("%s holds %q", path, bad)
			}
		}
		for _, m := range imports.FindAllStringSubmatch(text, -1) {
			if rec := get(t, true, "/assets/"+m[1]); rec.Code != 200 {
				t.Errorf("%s imports %s, which is not served (%d)", path, m[1], rec.Code)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
