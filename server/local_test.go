package server

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/promptkit/promptkit/jobs"
	"github.com/promptkit/promptkit/providertest"
)

// rawCall is a request as curl would make it: any Host, any headers,
// nothing added. headers are name, value pairs.
func (e *env) rawCall(method, path, host, body string, headers ...string) resp {
	e.t.Helper()
	req, err := http.NewRequest(method, e.srv.URL()+path, strings.NewReader(body))
	if err != nil {
		e.t.Fatal(err)
	}
	if body == "" {
		req.Body, req.ContentLength = nil, 0
	}
	if host != "" {
		req.Host = host
	}
	return e.send(req, headers...)
}

// TestLocalModeRefusesOtherSites: without a token, a request a web page
// could make — to a rebound name, cross-origin, or with a body a form or
// a no-cors fetch can send — is refused before it acts, in the shape of
// its route; what the page, curl and the SDKs send still works.
func TestLocalModeRefusesOtherSites(t *testing.T) {
	t.Parallel()
	// No worker runs: a chat completion let through answers 504 at once
	// rather than waiting.
	e := setup(t, func(c *Config) { c.ChatTimeout = time.Nanosecond })
	victim := e.submit("", map[string]any{"text": "mine"})
	_, port, _ := net.SplitHostPort(e.srv.Addr())
	const text, jsonType = "text/plain;charset=UTF-8", "application/json"
	prompt, chat := `{"text":"x"}`, `{"model":"default","messages":[{"role":"user","content":"x"}]}`

	for _, c := range []struct {
		what, method, path, host, body string
		headers                        []string
		code                           int
		errCode                        string
	}{
		{"rebound name reads", "GET", "/v1/prompts", "evil.example:" + port, "", nil, 403, "forbidden"},
		{"rebound name submits", "POST", "/v1/prompts", "evil.example", prompt, []string{"Content-Type", jsonType}, 403, "forbidden"},
		{"rebound name, front door", "GET", "/v1/models", "evil.example:" + port, "", nil, 403, "forbidden"},
		{"rebound name, the page", "GET", "/", "evil.example:" + port, "", nil, 403, "forbidden"},
		{"cross-origin text/plain submit", "POST", "/v1/prompts", "", prompt, []string{"Origin", "http://evil.example", "Content-Type", text}, 403, "forbidden"},
		{"cross-origin JSON submit", "POST", "/v1/prompts", "", prompt, []string{"Origin", "http://evil.example", "Content-Type", jsonType}, 403, "forbidden"},
		{"cross-site chat completion", "POST", "/v1/chat/completions", "", chat, []string{"Sec-Fetch-Site", "cross-site", "Content-Type", text}, 403, "forbidden"},
		{"same-site other port cancels", "POST", "/v1/jobs/" + victim.JobID + "/cancel", "", "", []string{"Sec-Fetch-Site", "same-site"}, 403, "forbidden"},
		{"cross-origin retry", "POST", "/v1/prompts/" + victim.PromptID + "/retry", "", "", []string{"Origin", "http://localhost:1"}, 403, "forbidden"},
		{"text/plain submit without Origin", "POST", "/v1/prompts", "", prompt, []string{"Content-Type", text}, 415, "unsupported_media_type"},
		{"form submit without Origin", "POST", "/v1/prompts", "", prompt, []string{"Content-Type", "application/x-www-form-urlencoded"}, 415, "unsupported_media_type"},
		{"no content type", "POST", "/v1/prompts", "", prompt, nil, 415, "unsupported_media_type"},
		{"text/plain chat completion", "POST", "/v1/chat/completions", "", chat, []string{"Content-Type", text}, 415, "unsupported_media_type"},
		{"text/plain batch", "POST", "/v1/batches", "", `{}`, []string{"Content-Type", text}, 415, "unsupported_media_type"},
	} {
		r := e.rawCall(c.method, c.path, c.host, c.body, c.headers...)
		if r.code != c.code || errorCodeOf(r) != c.errCode {
			t.Errorf("%s: %d %s, want %d %s", c.what, r.code, r.body, c.code, c.errCode)
		}
	}
	// Nothing a refused request asked for happened.
	page, err := e.st.ListJobs(context.Background(), jobs.ListParams{})
	if err != nil || len(page.Jobs) != 1 || page.Jobs[0].State != jobs.Queued {
		t.Fatalf("after the refusals: %+v, %v; want only the victim, still queued", page.Jobs, err)
	}

	// What a local user's own tools send is answered.
	for _, c := range []struct {
		what, method, path, host, body string
		headers                        []string
		code                           int
	}{
		{"curl, IP host", "POST", "/v1/prompts", "", prompt, []string{"Content-Type", jsonType}, 202},
		{"localhost name", "GET", "/v1/prompts", "localhost:" + port, "", nil, 200},
		{"a name under .localhost", "GET", "/v1/prompts", "promptkit.localhost:" + port, "", nil, 200},
		{"IPv6 literal", "GET", "/v1/prompts", "[::1]:" + port, "", nil, 200},
		{"the page, same-origin", "POST", "/v1/prompts", "", prompt, []string{"Sec-Fetch-Site", "same-origin", "Content-Type", jsonType}, 202},
		{"the page's Origin", "POST", "/v1/prompts", "", prompt, []string{"Origin", e.srv.URL(), "Content-Type", "application/json; charset=utf-8"}, 202},
		{"typed in the address bar", "GET", "/v1/prompts", "", "", []string{"Sec-Fetch-Site", "none"}, 200},
		{"an SDK's chat completion", "POST", "/v1/chat/completions", "", strings.Replace(chat, `"default"`, `"nope"`, 1), []string{"Content-Type", jsonType, "Authorization", "Bearer sk-real-openai-key"}, 404},
		{"bodyless cancel", "POST", "/v1/jobs/" + victim.JobID + "/cancel", "", "", nil, 200},
		{"probe by pod name", "GET", "/healthz", "promptkit-0.promptkit:8080", "", nil, 200},
		{"the API document", "GET", "/openapi.json", "evil.example", "", nil, 200},
	} {
		if r := e.rawCall(c.method, c.path, c.host, c.body, c.headers...); r.code != c.code {
			t.Errorf("%s: %d %s, want %d", c.what, r.code, r.body, c.code)
		}
	}
}

