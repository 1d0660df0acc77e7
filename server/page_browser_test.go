package server

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"

	"github.com/promptkit/promptkit"
	"github.com/promptkit/promptkit/internal/testkit/enginekit"
	"github.com/promptkit/promptkit/jobs"
	"github.com/promptkit/promptkit/jobs/worker"
	"github.com/promptkit/promptkit/providertest"
)

// The browser tests of what each card tells its reader (issue 28): times,
// attempts, tokens, the model and a profile's label, failures in words,
// threads that go on until left and fold away, a phone-sized compose box,
// and polling that shows all the event stream would. TestBrowserPage runs
// them, in its browser, beside its own.
var pageBrowserCases = []browserCase{
	{"a card says when it was asked, how long it ran, its attempt, tokens, model and profile", testPageCardFacts},
	{"a failure is told in words, with what to do and the detail behind a toggle", testPageFailureWords},
	{"a prompt that failed every attempt says 3/3", testPageFailedAttempts},
	{"a thread goes on until it is left, across a reload, and folds away", testPageThread},
	{"at 390x844 the compose box is small and never covers a card", testPagePhone},
	{"with the event stream blocked, idle polling shows other clients' prompts", testPageIdlePolling},
}

// visible is a condition: the element sel in p is rendered.
func visible(sel string) string {
	return fmt.Sprintf(`(el => !!el && el.checkVisibility())(p.querySelector(%s))`, js(sel))
}

// cardText is the JavaScript text of the element sel in p.
func cardText(sel string) string {
	return fmt.Sprintf(`p.querySelector(%s).textContent`, js(sel))
}

func testPageCardFacts(t *testing.T, e *browserEnv) {
	hold, release := e.hold()
	e.prov.Enqueue(providertest.Response{Text: "counted", Hold: hold,
		Usage: providertest.Usage{PromptTokens: 12, CompletionTokens: 34, TotalTokens: 46}})
	e.open(e.tab)
	// The profile select shows the configured label, the id as its
	// value and in its title.
	e.waitFor(e.tab, "the careful profile's label", `(o => !!o && o.textContent === 'Careful (slower)' && o.title.includes('careful'))(
		[...document.getElementById('profile').options].find(o => o.value === 'careful'))`)
	e.do(e.tab, "choosing careful", chromedp.SetValue(chromedp.CSS("#profile"), "careful"))
	e.ask(e.tab, "count my tokens")
	e.waitArrivals(1)
	const q = "count my tokens"
	// Running: asked just now, in local time; the running time goes up
	// while it runs; attempt 1 of 3.
	e.waitFor(e.tab, "running, with its facts", whenPrompt(q, `p.classList.contains('is-pending') && /^asked \d\d:\d\d.* \(just now\)$/.test(`+cardText(".asked")+`)
		&& `+cardText(".attempt-count")+` === 'attempt 1 of 3' && /^running \d+ s$/.test(`+cardText(".elapsed")+`)
		&& p.querySelector('.asked time').dateTime !== ''`))
	e.waitFor(e.tab, "the running time going up", whenPrompt(q, `/^running [1-9]\d* s$/.test(`+cardText(".elapsed")+`)`))
	release()
	e.waitFor(e.tab, "the answer with its model, profile, backend and tokens", whenPrompt(q, settled+`
		&& /^took \d+(\.\d)? s$/.test(`+cardText(".elapsed")+`)
		&& `+cardText(".meta")+` === 'model fake-model · profile Careful (slower) · from `+enginekit.BackendID+`'
		&& p.querySelector('.meta').title.includes('careful')
		&& `+cardText(".tokens")+` === 'tokens 12 in / 34 out'`))
}

