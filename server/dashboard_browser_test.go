package server

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/promptkit/promptkit/jobs"
	"github.com/promptkit/promptkit/providertest"
)

// The dashboard's browser tests run in TestBrowserPage's browser, on a
// browserEnv: a server in local mode (an operator), its worker and the
// fake provider.

var dashboardBrowserCases = []browserCase{
	{"dashboard: the overview counts by state and org, and pauses an org", testDashboardOverview},
	{"dashboard: the job list's filters", testDashboardFilters},
	{"dashboard: a bulk cancel shows its count, then acts", testDashboardBulkCancel},
	{"dashboard: pausing and resuming a backend", testDashboardPauseBackend},
	{"dashboard: a job's attempt timeline", testDashboardTimeline},
}

// openDashboard loads /dashboard at view in tab and waits until it has
// shown that view once.
func (e *browserEnv) openDashboard(tab context.Context, view string) {
	e.t.Helper()
	e.do(tab, "opening the dashboard", chromedp.Navigate(e.srv.URL()+"/dashboard#"+view))
	e.waitFor(tab, "the "+view+" view", `document.body.dataset.loaded === `+js(viewName(view)))
}

func viewName(hash string) string {
	for i, c := range hash {
		if c == '?' || c == '/' {
			return hash[:i]
		}
	}
	return hash
}

// queueLater enqueues n prompts of org, held an hour in the future so the
// worker leaves them queued, and returns their job IDs.
func (e *browserEnv) queueLater(org, profile string, n int) []string {
	e.t.Helper()
	var ids []string
	for i := range n {
		q, err := e.st.Enqueue(context.Background(), jobs.EnqueueParams{OrgID: org, CreatedBy: "u-" + org,
			Text: fmt.Sprintf("%s question %d", org, i), Profile: profile, AvailableAt: time.Now().Add(time.Hour)})
		if err != nil {
			e.t.Fatal(err)
		}
		ids = append(ids, q.JobID)
	}
	return ids
}

// rows is a JavaScript expression for the data-KEY values of table
// #id's rows.
func rows(id, key string) string {
	return fmt.Sprintf(`[...document.querySelectorAll('#%s tbody tr')].map(r => r.dataset.%s)`, id, key)
}

// testDashboardFilters: the job list's filter form narrows the list to
// one organisation and one state, and the address keeps the filter.
func testDashboardFilters(t *testing.T, e *browserEnv) {
	acme := e.queueLater("acme", "quick", 3)
	e.queueLater("beta", "", 2)
	e.openDashboard(e.tab, "jobs")
	e.waitFor(e.tab, "all five jobs", rows("jobs", "job")+`.length === 5`)

	e.do(e.tab, "filtering by org acme",
		chromedp.SetValue(chromedp.CSS(`#filters [name=org]`), "acme"),
		chromedp.SetValue(chromedp.CSS(`#filters [name=state]`), "queued"),
		chromedp.Click(chromedp.CSS(`#filters button[type=submit]`)))
	want := js(slices.Sorted(slices.Values(acme))[0])
	e.waitFor(e.tab, "acme's three jobs only", fmt.Sprintf(`(ids => ids.length === 3 && ids.includes(%s))(%s)`, want, rows("jobs", "job")))
	e.waitFor(e.tab, "the filter in the address", `location.hash.includes('org=acme') && location.hash.includes('state=queued')`)
	e.waitFor(e.tab, "the profile column", `[...document.querySelectorAll('#jobs tbody tr td:nth-child(5)')].every(td => td.textContent === 'quick')`)
}

