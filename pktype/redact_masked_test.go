package pktype_test

import (
	"strings"
	"testing"

	"github.com/promptkit/promptkit/pktype"
)

// Redact removes a key a provider masked whatever its shape: the
// configured key in any masked or cut form, and any masked key next to a
// word naming a credential or masked on both sides; prose with stars or
// dots keeps them.
func TestRedactMaskedKeys(t *testing.T) {
	const key = "AIzaNOTAREALKEYSECRET2"
	cases := []struct{ in, secret, want string }{
		// The configured key, masked: first 6 and last 4, or one side.
		{"API key not valid: AIzaNO****RET2. Please pass a valid API key.", key, "API key not valid: [REDACTED]. Please pass a valid API key."},
		{"rejected AIzaNO••••RET2", key, "rejected [REDACTED]"},
		{"rejected (AIzaNOTA...)", key, "rejected ([REDACTED])"},
		{"rejected AIzaNOTA…", key, "rejected [REDACTED]"},
		{"rejected ****RET2.", key, "rejected [REDACTED]."},
		{"rejected AIzaNO*RET2", key, "rejected [REDACTED]"},
		// Not the key's: too short a prefix, or another word.
		{"said Ai... and stopped", key, "said Ai... and stopped"},
		{"wait... what", key, "wait... what"},
		// Any key, masked on both sides.
		{"denied for abcd1234****wxyz today", "", "denied for [REDACTED] today"},
		{"denied for abcd••••wxyz", "", "denied for [REDACTED]"},
		// Masked on one side, after a word naming a credential.
		{"Invalid API key: AIza************.", "", "Invalid API key: [REDACTED]."},
		{"invalid_api_key ****9f3a", "", "invalid_api_key [REDACTED]"},
		{"token provided: 'ghp_ab**'", "", "token provided: '[REDACTED]'"},
		{"password=hunt•••", "", "password=[REDACTED]"},
		// Prose keeps its stars and dots.
		{"a **bold** claim, 2*3 = 6, and so on...", "", "a **bold** claim, 2*3 = 6, and so on..."},
		{"the keys are listed... below", "", "the keys are listed... below"},
		{"the token was... revoked; key: ****", "", "the token was... revoked; key: ****"},
	}
	for _, c := range cases {
		if got := pktype.Redact(c.in, 512, c.secret); got != c.want {
			t.Errorf("Redact(%q) = %q, want %q", c.in, got, c.want)
		}
	}
	// No part of the configured key survives a masked echo of it.
	got := pktype.Redact("key=AIzaNO****RET2, again AIzaNO****RET2", 512, key)
	for _, part := range []string{"AIzaNO", "RET2", "*"} {
		if strings.Contains(got, part) {
			t.Errorf("Redact left %q: %q", part, got)
		}
	}
}