func testPageFailureWords(t *testing.T, e *browserEnv) {
	e.prov.Enqueue(providertest.Status(400))
	e.open(e.tab)
	e.ask(e.tab, "refuse me")
	kind := jobs.KindProvider4xx
	e.waitFor(e.tab, "the failure in words", whenPrompt("refuse me", `p.classList.contains('is-orphan')
		&& `+cardText(".failure-title")+` === `+js(kind.Title())+`
		&& `+cardText(".failure-advice")+` === `+js(kind.Advice())+`
		&& `+visible(".failure-title")+` && `+visible(".retry")+`
		&& `+cardText(".attempt-count")+` === 'tried 1/3'`))
	// The developer's detail is there, folded away until asked for.
	e.waitFor(e.tab, "the detail folded", whenPrompt("refuse me", visible(".failure-details summary")+` && !`+visible(".error-kind")+
		` && `+cardText(".error-kind")+` === 'provider_4xx' && `+cardText(".error-message")+` !== ''`))
	e.do(e.tab, "opening the details", chromedp.Click(chromedp.CSS(`li.prompt .failure-details summary`)))
	e.waitFor(e.tab, "the detail shown", whenPrompt("refuse me", visible(".error-kind")+` && `+visible(".error-message")))
}

func testPageFailedAttempts(t *testing.T, e *browserEnv) {
	// Every attempt gets a 503 (the engine's own retries off), and the
	// worker's clock runs a minute behind, so its backoff between
	// attempts has passed already when it is written: three attempts
	// without waiting for them.
	e2 := newBrowserEnv(t, e.browser, envOptions{
		engine: func(c *promptkit.Config) { c.TransientRetries = new(0) },
		worker: func(c *worker.Config) {
			c.Now = func() time.Time { return time.Now().Add(-time.Minute) }
			c.Jitter = func(time.Duration) time.Duration { return 0 }
		},
	})
	e2.prov.Enqueue(providertest.Status(503), providertest.Status(503), providertest.Status(503))
	e2.open(e2.tab)
	e2.ask(e2.tab, "fail three times")
	kind := jobs.KindProvider5xx
	e2.waitFor(e2.tab, "failed after 3 of 3 attempts", whenPrompt("fail three times", `p.classList.contains('is-orphan')
		&& `+cardText(".attempt-count")+` === 'tried 3/3'
		&& `+cardText(".failure-title")+` === `+js(kind.Title()+" promptkit tried 3 times.")+`
		&& `+cardText(".failure-advice")+` === `+js(kind.Advice())))
	if n := e2.prov.Count(); n != 3 {
		t.Errorf("%d provider calls, want 3", n)
	}
}

// parentOf reads a prompt's parent from the store.
func (e *browserEnv) parentOf(id string) string {
	e.t.Helper()
	p, err := e.st.GetPrompt(context.Background(), LocalOrg, id)
	if err != nil {
		e.t.Fatal(err)
	}
	return p.ParentID
}

