package pktype_test

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/promptkit/promptkit/pktype"
)

// FuzzUsageJSON: whatever decodes re-encodes to a form that decodes to
// the same value, with every unknown count null and every known one a
// number.
func FuzzUsageJSON(f *testing.F) {
	for _, s := range []string{
		`{"prompt_tokens":1,"completion_tokens":2,"total_tokens":3,"cached_tokens":null,"reasoning_tokens":0}`,
		`{"prompt_tokens":7,"total_tokens":10,"known":{"prompt_tokens":true}}`,
		`{}`, `null`, `{"prompt_tokens":-1}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var u pktype.Usage
		if json.Unmarshal(data, &u) != nil {
			return
		}
		b, err := json.Marshal(u)
		if err != nil {
			t.Fatalf("Marshal(%+v): %v", u, err)
		}
		var back pktype.Usage
		if err := json.Unmarshal(b, &back); err != nil || back != u {
			t.Fatalf("%s → %+v → %s → %+v, %v", data, u, b, back, err)
		}
		var raw map[string]*int
		if err := json.Unmarshal(b, &raw); err != nil || len(raw) != 5 {
			t.Fatalf("encoded %s: %v", b, err)
		}
		if (raw["total_tokens"] == nil) == u.Known.TotalTokens {
			t.Fatalf("%s: total_tokens null=%t but known=%t", b, raw["total_tokens"] == nil, u.Known.TotalTokens)
		}
	})
}

// FuzzRedact: the result is valid UTF-8 without control characters, at
// most the bound, and never contains the secret.
func FuzzRedact(f *testing.F) {
	f.Add("hello\nworld", 20, "")
	f.Add("key=SECRET123 and Bearer abc.def", 512, "SECRET123")
	f.Add(strings.Repeat("é", 300)+"sk-abcdefghijkl", 500, "")
	f.Add("\xff\xfe broken", 3, "x")
	f.Fuzz(func(t *testing.T, s string, n int, secret string) {
		n = n % 4096
		if n < 0 {
			n = -n
		}
		got := pktype.Redact(s, n, secret)
		if !utf8.ValidString(got) || len(got) > n {
			t.Fatalf("Redact(%q, %d) = %q", s, n, got)
		}
		for _, r := range got {
			if r < 0x20 || r == 0x7f {
				t.Fatalf("Redact(%q) = %q has a control character", s, got)
			}
		}
		if len(secret) >= 4 && strings.Contains(got, secret) && !strings.Contains(pktype.Redacted, secret) {
			t.Fatalf("Redact(%q, %q) = %q leaks the secret", s, secret, got)
		}
	})
}
