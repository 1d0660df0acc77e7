package server

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/input"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"github.com/promptkit/promptkit"
	"github.com/promptkit/promptkit/internal/testkit/enginekit"
	"github.com/promptkit/promptkit/internal/testkit/storekit"
	"github.com/promptkit/promptkit/jobs"
	"github.com/promptkit/promptkit/jobs/worker"
	"github.com/promptkit/promptkit/providertest"
)

// The browser tests drive Debian's chromium, headless, through the page
// of a real server (server.New + Open on 127.0.0.1:0) with a worker, a
// SQLite store in a temporary folder and the providertest fake provider
// as the backend. Every outcome is decided by waiting on a DOM condition
// (bounded by browserWait), never by sleeping.

// browserWait bounds each wait on the page; browserTestTimeout bounds one
// whole test.
const (
	browserWait        = 20 * time.Second
	browserTestTimeout = 90 * time.Second
)

func TestBrowserPage(t *testing.T) {
	browser := startBrowser(t)
	t.Parallel()
	for _, c := range append([]browserCase{
		{"submit shows queued or running, then the answer", testBrowserSubmit},
		{"a provider failure shows is-orphan and retry brings the answer", testBrowserRetry},
		{"cancelling a running job shows is-cancelled", testBrowserCancel},
		{"prompts completing in reverse order stay in creation order", testBrowserOrder},
		{"with the event stream blocked, polling brings the answer", testBrowserPolling},
		{"reload, and a closed and reopened tab, show the answer", testBrowserReload},
		{"the page loads from the listing, reading a prompt only for its history", testBrowserLoad},
		{"text typed in the compose box survives updates", testBrowserCompose},
		{"an answer with <script> or onerror= is shown as text, never run", testBrowserUnsafeAnswer},
		{"two tabs continuing two threads each set their own parent", testBrowserContinue},
		{"a token is asked for and kept when the server requires one; the page streams with tickets", testBrowserToken},
		{"the profile select lists the engine's profiles and sends the chosen one", testBrowserProfiles},
		{"the settled page, at desktop and phone widths", testBrowserSettledPage},
		{"a page on another site cannot act through local mode", testBrowserCrossSite},
	}, slices.Concat(pageBrowserCases, dashboardBrowserCases)...) {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			c.fn(t, newBrowserEnv(t, browser))
		})
	}
}

// startBrowser starts a headless Chromium for the test, or skips it when
// there is none (fails instead with PROMPTKIT_TEST_REQUIRE_CHROMIUM set,
// as in CI); it stops when the test ends.
func startBrowser(t *testing.T) context.Context {
	t.Helper()
	chromium, err := exec.LookPath("chromium")
	if err != nil {
		if os.Getenv("PROMPTKIT_TEST_REQUIRE_CHROMIUM") != "" { // CI: never skip
			t.Fatal("chromium is not installed (apt-get install chromium), and PROMPTKIT_TEST_REQUIRE_CHROMIUM is set")
		}
		t.Skip("chromium is not installed (apt-get install chromium); the browser tests need it")
	}
	// One browser, a tab (or two) per test. The flags keep Chromium off
	// the network: this machine's closed network otherwise makes
	// background requests fail and stall.
	alloc, cancelAlloc := chromedp.NewExecAllocator(context.Background(),
		chromedp.ExecPath(chromium),
		chromedp.Headless,
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-extensions", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1000, 800),
	)
	browser, cancelBrowser := chromedp.NewContext(alloc)
	if err := chromedp.Do(browser); err != nil {
		cancelBrowser()
		cancelAlloc()
		t.Fatalf("starting chromium: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(browser, 10*time.Second)
		defer cancel()
		_ = chromedp.Cancel(ctx)
		cancelBrowser()
		cancelAlloc()
	})
	return browser
}

// browserCase is one browser test: it gets a fresh server and a tab.
type browserCase = struct {
	name string
	fn   func(t *testing.T, e *browserEnv)
}

// browserEnv is one server, its worker, its fake provider and a tab.
type browserEnv struct {
	t       *testing.T
	st      jobs.Store
	srv     *Server
	prov    *providertest.Server
	metrics *routeCounter
	browser context.Context
	// tab is the test's tab, with the test's deadline.
	tab context.Context
}

// envOptions change a browserEnv's engine config and worker config
// before they are used.
type envOptions struct {
	engine func(*promptkit.Config)
	worker func(*worker.Config)
}

