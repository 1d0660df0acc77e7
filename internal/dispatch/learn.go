package dispatch

import (
	"math"
	"sync"
	"time"

	"golang.org/x/time/rate"

	"github.com/promptkit/promptkit/internal/llm"
)

// How the pacer learns a backend's request rate from 429s that carry no
// rate-limit headers (additive increase, multiplicative decrease, shaped
// like TCP CUBIC so that it lingers just under the last known limit):
//
//   - A 429 estimates the provider's limit as the attempts it admitted
//     that were dispatched in the second before, and sets the rate to
//     learnShare of that, bounded to between learnMinCut and learnShare
//     of the rate in force, so that one 429 never collapses it.
//   - Later answers to attempts dispatched in that second (they were in
//     flight) still raise the estimate.
//   - Without a 429 the rate grows as base·1.05^((τ/learnPlateau)²), τ
//     the time since the decrease: 5 % after learnPlateau (12 s), double
//     after 45 s. Near the old limit it probes slowly, so a steady stream
//     settles just under it; the longer no 429 comes (the limit went up),
//     the faster it grows. Once it reaches the configured rate, or
//     learnMaxGrowth times base, it is dropped: the backend is unpaced
//     again, or paced by its configuration.
//   - At most one decrease per learnWindow: a provider counting fixed
//     windows answers 429 to everything until its window ends, whatever
//     the rate, so a 429 to an attempt dispatched before, or within
//     learnWindow after, the last decrease says nothing about the new rate.
//   - A 429 with nothing admitted in the second before, and no rate
//     learned yet, teaches nothing: a lone request cannot reveal a rate,
//     and the backend-wide pause already covers it.
const (
	learnShare     = 0.95
	learnMinCut    = 0.5
	learnPlateau   = 12 * time.Second
	learnWindow    = time.Second
	learnMaxGrowth = 1000
)

// Pacing sources, as reported by Pacing.Source.
const (
	SourceNone       = ""
	SourceConfigured = "configured"
	SourceHeaders    = "headers"
	Source429        = "429"
)

// Pacing is what a backend's pacer currently follows.
type Pacing struct {
	// RequestsPerSecond is the effective request rate: the lower of the
	// configured rate (less the pacing margin) and the rate learned from
	// 429s; 0 when unpaced.
	RequestsPerSecond float64
	// TokensPerMinute is the configured token rate; 0 when unpaced.
	TokensPerMinute float64
	// Source says where RequestsPerSecond comes from: SourceConfigured,
	// Source429, or SourceHeaders when the provider's rate-limit headers
	// govern (see Requests and Tokens); SourceNone when unpaced.
	Source string
	// Requests and Tokens are the provider's header budgets: what may
	// still be dispatched before ResetAt. Known is false when the provider
	// sent no such header.
	Requests, Tokens BudgetState
}

// BudgetState is one header budget as the pacer sees it.
type BudgetState struct {
	Known     bool
	Limit     int64
	Remaining int64 // less what is in flight

	ResetAt time.Time
}

// learner is one backend's learned rate and header budgets.
type learner struct {
	mu      sync.Mutex
	off     bool
	ceiling float64       // configured requests/s × margin; +Inf when none
	limit   *rate.Limiter // the learned rate; nil while none

	base    float64   // rate set by the last decrease; 0: none learned
	at      time.Time // when base was set
	est     int       // admitted attempts dispatched in the second before at
	estCap  float64   // upper bound on base for late answers
	sent    []time.Time
	granted []time.Time // dispatch times of admitted attempts

	requests, tokens budget
	// answered is closed, and replaced, when an answer settles: callers
	// waiting on budget held by attempts in flight look again.
	answered chan struct{}
}

func newLearner(off bool, ceiling float64) *learner {
	if ceiling <= 0 {
		ceiling = math.Inf(1)
	}
	return &learner{off: off, ceiling: ceiling}
}