// testDashboardBulkCancel: cancelling by filter shows the count first,
// acts only when confirmed, and leaves the other org's jobs alone.
func testDashboardBulkCancel(t *testing.T, e *browserEnv) {
	acme := e.queueLater("acme", "", 4)
	beta := e.queueLater("beta", "", 2)
	e.openDashboard(e.tab, "jobs?org=acme&state=queued")
	e.waitFor(e.tab, "acme's four jobs", rows("jobs", "job")+`.length === 4`)
	e.press(e.tab, "#bulk-cancel")
	e.waitFor(e.tab, "the count before acting", `!document.getElementById('bulk-confirm').hidden && document.getElementById('bulk-go').dataset.matched === '4' && document.getElementById('bulk-question').textContent.startsWith('4 jobs match')`)
	// Nothing is cancelled until the operator confirms.
	for _, id := range acme {
		if j, _ := e.st.GetJob(context.Background(), "", id); j.State != jobs.Queued {
			t.Fatalf("job %s is %s before the confirmation", id, j.State)
		}
	}
	e.press(e.tab, "#bulk-go")
	e.waitFor(e.tab, "the result", `document.getElementById('bulk-result').textContent === 'Cancelled 4 of 4.'`)
	e.waitFor(e.tab, "the list showing no queued acme job", rows("jobs", "job")+`.length === 0`)
	for _, id := range acme {
		j, err := e.st.GetJob(context.Background(), "", id)
		if err != nil || j.State != jobs.Cancelled {
			t.Fatalf("acme job %s: %s %v, want cancelled", id, j.State, err)
		}
		evs, err := e.st.JobEvents(context.Background(), "", id)
		if err != nil || len(evs) == 0 || !(strings.Contains(string(evs[len(evs)-1].Data), `"by":"local"`) && strings.Contains(string(evs[len(evs)-1].Data), `"bulk":`)) {
			t.Fatalf("acme job %s: its cancel event %v does not name the action and who asked (%v)", id, evs, err)
		}
	}
	for _, id := range beta {
		if j, _ := e.st.GetJob(context.Background(), "", id); j.State != jobs.Queued {
			t.Fatalf("beta job %s is %s: a bulk action on acme touched it", id, j.State)
		}
	}
}

// testDashboardPauseBackend: pausing a backend from the dashboard holds
// it for every process (the store's shared pacing), and resuming
// releases it.
func testDashboardPauseBackend(t *testing.T, e *browserEnv) {
	e.openDashboard(e.tab, "backends")
	row := `document.querySelector('#backends tr[data-backend]')`
	e.waitFor(e.tab, "a backend row", row+` !== null`)
	id := eval[string](e, e.tab, row+`.dataset.backend`)
	held := func() bool {
		ps, err := e.st.SyncPacing(context.Background(), jobs.PacingSyncParams{})
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range ps {
			if p.Backend == id {
				return p.Held
			}
		}
		return false
	}
	e.do(e.tab, "pausing it", chromedp.Click(chromedp.CSS(`#backends tr[data-backend] button`)))
	e.waitFor(e.tab, "the backend shown paused", row+`.dataset.paused === 'true' && `+row+`.querySelector('.state').textContent.includes('paused') && `+row+`.querySelector('button').textContent === 'Resume'`)
	if !held() {
		t.Fatal("the dashboard shows the backend paused, the store does not hold it")
	}
	e.do(e.tab, "resuming it", chromedp.Click(chromedp.CSS(`#backends tr[data-backend] button`)))
	e.waitFor(e.tab, "the backend shown running", row+`.dataset.paused === 'false' && `+row+`.querySelector('button').textContent === 'Pause'`)
	if held() {
		t.Fatal("resumed on the dashboard, still held in the store")
	}
}

// testDashboardTimeline: a job whose first call got a 500 and whose
// retry was answered shows both calls on its timeline, with their status,
// backend and tokens (cached and reasoning ones too); the job's tokens sum
// its calls, each a lower bound, since the 500 reported none.
func testDashboardTimeline(t *testing.T, e *browserEnv) {
	e.prov.Enqueue(providertest.Status(500), providertest.Response{Text: "second time lucky",
		Usage: providertest.Usage{PromptTokens: 40, CompletionTokens: 30, TotalTokens: 70, CachedTokens: 10, ReasoningTokens: 12}})
	s := e.submitAPI("flaky question")
	if j := e.waitJob(s.JobID); j.State != jobs.Succeeded {
		t.Fatalf("job %s, want succeeded", j.State)
	}
	e.openDashboard(e.tab, "job/"+s.JobID)
	steps := `[...document.querySelectorAll('#job-timeline li.step')]`
	e.waitFor(e.tab, "two calls: a 500, then an answer", fmt.Sprintf(`(s => s.length === 2 && s[0].dataset.status === '500' && s[0].classList.contains('is-failed') && s[1].dataset.status === '200' && !s[1].classList.contains('is-failed') && s[1].dataset.backend !== '')(%s)`, steps))
	e.waitFor(e.tab, "the labels", fmt.Sprintf(`(s => s[0].textContent.includes('HTTP 500') && !s[0].textContent.includes('tokens') && s[1].textContent.includes('answered') && s[1].textContent.includes('40 in (10 cached) · 30 out (12 reasoning) tokens') && s[1].textContent.includes('backend '))(%s)`, steps))
	e.waitFor(e.tab, "the job's tokens, lower bounds", `document.getElementById('job-facts').textContent.includes('≥ 40 in (≥ 10 cached) · ≥ 30 out (≥ 12 reasoning)') && document.getElementById('job-tokens-note') !== null`)
	e.waitFor(e.tab, "the answer in the conversation", `document.querySelector('#job-thread li.this .answer').textContent.includes('second time lucky')`)
	e.waitFor(e.tab, "the state", `document.getElementById('job-state').textContent === 'Succeeded'`)
}