func newBrowserEnv(t *testing.T, browser context.Context, opts ...envOptions) *browserEnv {
	t.Helper()
	prov := providertest.NewServer()
	t.Cleanup(prov.Close)
	// careful has a label; the others' labels are made from their ids.
	mods := []func(*promptkit.Config){func(c *promptkit.Config) { c.Profiles[0].Model = "fake-model" }, enginekit.Profiles("default", "quick", "careful"),
		func(c *promptkit.Config) { c.Profiles[2].Label = "Careful (slower)" }}
	for _, o := range opts {
		if o.engine != nil {
			mods = append(mods, o.engine)
		}
	}
	eng := enginekit.Provider(t, prov.URL, mods...)
	st := storekit.SQLite.New(t).Open(t, jobs.Options{})
	e := &browserEnv{t: t, st: st, prov: prov, metrics: &routeCounter{n: map[string]int{}}, browser: browser}
	var err error
	e.srv, err = New(Config{Store: st, Engine: eng, Addr: "127.0.0.1:0", Metrics: e.metrics,
		Check:  func(ctx context.Context, p jobs.EnqueueParams) error { return worker.Check(ctx, eng, p) },
		Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.srv.Open(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.srv.Close() })

	wcfg := worker.Config{Store: st, Engine: eng, Concurrency: 4, ShutdownGrace: -1,
		Logger: slog.New(slog.DiscardHandler)}
	for _, o := range opts {
		if o.worker != nil {
			o.worker(&wcfg)
		}
	}
	w, err := worker.New(wcfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { _ = w.Run(ctx) })
	t.Cleanup(func() { stop(); wg.Wait() })

	e.tab = e.newTab()
	return e
}

// newTab opens a tab bounded by the test's deadline; it closes when the
// test ends. An uncaught JavaScript exception in it fails the test.
func (e *browserEnv) newTab() context.Context {
	tab, cancelTab := chromedp.NewContext(e.browser, chromedp.WithListener(e.watchExceptions))
	ctx, cancel := context.WithTimeout(tab, browserTestTimeout)
	e.t.Cleanup(func() { cancel(); cancelTab() })
	return ctx
}

func (e *browserEnv) watchExceptions(ev any) {
	if ex, ok := ev.(*runtime.EventExceptionThrown); ok && ex.ExceptionDetails != nil {
		d := ex.ExceptionDetails
		msg := d.Text
		if d.Exception != nil {
			msg += " " + d.Exception.Description
		}
		e.t.Errorf("JavaScript exception at %s:%d: %s", d.URL, d.LineNumber, msg)
	}
}

// hold returns a channel that keeps a scripted reply in flight until the
// returned release is called (at the latest when the test ends, before
// the worker stops).
func (e *browserEnv) hold() (<-chan struct{}, func()) {
	ch := make(chan struct{})
	var once sync.Once
	release := func() { once.Do(func() { close(ch) }) }
	e.t.Cleanup(release)
	return ch, release
}

// waitArrivals waits until the fake provider has received n requests.
func (e *browserEnv) waitArrivals(n int) {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), browserWait)
	defer cancel()
	if err := e.prov.WaitArrivals(ctx, n); err != nil {
		e.t.Fatalf("waiting for %d provider requests (got %d): %v", n, e.prov.Count(), err)
	}
}

// do runs actions on a tab, failing the test on error.
func (e *browserEnv) do(tab context.Context, what string, actions ...chromedp.Action[chromedp.Void]) {
	e.t.Helper()
	if err := chromedp.Do(tab, actions...); err != nil {
		e.t.Fatalf("%s: %v\n%s", what, err, e.pageState(tab))
	}
}

// open loads the page in tab and waits until it has loaded its prompts
// and its event stream is live.
func (e *browserEnv) open(tab context.Context) {
	e.t.Helper()
	e.do(tab, "opening the page", chromedp.Navigate(e.srv.URL()+"/"))
	e.waitFor(tab, "the event stream to be live", `document.body.dataset.updates === 'live'`)
}

// waitFor waits until the JavaScript condition holds in tab.
func (e *browserEnv) waitFor(tab context.Context, what, cond string) {
	e.t.Helper()
	_, err := chromedp.Run(tab, chromedp.Poll[bool](cond,
		chromedp.WithPollingInterval(25*time.Millisecond), chromedp.WithPollingTimeout(browserWait)))
	if err != nil {
		e.t.Fatalf("waiting for %s: %v\n%s", what, err, e.pageState(tab))
	}
}

// eval evaluates a JavaScript expression in tab.
func eval[T any](e *browserEnv, tab context.Context, expr string) T {
	e.t.Helper()
	v, err := chromedp.Run(tab, chromedp.Evaluate[T](expr))
	if err != nil {
		e.t.Fatalf("evaluating %s: %v", expr, err)
	}
	return v
}

// pageState describes the page for a failure message.
func (e *browserEnv) pageState(tab context.Context) string {
	// The test's deadline may be what failed: look with a few more
	// seconds.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(tab), 5*time.Second)
	defer cancel()
	// The dashboard has no compose box: its status and error instead.
	s, err := chromedp.Run(ctx, chromedp.Evaluate[string](`JSON.stringify({
		updates: document.body.dataset.updates,
		error: (document.getElementById('compose-error') || document.getElementById('error')).textContent,
		status: document.getElementById('status')?.textContent,
		prompts: [...document.querySelectorAll('li.prompt')].map(li => ({
			class: li.className, question: li.querySelector('.question').textContent,
			answer: li.querySelector('.answer').textContent.slice(0, 200)}))
	}, null, 1)`))
	if err != nil {
		return "(page state unavailable: " + err.Error() + ")"
	}
	return "page: " + s
}

