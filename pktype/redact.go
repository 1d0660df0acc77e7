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
)

// Redact makes text fit to print and to store: valid UTF-8 without control
// characters (line breaks and tabs become single spaces), each of secrets
// and anything shaped like a bearer token or an sk- key (also a masked
// one, "sk-proj-****abcd") replaced by
// Redacted, and cut to at most maxBytes without splitting a character.
// The engine redacts provider messages with it, and the job service its
// stored error messages.
func Redact(s string, maxBytes int, secrets ...string) string {
	// Redact before and after sanitizing: a secret split by control bytes
	// is only visible afterwards, one with collapsible spaces only before.
	s = replaceSecrets(s, secrets)
	s = replaceSecrets(sanitize(s), secrets)
	s = bearerRE.ReplaceAllString(s, "Bearer "+Redacted)
	s = skRE.ReplaceAllString(s, Redacted)
	// A secret that is not valid UTF-8 may have matched part of a
	// character.
	s = strings.ToValidUTF8(s, "\uFFFD")
	return truncateUTF8(s, maxBytes)
}

func replaceSecrets(s string, secrets []string) string {
	for _, k := range secrets {
		if k != "" { // ReplaceAll with an empty old string inserts everywhere
			s = strings.ReplaceAll(s, k, Redacted)
		}
	}
	return s
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