func testPageThread(t *testing.T, e *browserEnv) {
	for i := range 6 {
		e.prov.Enqueue(providertest.Reply("answer " + strconv.Itoa(i+1)))
	}
	e.open(e.tab)
	root := e.ask(e.tab, "root question")
	e.waitFor(e.tab, "the first answer", whenPrompt("root question", settled))
	e.press(e.tab, "#p-"+root+" .continue")
	e.waitFor(e.tab, "the thread shown, with a way out", `!document.getElementById('continuing').hidden
		&& document.getElementById('continuing-clear').textContent === 'Leave thread' && document.activeElement.id === 'compose-text'`)
	second := e.ask(e.tab, "second in thread")
	e.waitFor(e.tab, "the second answer", whenPrompt("second in thread", settled))
	third := e.ask(e.tab, "third in thread")
	e.waitFor(e.tab, "the third answer", whenPrompt("third in thread", settled))
	// Each follows the newest prompt of the thread, not the first.
	if got := e.parentOf(second); got != root {
		t.Errorf("the second prompt's parent is %s, want the root %s", got, root)
	}
	if got := e.parentOf(third); got != second {
		t.Errorf("the third prompt's parent is %s, want the second %s", got, second)
	}

	// A reload keeps the tab in its thread.
	e.do(e.tab, "reloading", chromedp.Reload())
	e.waitFor(e.tab, "the thread after a reload", `!document.getElementById('continuing').hidden
		&& document.getElementById('continuing-link').getAttribute('href') === '#p-`+third+`'
		&& document.getElementById('continuing-link').textContent === '“root question”'`)
	e.waitFor(e.tab, "the page live again", `document.body.dataset.updates === 'live'`)
	fourth := e.ask(e.tab, "fourth in thread")
	e.waitFor(e.tab, "the fourth answer", whenPrompt("fourth in thread", settled))
	if got := e.parentOf(fourth); got != third {
		t.Errorf("after a reload, the fourth prompt's parent is %s, want the third %s", got, third)
	}

	// Leaving the thread: the next prompt starts a new one.
	e.press(e.tab, "#continuing-clear")
	e.waitFor(e.tab, "the thread left", `document.getElementById('continuing').hidden`)
	fresh := e.ask(e.tab, "a new conversation")
	e.waitFor(e.tab, "the new conversation's answer", whenPrompt("a new conversation", settled))
	if got := e.parentOf(fresh); got != "" {
		t.Errorf("after leaving the thread, the prompt's parent is %s, want none", got)
	}

	// Grouped: the thread's prompts under its first, in order; the new
	// conversation is its own thread, after it (the newest).
	conv := `document.querySelector('li.conv[data-root="` + root + `"]')`
	e.waitFor(e.tab, "the threads grouped", `[...document.querySelectorAll('li.conv')].map(c =>
		[...c.querySelectorAll('li.prompt .question')].map(q => q.textContent).join('>')).join('|')
		=== 'root question>second in thread>third in thread>fourth in thread|a new conversation'`)
	e.waitFor(e.tab, "the thread's bar", conv+`.querySelector('.conv-bar').checkVisibility()
		&& `+conv+`.querySelector('.conv-title').textContent === 'Thread of 4 prompts'`)
	// Collapsed, only its first prompt shows; expanded, all again.
	e.press(e.tab, `li.conv[data-root="`+root+`"] .conv-toggle`)
	e.waitFor(e.tab, "the thread collapsed", `(c => c.querySelector('.conv-toggle').getAttribute('aria-expanded') === 'false'
		&& c.querySelector('.conv-toggle').textContent === 'Show 3 follow-ups'
		&& [...c.querySelectorAll('li.prompt')].map(li => li.checkVisibility()).join() === 'true,false,false,false')(`+conv+`)`)
	e.press(e.tab, `li.conv[data-root="`+root+`"] .conv-toggle`)
	e.waitFor(e.tab, "the thread expanded", `(c => c.querySelector('.conv-toggle').getAttribute('aria-expanded') === 'true'
		&& [...c.querySelectorAll('li.prompt')].every(li => li.checkVisibility()))(`+conv+`)`)
}

// composeHeight is the compose box's height in CSS pixels, and whether
// the last card (or the card of text) lies wholly above it and in the
// window.
const composeCheck = `(() => {
	const box = document.getElementById('compose').getBoundingClientRect();
	const cards = [...document.querySelectorAll('li.prompt')];
	const card = (window.checkCard ? cards.find(li => li.querySelector('.question').textContent === window.checkCard) : cards.at(-1)).getBoundingClientRect();
	return {height: box.height, clear: card.bottom <= box.top + 0.5 && card.top >= 0};
})()`

type composeState struct {
	Height float64 `json:"height"`
	Clear  bool    `json:"clear"`
}