// js quotes a Go string as a JavaScript string literal.
func js(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// findPrompt is a JavaScript expression for the prompt element whose
// question is text (undefined until there is one).
func findPrompt(text string) string {
	return fmt.Sprintf(`[...document.querySelectorAll('li.prompt')].find(li => li.querySelector('.question').textContent === %s)`, js(text))
}

// whenPrompt is a condition on the prompt element p of text.
func whenPrompt(text, cond string) string {
	return fmt.Sprintf(`(p => !!p && (%s))(%s)`, cond, findPrompt(text))
}

// settled: the prompt shows an answer and no state class.
const settled = `p.dataset.state === 'succeeded' && !/\bis-/.test(p.className) && p.querySelector('.answer').textContent !== ''`

// promptID waits for the prompt of text and returns its id.
func (e *browserEnv) promptID(tab context.Context, text string) string {
	e.t.Helper()
	e.waitFor(tab, "the prompt "+text, whenPrompt(text, "true"))
	return eval[string](e, tab, findPrompt(text)+`.dataset.promptId`)
}

// enter presses Enter with no character event, as a person's Enter
// reaches a page that handles it on keydown (kb's "\r" would also type a
// line break after the keydown handler ran).
var enter = chromedp.Func(func(ctx context.Context, t *chromedp.Target) error {
	for _, typ := range []input.DispatchKeyEventType{input.DispatchKeyEventTypeRawKeyDown, input.DispatchKeyEventTypeKeyUp} {
		_, err := cdp.Call(ctx, t, input.DispatchKeyEvent, input.DispatchKeyEventParams{
			Type: typ, Key: "Enter", Code: "Enter", WindowsVirtualKeyCode: 13, NativeVirtualKeyCode: 13,
		})
		if err != nil {
			return err
		}
	}
	return nil
})

// ask types text into the compose box and presses Enter; it returns the
// new prompt's id once the page shows it.
func (e *browserEnv) ask(tab context.Context, text string) string {
	e.t.Helper()
	e.do(tab, "asking "+text, chromedp.SendKeys(chromedp.CSS("#compose-text"), text), enter)
	return e.promptID(tab, text)
}

// press focuses a control and activates it with the keyboard, as a
// keyboard user would.
func (e *browserEnv) press(tab context.Context, sel string) {
	e.t.Helper()
	e.do(tab, "pressing "+sel, chromedp.Focus(chromedp.CSS(sel)), chromedp.KeyEvent(kb.Enter))
}

// submitAPI queues a prompt through the API, as another client would.
func (e *browserEnv) submitAPI(text string) submitted {
	e.t.Helper()
	res, err := http.Post(e.srv.URL()+"/v1/prompts", "application/json", strings.NewReader(`{"text":`+js(text)+`}`))
	if err != nil {
		e.t.Fatal(err)
	}
	defer res.Body.Close()
	var s submitted
	if err := json.NewDecoder(res.Body).Decode(&s); err != nil || res.StatusCode != http.StatusAccepted {
		e.t.Fatalf("submit: %d %v", res.StatusCode, err)
	}
	return s
}

// waitJob waits until the store has the job in a terminal state, and
// returns it.
func (e *browserEnv) waitJob(id string) jobs.Job {
	e.t.Helper()
	deadline := time.Now().Add(browserWait)
	for {
		j, err := e.st.GetJob(context.Background(), "", id)
		if err != nil {
			e.t.Fatal(err)
		}
		if j.State.Terminal() || time.Now().After(deadline) {
			return j
		}
		select {
		case <-time.After(10 * time.Millisecond):
		case <-e.t.Context().Done():
			return j
		}
	}
}

// artifact saves a test artifact in $PROMPTKIT_TEST_ARTIFACTS (kept) or
// in the test's temporary folder.
func (e *browserEnv) artifact(name string, b []byte) {
	e.t.Helper()
	dir := os.Getenv("PROMPTKIT_TEST_ARTIFACTS")
	if dir == "" {
		dir = e.t.TempDir()
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		e.t.Fatal(err)
	}
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, b, 0o644); err != nil {
		e.t.Fatal(err)
	}
	e.t.Logf("saved %s", path)
}

// routeCounter is a Metrics that counts requests by route and status.
type routeCounter struct {
	mu sync.Mutex
	n  map[string]int
	// streams is the number of open event streams, opened how many were
	// ever opened; changed is closed and replaced on every change.
	streams, opened int
	changed         chan struct{}
}

func (m *routeCounter) ObserveHTTP(route string, code int, _ time.Duration) {
	m.mu.Lock()
	m.n[fmt.Sprintf("%s %d", route, code)]++
	m.mu.Unlock()
}
func (m *routeCounter) SSEClients(delta int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.streams += delta
	if delta > 0 {
		m.opened += delta
	}
	if m.changed != nil {
		close(m.changed)
		m.changed = nil
	}
}

