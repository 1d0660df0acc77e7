package page

import (
	"encoding/json"
	"fmt"
	"html"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/promptkit/promptkit/jobs"
)

// markdownCases are answers a model might write, or an attacker might make
// it write, with what their HTML must and must not hold.
var markdownCases = []struct {
	name, md    string
	want, never []string
}{
	{"script inline", "Hello <script>alert(1)</script> world",
		[]string{"Hello &lt;script&gt;alert(1)&lt;/script&gt; world"}, []string{"<script"}},
	{"script block", "<script>\nalert(1)\n</script>\n\nafter",
		[]string{`<pre class="raw-html"><code>&lt;script&gt;`, "<p>after</p>"}, []string{"<script"}},
	{"onerror", `<img src=x onerror="alert(1)">`,
		[]string{"onerror=&quot;alert(1)&quot;"}, []string{"<img"}},
	{"onerror inline", `see <img src=x onerror=alert(1)> here`,
		[]string{"&lt;img src=x onerror=alert(1)&gt;"}, []string{"<img"}},
	{"event handler on a tag", `<div onclick="steal()">hi</div>`, []string{"&lt;div onclick="}, []string{"<div"}},
	{"iframe", `<iframe src="https://evil.example"></iframe>`, []string{"&lt;iframe"}, []string{"<iframe"}},
	{"comment", "<!-- hidden -->", []string{"&lt;!-- hidden --&gt;"}, nil},
	{"javascript link", "[click](javascript:alert(1))", []string{"<p>click</p>"}, []string{"<a", "javascript"}},
	{"javascript link, mixed case", "[click](JaVaScRiPt:alert(1))", []string{"<p>click</p>"}, []string{"<a"}},
	{"javascript link, entity", "[click](java&#x09;script:alert(1))", []string{"<p>click</p>"}, []string{"<a"}},
	{"javascript link, angle brackets", "[click](<javascript:alert(1)>)", []string{"<p>click</p>"}, []string{"<a"}},
	{"javascript autolink", "<javascript:alert(1)>", []string{"<p>javascript:alert(1)</p>"}, []string{"<a"}},
	{"data link", "[x](data:text/html;base64,PHNjcmlwdD4=)", []string{"<p>x</p>"}, []string{"<a"}},
	{"vbscript link", "[x](vbscript:msgbox)", []string{"<p>x</p>"}, []string{"<a"}},
	{"relative link", "[cancel](/v1/jobs/1/cancel)", []string{"<p>cancel</p>"}, []string{"<a"}},
	{"safe link", `[docs](https://example.com/a?b=1&c=2 "The docs")`,
		[]string{`<a href="https://example.com/a?b=1&amp;c=2" title="The docs" rel="nofollow noopener noreferrer" target="_blank">docs</a>`}, nil},
	{"mail link", "[me](mailto:me@example.com)", []string{`<a href="mailto:me@example.com" rel="nofollow noopener noreferrer"`}, nil},
	{"bare links", "www.example.com, https://example.com/x and me@example.com",
		[]string{`href="http://www.example.com"`, `href="https://example.com/x"`, `href="mailto:me@example.com"`}, nil},
	{"image", `![a chart](https://example.com/chart.png "Chart")`,
		[]string{`<a href="https://example.com/chart.png" title="Chart" rel="nofollow noopener noreferrer" target="_blank">image: a chart</a>`},
		[]string{"<img"}},
	{"image, javascript", "![x](javascript:alert(1))", []string{"<p>x</p>"}, []string{"<img", "<a"}},
	{"image, data", "![x](data:image/png;base64,iVBORw0KGgo=)", []string{"<p>x</p>"}, []string{"<img", "<a"}},
	{"attribute breakout", `[x](https://example.com" onmouseover="alert(1))`, nil, []string{` onmouseover="`}},
	{"code", "Use `<b>` or:\n\n```html\n<script>x</script>\n```",
		[]string{"<code>&lt;b&gt;</code>", `<code class="language-html">&lt;script&gt;x&lt;/script&gt;`}, []string{"<script", "<b>"}},
	{"markdown", "# Title\n\n**bold** _it_ ~~old~~\n\n- [x] done\n\n| a | b |\n|---|--:|\n| 1 | <i>2</i> |",
		[]string{"<h1>Title</h1>", "<strong>bold</strong>", "<em>it</em>", "<del>old</del>", `<input checked="" disabled="" type="checkbox"> done`,
			`<td align="right">&lt;i&gt;2&lt;/i&gt;</td>`}, []string{"<i>", "style="}},
}

// htmlTag matches one start or end tag of the renderer's output, whose
// attribute values are always double-quoted and escaped.
var (
	htmlTag  = regexp.MustCompile(`<(/?)([a-zA-Z][a-zA-Z0-9]*)((?:\s+[a-zA-Z-]+(?:="[^"<>]*")?)*)\s*/?>`)
	htmlAttr = regexp.MustCompile(`\s+([a-zA-Z-]+)(?:="([^"]*)")?`)
	anyTag   = regexp.MustCompile(`<[a-zA-Z/!?]`)
)