func testPagePhone(t *testing.T, e *browserEnv) {
	for i := range 4 {
		e.prov.Enqueue(providertest.Reply(strings.Repeat("A line of the answer that wraps on a phone. ", 6) + strconv.Itoa(i)))
	}
	e.do(e.tab, "a phone-sized viewport", chromedp.EmulateViewport(390, 844, chromedp.EmulatePortrait, chromedp.EmulateMobile))
	e.open(e.tab)
	for i := range 4 {
		q := "phone question " + strconv.Itoa(i+1)
		e.ask(e.tab, q)
		e.waitFor(e.tab, "its answer", whenPrompt(q, settled))
	}
	// Scrolled to the end, the last card is wholly above the compose box.
	e.do(e.tab, "scrolling to the end", chromedp.Evaluate[chromedp.Void](`window.scrollTo(0, document.documentElement.scrollHeight)`))
	e.waitFor(e.tab, "the last card clear of the compose box", composeCheck+`.clear`)
	st := eval[composeState](e, e.tab, composeCheck)
	t.Logf("at 390x844 the compose box is %.0f px high", st.Height)
	if st.Height > 130 {
		t.Errorf("the compose box is %.0f px high at 390x844, want at most 130", st.Height)
	}
	// A prompt sent from the top of the page is scrolled into view above
	// the compose box, not under it (a held answer keeps it small).
	hold, release := e.hold()
	defer release()
	e.prov.Enqueue(providertest.Response{Text: "later", Hold: hold})
	e.do(e.tab, "scrolling to the top", chromedp.Evaluate[chromedp.Void](`window.scrollTo(0, 0); window.checkCard = 'sent from the top'`))
	e.ask(e.tab, "sent from the top")
	e.waitArrivals(5)
	e.waitFor(e.tab, "the new card clear of the compose box", whenPrompt("sent from the top", `p.classList.contains('is-pending')`)+` && `+composeCheck+`.clear`)
	e.waitFor(e.tab, "no horizontal scrolling at 390 px", `document.documentElement.scrollWidth <= window.innerWidth`)
}

// blockStream makes tab's requests for the event stream fail, as a proxy
// that buffers or drops it would.
func (e *browserEnv) blockStream(tab context.Context) {
	e.t.Helper()
	e.do(tab, "blocking /v1/events", chromedp.Func(func(ctx context.Context, tgt *chromedp.Target) error {
		if _, err := cdp.Call(ctx, tgt, network.Enable, network.EnableParams{}); err != nil {
			return err
		}
		_, err := cdp.Call(ctx, tgt, network.SetBlockedURLs, network.SetBlockedURLsParams{
			URLPatterns: []*network.BlockPattern{{URLPattern: e.srv.URL() + "/v1/events", Block: true}},
		})
		return err
	}))
}

func testPageIdlePolling(t *testing.T, e *browserEnv) {
	// Short intervals for the test, idle three times the busy one, so the
	// spacing of the polls tells which applies.
	const busyMS, idleMS = 200, 600
	e.blockStream(e.tab)
	e.do(e.tab, "opening the page", chromedp.Navigate(fmt.Sprintf("%s/?poll_ms=%d&idle_poll_ms=%d", e.srv.URL(), busyMS, idleMS)))
	e.waitFor(e.tab, "the stream to fail, nothing in flight", `document.body.dataset.updates === 'idle'
		&& document.getElementById('connection').textContent === 'Nothing running · checking every 0.6 s'`)
	// Idle, the page polls, every idle interval — not the busy one.
	const polls = `performance.getEntriesByType('resource').filter(r => r.name.includes('/v1/recent')).map(r => r.startTime)`
	e.waitFor(e.tab, "three idle polls", polls+`.length >= 3`)
	gaps := eval[[]float64](e, e.tab, `(ts => ts.slice(1).map((t, i) => t - ts[i]))(`+polls+`)`)
	for _, g := range gaps {
		// A timer never fires early; a few ms of slack for the clocks.
		if g < idleMS-20 {
			t.Errorf("idle polls %.0f ms apart, want at least the idle interval %d ms (gaps %v)", g, idleMS, gaps)
		}
	}
	if n := eval[int](e, e.tab, `document.querySelectorAll('li.prompt').length`); n != 0 {
		t.Fatalf("%d prompts before any was sent", n)
	}

	// Ten prompts from another client, the page idle meanwhile: all ten
	// appear, and their answers, as through the stream.
	var want []string
	for i := range 10 {
		q := "from elsewhere " + strconv.Itoa(i+1)
		want = append(want, q)
		e.prov.Enqueue(providertest.Reply("answer " + strconv.Itoa(i+1)))
		e.submitAPI(q)
	}
	e.waitFor(e.tab, "all ten prompts", `[...document.querySelectorAll('li.prompt .question')].map(q => q.textContent).join('|') === `+js(strings.Join(want, "|")))
	e.waitFor(e.tab, "all ten answers", `[...document.querySelectorAll('li.prompt')].every(p => `+settled+`)`)
	e.waitFor(e.tab, "idle again", `document.body.dataset.updates === 'idle'`)
	if n := e.metrics.count("GET /v1/events 200"); n != 0 {
		t.Errorf("%d event streams reached the server; the block failed", n)
	}
}