// waitStreams waits until the server has opened at least opened event
// streams and exactly one is open.
func (e *browserEnv) waitStreams(opened int) {
	e.t.Helper()
	m := e.metrics
	deadline := time.After(browserWait)
	for {
		m.mu.Lock()
		ok, n, o := m.opened >= opened && m.streams == 1, m.streams, m.opened
		if m.changed == nil {
			m.changed = make(chan struct{})
		}
		ch := m.changed
		m.mu.Unlock()
		if ok {
			return
		}
		select {
		case <-ch:
		case <-deadline:
			e.t.Fatalf("waiting for %d event streams opened, one open: %d opened, %d open", opened, o, n)
		}
	}
}

// dropStreams ends every open event stream from the server's side, the
// way the hub ends the streams of a revoked token.
func (e *browserEnv) dropStreams() { e.srv.hub.EndStreams() }
func (m *routeCounter) Handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "") })
}
func (m *routeCounter) count(routeAndCode string) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.n[routeAndCode]
}

// ---- The tests

func testBrowserSubmit(t *testing.T, e *browserEnv) {
	const answer = "The answer is **42**.\n\n- one\n- two\n\n```\nfmt.Println(42)\n```"
	hold, release := e.hold()
	e.prov.Enqueue(providertest.Response{Text: answer, Hold: hold})
	e.open(e.tab)

	// Enter sends, Shift+Enter breaks the line.
	e.do(e.tab, "typing", chromedp.SendKeys(chromedp.CSS("#compose-text"), "line one"),
		chromedp.KeyEvent(kb.Enter, chromedp.KeyModifiers(chromedp.ModifierShift)),
		chromedp.SendKeys(chromedp.CSS("#compose-text"), "line two"), enter)
	const q = "line one\nline two"
	e.waitFor(e.tab, "queued or running", whenPrompt(q, `p.classList.contains('is-queued') || p.classList.contains('is-pending')`))
	if v := eval[string](e, e.tab, `document.getElementById('compose-text').value`); v != "" {
		t.Errorf("the compose box holds %q after sending", v)
	}
	e.waitArrivals(1)
	e.waitFor(e.tab, "running (is-pending)", whenPrompt(q, `p.classList.contains('is-pending') && !p.classList.contains('is-queued')`))
	e.waitFor(e.tab, "a cancel control while running", whenPrompt(q, `!p.querySelector('.cancel').hidden`))
	release()
	e.waitFor(e.tab, "the answer", whenPrompt(q, settled+` && p.querySelector('.answer strong').textContent === '42' && p.querySelectorAll('.answer li').length === 2`))
	// The card names the backend that answered.
	e.waitFor(e.tab, "the answering backend", whenPrompt(q, `p.querySelector('.meta').textContent.includes('from `+enginekit.BackendID+`')`))
	e.waitFor(e.tab, "the answer announced", `document.getElementById('announcer').textContent.startsWith('Answered')`)

	// Copy copies the Markdown as written.
	e.do(e.tab, "copying", chromedp.Evaluate[chromedp.Void](
		`navigator.clipboard.writeText = (text) => { window.copied = text; return Promise.resolve(); }`))
	e.press(e.tab, "#p-"+e.promptID(e.tab, q)+" .copy")
	e.waitFor(e.tab, "the copied Markdown", `window.copied === `+js(answer))
}

func testBrowserRetry(t *testing.T, e *browserEnv) {
	e.prov.Enqueue(providertest.Status(400))
	e.open(e.tab)
	id := e.ask(e.tab, "fail first")
	e.waitFor(e.tab, "is-orphan with its error kind and a retry chip", whenPrompt("fail first",
		`p.classList.contains('is-orphan') && p.querySelector('.error-kind').textContent === 'provider_4xx' && !p.querySelector('.retry').hidden && p.querySelector('.cancel').hidden`))
	e.prov.Enqueue(providertest.Reply("Recovered answer"))
	e.press(e.tab, "#p-"+id+" .retry")
	e.waitFor(e.tab, "the retried answer", whenPrompt("fail first", settled+` && p.querySelector('.answer').textContent.includes('Recovered answer')`))

	// The failed attempt is superseded: hidden until history is on.
	attempt := `document.querySelector('#p-` + id + ` .attempt.is-superseded')`
	e.waitFor(e.tab, "the superseded attempt, hidden", attempt+` && getComputedStyle(`+attempt+`).display === 'none'`)
	e.do(e.tab, "turning history on", chromedp.Click(chromedp.CSS("#history")))
	e.waitFor(e.tab, "the superseded attempt, shown", `getComputedStyle(`+attempt+`).display !== 'none' && `+attempt+`.textContent.includes('provider_4xx')`)
}

func testBrowserCancel(t *testing.T, e *browserEnv) {
	hold, _ := e.hold()
	e.prov.Enqueue(providertest.Response{Text: "too late", Hold: hold})
	e.open(e.tab)
	id := e.ask(e.tab, "slow one")
	e.waitArrivals(1)
	e.waitFor(e.tab, "running", whenPrompt("slow one", `p.classList.contains('is-pending')`))
	e.press(e.tab, "#p-"+id+" .cancel")
	e.waitFor(e.tab, "is-cancelled, with no cancel or retry control", whenPrompt("slow one",
		`p.classList.contains('is-cancelled') && !p.classList.contains('is-pending') && p.querySelector('.cancel').hidden && p.querySelector('.retry').hidden`))
	// The Cancel control is gone: its prompt has the focus.
	e.waitFor(e.tab, "the focus on the prompt", `document.activeElement.id === `+js("p-"+id))
}