// testDashboardOverview: the overview counts jobs by state and by org,
// and pausing an org's queue from it keeps that org's jobs queued.
func testDashboardOverview(t *testing.T, e *browserEnv) {
	e.queueLater("acme", "", 3)
	e.queueLater("beta", "", 1)
	e.openDashboard(e.tab, "overview")
	e.waitFor(e.tab, "four queued", `document.querySelector('.tile.is-queued .n').textContent === '4'`)
	e.waitFor(e.tab, "an operator's sections (local mode)", `document.body.dataset.operator === 'true' && !document.querySelector('nav a[data-view=backends]').hidden`)
	org := func(o string) string { return `document.querySelector('#orgs tr[data-org=` + js(o) + `]')` }
	e.waitFor(e.tab, "acme's row", org("acme")+` && `+org("acme")+`.children[1].textContent === '3'`)
	e.do(e.tab, "pausing acme", chromedp.Click(chromedp.CSS(`#orgs tr[data-org=acme] button`)))
	e.waitFor(e.tab, "acme paused", org("acme")+`.textContent.includes('paused') && `+org("acme")+`.querySelector('button').textContent === 'Resume'`)
	ls, err := e.st.Limits(context.Background())
	if err != nil || !slices.ContainsFunc(ls, func(l jobs.Limit) bool { return l.Subject == "acme" && l.Paused }) {
		t.Fatalf("limits %v %v: acme is not paused in the store", ls, err)
	}
}

// TestDashboardScreenshot regenerates docs/dashboard.png and
// docs/dashboard-job.png (the README's and docs/dashboard.md's pictures)
// from the real dashboard in Chromium. It runs only when asked:
//
//	PROMPTKIT_SCREENSHOTS=docs go test -run TestDashboardScreenshot ./server/
func TestDashboardScreenshot(t *testing.T) {
	dir := screenshotDir(t)
	e := newBrowserEnv(t, startBrowser(t))
	ctx := context.Background()
	// A morning's queue: three orgs, answers, failures, one org paused.
	e.prov.Enqueue(providertest.Status(429), providertest.Reply("The quarterly summary, in three points."))
	s := e.submitAPI("Summarize the quarterly report")
	e.waitJob(s.JobID)
	for i := range 6 {
		e.prov.Enqueue(providertest.Reply(fmt.Sprint("answer ", i)))
		e.waitJob(e.submitAPI(fmt.Sprint("question ", i)).JobID)
	}
	e.queueLater("acme", "", 12)
	e.queueLater("globex", "", 30)
	e.queueLater("initech", "", 4)
	if _, err := e.st.PauseOrg(ctx, "globex", true); err != nil {
		t.Fatal(err)
	}
	shoot := func(view, name, ready string) {
		e.do(e.tab, "a desktop viewport", chromedp.EmulateViewport(1200, 800))
		e.openDashboard(e.tab, view)
		e.waitFor(e.tab, ready, ready)
		e.capture(e.tab, filepath.Join(dir, name))
	}
	shoot("overview", "dashboard.png", `document.querySelectorAll('#orgs tbody tr').length === 4`)
	shoot("job/"+s.JobID, "dashboard-job.png", `document.querySelectorAll('#job-timeline li.step').length === 2`)
}
