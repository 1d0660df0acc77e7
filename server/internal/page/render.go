package page

import (
	"bytes"
	"encoding/json"
	"html/template"
	"net/url"
	"strings"

	"github.com/yuin/goldmark"
	"github.com/yuin/goldmark/ast"
	"github.com/yuin/goldmark/extension"
	"github.com/yuin/goldmark/renderer"
	"github.com/yuin/goldmark/util"

	"github.com/promptkit/promptkit/jobs"
)

// Answers as HTML. The model's text is Markdown from an untrusted source:
// it is rendered here, in Go, so that what reaches the page is HTML this
// renderer wrote. goldmark escapes text and, without WithUnsafe, never
// passes raw HTML through; the node renderers below go further:
//   - raw HTML (inline or a block) is shown as escaped text, so an answer
//     about <script> tags reads as written and runs nothing;
//   - a link keeps its href only for http, https and mailto URLs (anything
//     else — javascript:, data:, relative paths — is plain text) and opens
//     in a new tab without a referrer or an opener;
//   - an image becomes a link to it: the page loads nothing from elsewhere
//     because a model said so.

// answerMarkdown is the renderer of answers; goldmark's Markdown is safe
// for concurrent use once built.
var answerMarkdown = goldmark.New(
	// GitHub's extensions, with table alignment as align attributes: the
	// page's Content-Security-Policy drops style attributes.
	goldmark.WithExtensions(extension.Linkify, extension.Strikethrough, extension.TaskList,
		extension.NewTable(extension.WithTableCellAlignMethod(extension.TableCellAlignAttribute))),
	goldmark.WithRendererOptions(renderer.WithNodeRenderers(
		// Below the default HTML renderer's 1000: these win for their
		// kinds.
		util.Prioritized(safeNodes{}, 100),
	)),
)

// Render renders a response for the page: its Markdown output, or,
// when the output parsed as JSON (a prompt with an output schema), that
// JSON indented in a code block.
func Render(r jobs.Response) string {
	if len(r.Parsed) > 0 {
		var b bytes.Buffer
		if json.Indent(&b, r.Parsed, "", "  ") == nil {
			return `<pre><code class="language-json">` + template.HTMLEscapeString(b.String()) + "</code></pre>\n"
		}
	}
	return renderMarkdown(r.Output)
}

// renderMarkdown renders Markdown as safe HTML.
func renderMarkdown(md string) string {
	var b bytes.Buffer
	if err := answerMarkdown.Convert([]byte(md), &b); err != nil {
		// Rendering into a buffer does not fail; should it, the text
		// is still shown, escaped.
		return "<pre>" + template.HTMLEscapeString(md) + "</pre>\n"
	}
	return b.String()
}

// safeHref returns the href of a link to dest, escaped as goldmark
// escapes URLs, and whether a link may point there.
func safeHref(dest []byte) ([]byte, bool) {
	href := util.URLEscape(dest, true)
	return href, safeURL(href)
}

// safeURL reports whether a link may point at u: an absolute http or https
// URL with a host, or mailto.
func safeURL(u []byte) bool {
	p, err := url.Parse(string(u))
	if err != nil {
		return false
	}
	switch strings.ToLower(p.Scheme) {
	case "http", "https":
		return p.Host != ""
	case "mailto":
		return p.Opaque != ""
	}
	return false
}

// safeNodes renders the nodes through which HTML or URLs from the answer
// could reach the page.
type safeNodes struct{}

func (safeNodes) RegisterFuncs(reg renderer.NodeRendererFuncRegisterer) {
	reg.Register(ast.KindRawHTML, renderRawHTML)
	reg.Register(ast.KindHTMLBlock, renderHTMLBlock)
	reg.Register(ast.KindLink, renderLink)
	reg.Register(ast.KindAutoLink, renderAutoLink)
	reg.Register(ast.KindImage, renderImage)
}

func renderRawHTML(w util.BufWriter, source []byte, node ast.Node, entering bool) (ast.WalkStatus, error) {
	if entering {
		segs := node.(*ast.RawHTML).Segments
		for i := range segs.Len() {
			seg := segs.At(i)
			_, _ = w.Write(util.EscapeHTML(seg.Value(source)))
		}
	}
	return ast.WalkSkipChildren, nil
}

func renderHTMLBlock(w util.BufWriter, source []byte, node ast.Node, entering bool) (ast.WalkStatus, error) {
	if !entering {
		return ast.WalkContinue, nil
	}
	n := node.(*ast.HTMLBlock)
	_, _ = w.WriteString(`<pre class="raw-html"><code>`)
	for i := range n.Lines().Len() {
		line := n.Lines().At(i)
		_, _ = w.Write(util.EscapeHTML(line.Value(source)))
	}
	if n.HasClosure() {
		_, _ = w.Write(util.EscapeHTML(n.ClosureLine.Value(source)))
	}
	_, _ = w.WriteString("</code></pre>\n")
	return ast.WalkSkipChildren, nil
}

// openLink writes the start tag of a link to href (from safeHref).
func openLink(w util.BufWriter, href, title []byte) {
	_, _ = w.WriteString(`<a href="`)
	_, _ = w.Write(util.EscapeHTML(href))
	_ = w.WriteByte('"')
	if len(title) > 0 {
		_, _ = w.WriteString(` title="`)
		_, _ = w.Write(util.EscapeHTML(title))
		_ = w.WriteByte('"')
	}
	_, _ = w.WriteString(` rel="nofollow noopener noreferrer" target="_blank">`)
}

func renderLink(w util.BufWriter, _ []byte, node ast.Node, entering bool) (ast.WalkStatus, error) {
	n := node.(*ast.Link)
	href, ok := safeHref(n.Destination)
	if !ok {
		return ast.WalkContinue, nil // the link text alone
	}
	if entering {
		openLink(w, href, n.Title)
	} else {
		_, _ = w.WriteString("</a>")
	}
	return ast.WalkContinue, nil
}

func renderAutoLink(w util.BufWriter, source []byte, node ast.Node, entering bool) (ast.WalkStatus, error) {
	if !entering {
		return ast.WalkContinue, nil
	}
	n := node.(*ast.AutoLink)
	dest := n.URL(source)
	if n.AutoLinkType == ast.AutoLinkEmail && !bytes.HasPrefix(bytes.ToLower(dest), []byte("mailto:")) {
		dest = append([]byte("mailto:"), dest...)
	}
	label := util.EscapeHTML(n.Label(source))
	href, ok := safeHref(dest)
	if !ok {
		_, _ = w.Write(label)
		return ast.WalkContinue, nil
	}
	openLink(w, href, nil)
	_, _ = w.Write(label)
	_, _ = w.WriteString("</a>")
	return ast.WalkContinue, nil
}

// renderImage renders an image as a link to it, its alt text as the link
// text.
func renderImage(w util.BufWriter, _ []byte, node ast.Node, entering bool) (ast.WalkStatus, error) {
	n := node.(*ast.Image)
	href, ok := safeHref(n.Destination)
	if !ok {
		return ast.WalkContinue, nil
	}
	if entering {
		openLink(w, href, n.Title)
		_, _ = w.WriteString("image: ")
	} else {
		_, _ = w.WriteString("</a>")
	}
	return ast.WalkContinue, nil
}