func testBrowserOrder(t *testing.T, e *browserEnv) {
	hold, release := e.hold()
	e.prov.Enqueue(providertest.Response{Text: "first answer", Hold: hold}, providertest.Reply("second answer"))
	e.open(e.tab)
	e.ask(e.tab, "first question")
	e.waitArrivals(1) // the first holds the held reply
	e.ask(e.tab, "second question")
	order := `[...document.querySelectorAll('li.prompt .question')].map(q => q.textContent).join('|') === 'first question|second question'`
	e.waitFor(e.tab, "the second answer while the first runs", whenPrompt("second question", settled)+` && `+
		whenPrompt("first question", `p.classList.contains('is-pending')`))
	e.waitFor(e.tab, "creation order", order)
	release()
	e.waitFor(e.tab, "the first answer", whenPrompt("first question", settled))
	e.waitFor(e.tab, "creation order", order)
}

func testBrowserPolling(t *testing.T, e *browserEnv) {
	e.do(e.tab, "blocking /v1/events",
		chromedp.Func(func(ctx context.Context, tgt *chromedp.Target) error {
			if _, err := cdp.Call(ctx, tgt, network.Enable, network.EnableParams{}); err != nil {
				return err
			}
			_, err := cdp.Call(ctx, tgt, network.SetBlockedURLs, network.SetBlockedURLsParams{
				URLPatterns: []*network.BlockPattern{{URLPattern: e.srv.URL() + "/v1/events", Block: true}},
			})
			return err
		}),
		chromedp.Navigate(e.srv.URL()+"/"))
	e.waitFor(e.tab, "the stream to fail, nothing in flight", `document.body.dataset.updates === 'idle'`)
	hold, release := e.hold()
	e.prov.Enqueue(providertest.Response{Text: "polled answer", Hold: hold})
	e.ask(e.tab, "poll for me")
	e.waitFor(e.tab, "polling while in flight", `document.body.dataset.updates === 'polling'`)
	e.waitArrivals(1)
	e.waitFor(e.tab, "running, seen by polling", whenPrompt("poll for me", `p.classList.contains('is-pending')`))
	release()
	e.waitFor(e.tab, "the answer, by polling", whenPrompt("poll for me", settled+` && p.querySelector('.answer').textContent.includes('polled answer')`))
	e.waitFor(e.tab, "polling to stop with nothing in flight", `document.body.dataset.updates === 'idle'`)
	if n := e.metrics.count("GET /v1/events 200"); n != 0 {
		t.Errorf("%d event streams reached the server; the block failed", n)
	}
	if n := e.metrics.count("GET /v1/recent 200"); n == 0 {
		t.Error("the page never polled /v1/recent")
	}
}

func testBrowserReload(t *testing.T, e *browserEnv) {
	e.prov.Enqueue(providertest.Reply("kept answer"))
	e.open(e.tab)
	e.ask(e.tab, "remember me")
	e.waitFor(e.tab, "the answer", whenPrompt("remember me", settled))
	e.do(e.tab, "reloading", chromedp.Reload())
	e.waitFor(e.tab, "the answer after a reload", whenPrompt("remember me", settled+` && p.querySelector('.answer').textContent.includes('kept answer')`))

	// Close the tab while a job runs: it goes on, and a new tab shows its
	// answer.
	hold, release := e.hold()
	e.prov.Enqueue(providertest.Response{Text: "finished meanwhile", Hold: hold})
	tab, closeTab := chromedp.NewContext(e.browser)
	tab, cancel := context.WithTimeout(tab, browserTestTimeout)
	defer cancel()
	e.open(tab)
	id := e.ask(tab, "outlive the tab")
	e.waitArrivals(2)
	e.waitFor(tab, "running", whenPrompt("outlive the tab", `p.classList.contains('is-pending')`))
	closeTab()
	release()
	var v promptView
	if err := getJSON(e.srv.URL()+"/v1/prompts/"+id, &v); err != nil {
		t.Fatal(err)
	}
	if j := e.waitJob(v.Job.ID); j.State != jobs.Succeeded {
		t.Fatalf("after the tab closed, the job is %s, want succeeded", j.State)
	}
	reopened := e.newTab()
	e.open(reopened)
	e.waitFor(reopened, "the answer in a new tab", whenPrompt("outlive the tab", settled+` && p.querySelector('.answer').textContent.includes('finished meanwhile')`))
	e.waitFor(reopened, "creation order", `[...document.querySelectorAll('li.prompt .question')].map(q => q.textContent).join('|') === 'remember me|outlive the tab'`)
}

