package openai

import (
	"errors"
	"reflect"
	"testing"
	"time"

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
