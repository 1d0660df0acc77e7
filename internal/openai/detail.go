package openai

import (
	"bytes"
	"encoding/json"
	"regexp"
	"strings"
	"unicode"
	"unicode/utf8"
)

const (
	maxDetailBytes = 512
	redacted       = "[REDACTED]"
)

// Token shapes that look like credentials even when they are not our key
// (a proxy may echo its own or the request's Authorization header).
var (
	bearerRE = regexp.MustCompile(`(?i)\bbearer\s+[A-Za-z0-9\-._~+/]+=*`)
	skRE     = regexp.MustCompile(`\bsk-[A-Za-z0-9_\-]{8,}`)
)

// errorDetail turns a non-2xx body into a short, redacted, printable
// detail. OpenAI-style {"error":{...}} bodies are reduced to
// "type: code: message"; anything else is used as raw text.
func errorDetail(body []byte, apiKey string) string {
	s := providerMessage(body)
	if s == "" {
		s = string(body)
	}
	// Redact before and after sanitizing: a key split by control bytes is
	// only visible afterwards, one with collapsible spaces only before.
	s = redactKey(s, apiKey)
	s = redactKey(sanitize(s), apiKey)
	s = bearerRE.ReplaceAllString(s, "Bearer "+redacted)
	s = skRE.ReplaceAllString(s, redacted)
	return truncateUTF8(s, maxDetailBytes)
}

func redactKey(s, key string) string {
	if key == "" { // ReplaceAll with an empty old string inserts everywhere
		return s
	}
	return strings.ReplaceAll(s, key, redacted)
}

func providerMessage(body []byte) string {
	var env struct {
		Error json.RawMessage `json:"error"`
	}
	if json.Unmarshal(body, &env) != nil || len(env.Error) == 0 {
		return ""
	}
	// Some compatible servers send {"error": "text"}.
	if s := scalar(env.Error); s != "" {
		return s
	}
	var obj struct {
		Message json.RawMessage `json:"message"`
		Type    json.RawMessage `json:"type"`
		Code    json.RawMessage `json:"code"`
	}
	if json.Unmarshal(env.Error, &obj) != nil {
		return ""
	}
	var parts []string
	for _, raw := range []json.RawMessage{obj.Type, obj.Code, obj.Message} {
		if s := scalar(raw); s != "" {
			parts = append(parts, s)
		}
	}
	return strings.Join(parts, ": ")
}

// scalar renders a JSON string or number; anything else is "".
func scalar(raw json.RawMessage) string {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return ""
	}
	switch c := raw[0]; {
	case c == '"':
		var s string
		if json.Unmarshal(raw, &s) == nil {
			return s
		}
	case c == '-' || (c >= '0' && c <= '9'):
		var n json.Number
		if json.Unmarshal(raw, &n) == nil {
			return n.String()
		}
	}
	return ""
}

// sanitize makes s valid UTF-8 without control characters, turning line
// breaks and tabs into single spaces so multi-line bodies stay readable.
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
	i := n
	for i > 0 && !utf8.RuneStart(s[i]) {
		i--
	}
	return s[:i]
}
