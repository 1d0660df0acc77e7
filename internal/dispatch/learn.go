package dispatch

import (
	"math"
	"sync"
	"time"

	"golang.org/x/time/rate"

	"github.com/promptkit/promptkit/internal/llm"
	"github.com/promptkit/promptkit/pktype"
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
//   - Without a 429 the rate grows as base·1.05^((τ/12 s)²), τ the time
//     since the decrease: 5 % after 12 s, double after 45 s
//     (pktype.LearnedRate.Grown, the law every process sharing the rate
//     computes alike). Near the old limit it probes slowly, so a steady
//     stream settles just under it; the longer no 429 comes (the limit
//     went up), the faster it grows. Once it reaches the configured rate,
//     or 1000 times base, it is dropped: the backend is unpaced again, or
//     paced by its configuration.
//   - At most one decrease per learnWindow: a provider counting fixed
//     windows answers 429 to everything until its window ends, whatever
//     the rate, so a 429 to an attempt dispatched before, or within
//     learnWindow after, the last decrease says nothing about the new rate.
//   - A 429 with nothing admitted in the second before, and no rate
//     learned yet, teaches nothing: a lone request cannot reveal a rate,
//     and the backend-wide pause already covers it.
//   - A cut, like a pause, wakes the callers waiting for their turn and
//     drops the limiter's reservations: they queue again at the new rate
//     instead of leaving at the old one's pace (which is what ran into
//     the limit), or into the pause.
//   - Shared between processes (share.go), the rate is provider-wide: the
//     attempts admitted in the second before a cut are every process's,
//     each counting its own, and each process dispatches its share.
const (
	learnShare  = pktype.LearnShare
	learnMinCut = 0.5
	learnWindow = time.Second
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

	// Shared is set when the scheduler shares its pacing with other
	// processes (Scheduler.Share). The rates above are then
	// provider-wide, and this process uses Share of them: its demand over
	// the demand of the Processes present on the backend (itself
	// included). Share and Processes are 0 when not shared.
	Shared    bool
	Share     float64
	Processes int
	// PausedUntil is when the backend's pause (a provider's Retry-After,
	// received here or by another process) ends; zero or past: none.
	PausedUntil time.Time
	// Held says an operator holds the backend (State.Held): nothing new
	// is dispatched to it until it is released.
	Held bool
	// CooldownUntil is when the backend's cooldown (route.go), begun
	// here or by another process, ends; zero or past: none. Unwell says
	// its last verdict was a failure: past CooldownUntil, model groups
	// send it one probe at a time until one is answered.
	CooldownUntil time.Time
	Unwell        bool
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

	// Sharing with other processes (share.go). base, at and estCap are
	// provider-wide; est, sent and granted count this process's attempts,
	// othersEst what the others counted in the second before at: base
	// is learnShare of their sum, within its bounds (rebase). rateNews
	// marks a decrease not yet published, estNews a change of est; peers
	// is how many other processes have demand on the backend.
	shared            bool
	floor             float64 // the least the last decrease keeps
	othersEst         int
	rateNews, estNews bool
	peers             int
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
// sh is this process's share of the provider-wide budget (1 alone): the
// other processes spend the rest, and the next answer says what is left
// of it all.
func (b *budget) take(now time.Time, cost int64, sh float64) (wait time.Duration, inFlight bool, spent int64) {
	if b.known && !b.resetAt.IsZero() && !now.Before(b.resetAt) {
		// The window ended: the budget is whole again, and when the next
		// one ends is unknown until an answer says so.
		b.remaining, b.resetAt = b.limit, time.Time{}
	}
	if b.known {
		cost = min(cost, b.limit) // an estimate past the whole budget waits one reset, not forever
		mine := b.remaining
		if sh < 1 {
			mine = int64(math.Floor(float64(b.remaining) * sh))
			if b.inflight == 0 && mine < cost && b.remaining >= cost {
				// A share too small for one dispatch still makes one, when
				// nothing of this process is in flight: else a cost above
				// limit × share would wait forever.
				mine = cost
			}
		}
		switch {
		case mine-b.inflight >= cost:
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
	r := pktype.LearnedRate{At: l.at}.Grown(l.base, now)
	if math.IsInf(r, 1) || r >= l.ceiling {
		l.base = 0
		return math.Inf(1)
	}
	return r
}

// sync brings the learned limiter's rate up to date with now and this
// process's share sh of it, and returns it; nil when no rate is learned.
func (l *learner) sync(now time.Time, sh float64) *rate.Limiter {
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
		l.limit = rate.NewLimiter(rate.Limit(scaled(r, sh)), 1)
	default:
		l.limit.SetLimitAt(now, rate.Limit(scaled(r, sh)))
	}
	return l.limit
}

// take spends the header budgets for one dispatch at now of tokens. A
// positive wait means they are spent until then; when answers to attempts
// in flight may free them sooner, answered is closed on the next one. The
// costs spent are for observe.
func (l *learner) take(now time.Time, tokens int, sh float64) (wait time.Duration, answered <-chan struct{}, reqCost, tokCost int64) {
	if l.off {
		return 0, nil, 0, 0
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	w, inFlight, reqCost := l.requests.take(now, 1, sh)
	if w <= 0 {
		w, inFlight, tokCost = l.tokens.take(now, int64(max(tokens, 0)), sh)
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
	l.sent = append(prune(l.sent, t, learnWindow), t)
	l.mu.Unlock()
}

// prune drops times more than keep before now from the front.
func prune(ts []time.Time, now time.Time, keep time.Duration) []time.Time {
	i := 0
	for i < len(ts) && now.Sub(ts[i]) > keep {
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
// arrived, sh this process's share of the backend. news reports a
// decrease or a count to publish, cut a decrease.
func (l *learner) observe(out llm.Outcome, sentAt, now time.Time, reqCost, tokCost int64, sh float64) (news, cut bool) {
	if l.off {
		return false, false
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
		return false, false // the headers govern
	}
	switch {
	case out.StatusCode == 429:
		if cut = l.decrease(sentAt, now, sh); cut {
			l.rateNews = l.shared
		}
	case out.Err == nil || out.StatusCode != 0:
		// The provider admitted it (whatever it answered). Kept twice
		// learnWindow: a shared decrease is adopted a little after it was
		// made, and this process then counts its part of it.
		l.granted = append(prune(l.granted, now, 2*learnWindow), sentAt)
		if l.base > 0 && !sentAt.After(l.at) && l.at.Sub(sentAt) <= learnWindow {
			// In flight at the last decrease: the estimate was short.
			l.est++
			l.rebase()
			l.estNews = l.shared
		}
	}
	return l.rateNews || l.estNews, cut
}

// rebase sets base from the attempts admitted in the second before the
// last decrease (this process's and the others'), within its bounds:
// floor and estCap.
func (l *learner) rebase() {
	l.base = pktype.LearnedRate{Cap: l.estCap, Floor: l.floor}.Base(l.est + l.othersEst)
}

// decrease lowers the rate on a 429 to an attempt dispatched at sentAt.
// Shared with other processes, it counts only this process's attempts:
// the others add theirs when they adopt it (adopt). Until then, the rate
// is at least learnMinCut of the one it cut; sh, this process's share,
// estimates that rate when there was none. It reports whether it changed
// the rate.
func (l *learner) decrease(sentAt, now time.Time, sh float64) bool {
	if l.base > 0 && sentAt.Sub(l.at) < learnWindow {
		return false // too soon after the last decrease to judge it
	}
	from := now.Add(-learnWindow)
	est := countSince(l.granted, from, now)
	cur := l.rateAt(now)
	switch {
	case !math.IsInf(cur, 1) || !math.IsInf(l.ceiling, 1):
		// A rate was in force (learned, or configured): the cut keeps
		// between learnMinCut and learnShare of it, so that one 429
		// never collapses it.
		if math.IsInf(cur, 1) {
			if est == 0 {
				return false
			}
			cur = float64(countSince(l.sent, from, now)) / sh
		}
		cur = min(cur, l.ceiling)
		l.estCap, l.floor = learnShare*cur, learnMinCut*cur
	case est == 0:
		return false
	default:
		// Unpaced: the rate to keep is unknown — what was sent says
		// nothing of what the provider allows (at a cold start most of it
		// was refused), and shared, this process saw only its part — so
		// the estimate stands, raised by the answers still in flight,
		// which it cannot exceed (no more was sent).
		l.estCap, l.floor = math.MaxFloat64, 0
	}
	// In microseconds, as stores keep it: shared, the others' counts
	// name this time.
	l.at, l.est, l.othersEst = now.Truncate(time.Microsecond), est, 0
	l.rebase()
	l.limit = nil // the callers it woke leave at the new rate, not after the old one's reservations
	return true
}

// restart drops the learned limiter's reservations, when a pause began:
// the callers it woke come back after the pause, one at a time at the
// rate, instead of after the reservations they gave up (which a limiter
// cannot return in any order).
func (l *learner) restart() {
	l.mu.Lock()
	l.limit = nil
	l.mu.Unlock()
}

// setShared marks the learner as shared with other processes: from now
// on its decreases are published.
func (l *learner) setShared() {
	l.mu.Lock()
	l.shared = true
	l.rateNews = l.base > 0 && !l.off // what it learned alone
	l.estNews = l.rateNews
	l.mu.Unlock()
}

// takeNews returns what to publish of the learned rate: a decrease made
// here (rate; At zero: none), and this process's count for the last
// decrease (est; At zero: none), each when it changed since the last
// call.
func (l *learner) takeNews() (rate pktype.LearnedRate, est pktype.RateEstimate) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.rateNews {
		rate = pktype.LearnedRate{Cap: l.estCap, Floor: l.floor, At: l.at}
	}
	if l.rateNews || l.estNews {
		est = pktype.RateEstimate{Admitted: l.est, At: l.at}
	}
	l.rateNews, l.estNews = false, false
	return rate, est
}

// requeueNews marks what a failed sync carried as unpublished again (the
// current values are published: they may be newer still).
func (l *learner) requeueNews(rate, est bool) {
	l.mu.Lock()
	l.rateNews = l.rateNews || (rate && !l.at.IsZero())
	l.estNews = l.estNews || (est && !l.at.IsZero())
	l.mu.Unlock()
}

// adopt takes the shared learned rate r when it was set after this
// process's, counting this process's part of it; othersEst is what the
// other processes counted for r, peers how many have demand on the
// backend (for Pacing). cut reports a decrease adopted.
func (l *learner) adopt(r pktype.LearnedRate, othersEst, peers int) (cut bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.peers = peers
	if l.off || r.At.IsZero() || r.At.Before(l.at) {
		return false
	}
	if r.At.After(l.at) {
		// A decrease made by another process: this process's attempts
		// admitted in the second before count too (late answers add to
		// them), and what it would have published is older.
		l.at, l.estCap, l.floor = r.At, r.Cap, r.Floor
		l.est = countSince(l.granted, r.At.Add(-learnWindow), r.At)
		l.rateNews, l.estNews = false, true
		l.othersEst = othersEst
		l.rebase()
		l.limit = nil
		return true
	}
	if l.base > 0 && othersEst != l.othersEst {
		l.othersEst = othersEst
		l.rebase()
	}
	return false
}

// pacing reports the learner's state at now, given the configured rates.
func (l *learner) pacing(now time.Time, configured float64, tpm int) Pacing {
	l.mu.Lock()
	defer l.mu.Unlock()
	p := Pacing{TokensPerMinute: float64(tpm), Requests: l.requests.state(), Tokens: l.tokens.state(),
		Shared: l.shared}
	if l.shared {
		p.Processes = 1 + l.peers
	}
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
