package pktype

import (
	"regexp"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Redacted replaces a secret in redacted text.
const Redacted = "[REDACTED]"

// Token shapes that look like credentials even when they are not a known
// secret (a proxy may echo its own or the request's Authorization header).
var (
	bearerRE = regexp.MustCompile(`(?i)\bbearer\s+[A-Za-z0-9\-._~+/]+=*`)
	// skRE also takes a key the provider masked or cut short, as in
	// OpenAI's "Incorrect API key provided: sk-proj-****abcd.": what shows
	// is still part of a key. A final "." ends a sentence, not the key.
	skRE = regexp.MustCompile(`\bsk-[A-Za-z0-9_\-*•.]{2,}[A-Za-z0-9_\-*•]`)
	// maskedRE is a key a provider masked, whatever its shape: key
	// characters on both sides of three or more stars or two or more
	// bullets ("abcd****wxyz"), which prose does not write.
	maskedRE = regexp.MustCompile(`[A-Za-z0-9_\-]*[A-Za-z0-9](?:\*{3,}|•{2,})[A-Za-z0-9][A-Za-z0-9_\-]*`)
	// keyishRE is a masked token right after a word that names a
	// credential ("API key: AIza****", "invalid_api_key ****wxyz"): with
	// the word there, stars or bullets on one side only are a key too.
	// Dots and ellipses are not: prose ends words with them.
	keyishRE = regexp.MustCompile(`(?i)((?:api[_ -]?)?(?:keys?|tokens?|secrets?|passwords?|credentials?)\b` +
		`(?:\s+(?:provided|given|used|sent|is|was))?[\s:="']{0,4})` +
		`(?:[A-Za-z0-9_\-]+[*•]+[A-Za-z0-9_\-*•]*|[*•]+[A-Za-z0-9_\-]+)`)
	// maskRE is a run of the marks providers mask keys with, for
	// replaceMasked.
	maskRE = regexp.MustCompile(`(?:[*•…]|\.{2,})+`)
)

// Redact makes text fit to print and to store: valid UTF-8 without control
// characters (line breaks and tabs become single spaces), each of secrets
// (also as a provider masks or cuts it: "AIzaNO****RET2", "AIzaNOTA...")
// and anything shaped like a bearer token, an sk- key (also a masked
// one, "sk-proj-****abcd") or another masked key ("abcd****wxyz", or
// "AIza****" after the word key or token) replaced by Redacted, and cut
// to at most maxBytes without splitting a character.
// The engine redacts provider messages with it, and the job service its
// stored error messages.
func Redact(s string, maxBytes int, secrets ...string) string {
	// Redact before and after sanitizing: a secret split by control bytes
	// is only visible afterwards, one with collapsible spaces only before.
	s = replaceSecrets(s, secrets)
	s = replaceSecrets(sanitize(s), secrets)
	s = bearerRE.ReplaceAllString(s, "Bearer "+Redacted)
	s = skRE.ReplaceAllString(s, Redacted)
	s = maskedRE.ReplaceAllString(s, Redacted)
	s = keyishRE.ReplaceAllString(s, "${1}"+Redacted)
	// A secret that is not valid UTF-8 may have matched part of a
	// character.
	s = strings.ToValidUTF8(s, "\uFFFD")
	return truncateUTF8(s, maxBytes)
}

func replaceSecrets(s string, secrets []string) string {
	for _, k := range secrets {
		if k != "" { // ReplaceAll with an empty old string inserts everywhere
			s = replaceMasked(strings.ReplaceAll(s, k, Redacted), k)
		}
	}
	return s
}

// replaceMasked replaces the forms of secret a provider shows instead of
// it: a mask (stars, bullets, an ellipsis) with, before it, a prefix of
// the secret of at least 4 characters, or, after it, a suffix of at least
// 4 after a prefix or nothing ("AIzaNO****RET2", "AIzaNOTA...",
// "****RET2"), with the key characters touching the mask.
func replaceMasked(s, secret string) string {
	var b strings.Builder
	last := 0
	for _, m := range maskRE.FindAllStringIndex(s, -1) {
		i, j := m[0], m[1]
		for i > last && keyChar(s[i-1]) {
			i--
		}
		for j < len(s) && keyChar(s[j]) {
			j++
		}
		left, right := s[i:m[0]], s[m[1]:j]
		pre := left != "" && strings.HasPrefix(secret, left)
		suf := right != "" && strings.HasSuffix(secret, right)
		if (pre && len(left) >= 4) || (suf && len(right) >= 4 && (left == "" || pre)) {
			b.WriteString(s[last:i])
			b.WriteString(Redacted)
			last = j
		}
	}
	if last == 0 {
		return s
	}
	b.WriteString(s[last:])
	return b.String()
}

// keyChar reports whether c may be part of an API key as providers show
// one.
func keyChar(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-'
}

// sanitize makes s valid UTF-8 without control characters, turning line
// breaks and tabs into single spaces so multi-line text stays readable.
func sanitize(s string) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	var b strings.Builder
	b.Grow(len(s))
	space := false
	for _, r := range s {
		if unicode.IsControl(r) || unicode.IsSpace(r) {
			if unicode.IsSpace(r) && !space && b.Len() > 0 {
				b.WriteByte(' ')
				space = true
			}
			continue
		}
		b.WriteRune(r)
		space = false
	}
	return strings.TrimRight(b.String(), " ")
}

// truncateUTF8 cuts s to at most n bytes without splitting a rune.
func truncateUTF8(s string, n int) string {
	if len(s) <= n {
		return s
	}
	i := max(n, 0)
	for i > 0 && !utf8.RuneStart(s[i]) {
		i--
	}
	return s[:i]
}
