package page

import (
	"html/template"
	"net/http"
	"time"
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
	return p.render(w, r, dashboardTemplate, pageData{PollMS: DashboardRefresh.Milliseconds()})
}
