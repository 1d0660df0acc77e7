package httpapi

import (
	"errors"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

func TestCheckQuery(t *testing.T) {
	t.Parallel()
	known := func(name string) bool { return name == "after" || name == "org" }
	for _, c := range []struct {
		query, param string // param "-": accepted
	}{
		{"", "-"},
		{"after=abc&limit=5", "-"},
		{"after=caf%C3%A9&org=a%20b", "-"},
		{"after=x%00SECRET", "after"},
		{"org=ok&after=x%ffSECRET", "after"},
		{"bogus=x%00SECRET", ""},
		{"af%00ter=1", ""},
		{"a%ffb=1", ""},
		// Two at fault: the first by name, every time.
		{"org=%00&after=%00", "after"},
	} {
		r := httptest.NewRequest("GET", "/v1/x?"+c.query, nil)
		err := CheckQuery(r, known)
		if c.param == "-" {
			if err != nil {
				t.Errorf("%q: %v, want it accepted", c.query, err)
			}
			continue
		}
		p, ok := errors.AsType[*Problem](err)
		if !ok || p.Status != 400 || p.Code != "invalid_request" || p.Param != c.param {
			t.Errorf("%q: %#v, want a 400 naming %q", c.query, err, c.param)
			continue
		}
		if strings.Contains(p.Message, "SECRET") || strings.Contains(p.Message, "bogus") || (c.param != "" && !strings.Contains(p.Message, c.param)) {
			t.Errorf("%q: message %q quotes the request or misses the parameter", c.query, p.Message)
		}
	}
}

// A time the decoder cannot parse is refused without its text, which the
// time package's error quotes.
func TestDecodeStrictTimeQuotesNothing(t *testing.T) {
	t.Parallel()
	var v struct {
		At time.Time `json:"at"`
	}
	err := DecodeStrict([]byte(`{"at": "soon SECRET"}`), &v)
	p, ok := errors.AsType[*Problem](err)
	if !ok || p.Status != 400 || p.Code != "invalid_json" || strings.Contains(p.Message, "SECRET") || !strings.Contains(p.Message, "RFC 3339") {
		t.Fatalf("%#v, want a 400 invalid_json naming RFC 3339 without the value", err)
	}
}