// TestScreenshot regenerates docs/screenshot.png (the README's picture of
// the page) from the real page in Chromium. It runs only when asked:
//
//	PROMPTKIT_SCREENSHOTS=docs go test -run TestScreenshot ./server/
//
// PROMPTKIT_SCREENSHOTS is the folder to write to, relative to the
// repository's root.
func TestScreenshot(t *testing.T) {
	dir := screenshotDir(t)
	browser := startBrowser(t)
	e := newBrowserEnv(t, browser, envOptions{
		engine: func(c *promptkit.Config) { c.TransientRetries = new(0) },
		worker: func(c *worker.Config) {
			c.Now = func() time.Time { return time.Now().Add(-time.Minute) }
			c.Jitter = func(time.Duration) time.Duration { return 0 }
		},
	})
	e.prov.Enqueue(
		providertest.Response{Text: "Three things make a job durable:\n\n1. it is **stored** before it runs,\n2. a worker *claims* it,\n3. its result is written once.\n\n```sh\npromptkit jobs show JOB_ID\n```",
			Usage: providertest.Usage{PromptTokens: 14, CompletionTokens: 41, TotalTokens: 55}},
		providertest.Status(503), providertest.Status(503), providertest.Status(503),
	)
	e.do(e.tab, "a desktop viewport", chromedp.EmulateViewport(1100, 1000))
	e.open(e.tab)
	first := e.ask(e.tab, "What makes a job durable?")
	e.waitFor(e.tab, "the answer", whenPrompt("What makes a job durable?", settled))
	e.ask(e.tab, "Summarize this in one line")
	e.waitFor(e.tab, "the failure", whenPrompt("Summarize this in one line", `p.classList.contains('is-orphan') && p.querySelector('.failure-title').textContent.includes('3 times')`))
	e.prov.Enqueue(providertest.Response{Text: "Stored first, claimed once, written once — so a closed tab loses nothing.",
		Usage: providertest.Usage{PromptTokens: 70, CompletionTokens: 16, TotalTokens: 86}})
	e.press(e.tab, "#p-"+first+" .continue")
	e.ask(e.tab, "And if I close the tab?")
	e.waitFor(e.tab, "the follow-up's answer", whenPrompt("And if I close the tab?", settled))
	e.do(e.tab, "typing a draft", chromedp.SendKeys(chromedp.CSS("#compose-text"), "What happens on a retry?"))
	e.capture(e.tab, filepath.Join(dir, "screenshot.png"))
}

// screenshotDir is where the screenshot tests write: PROMPTKIT_SCREENSHOTS,
// relative to the repository's root. Without it they skip: they run only
// when asked.
func screenshotDir(t *testing.T) string {
	dir := os.Getenv("PROMPTKIT_SCREENSHOTS")
	if dir == "" {
		t.Skip("set PROMPTKIT_SCREENSHOTS=docs to regenerate the README's pictures")
	}
	if !filepath.IsAbs(dir) {
		dir = filepath.Join("..", dir)
	}
	return dir
}

// capture writes a PNG of the whole page in tab to path: the window made
// as tall as the page, so it is one picture.
func (e *browserEnv) capture(tab context.Context, path string) {
	e.t.Helper()
	w := eval[int64](e, tab, `window.innerWidth`)
	h := eval[int64](e, tab, `document.documentElement.scrollHeight`)
	e.do(tab, "a window the page's height", chromedp.EmulateViewport(w, h), chromedp.Evaluate[chromedp.Void](`window.scrollTo(0, 0)`))
	shot, err := chromedp.Run(tab, chromedp.CaptureScreenshot())
	if err != nil {
		e.t.Fatal(err)
	}
	if err := os.WriteFile(path, shot, 0o644); err != nil {
		e.t.Fatal(err)
	}
	e.t.Logf("wrote %s (%d bytes)", path, len(shot))
}