func testBrowserLoad(t *testing.T, e *browserEnv) {
	// Before the page opens: an answered prompt, and one that failed and
	// was retried.
	e.prov.Enqueue(providertest.Reply("first answer"))
	if j := e.waitJob(e.submitAPI("loaded one").JobID); j.State != jobs.Succeeded {
		t.Fatalf("first job %s", j.State)
	}
	e.prov.Enqueue(providertest.Status(400))
	two := e.submitAPI("loaded two")
	if j := e.waitJob(two.JobID); j.State != jobs.Failed {
		t.Fatalf("second job %s", j.State)
	}
	e.prov.Enqueue(providertest.Reply("retried answer"))
	res, err := http.Post(e.srv.URL()+"/v1/prompts/"+two.PromptID+"/retry", "application/json", strings.NewReader("{}"))
	if err != nil {
		t.Fatal(err)
	}
	var retried submitted
	err = json.NewDecoder(res.Body).Decode(&retried)
	res.Body.Close()
	if err != nil || res.StatusCode != http.StatusAccepted {
		t.Fatalf("retry: %d %v", res.StatusCode, err)
	}
	if j := e.waitJob(retried.JobID); j.State != jobs.Succeeded {
		t.Fatalf("retried job %s", j.State)
	}

	e.open(e.tab)
	e.waitFor(e.tab, "the first answer", whenPrompt("loaded one", settled+` && p.querySelector('.answer').textContent.includes('first answer')`))
	e.waitFor(e.tab, "the retried answer", whenPrompt("loaded two", settled+` && p.querySelector('.answer').textContent.includes('retried answer')`))
	if n := e.metrics.count("GET /v1/prompts 200"); n != 1 {
		t.Errorf("the page listed prompts %d times, want once", n)
	}
	if n := e.metrics.count("GET /v1/prompts/{id} 200"); n != 0 {
		t.Errorf("loading read %d prompts one by one; the listing holds all the page needs", n)
	}

	// History on: the retried prompt's earlier attempt is read, and only
	// that prompt's.
	e.do(e.tab, "turning history on", chromedp.Click(chromedp.CSS("#history")))
	attempt := `document.querySelector('#p-` + two.PromptID + ` .attempt.is-superseded')`
	e.waitFor(e.tab, "the earlier attempt, shown", attempt+` && getComputedStyle(`+attempt+`).display !== 'none' && `+attempt+`.textContent.includes('provider_4xx')`)
	if n := e.metrics.count("GET /v1/prompts/{id} 200"); n != 1 {
		t.Errorf("history read %d prompts, want the retried one only", n)
	}
}

func getJSON(url string, v any) error {
	res, err := http.Get(url)
	if err != nil {
		return err
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %d", url, res.StatusCode)
	}
	return json.NewDecoder(res.Body).Decode(v)
}

func testBrowserCompose(t *testing.T, e *browserEnv) {
	e.open(e.tab)
	const draft = "a draft, half written"
	e.do(e.tab, "typing a draft", chromedp.SendKeys(chromedp.CSS("#compose-text"), draft))

	// Another client's prompt runs and finishes: the page shows it...
	hold, release := e.hold()
	e.prov.Enqueue(providertest.Response{Text: "from elsewhere", Hold: hold})
	e.submitAPI("another client's prompt")
	e.waitArrivals(1)
	e.waitFor(e.tab, "the other prompt running", whenPrompt("another client's prompt", `p.classList.contains('is-pending')`))
	release()
	e.waitFor(e.tab, "the other prompt's answer", whenPrompt("another client's prompt", settled))
	e.prov.Enqueue(providertest.Status(400))
	e.submitAPI("and a failure")
	e.waitFor(e.tab, "the failure", whenPrompt("and a failure", `p.classList.contains('is-orphan')`))

	// ...and the draft, the focus and the caret are where they were.
	if got := eval[string](e, e.tab, `document.getElementById('compose-text').value`); got != draft {
		t.Fatalf("the compose box holds %q, want %q", got, draft)
	}
	if got := eval[string](e, e.tab, `document.activeElement.id`); got != "compose-text" {
		t.Errorf("focus moved to %q", got)
	}
	e.do(e.tab, "typing on", chromedp.KeyEvent(" and finished"))
	if got := eval[string](e, e.tab, `document.getElementById('compose-text').value`); got != draft+" and finished" {
		t.Errorf("the compose box holds %q after typing on", got)
	}
}

func testBrowserUnsafeAnswer(t *testing.T, e *browserEnv) {
	const evil = "<script>window.pwned = 'script'</script>\n\n" +
		`Hello <img src=x onerror="window.pwned = 'onerror'"> and <b onmouseover="window.pwned = 'b'">bold</b>, ` +
		"[a link](javascript:window.pwned='link') and ![a picture](http://127.0.0.1:9/x.png)"
	e.prov.Enqueue(providertest.Reply(evil))
	e.open(e.tab)
	e.ask(e.tab, "say something nasty")
	e.waitFor(e.tab, "the answer", whenPrompt("say something nasty", settled))
	answer := findPrompt("say something nasty") + `.querySelector('.answer')`
	for _, check := range []struct{ what, cond string }{
		{"nothing ran", `window.pwned === undefined`},
		{"no script, image, frame or handler reached the page", answer + `.querySelectorAll('script, img, iframe, b, [onerror], [onmouseover]').length === 0`},
		{"the script is shown as text", answer + `.textContent.includes("<script>window.pwned = 'script'</script>")`},
		{"the onerror attribute is shown as text", answer + `.textContent.includes('<img src=x onerror="window.pwned = \'onerror\'">')`},
		{"the javascript: link is text", `![...` + answer + `.querySelectorAll('a')].some(a => a.textContent === 'a link')`},
		{"the picture is a link, not loaded", answer + `.querySelector('a[href="http://127.0.0.1:9/x.png"][rel~="noopener"]') !== null && performance.getEntriesByType('resource').every(r => !r.name.includes(':9/'))`},
	} {
		if !eval[bool](e, e.tab, check.cond) {
			t.Errorf("%s: false\n%s", check.what, e.pageState(e.tab))
		}
	}
}