// budget follows one rate-limit header: the provider said remaining of
// limit were left until resetAt. Answers arrive out of order, so the
// lowest remaining of a window is the truth, and what is still in flight
// may or may not be counted in it: the pacer assumes it is not, and gets
// it back as those answers arrive.
type budget struct {
	known     bool
	limit     int64
	remaining int64
	resetAt   time.Time // zero: unknown, the window having ended
	inflight  int64     // dispatched, not yet answered
}

// take spends cost at now, or returns how long to wait for the reset; then
// inFlight says whether what is in flight is short of the budget, so that
// an answer may free it sooner. It returns the cost spent, for settle.
func (b *budget) take(now time.Time, cost int64) (wait time.Duration, inFlight bool, spent int64) {
	if b.known && !b.resetAt.IsZero() && !now.Before(b.resetAt) {
		// The window ended: the budget is whole again, and when the next
		// one ends is unknown until an answer says so.
		b.remaining, b.resetAt = b.limit, time.Time{}
	}
	if b.known {
		cost = min(cost, b.limit) // an estimate past the whole budget waits one reset, not forever
		switch {
		case b.remaining-b.inflight >= cost:
		case !b.resetAt.IsZero():
			return b.resetAt.Sub(now), b.remaining >= cost, 0
		case b.inflight > 0:
			// A new window, its end unknown: the answers in flight will
			// tell. learnWindow bounds the wait should none come.
			return learnWindow, true, 0
		}
	}
	b.inflight += cost
	return 0, false, cost
}

// settle applies the answer to an attempt that spent cost: h, received at
// t, as seen at now.
func (b *budget) settle(h llm.Budget, t, now time.Time, cost int64) {
	b.inflight -= cost
	if !h.Known || h.Limit <= 0 {
		b.remaining -= cost // counted, surely, but not reported
		return
	}
	resetAt := t.Add(h.Reset)
	if !resetAt.After(now) {
		return // its window has ended
	}
	if !b.known || b.resetAt.IsZero() || h.Remaining <= b.remaining {
		b.known, b.limit, b.remaining, b.resetAt = true, h.Limit, h.Remaining, resetAt
	}
}

func (b *budget) state() BudgetState {
	if !b.known {
		return BudgetState{}
	}
	return BudgetState{Known: b.known, Limit: b.limit, Remaining: b.remaining - b.inflight, ResetAt: b.resetAt}
}

// rateAt is the learned rate at now; +Inf when none. Callers hold mu.
func (l *learner) rateAt(now time.Time) float64 {
	if l.base == 0 {
		return math.Inf(1)
	}
	tau := float64(now.Sub(l.at)) / float64(learnPlateau)
	r := l.base * math.Pow(1.05, tau*tau)
	if r > l.base*learnMaxGrowth || r >= l.ceiling {
		l.base = 0
		return math.Inf(1)
	}
	return r
}

