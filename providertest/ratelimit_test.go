package providertest_test

import (
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/promptkit/promptkit/internal/testkit"
	"github.com/promptkit/promptkit/providertest"
)

// chatBody's prompt is 5 words; with max_tokens 5 a request costs 10
// tokens.
const tokenBody = `{"model":"gpt-test","max_tokens":5,"messages":[{"role":"system","content":"be brief"},{"role":"user","content":"hello there world"}]}`

type budgetHeaders struct{ limit, remaining, reset string }

func budgetOf(h http.Header, kind string) budgetHeaders {
	return budgetHeaders{
		h.Get("x-ratelimit-limit-" + kind),
		h.Get("x-ratelimit-remaining-" + kind),
		h.Get("x-ratelimit-reset-" + kind),
	}
}

// newClock returns the fake clock the rate limiter tests inject.
func newClock() *testkit.Clock { return testkit.NewClock(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)) }

func TestRateLimitHeaders(t *testing.T) {
	clock := newClock()
	s := newServer(t, providertest.WithRateLimit(2), providertest.WithRateLimitHeaders(), providertest.WithClock(clock.Now))
	url := s.URL + "/chat/completions"

	steps := []struct {
		advance time.Duration
		status  int
		want    budgetHeaders
	}{
		{0, 200, budgetHeaders{"2", "1", "1s"}},
		{250 * time.Millisecond, 200, budgetHeaders{"2", "0", "750ms"}},
		{100*time.Millisecond + 500*time.Microsecond, 429, budgetHeaders{"2", "0", "650ms"}}, // rounded up
		{650 * time.Millisecond, 200, budgetHeaders{"2", "1", "1s"}},                         // a new window
	}
	for i, st := range steps {
		clock.Advance(st.advance)
		r := post(t, url, chatBody)
		if r.status != st.status {
			t.Fatalf("request %d: status %d, want %d", i+1, r.status, st.status)
		}
		if got := budgetOf(r.header, "requests"); got != st.want {
			t.Errorf("request %d: requests headers %+v, want %+v", i+1, got, st.want)
		}
		if got := budgetOf(r.header, "tokens"); got != (budgetHeaders{}) {
			t.Errorf("request %d: token headers %+v without a token limit", i+1, got)
		}
	}
}

func TestRateLimitHeadersScriptedOverride(t *testing.T) {
	clock := newClock()
	s := newServer(t, providertest.WithRateLimit(5), providertest.WithRateLimitHeaders(), providertest.WithClock(clock.Now))
	s.Enqueue(providertest.Response{Text: "x", Header: http.Header{"X-Ratelimit-Remaining-Requests": {"99"}}})
	r := post(t, s.URL+"/chat/completions", chatBody)
	if got, want := budgetOf(r.header, "requests"), (budgetHeaders{"5", "99", "1s"}); got != want {
		t.Errorf("headers %+v, want %+v", got, want)
	}
}

func TestNoRateLimitHeadersByDefault(t *testing.T) {
	clock := newClock()
	s := newServer(t, providertest.WithRateLimit(1), providertest.WithTokenRateLimit(100), providertest.WithClock(clock.Now))
	url := s.URL + "/chat/completions"
	for i, want := range []int{200, 429} {
		r := post(t, url, chatBody)
		if r.status != want {
			t.Fatalf("request %d: status %d, want %d", i+1, r.status, want)
		}
		for k := range r.header {
			if strings.HasPrefix(k, "X-Ratelimit") {
				t.Errorf("request %d: unexpected header %s", i+1, k)
			}
		}
	}
}

func TestTokenRateLimit(t *testing.T) {
	clock := newClock()
	s := newServer(t, providertest.WithTokenRateLimit(20), providertest.WithRateLimit(100),
		providertest.WithRateLimitHeaders(), providertest.WithClock(clock.Now))
	url := s.URL + "/chat/completions"

	steps := []struct {
		advance    time.Duration
		body       string
		status     int
		retryAfter string
		tokens     budgetHeaders
		remaining  string // requests remaining
	}{
		{0, tokenBody, 200, "", budgetHeaders{"20", "10", "1m0s"}, "99"},
		{30 * time.Second, tokenBody, 200, "", budgetHeaders{"20", "0", "30s"}, "99"}, // a new request window
		{0, tokenBody, 429, "30", budgetHeaders{"20", "0", "30s"}, "99"},
		// Without max_tokens a request costs its 5 prompt tokens: still
		// too many; a refused request took no tokens or requests.
		{29*time.Second + 500*time.Millisecond, chatBody, 429, "1", budgetHeaders{"20", "0", "500ms"}, "100"},
		{500 * time.Millisecond, chatBody, 200, "", budgetHeaders{"20", "15", "1m0s"}, "99"},
	}
	for i, st := range steps {
		clock.Advance(st.advance)
		r := post(t, url, st.body)
		if r.status != st.status || r.header.Get("Retry-After") != st.retryAfter {
			t.Fatalf("request %d: %d Retry-After %q, want %d %q", i+1, r.status, r.header.Get("Retry-After"), st.status, st.retryAfter)
		}
		if got := budgetOf(r.header, "tokens"); got != st.tokens {
			t.Errorf("request %d: token headers %+v, want %+v", i+1, got, st.tokens)
		}
		if got := r.header.Get("x-ratelimit-remaining-requests"); got != st.remaining {
			t.Errorf("request %d: remaining requests %q, want %q", i+1, got, st.remaining)
		}
	}
	if st := s.Stats(); st.RateLimited != 2 || st.TokenLimited != 2 || st.Defaults != 3 {
		t.Errorf("Stats = %+v", st)
	}
}

