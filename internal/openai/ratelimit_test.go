package openai

import (
	"net/http"
	"testing"
	"time"

	"github.com/promptkit/promptkit/internal/llm"
	"github.com/promptkit/promptkit/providertest"
)

var received = time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)

func known(limit, remaining int64, reset time.Duration) llm.Budget {
	return llm.Budget{Known: true, Limit: limit, Remaining: remaining, Reset: reset}
}

func TestParseRateLimits(t *testing.T) {
	tests := []struct {
		name   string
		header map[string]string
		want   llm.RateLimits
	}{
		{"none", nil, llm.RateLimits{}},
		{"openai both", map[string]string{
			"x-ratelimit-limit-requests": "60", "x-ratelimit-remaining-requests": "59", "x-ratelimit-reset-requests": "1s",
			"x-ratelimit-limit-tokens": "150000", "x-ratelimit-remaining-tokens": "149984", "x-ratelimit-reset-tokens": "6m0s",
		}, llm.RateLimits{Requests: known(60, 59, time.Second), Tokens: known(150000, 149984, 6*time.Minute)}},
		{"openai fractional", map[string]string{
			"x-ratelimit-limit-requests": "10000", "x-ratelimit-remaining-requests": "9999", "x-ratelimit-reset-requests": "1m30.5s",
			"x-ratelimit-limit-tokens": "1000", "x-ratelimit-remaining-tokens": "0", "x-ratelimit-reset-tokens": "20ms",
		}, llm.RateLimits{Requests: known(10000, 9999, 90*time.Second+500*time.Millisecond), Tokens: known(1000, 0, 20*time.Millisecond)}},
		{"openai zero reset", map[string]string{
			"x-ratelimit-limit-requests": "5", "x-ratelimit-remaining-requests": "5", "x-ratelimit-reset-requests": "0s",
		}, llm.RateLimits{Requests: known(5, 5, 0)}},
		{"openai plain seconds", map[string]string{
			"x-ratelimit-limit-requests": "5", "x-ratelimit-remaining-requests": "4", "x-ratelimit-reset-requests": " 0.25 ",
		}, llm.RateLimits{Requests: known(5, 4, 250*time.Millisecond)}},
		{"openai without limit", map[string]string{
			"x-ratelimit-remaining-tokens": "7", "x-ratelimit-reset-tokens": "2s",
		}, llm.RateLimits{Tokens: known(7, 7, 2*time.Second)}},
		{"remaining above limit is clamped", map[string]string{
			"x-ratelimit-limit-requests": "5", "x-ratelimit-remaining-requests": "9", "x-ratelimit-reset-requests": "1s",
		}, llm.RateLimits{Requests: known(5, 5, time.Second)}},
		{"malformed limit means unstated", map[string]string{
			"x-ratelimit-limit-requests": "lots", "x-ratelimit-remaining-requests": "3", "x-ratelimit-reset-requests": "1s",
		}, llm.RateLimits{Requests: known(3, 3, time.Second)}},
		{"negative remaining", map[string]string{
			"x-ratelimit-limit-requests": "5", "x-ratelimit-remaining-requests": "-1", "x-ratelimit-reset-requests": "1s",
		}, llm.RateLimits{}},
		{"negative reset", map[string]string{
			"x-ratelimit-limit-requests": "5", "x-ratelimit-remaining-requests": "1", "x-ratelimit-reset-requests": "-1s",
		}, llm.RateLimits{}},
		{"missing reset", map[string]string{
			"x-ratelimit-limit-requests": "5", "x-ratelimit-remaining-requests": "1",
		}, llm.RateLimits{}},
		{"garbage reset", map[string]string{
			"x-ratelimit-limit-tokens": "5", "x-ratelimit-remaining-tokens": "1", "x-ratelimit-reset-tokens": "NaN",
		}, llm.RateLimits{}},
		{"overflowing remaining", map[string]string{
			"x-ratelimit-remaining-requests": "99999999999999999999", "x-ratelimit-reset-requests": "1s",
		}, llm.RateLimits{}},
		{"overflowing reset", map[string]string{
			"x-ratelimit-remaining-requests": "1", "x-ratelimit-reset-requests": "9999999999999999999",
		}, llm.RateLimits{}},
		{"draft", map[string]string{
			"ratelimit-limit": "100", "ratelimit-remaining": "42", "ratelimit-reset": "30",
		}, llm.RateLimits{Requests: known(100, 42, 30*time.Second)}},
		{"draft with policy", map[string]string{
			"ratelimit-limit": "100, 100;w=60, 1000;w=3600", "ratelimit-remaining": "42", "ratelimit-reset": "30",
		}, llm.RateLimits{Requests: known(100, 42, 30*time.Second)}},
		{"draft reset as unix time", map[string]string{
			"ratelimit-limit": "10", "ratelimit-remaining": "0", "ratelimit-reset": "1796299205", // received + 5s
		}, llm.RateLimits{Requests: known(10, 0, 5*time.Second)}},
		{"draft fractional reset", map[string]string{
			"ratelimit-limit": "10", "ratelimit-remaining": "0", "ratelimit-reset": "1.5",
		}, llm.RateLimits{}},
		{"openai wins over draft", map[string]string{
			"x-ratelimit-limit-requests": "60", "x-ratelimit-remaining-requests": "1", "x-ratelimit-reset-requests": "1s",
			"ratelimit-limit": "100", "ratelimit-remaining": "42", "ratelimit-reset": "30",
		}, llm.RateLimits{Requests: known(60, 1, time.Second)}},
		{"structured", map[string]string{
			"ratelimit-policy": `"default";q=100;w=60`, "ratelimit": `"default";r=50;t=30`,
		}, llm.RateLimits{Requests: known(100, 50, 30*time.Second)}},
		{"structured without policy", map[string]string{
			"ratelimit": `"default";r=50;t=30`,
		}, llm.RateLimits{Requests: known(50, 50, 30*time.Second)}},
		{"structured tightest binds", map[string]string{
			"ratelimit-policy": `burst;q=10;w=1, "day";q=1000;w=86400`,
			"ratelimit":        `"day";r=900;t=40000, burst;r=3;t=1`,
		}, llm.RateLimits{Requests: known(10, 3, time.Second)}},
		{"structured malformed", map[string]string{
			"ratelimit": `"default";r=x;t=30, "other";r=5`,
		}, llm.RateLimits{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := http.Header{}
			for k, v := range tt.header {
				h.Set(k, v)
			}
			if got := ParseRateLimits(h, received); got != tt.want {
				t.Errorf("got %+v\nwant %+v", got, tt.want)
			}
		})
	}
}

// TestOutcomeLimits checks that every answer, success or 429, reports the
// provider's headers.
func TestOutcomeLimits(t *testing.T) {
	clock := func() time.Time { return received }
	srv := providertest.NewServer(providertest.WithRateLimit(1), providertest.WithTokenRateLimit(1000),
		providertest.WithRateLimitHeaders(), providertest.WithClock(clock))
	t.Cleanup(srv.Close)
	f := mustPrepare(t, Endpoint{BaseURL: srv.URL, Now: clock}, basicRequest())

	// basicRequest's prompt is 2 words: 2 tokens.
	ok := f.Execute(t.Context())
	want := llm.RateLimits{Requests: known(1, 0, time.Second), Tokens: known(1000, 998, time.Minute)}
	if ok.Err != nil || ok.Limits != want {
		t.Fatalf("success: err %v, limits %+v, want %+v", ok.Err, ok.Limits, want)
	}
	limited := f.Execute(t.Context())
	if limited.StatusCode != http.StatusTooManyRequests || limited.Limits != want {
		t.Fatalf("429: status %d, limits %+v, want %+v", limited.StatusCode, limited.Limits, want)
	}
}