// sync brings the learned limiter's rate up to date with now and returns
// it; nil when no rate is learned.
func (l *learner) sync(now time.Time) *rate.Limiter {
	if l.off {
		return nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	r := l.rateAt(now)
	switch {
	case math.IsInf(r, 1):
		// Not rate.Inf: a limiter moving from it to a finite rate computes
		// NaN tokens.
		l.limit = nil
	case l.limit == nil:
		l.limit = rate.NewLimiter(rate.Limit(r), 1)
	default:
		l.limit.SetLimitAt(now, rate.Limit(r))
	}
	return l.limit
}

// take spends the header budgets for one dispatch at now of tokens. A
// positive wait means they are spent until then; when answers to attempts
// in flight may free them sooner, answered is closed on the next one. The
// costs spent are for observe.
func (l *learner) take(now time.Time, tokens int) (wait time.Duration, answered <-chan struct{}, reqCost, tokCost int64) {
	if l.off {
		return 0, nil, 0, 0
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	w, inFlight, reqCost := l.requests.take(now, 1)
	if w <= 0 {
		w, inFlight, tokCost = l.tokens.take(now, int64(max(tokens, 0)))
		if w > 0 {
			l.requests.inflight -= reqCost // this dispatch waits for the tokens
		}
	}
	if w <= 0 {
		return 0, nil, reqCost, tokCost
	}
	if inFlight {
		if l.answered == nil {
			l.answered = make(chan struct{})
		}
		answered = l.answered
	}
	return w, answered, 0, 0
}

// settled wakes the callers waiting for an answer. Callers hold mu.
func (l *learner) settled() {
	if l.answered != nil {
		close(l.answered)
		l.answered = nil
	}
}

// dispatched records a dispatch at t.
func (l *learner) dispatched(t time.Time) {
	if l.off {
		return
	}
	l.mu.Lock()
	l.sent = append(prune(l.sent, t), t)
	l.mu.Unlock()
}

// prune drops times more than learnWindow before now from the front.
func prune(ts []time.Time, now time.Time) []time.Time {
	i := 0
	for i < len(ts) && now.Sub(ts[i]) > learnWindow {
		i++
	}
	if i > len(ts)/2 {
		return append(ts[:0], ts[i:]...)
	}
	return ts[i:]
}

func countSince(ts []time.Time, from, to time.Time) int {
	n := 0
	for _, t := range ts {
		if !t.Before(from) && !t.After(to) {
			n++
		}
	}
	return n
}

// abandon returns what an attempt that never answered spent.
func (l *learner) abandon(reqCost, tokCost int64) {
	l.mu.Lock()
	l.requests.inflight -= reqCost
	l.tokens.inflight -= tokCost
	l.settled()
	l.mu.Unlock()
}

// observe learns from the answer to an attempt dispatched at sentAt that
// spent reqCost and tokCost of the header budgets; now is when the answer
// arrived.
func (l *learner) observe(out llm.Outcome, sentAt, now time.Time, reqCost, tokCost int64) {
	if l.off {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	received := out.Received
	if received.IsZero() {
		received = now
	}
	l.requests.settle(out.Limits.Requests, received, now, reqCost)
	l.tokens.settle(out.Limits.Tokens, received, now, tokCost)
	l.settled()
	if out.Limits.Requests.Known || out.Limits.Tokens.Known {
		return // the headers govern
	}
	switch {
	case out.StatusCode == 429:
		l.decrease(sentAt, now)
	case out.Err == nil || out.StatusCode != 0:
		// The provider admitted it (whatever it answered).
		l.granted = append(prune(l.granted, now), sentAt)
		if l.base > 0 && !sentAt.After(l.at) && l.at.Sub(sentAt) <= learnWindow {
			// In flight at the last decrease: the estimate was short.
			l.est++
			l.base = max(l.base, min(learnShare*float64(l.est), l.estCap))
		}
	}
}

func (l *learner) decrease(sentAt, now time.Time) {
	if l.base > 0 && sentAt.Sub(l.at) < learnWindow {
		return // too soon after the last decrease to judge it
	}
	from := now.Add(-learnWindow)
	est := countSince(l.granted, from, now)
	cur := l.rateAt(now)
	if math.IsInf(cur, 1) {
		if est == 0 {
			return
		}
		cur = float64(countSince(l.sent, from, now))
	}
	cur = min(cur, l.ceiling)
	l.estCap = learnShare * cur
	l.base = min(max(learnShare*float64(est), learnMinCut*cur), l.estCap)
	l.at, l.est = now, est
}

// pacing reports the learner's state at now, given the configured rates.
func (l *learner) pacing(now time.Time, configured float64, tpm int) Pacing {
	l.mu.Lock()
	defer l.mu.Unlock()
	p := Pacing{TokensPerMinute: float64(tpm), Requests: l.requests.state(), Tokens: l.tokens.state()}
	if configured > 0 {
		p.RequestsPerSecond, p.Source = configured*pacingMargin, SourceConfigured
	}
	if !l.off {
		if r := l.rateAt(now); !math.IsInf(r, 1) && (p.RequestsPerSecond == 0 || r < p.RequestsPerSecond) {
			p.RequestsPerSecond, p.Source = r, Source429
		}
	}
	if p.Requests.Known || p.Tokens.Known {
		p.Source = SourceHeaders
	}
	return p
}