func TestTokenCostMaxCompletionTokens(t *testing.T) {
	clock := newClock()
	s := newServer(t, providertest.WithTokenRateLimit(12), providertest.WithRateLimitHeaders(), providertest.WithClock(clock.Now))
	body := `{"model":"m","max_completion_tokens":7,"messages":[{"role":"user","content":"one two three"}]}`
	r := post(t, s.URL+"/chat/completions", body)
	if got := r.header.Get("x-ratelimit-remaining-tokens"); r.status != 200 || got != "2" {
		t.Errorf("status %d, remaining tokens %q, want 200 and 2", r.status, got)
	}
}

func TestSetRateLimit(t *testing.T) {
	clock := newClock()
	s := newServer(t, providertest.WithRateLimit(1), providertest.WithRateLimitHeaders(), providertest.WithClock(clock.Now))
	url := s.URL + "/chat/completions"
	expect := func(step string, status int, remaining string) {
		t.Helper()
		r := post(t, url, chatBody)
		if r.status != status || r.header.Get("x-ratelimit-remaining-requests") != remaining {
			t.Fatalf("%s: %d remaining %q, want %d %q", step, r.status, r.header.Get("x-ratelimit-remaining-requests"), status, remaining)
		}
	}
	expect("first", 200, "0")
	expect("over the limit", 429, "0")
	// Raised mid-window: the window keeps its one request.
	s.SetRateLimit(3)
	expect("raised", 200, "1")
	expect("raised", 200, "0")
	expect("raised, full", 429, "0")
	// Lowered below what the window already counted.
	s.SetRateLimit(2)
	expect("lowered", 429, "0")
	clock.Advance(time.Second)
	expect("lowered, next window", 200, "1")
	expect("lowered, next window", 200, "0")
	expect("lowered, next window", 429, "0")
	s.SetRateLimit(0)
	if r := post(t, url, chatBody); r.status != 200 || r.header.Get("x-ratelimit-limit-requests") != "" {
		t.Fatalf("off: %d limit header %q, want 200 and none", r.status, r.header.Get("x-ratelimit-limit-requests"))
	}
}

func TestSetTokenRateLimit(t *testing.T) {
	clock := newClock()
	s := newServer(t, providertest.WithRateLimitHeaders(), providertest.WithClock(clock.Now))
	url := s.URL + "/chat/completions"
	if r := post(t, url, tokenBody); r.status != 200 || len(r.header.Values("x-ratelimit-limit-tokens")) != 0 {
		t.Fatalf("no limit: %d %v", r.status, r.header)
	}
	s.SetTokenRateLimit(15)
	for i, want := range []struct {
		status    int
		remaining string
	}{{200, "5"}, {429, "5"}} {
		r := post(t, url, tokenBody)
		if r.status != want.status || r.header.Get("x-ratelimit-remaining-tokens") != want.remaining {
			t.Fatalf("request %d: %d remaining %q, want %+v", i+1, r.status, r.header.Get("x-ratelimit-remaining-tokens"), want)
		}
	}
	s.SetTokenRateLimit(25) // the window keeps its 10 tokens
	if r := post(t, url, tokenBody); r.status != 200 || r.header.Get("x-ratelimit-remaining-tokens") != "5" {
		t.Fatalf("raised: %d remaining %q, want 200 and 5", r.status, r.header.Get("x-ratelimit-remaining-tokens"))
	}
}

// TestSetRateLimitConcurrent changes the limits while requests are in
// flight; the race detector checks the locking, and every answer is one
// of the two the limiter may give.
func TestSetRateLimitConcurrent(t *testing.T) {
	s := newServer(t, providertest.WithRateLimit(1), providertest.WithRateLimitHeaders())
	url := s.URL + "/chat/completions"
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for range 8 {
		wg.Go(func() {
			for range 5 {
				r, err := do(t.Context(), http.MethodPost, url, chatBody)
				if err != nil {
					errs <- err
					return
				}
				if r.status != 200 && r.status != 429 {
					errs <- &statusError{r.status}
					return
				}
			}
		})
	}
	for i := range 20 {
		s.SetRateLimit(i % 4)
		s.SetTokenRateLimit(i * 10)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if got := s.Count(); got != 40 {
		t.Errorf("Count = %d, want 40", got)
	}
}

type statusError struct{ status int }

func (e *statusError) Error() string { return "unexpected status " + strconv.Itoa(e.status) }
