package openai

import (
	"errors"
	"net/http"
	"reflect"
	"testing"
	"time"

	"github.com/promptkit/promptkit/internal/llm"
	"github.com/promptkit/promptkit/pktype"
)

func FuzzDecode(f *testing.F) {
	for _, s := range []string{
		`{` + okChoices + `}`,
		`{` + okChoices + `,"usage":{"prompt_tokens":1,"completion_tokens":2,"total_tokens":3,"prompt_tokens_details":{"cached_tokens":0},"completion_tokens_details":{"reasoning_tokens":null}}}`,
		`{"choices":[],"usage":{"prompt_tokens":5}}`,
		`{"choices":[{"message":{"content":null}}]}`,
		`{"usage":{"prompt_tokens":-0}}`,
		`{}`,
		`null`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		resp, usage, presence, err := decode(body)
		checkUsage(t, usage, presence)
		if err != nil {
			if resp != nil {
				t.Fatalf("resp %+v with err %v", resp, err)
			}
			if !errors.Is(err, pktype.ErrMalformedResponse) {
				t.Fatalf("err %v does not wrap ErrMalformed", err)
			}
			return
		}
		if resp == nil {
			t.Fatal("nil response without error")
		}
		if resp.Usage != usage || resp.Presence() != presence {
			t.Fatalf("response usage %+v/%+v differs from %+v/%+v", resp.Usage, resp.Presence(), usage, presence)
		}
		r2, err2 := Decode(body)
		if err2 != nil || !reflect.DeepEqual(r2, resp) {
			t.Fatalf("Decode disagrees: %+v, %v", r2, err2)
		}
	})
}

func checkUsage(t *testing.T, u pktype.TokenUsage, p pktype.TokenUsagePresence) {
	t.Helper()
	fields := []struct {
		n   int
		set bool
	}{
		{u.PromptTokens, p.PromptTokens},
		{u.CompletionTokens, p.CompletionTokens},
		{u.TotalTokens, p.TotalTokens},
		{u.CachedTokens, p.CachedTokens},
		{u.ReasoningTokens, p.ReasoningTokens},
	}
	for i, fl := range fields {
		if fl.n < 0 {
			t.Fatalf("field %d negative: %d", i, fl.n)
		}
		if !fl.set && fl.n != 0 {
			t.Fatalf("field %d unknown but %d", i, fl.n)
		}
	}
}

func FuzzParseRetryAfter(f *testing.F) {
	base := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC).Unix()
	for _, s := range []string{"0", " 5 ", "-1", "1.5", "Wed, 21 Oct 2015 07:28:00 GMT", "99999999999999999999"} {
		f.Add(s, base)
	}
	f.Fuzz(func(t *testing.T, value string, unix int64) {
		received := time.Unix(unix, 0)
		nb, ok := ParseRetryAfter(value, received)
		if !ok {
			if !nb.IsZero() {
				t.Fatalf("ok=false with notBefore %v", nb)
			}
			return
		}
		if nb.Before(received) {
			t.Fatalf("notBefore %v before received %v", nb, received)
		}
	})
}

func FuzzParseRateLimits(f *testing.F) {
	for _, s := range [][5]string{
		{"60", "59", "1s", "", ""},
		{"150000", "149984", "6m0s", "", ""},
		{"10000", "9999", "1m30.5s", "", ""},
		{"1000", "0", "20ms", "", ""},
		{"5", "9", "0s", "", ""},
		{"", "3", "0.25", "", ""},
		{"x", "-1", "-1s", "30", ""},
		{"", "", "", "1796299205", ""},
		{"", "", "", "30", `"default";r=50;t=30`},
		{"", "", "", "", `burst;r=3;t=1, "day";r=900;t=40000`},
		{"", "99999999999999999999", "9999999999999999999", "", `"a";r=;t`},
	} {
		f.Add(s[0], s[1], s[2], s[3], s[4])
	}
	f.Fuzz(func(t *testing.T, limit, remaining, reset, draftReset, structured string) {
		h := http.Header{}
		// Both budgets and every format see the same values.
		for _, kind := range []string{"requests", "tokens"} {
			h.Set("x-ratelimit-limit-"+kind, limit)
			h.Set("x-ratelimit-remaining-"+kind, remaining)
			h.Set("x-ratelimit-reset-"+kind, reset)
		}
		h.Set("ratelimit-limit", limit)
		h.Set("ratelimit-remaining", remaining)
		h.Set("ratelimit-reset", draftReset)
		h.Set("ratelimit", structured)
		h.Set("ratelimit-policy", structured)
		rl := ParseRateLimits(h, time.Unix(1796299200, 0))
		for _, b := range []llm.Budget{rl.Requests, rl.Tokens} {
			if !b.Known {
				if b != (llm.Budget{}) {
					t.Fatalf("unknown budget with values %+v", b)
				}
				continue
			}
			if b.Limit < 0 || b.Remaining < 0 || b.Remaining > b.Limit || b.Reset < 0 {
				t.Fatalf("inconsistent budget %+v", b)
			}
		}
	})
}