func testBrowserContinue(t *testing.T, e *browserEnv) {
	p1 := e.submitAPI("thread one")
	p2 := e.submitAPI("thread two")
	e.waitJob(p1.JobID)
	e.waitJob(p2.JobID)
	a, b := e.tab, e.newTab()
	e.open(a)
	e.open(b)
	for _, tab := range []context.Context{a, b} {
		e.waitFor(tab, "both answers", whenPrompt("thread one", settled)+" && "+whenPrompt("thread two", settled))
	}
	// Interleaved: A picks thread one, B thread two, then both send.
	e.press(a, "#p-"+p1.PromptID+" .continue")
	e.press(b, "#p-"+p2.PromptID+" .continue")
	e.waitFor(a, "the continuation shown", `!document.getElementById('continuing').hidden && document.activeElement.id === 'compose-text'`)
	idA := e.ask(a, "follow-up in A")
	idB := e.ask(b, "follow-up in B")
	for _, c := range []struct{ id, parent string }{{idA, p1.PromptID}, {idB, p2.PromptID}} {
		p, err := e.st.GetPrompt(context.Background(), "", c.id)
		if err != nil {
			t.Fatal(err)
		}
		if p.ParentID != c.parent {
			t.Errorf("prompt %q has parent %s, want %s", p.Text, p.ParentID, c.parent)
		}
	}
	e.waitFor(a, "the follow-up linked to its parent", whenPrompt("follow-up in A", `p.querySelector('.parent-link').textContent === '“thread one”'`))
	// The tab stays in its thread: its next prompt would follow the one
	// just sent (testPageThread follows it further).
	e.waitFor(a, "the thread kept after sending", `!document.getElementById('continuing').hidden && document.getElementById('continuing-link').getAttribute('href') === '#p-`+idA+`'`)
}

func testBrowserToken(t *testing.T, e *browserEnv) {
	secret, hash := jobs.NewTokenSecret()
	if _, err := e.st.CreateToken(context.Background(), jobs.CreateTokenParams{OrgID: "acme", UserID: "ann", Role: jobs.RoleMember, Hash: hash}); err != nil {
		t.Fatal(err)
	}
	e.do(e.tab, "opening the page", chromedp.Navigate(e.srv.URL()+"/"))
	e.waitFor(e.tab, "the token field", `!document.getElementById('auth').hidden && document.activeElement.id === 'token'`)
	// Saving the token reloads the page with it.
	e.do(e.tab, "entering the token", chromedp.SendKeys(chromedp.CSS("#token"), secret))
	if _, err := chromedp.Run(e.tab, chromedp.WaitEvent(page.LoadEventFired, nil, chromedp.KeyEvent(kb.Enter))); err != nil {
		t.Fatalf("saving the token: %v", err)
	}
	// EventSource cannot send a bearer token: the page streams with a
	// ticket instead.
	e.waitFor(e.tab, "the page with the token, streaming", `localStorage.getItem('promptkit.token') === `+js(secret)+
		` && document.body.dataset.updates === 'live' && document.getElementById('empty').hidden === false`)
	hold, release := e.hold()
	e.prov.Enqueue(providertest.Response{Text: "answer for ann", Hold: hold})
	e.ask(e.tab, "with a token")
	e.waitArrivals(1)
	e.waitFor(e.tab, "running, seen by the stream", whenPrompt("with a token", `p.classList.contains('is-pending')`)+
		` && document.body.dataset.updates === 'live'`)
	release()
	e.waitFor(e.tab, "the answer", whenPrompt("with a token", settled+` && p.querySelector('.answer').textContent.includes('answer for ann')`)+
		` && document.body.dataset.updates === 'live'`)
	if n := e.metrics.count("POST /v1/prompts 202"); n != 1 {
		t.Errorf("%d accepted submissions, want 1", n)
	}
	if n := e.metrics.count("POST /v1/events/ticket 200"); n != 1 {
		t.Errorf("%d stream tickets issued, want 1", n)
	}
	if n := e.metrics.count("GET /v1/recent 200"); n != 0 {
		t.Errorf("the page polled /v1/recent %d times while its stream was live", n)
	}

	// The server ends the stream (as at a restart): the page asks for a new ticket and resumes after the last
	// event it received, so nothing is missed and nothing is polled.
	e.waitStreams(1)
	e.dropStreams()
	e.waitStreams(2)
	e.waitFor(e.tab, "the stream live again", `document.body.dataset.updates === 'live'`)
	if n := e.metrics.count("POST /v1/events/ticket 200"); n != 2 {
		t.Errorf("%d stream tickets issued, want 2", n)
	}
	if n := e.metrics.count("GET /v1/events 200"); n != 1 {
		t.Errorf("%d event streams ended, want 1", n)
	}
	e.prov.Enqueue(providertest.Reply("second answer for ann"))
	e.ask(e.tab, "after the reconnect")
	e.waitFor(e.tab, "the second answer", whenPrompt("after the reconnect", settled+` && p.querySelector('.answer').textContent.includes('second answer for ann')`)+
		` && document.body.dataset.updates === 'live'`)
	if n := e.metrics.count("GET /v1/recent 200"); n != 0 {
		t.Errorf("the page polled /v1/recent %d times; the reconnect should resume the stream instead", n)
	}
}

