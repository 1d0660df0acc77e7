// Package page is the browser page at / and its answer renderer: web/
// holds plain HTML, CSS and JavaScript modules, embedded in the binary, so
// `promptkit serve` needs no build step and the page makes no request
// outside this server. Its data comes from the /v1 API like any other
// client's; the page only adds the routes IndexPattern and AssetPattern. Render turns a
// model's Markdown into the safe HTML the API's answers carry.
package page

import (
	"bytes"
	"context"
	"embed"
	"html/template"
	"io/fs"
	"log/slog"
	"net/http"
	"path"
	"time"

	"github.com/promptkit/promptkit/server/internal/httpapi"
)

//go:embed web
var webFiles embed.FS

// The page's polling of /v1/recent while its event stream is down (seed
// §6): every DefaultPollInterval while a job it shows is queued or
// running, and every DefaultIdlePollInterval otherwise, so prompts other
// clients send still appear — as they would through the stream — while an
// idle tab costs a request per 20 s. The page reads both from the
// document, so the server decides; a test may shorten them with the
// page's ?poll_ms= and ?idle_poll_ms= (at least 100 ms).
const (
	DefaultPollInterval     = 2 * time.Second
	DefaultIdlePollInterval = 20 * time.Second
)

// The routes of the page: HTML and static files, not API operations, so
// openapi.json does not describe them (its test skips exactly these).
const (
	IndexPattern = "GET /{$}"
	AssetPattern = "GET /assets/{file}"
)

// pageCSP keeps the page to its own origin: scripts only from /assets (no
// inline script or event-handler attribute runs, whatever reaches the
// DOM), no plugins, no framing. Answers' images are rendered as links, so
// img-src needs nothing but the empty favicon.
const pageCSP = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
	"connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

var indexTemplate = template.Must(template.ParseFS(webFiles, "web/index.html"))

// pageData is what index.html is rendered with: what the page cannot learn
// from the API without a round trip.
type pageData struct {
	// Local is whether requests without a token are accepted (no token
	// field is shown).
	Local bool
	// PollMS and IdlePollMS are the polling intervals of the fallback,
	// with and without a job in flight, in milliseconds.
	PollMS, IdlePollMS int64
	// Now is the server's clock when the page was served: the first
	// `since` of /v1/recent, so no change after the page loaded is missed
	// whatever the browser's clock says.
	Now string
}

// Page serves the page.
type Page struct {
	// LocalMode reports whether requests without a token are accepted.
	LocalMode func(context.Context) (bool, error)
	Log       *slog.Logger
}

// Index answers GET /: the page, rendered for this server.
func (p Page) Index(w http.ResponseWriter, r *http.Request) error {
	return p.render(w, r, indexTemplate, pageData{
		PollMS:     DefaultPollInterval.Milliseconds(),
		IdlePollMS: DefaultIdlePollInterval.Milliseconds(),
	})
}

// render answers with t rendered with d, completed with whether local mode
// holds and the server's clock.
func (p Page) render(w http.ResponseWriter, r *http.Request, t *template.Template, d pageData) error {
	local, err := p.LocalMode(r.Context())
	if err != nil {
		// The page still loads; it asks for a token, and the API answers
		// whatever the database allows.
		p.Log.Warn("page: reading whether tokens exist failed", "err", err)
	}
	d.Local, d.Now = local, time.Now().UTC().Format(time.RFC3339Nano)
	var b bytes.Buffer
	if err := t.Execute(&b, d); err != nil {
		return httpapi.About("page", err)
	}
	setPageHeaders(w.Header(), "text/html; charset=utf-8")
	// Whether tokens exist can change: never serve a stale copy.
	w.Header().Set("Cache-Control", "no-store")
	_, _ = w.Write(b.Bytes())
	return nil
}

// assetTypes are the files /assets serves, by extension; anything else is
// 404 (index.html is only served rendered, at /).
var assetTypes = map[string]string{
	".js":  "text/javascript; charset=utf-8",
	".css": "text/css; charset=utf-8",
	".svg": "image/svg+xml",
}

// Asset answers GET /assets/{file}: the page's scripts and styles.
func Asset(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("file")
	ct, ok := assetTypes[path.Ext(name)]
	if !ok {
		http.NotFound(w, r)
		return
	}
	b, err := fs.ReadFile(webFiles, "web/"+name)
	if err != nil {
		http.NotFound(w, r)
		return
	}
	setPageHeaders(w.Header(), ct)
	// Revalidate every time: the files change with the binary, and there
	// are few of them on a loopback connection.
	w.Header().Set("Cache-Control", "no-cache")
	_, _ = w.Write(b)
}

func setPageHeaders(h http.Header, contentType string) {
	h.Set("Content-Type", contentType)
	h.Set("Content-Security-Policy", pageCSP)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
}