// errorCodeOf is the code of an error answer in either shape.
func errorCodeOf(r resp) string {
	var b struct {
		Error struct {
			Code *string `json:"code"`
		} `json:"error"`
	}
	if json.Unmarshal(r.body, &b) != nil {
		return ""
	}
	return deref(b.Error.Code)
}

// TestTokensLiftTheLocalGuard: with tokens a browser adds no credential
// by itself, so a server behind any name serves any client.
func TestTokensLiftTheLocalGuard(t *testing.T) {
	t.Parallel()
	e := setup(t)
	tok := e.token("acme", "ann", jobs.RoleMember)
	r := e.rawCall("POST", "/v1/prompts", "promptkit.example.com", `{"text":"x"}`,
		"Authorization", "Bearer "+tok, "Origin", "https://app.example.com", "Content-Type", "application/json")
	if r.code != 202 {
		t.Fatalf("with a token: %d %s", r.code, r.body)
	}
	if r := e.rawCall("GET", "/v1/prompts", "promptkit.example.com", ""); r.code != 401 {
		t.Fatalf("without a token, once tokens exist: %d %s", r.code, r.body)
	}
}

// testBrowserCrossSite: a page on another site (localhost:P2, the API on
// 127.0.0.1:P1) tries what any page can do without CORS — no-cors
// fetches with text/plain bodies and a form post — against the local
// server. Nothing it asked for may happen.
func testBrowserCrossSite(t *testing.T, e *browserEnv) {
	ctx := context.Background()
	// The victim's prompt runs, held, while the other site tries to
	// cancel it.
	hold, _ := e.hold()
	e.prov.Enqueue(providertest.Response{Text: "mine", Hold: hold})
	sub, err := e.st.Enqueue(ctx, jobs.EnqueueParams{OrgID: LocalOrg, CreatedBy: LocalUser, Text: "the victim's own prompt"})
	if err != nil {
		t.Fatal(err)
	}
	e.waitArrivals(1)
	api := e.srv.URL()
	evil := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprintf(w, `<!doctype html><title>evil</title>
<form id="f" method="post" enctype="text/plain" action="%[1]s/v1/prompts" target="sink"><input name='{"text":"form","x":"' value='"}'></form>
<iframe name="sink"></iframe>
<script>
const api = %[1]q;
const opts = { method: 'POST', mode: 'no-cors', headers: { 'Content-Type': 'text/plain' } };
Promise.allSettled([
  fetch(api + '/v1/prompts', { ...opts, body: '{"text":"no-cors"}' }),
  fetch(api + '/v1/chat/completions', { ...opts, body: '{"model":"default","messages":[{"role":"user","content":"x"}]}' }),
  fetch(api + '/v1/jobs/%[2]s/cancel', { method: 'POST', mode: 'no-cors' }),
]).then(() => {
  document.querySelector('iframe').addEventListener('load', () => { document.title = 'done'; });
  document.getElementById('f').submit();
});
</script>`, api, sub.JobID)
	}))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	evil.Listener = ln
	evil.Start()
	t.Cleanup(evil.Close)
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	e.do(e.tab, "opening the other site's page", chromedp.Navigate("http://localhost:"+port+"/"))
	e.waitFor(e.tab, "the other site's requests to be answered", `document.title === 'done'`)

	page, err := e.st.ListJobs(ctx, jobs.ListParams{})
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Jobs) != 1 || page.Jobs[0].ID != sub.JobID || page.Jobs[0].State != jobs.Running {
		for _, j := range page.Jobs {
			t.Logf("job %s %s", j.ID, j.State)
		}
		t.Fatalf("another site's page acted through local mode: %d jobs", len(page.Jobs))
	}
	if n := e.prov.Count(); n != 1 {
		t.Errorf("the provider was called %d times, want only the victim's prompt", n)
	}
}