func testBrowserProfiles(t *testing.T, e *browserEnv) {
	e.open(e.tab)
	// "default" (no profile: the server's default) first, then the
	// engine's other profiles, sorted; a labelled select.
	e.waitFor(e.tab, "the profiles", `[...document.getElementById('profile').options].map(o => o.value + '=' + o.textContent).join('|') === '=Default|careful=Careful (slower)|quick=Quick'`)
	e.waitFor(e.tab, "a labelled select", `(() => { const el = document.getElementById('profile');
		return el.tagName === 'SELECT' && el.value === '' && el.labels.length === 1 && el.labels[0].textContent.includes('Profile'); })()`)
	// Chosen with the keyboard, it goes with the prompt.
	e.do(e.tab, "choosing a profile with the keyboard", chromedp.Focus(chromedp.CSS("#profile")),
		chromedp.KeyEvent(kb.ArrowDown), chromedp.KeyEvent(kb.ArrowDown))
	e.waitFor(e.tab, "quick chosen", `document.getElementById('profile').value === 'quick'`)
	e.prov.Enqueue(providertest.Reply("a quick answer"))
	id := e.ask(e.tab, "with a profile")
	e.waitFor(e.tab, "the answer", whenPrompt("with a profile", settled+` && p.querySelector('.answer').textContent.includes('a quick answer')`))
	p, err := e.st.GetPrompt(context.Background(), LocalOrg, id)
	if err != nil {
		t.Fatal(err)
	}
	if p.Profile != "quick" {
		t.Errorf("the prompt was sent with profile %q, want quick", p.Profile)
	}
	if n := e.metrics.count("GET /v1/profiles 200"); n != 1 {
		t.Errorf("%d profile lists read, want 1", n)
	}
}

func testBrowserSettledPage(t *testing.T, e *browserEnv) {
	e.prov.Enqueue(
		providertest.Reply("Three things make a job durable:\n\n1. it is **stored** before it runs,\n2. a worker *claims* it,\n3. its result is written once.\n\n```sh\npromptkit jobs show JOB_ID\n```"),
		providertest.Status(400),
	)
	e.open(e.tab)
	first := e.ask(e.tab, "What makes a job durable?")
	e.waitFor(e.tab, "the answer", whenPrompt("What makes a job durable?", settled))
	e.ask(e.tab, "Summarize this in one line")
	e.waitFor(e.tab, "the failure", whenPrompt("Summarize this in one line", `p.classList.contains('is-orphan')`))
	e.prov.Enqueue(providertest.Reply("Stored first, claimed once, written once — so a closed tab loses nothing."))
	e.press(e.tab, "#p-"+first+" .continue")
	e.ask(e.tab, "And if I close the tab?")
	e.waitFor(e.tab, "the follow-up's answer", whenPrompt("And if I close the tab?", settled))
	e.do(e.tab, "typing a draft", chromedp.SendKeys(chromedp.CSS("#compose-text"), "What happens on a retry?"))

	// Every control has a name; state changes are announced.
	e.waitFor(e.tab, "labelled controls", `[...document.querySelectorAll('input, select, textarea, button')]
		.filter(el => el.offsetParent !== null)
		.every(el => (el.labels && el.labels.length > 0) || el.getAttribute('aria-label') || el.textContent.trim() !== '')`)
	e.waitFor(e.tab, "a live region", `document.querySelector('[aria-live]') !== null`)

	// Tall enough for the whole thread above the compose box (which
	// stays at the bottom of the window).
	e.do(e.tab, "a desktop viewport", chromedp.EmulateViewport(1000, 980))
	shot, err := chromedp.Run(e.tab, chromedp.CaptureScreenshot())
	if err != nil {
		t.Fatal(err)
	}
	e.artifact("page.png", shot)

	// Phone width: nothing wider than the screen.
	e.do(e.tab, "a phone-sized viewport", chromedp.EmulateViewport(390, 844, chromedp.EmulatePortrait, chromedp.EmulateMobile))
	e.waitFor(e.tab, "no horizontal scrolling at 390 px", `document.documentElement.scrollWidth <= window.innerWidth`)
	shot, err = chromedp.Run(e.tab, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatal(err)
	}
	e.artifact("page-phone.png", shot)
}
