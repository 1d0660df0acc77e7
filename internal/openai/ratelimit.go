package openai

import (
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/promptkit/promptkit/internal/llm"
)

// epochSeconds is where a ratelimit-reset value stops being read as delta
// seconds (about 31 years) and starts being read as a Unix time, which
// some servers send despite the draft.
const epochSeconds = 1_000_000_000

// ParseRateLimits reads the rate-limit headers of an answer received at
// received. OpenAI's x-ratelimit-{limit,remaining,reset}-{requests,tokens}
// give both budgets, resets in Go's duration format ("1s", "6m0s",
// "20ms"; plain seconds such as "1.5" are accepted too). Without them the
// request budget comes from the IETF draft's fields: ratelimit-limit,
// ratelimit-remaining and ratelimit-reset (delta seconds), or the
// structured ratelimit ("default";r=50;t=30) with ratelimit-policy
// ("default";q=100;w=60) for the limit. A budget is Known only when its
// remaining count and reset parse; a missing or malformed value leaves it
// unknown, never an error. Remaining is clamped to Limit, and a Limit the
// provider did not state is Remaining (all that is known to be left).
func ParseRateLimits(h http.Header, received time.Time) llm.RateLimits {
	var rl llm.RateLimits
	rl.Requests = openAIBudget(h, "requests")
	rl.Tokens = openAIBudget(h, "tokens")
	if !rl.Requests.Known {
		rl.Requests = draftBudget(h, received)
	}
	if !rl.Requests.Known {
		rl.Requests = structuredBudget(h)
	}
	return rl
}

func openAIBudget(h http.Header, kind string) llm.Budget {
	remaining, ok := nonNegative(h.Get("X-Ratelimit-Remaining-" + kind))
	if !ok {
		return llm.Budget{}
	}
	reset, ok := openAIDuration(h.Get("X-Ratelimit-Reset-" + kind))
	if !ok {
		return llm.Budget{}
	}
	return budget(h.Get("X-Ratelimit-Limit-"+kind), remaining, reset)
}

// draftBudget reads the earlier drafts' three fields. ratelimit-limit may
// carry a policy after the number ("100, 100;w=60"): its first item is
// the limit.
func draftBudget(h http.Header, received time.Time) llm.Budget {
	remaining, ok := nonNegative(firstItem(h.Get("Ratelimit-Remaining")))
	if !ok {
		return llm.Budget{}
	}
	secs, ok := nonNegative(h.Get("Ratelimit-Reset"))
	if !ok {
		return llm.Budget{}
	}
	if secs >= epochSeconds {
		secs = max(secs-received.Unix(), 0)
	}
	reset, ok := seconds(secs)
	if !ok {
		return llm.Budget{}
	}
	return budget(firstItem(h.Get("Ratelimit-Limit")), remaining, reset)
}

// structuredBudget reads the later drafts' ratelimit field: of its
// policies the one with the fewest remaining binds. Its limit is the
// quota (q) of the ratelimit-policy item of the same name.
func structuredBudget(h http.Header) llm.Budget {
	var best llm.Budget
	var bestName string
	for _, item := range sfList(h.Values("Ratelimit")) {
		remaining, ok := nonNegative(item.params["r"])
		if !ok {
			continue
		}
		secs, ok := nonNegative(item.params["t"])
		if !ok {
			continue
		}
		reset, ok := seconds(secs)
		if !ok {
			continue
		}
		if !best.Known || remaining < best.Remaining {
			best = llm.Budget{Known: true, Remaining: remaining, Reset: reset}
			bestName = item.name
		}
	}
	if !best.Known {
		return best
	}
	limit := ""
	for _, p := range sfList(h.Values("Ratelimit-Policy")) {
		if p.name == bestName {
			limit = p.params["q"]
			break
		}
	}
	return budget(limit, best.Remaining, best.Reset)
}

// budget completes a budget whose remaining count and reset parsed.
func budget(limitValue string, remaining int64, reset time.Duration) llm.Budget {
	limit, ok := nonNegative(limitValue)
	if !ok {
		limit = remaining
	}
	return llm.Budget{Known: true, Limit: limit, Remaining: min(remaining, limit), Reset: reset}
}

// nonNegative parses a non-negative decimal integer.
func nonNegative(v string) (int64, bool) {
	v = strings.TrimSpace(v)
	if !isDigits(v) {
		return 0, false
	}
	n, err := strconv.ParseInt(v, 10, 64)
	return n, err == nil
}

// seconds converts whole seconds to a Duration, refusing overflow.
func seconds(s int64) (time.Duration, bool) {
	if s > math.MaxInt64/int64(time.Second) {
		return 0, false
	}
	return time.Duration(s) * time.Second, true
}

// openAIDuration parses a reset such as "1s", "6m0s", "1m30.5s" or "20ms",
// or plain non-negative seconds ("2", "0.5").
func openAIDuration(v string) (time.Duration, bool) {
	v = strings.TrimSpace(v)
	if v == "" || v[0] == '-' || v[0] == '+' {
		return 0, false
	}
	if d, err := time.ParseDuration(v); err == nil {
		return d, true
	}
	f, err := strconv.ParseFloat(v, 64)
	// ParseFloat takes "NaN", "Inf" and hex; only decimals are seconds.
	if err != nil || strings.ContainsFunc(v, func(r rune) bool { return (r < '0' || r > '9') && r != '.' }) {
		return 0, false
	}
	if f*float64(time.Second) >= math.MaxInt64 {
		return 0, false
	}
	return time.Duration(f * float64(time.Second)), true
}

// firstItem is a list field's first comma-separated item, without its
// parameters.
func firstItem(v string) string {
	v, _, _ = strings.Cut(v, ",")
	v, _, _ = strings.Cut(v, ";")
	return v
}

// sfItem is one member of a structured-field list: a name (a token or a
// string) and its parameters, values unquoted.
type sfItem struct {
	name   string
	params map[string]string
}

// sfList parses the lists of the ratelimit and ratelimit-policy fields
// leniently: enough for names and integer parameters, without the
// structured-field grammar's corner cases (a quoted name holding a comma
// or a semicolon is cut there, so it matches nothing).
func sfList(values []string) []sfItem {
	var items []sfItem
	for _, v := range values {
		for _, member := range strings.Split(v, ",") {
			parts := strings.Split(member, ";")
			it := sfItem{name: unquote(parts[0]), params: map[string]string{}}
			for _, p := range parts[1:] {
				k, val, _ := strings.Cut(p, "=")
				it.params[strings.TrimSpace(k)] = unquote(val)
			}
			items = append(items, it)
		}
	}
	return items
}

func unquote(s string) string {
	s = strings.TrimSpace(s)
	if len(s) >= 2 && s[0] == '"' && s[len(s)-1] == '"' {
		return s[1 : len(s)-1]
	}
	return s
}