// The elements and attributes the renderer may write: Markdown's own, and
// nothing that runs or loads anything.
var (
	okTags = strings.Fields(`p a em strong del code pre ul ol li blockquote hr br h1 h2 h3 h4 h5 h6
		table thead tbody tr th td input`)
	okAttrs = map[string][]string{
		"a": {"href", "title", "rel", "target"}, "code": {"class"}, "pre": {"class"}, "ol": {"start"},
		"input": {"checked", "disabled", "type"}, "th": {"align"}, "td": {"align"},
	}
)

// checkSafeHTML fails t unless every tag of out is one the renderer may
// write, with allowed attributes, and every link is http, https or mailto.
func checkSafeHTML(t testing.TB, md, out string) {
	t.Helper()
	rest := htmlTag.ReplaceAllStringFunc(out, func(tag string) string {
		m := htmlTag.FindStringSubmatch(tag)
		name := strings.ToLower(m[2])
		if !slices.Contains(okTags, name) {
			t.Errorf("%q: the HTML has a <%s> tag: %s", md, name, out)
		}
		for _, a := range htmlAttr.FindAllStringSubmatch(m[3], -1) {
			attr := strings.ToLower(a[1])
			if !slices.Contains(okAttrs[name], attr) {
				t.Errorf("%q: <%s> has the attribute %s: %s", md, name, attr, out)
			}
			if attr == "href" && !safeURL([]byte(html.UnescapeString(a[2]))) {
				t.Errorf("%q: a link to %q: %s", md, a[2], out)
			}
			if attr == "align" && !slices.Contains([]string{"left", "right", "center"}, a[2]) {
				t.Errorf("%q: align %q", md, a[2])
			}
		}
		return ""
	})
	// Whatever is left is text: no markup may hide in it.
	if anyTag.MatchString(rest) {
		t.Errorf("%q: markup outside the renderer's tags: %s", md, out)
	}
}

// TestRenderMarkdownSafe: an answer holding <script>, an onerror=
// attribute, a javascript: link or an image is shown as text or as a safe
// link, never as markup that runs or loads.
func TestRenderMarkdownSafe(t *testing.T) {
	t.Parallel()
	for _, c := range markdownCases {
		out := renderMarkdown(c.md)
		for _, w := range c.want {
			if !strings.Contains(out, w) {
				t.Errorf("%s: %q renders as\n%s\nwant it to hold %s", c.name, c.md, out, w)
			}
		}
		for _, n := range c.never {
			if strings.Contains(strings.ToLower(out), strings.ToLower(n)) {
				t.Errorf("%s: %q renders as\n%s\nwhich holds %s", c.name, c.md, out, n)
			}
		}
		checkSafeHTML(t, c.md, out)
	}
}

func TestRenderAnswer(t *testing.T) {
	t.Parallel()
	// Structured output: the JSON, indented, as code.
	got := Render(jobs.Response{Answer: jobs.Answer{Output: `{"a":"<script>x</script>"}`, Parsed: json.RawMessage(`{"a":"<script>x</script>"}`)}})
	want := "<pre><code class=\"language-json\">{\n  &#34;a&#34;: &#34;&lt;script&gt;x&lt;/script&gt;&#34;\n}</code></pre>\n"
	if got != want {
		t.Errorf("parsed: %q, want %q", got, want)
	}
	// Text: Markdown.
	if got := Render(jobs.Response{Answer: jobs.Answer{Output: "**hi**"}}); got != "<p><strong>hi</strong></p>\n" {
		t.Errorf("text: %q", got)
	}
}

func FuzzRenderMarkdown(f *testing.F) {
	for _, c := range markdownCases {
		f.Add(c.md)
	}
	f.Add("<a href=\"javascript:x\">x</a> [x]: javascript:y\n\n[x] [y](x \"<script>\")")
	f.Add(`<https://">`) // found by fuzzing: the URL must be checked as escaped

	f.Fuzz(func(t *testing.T, md string) {
		checkSafeHTML(t, md, renderMarkdown(md))
	})
}

// BenchmarkRenderAnswer measures the rendering every answer of GET
// /v1/prompts/{id} and /v1/recent pays: a typical answer of about 1 KB
// with a list, code and a link.
func BenchmarkRenderAnswer(b *testing.B) {
	var md strings.Builder
	for i := range 8 {
		fmt.Fprintf(&md, "## Step %d\n\nRun the **worker** with `--once` and see [the docs](https://example.com/docs/%d).\n\n- one\n- two\n\n```sh\npromptkit jobs show ID\n```\n\n", i, i)
	}
	r := jobs.Response{Answer: jobs.Answer{Output: md.String()}}
	b.SetBytes(int64(md.Len()))
	for b.Loop() {
		Render(r)
	}
}
