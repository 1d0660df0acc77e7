package page

import (
	"bytes"
	"html/template"
	"net/http"
	"time"

	"github.com/promptkit/promptkit/server/internal/httpapi"
)

// DashboardPattern is the operator's dashboard: like the page, an HTML
// file whose data comes from the API (/v1/admin), with its script and
// style under /assets.
const DashboardPattern = "GET /dashboard"

// DashboardRefresh is how often the dashboard reads the queue's counts
// again while it is open and visible.
const DashboardRefresh = 2 * time.Second

var dashboardTemplate = template.Must(template.ParseFS(webFiles, "web/dashboard.html"))

// Dashboard answers GET /dashboard.
func (p Page) Dashboard(w http.ResponseWriter, r *http.Request) error {
	local, err := p.LocalMode(r.Context())
	if err != nil {
		p.Log.Warn("dashboard: reading whether tokens exist failed", "err", err)
	}
	var b bytes.Buffer
	err = dashboardTemplate.Execute(&b, pageData{Local: local, PollMS: DashboardRefresh.Milliseconds(),
		Now: time.Now().UTC().Format(time.RFC3339Nano)})
	if err != nil {
		return httpapi.About("dashboard", err)
	}
	setPageHeaders(w.Header(), "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	_, _ = w.Write(b.Bytes())
	return nil
}
