package dispatch

import (
	"context"
	"errors"
	"math"
	"testing"
	"time"

	"github.com/promptkit/promptkit/internal/llm"
	"github.com/promptkit/promptkit/internal/testkit"
)

// These tests drive the pacer with one caller on a fake clock against an
// in-test provider that admits limit(t) requests per aligned second of
// that clock and answers 429 past it. Every attempt takes latency of fake
// time, so the caller alone offers 1/latency requests per second: far
// more than the limit.

type simProvider struct {
	c          *testkit.Clock
	limit      func(since time.Duration) int
	latency    time.Duration
	retryAfter bool // 429s carry a Retry-After to the window's end

	window time.Time
	count  int
}

func (p *simProvider) attempt(context.Context) llm.Outcome {
	now := p.c.Now()
	if w := now.Truncate(time.Second); !w.Equal(p.window) {
		p.window, p.count = w, 0
	}
	p.c.Advance(p.latency)
	if p.count >= p.limit(now.Sub(epoch)) {
		var nb time.Time
		if p.retryAfter {
			nb = p.window.Add(time.Second)
		}
		out := statusAt(429, nb)
		out.Received = p.c.Now()
		return out
	}
	p.count++
	out := success()
	out.Received = p.c.Now()
	return out
}

// secondStats counts, per second since epoch, successes and 429s by
// dispatch time.
type secondStats struct{ ok, limited []int }

func (st *secondStats) add(sec int, status int) {
	for len(st.ok) <= sec {
		st.ok = append(st.ok, 0)
		st.limited = append(st.limited, 0)
	}
	if status == 429 {
		st.limited[sec]++
	} else {
		st.ok[sec]++
	}
}

// sums returns the successes and 429s in seconds [from, to).
func (st *secondStats) sums(from, to int) (ok, limited int) {
	for s := from; s < to && s < len(st.ok); s++ {
		ok += st.ok[s]
		limited += st.limited[s]
	}
	return ok, limited
}

// drive runs one caller against p until d of fake time passed.
func drive(t *testing.T, s *Scheduler, c *testkit.Clock, p *simProvider, d time.Duration) *secondStats {
	t.Helper()
	st := &secondStats{}
	for c.Now().Before(epoch.Add(d)) {
		var sent time.Time
		out := s.Generate(context.Background(), Sequence{Backend: "b", Generation: 1, Attempt: func(ctx context.Context) llm.Outcome {
			sent = c.Now()
			return p.attempt(ctx)
		}})
		if out.Err != nil && out.StatusCode != 429 {
			t.Fatalf("unexpected failure: %v", out.Err)
		}
		st.add(int(sent.Sub(epoch)/time.Second), out.StatusCode)
	}
	return st
}

func learnSched(c *testkit.Clock, b Backend) *Scheduler {
	return New(Config{Backends: map[string]Backend{"b": b}, Now: c.Now, Jitter: jitterNone, Wait: c.Wait})
}

func fixed(n int) func(time.Duration) int { return func(time.Duration) int { return n } }

func TestLearnConvergesUnderFixedLimit(t *testing.T) {
	t.Parallel()
	for _, retryAfter := range []bool{false, true} {
		c := newClock()
		s := learnSched(c, Backend{})
		p := &simProvider{c: c, limit: fixed(100), latency: 2 * time.Millisecond, retryAfter: retryAfter}
		st := drive(t, s, c, p, 120*time.Second)
		ok, limited := st.sums(20, 120)
		t.Logf("retry-after %v: first second %d ok %d 429s; seconds 20-120: %d ok, %d 429s; learned %+v",
			retryAfter, st.ok[0], st.limited[0], ok, limited, s.Pacing()["b"])
		// Goodput at least 90 % of the limit, and at most 1 % of calls
		// wasted on 429s, once learned.
		if ok < 9000 || limited*100 > ok {
			t.Errorf("retry-after %v: seconds 20-120: %d successes, %d 429s; want >= 9000 and <= 1 %%", retryAfter, ok, limited)
		}
		if pc := s.Pacing()["b"]; pc.Source != Source429 || pc.RequestsPerSecond < 80 || pc.RequestsPerSecond > 105 {
			t.Errorf("retry-after %v: pacing = %+v, want a learned rate near 100", retryAfter, pc)
		}
	}
}

func TestLearnFollowsHalvingAndDoubling(t *testing.T) {
	t.Parallel()
	c := newClock()
	s := learnSched(c, Backend{})
	limit := func(since time.Duration) int {
		switch {
		case since < 60*time.Second:
			return 100
		case since < 120*time.Second:
			return 50
		default:
			return 100
		}
	}
	p := &simProvider{c: c, limit: limit, latency: 2 * time.Millisecond, retryAfter: true}
	st := drive(t, s, c, p, 240*time.Second)
	for _, ph := range []struct {
		from, to, limit int
	}{{30, 60, 100}, {90, 120, 50}, {210, 240, 100}} {
		ok, limited := st.sums(ph.from, ph.to)
		secs := ph.to - ph.from
		t.Logf("seconds %d-%d (limit %d/s): %.1f ok/s, %d 429s", ph.from, ph.to, ph.limit, float64(ok)/float64(secs), limited)
		// Within 10 % of the limit, at most 1 % of calls wasted.
		if ok*10 < 9*ph.limit*secs || limited*100 > ok {
			t.Errorf("seconds %d-%d: %d successes, %d 429s against a limit of %d/s", ph.from, ph.to, ok, limited, ph.limit)
		}
	}
	// Right after each change, it adapts within seconds: a halved limit
	// wastes few calls, and a doubled one is used within a minute.
	if _, limited := st.sums(60, 70); limited > 20 {
		t.Errorf("%d 429s in the 10 s after the limit halved", limited)
	}
	if ok, _ := st.sums(170, 180); ok < 900 {
		t.Errorf("%d successes in seconds 170-180, 50-60 s after the limit doubled to 100/s", ok)
	}
}

func TestLearnNeverExceedsConfiguredRate(t *testing.T) {
	t.Parallel()
	c := newClock()
	s := learnSched(c, Backend{RequestsPerSecond: 50})
	p := &simProvider{c: c, limit: fixed(100), latency: 2 * time.Millisecond}
	st := drive(t, s, c, p, 60*time.Second)
	for sec := range 60 {
		if n := st.ok[sec] + st.limited[sec]; n > 50 {
			t.Fatalf("second %d: %d dispatches past a configured 50/s", sec, n)
		}
	}
	if pc := s.Pacing()["b"]; pc.Source != SourceConfigured || pc.RequestsPerSecond != 50*pacingMargin {
		t.Fatalf("pacing = %+v", pc)
	}
	// Learning below the bound: the provider allows 30/s.
	c2 := newClock()
	s2 := learnSched(c2, Backend{RequestsPerSecond: 50})
	p2 := &simProvider{c: c2, limit: fixed(30), latency: 2 * time.Millisecond, retryAfter: true}
	st2 := drive(t, s2, c2, p2, 60*time.Second)
	ok, limited := st2.sums(20, 60)
	if ok < 40*27 || limited*100 > ok {
		t.Fatalf("below a configured bound: %d successes, %d 429s in 40 s against 30/s", ok, limited)
	}
	for sec := range 60 {
		if n := st2.ok[sec] + st2.limited[sec]; n > 50 {
			t.Fatalf("second %d: %d dispatches past a configured 50/s", sec, n)
		}
	}
	if pc := s2.Pacing()["b"]; pc.Source != Source429 || pc.RequestsPerSecond > 50*pacingMargin {
		t.Fatalf("pacing = %+v", pc)
	}
}

func TestLearnOffIgnores429s(t *testing.T) {
	t.Parallel()
	c := newClock()
	s := learnSched(c, Backend{NoLearn: true})
	p := &simProvider{c: c, limit: fixed(100), latency: 2 * time.Millisecond}
	drive(t, s, c, p, 3*time.Second)
	if pc := s.Pacing()["b"]; pc != (Pacing{}) {
		t.Fatalf("pacing = %+v, want none", pc)
	}
	if w := c.Waits(); len(w) != 0 {
		t.Fatalf("waits %v with learning off", w)
	}
}

// TestLearnSingle429DoesNotStarve: a stream far under the limit meets one
// stray 429; the rate dips by at most half and recovers.
func TestLearnSingle429DoesNotStarve(t *testing.T) {
	t.Parallel()
	c := newClock()
	s := learnSched(c, Backend{})
	stray := epoch.Add(10 * time.Second)
	strayDone := false
	p := &simProvider{c: c, limit: func(since time.Duration) int {
		if !strayDone && !c.Now().Before(stray) {
			strayDone = true
			return 0
		}
		return 1000
	}, latency: 10 * time.Millisecond} // 100/s offered
	st := drive(t, s, c, p, 120*time.Second)
	if _, limited := st.sums(0, 120); limited != 1 {
		t.Fatalf("%d 429s, want the one stray", limited)
	}
	pc := s.Pacing()["b"]
	t.Logf("after: %+v; seconds 10-12: %v", pc, st.ok[10:13])
	for sec := 10; sec < 120; sec++ {
		if st.ok[sec] < 50 {
			t.Fatalf("second %d: %d successes; a single 429 must not cut the rate below half", sec, st.ok[sec])
		}
	}
	if ok, _ := st.sums(100, 120); ok < 20*99 {
		t.Fatalf("seconds 100-120: %d successes, want the full 100/s back", ok)
	}
}

func TestLearnNoRateFromALone429(t *testing.T) {
	t.Parallel()
	c := newClock()
	s := learnSched(c, Backend{})
	att, _ := outcomes(failStatus(429), success())
	s.Generate(context.Background(), Sequence{Backend: "b", Generation: 1, Attempt: att})
	if pc := s.Pacing()["b"]; pc != (Pacing{}) {
		t.Fatalf("pacing after a first-request 429 = %+v, want none", pc)
	}
}

// headerAnswer is a success whose headers report budgets at the fake now.
func headerAnswer(c *testkit.Clock, req, tok llm.Budget) llm.Outcome {
	out := success()
	out.Received = c.Now()
	out.Limits = llm.RateLimits{Requests: req, Tokens: tok}
	return out
}

func TestHeaderBudgetSpentExactly(t *testing.T) {
	t.Parallel()
	c := newClock()
	s, waiting := fakeSched(t, c, jitterNone, map[string]Backend{"b": {}})
	att, _ := outcomes(headerAnswer(c, llm.Budget{Known: true, Limit: 10, Remaining: 3, Reset: 2 * time.Second}, llm.Budget{}))
	if out := s.Generate(context.Background(), Sequence{Backend: "b", Generation: 1, Attempt: att}); out.Err != nil {
		t.Fatal(out.Err)
	}
	if pc := s.Pacing()["b"]; pc.Source != SourceHeaders || pc.Requests != (BudgetState{Known: true, Limit: 10, Remaining: 3, ResetAt: epoch.Add(2 * time.Second)}) {
		t.Fatalf("pacing = %+v", pc)
	}
	c.Advance(500 * time.Millisecond)
	// Answers without headers: each counts against the budget.
	plain, _ := outcomes(success())
	for i := range 3 { // the three that remain go at once
		if out := s.Generate(context.Background(), Sequence{Backend: "b", Generation: 1, Attempt: plain}); out.Err != nil {
			t.Fatalf("dispatch %d: %v", i+1, out.Err)
		}
	}
	sameWaits(t, c.Waits())
	// The fourth waits for the reset, and the budget is whole again.
	for i := range 10 {
		if out := s.Generate(context.Background(), Sequence{Backend: "b", Generation: 1, Attempt: plain}); out.Err != nil {
			t.Fatalf("dispatch %d after the reset: %v", i+1, out.Err)
		}
	}
	sameWaits(t, c.Waits(), 1500*time.Millisecond)
	sameStrings(t, "announced", announced(waiting), []string{"backend budget"})
	if pc := s.Pacing()["b"]; pc.Requests.Remaining != 0 {
		t.Fatalf("after the reset: %+v", pc.Requests)
	}
}

// TestHeaderBudgetCountsWhatIsInFlight: an answer's Remaining may not
// count the attempts still in flight; answers arriving out of order
// never raise it within its window.
func TestHeaderBudgetCountsWhatIsInFlight(t *testing.T) {
	t.Parallel()
	c := newClock()
	s, _ := fakeSched(t, c, jitterNone, map[string]Backend{"b": {}})
	var tickets []ticket
	for range 3 { // A, B and C in flight together
		tk, err := s.acquireTicket(context.Background(), "b", 1, waitLimit{})
		if err != nil {
			t.Fatal(err)
		}
		tickets = append(tickets, tk)
	}
	g := s.gates["b"]
	answer := func(i int, remaining int64) int64 {
		t.Helper()
		out := headerAnswer(c, llm.Budget{Known: true, Limit: 10, Remaining: remaining, Reset: time.Second}, llm.Budget{})
		g.learn.observe(out, epoch, c.Now(), tickets[i].reqCost, tickets[i].tokCost, 1)
		return s.Pacing()["b"].Requests.Remaining
	}
	if got := answer(0, 4); got != 2 { // B and C may not be counted in A's 4
		t.Fatalf("after A: remaining %d, want 2", got)
	}
	if got := answer(1, 5); got != 3 { // B was counted before A: 4 stands
		t.Fatalf("after B: remaining %d, want 3", got)
	}
	if got := answer(2, 3); got != 3 {
		t.Fatalf("after C: remaining %d, want 3", got)
	}
}

func TestHeaderTokenBudget(t *testing.T) {
	t.Parallel()
	c := newClock()
	s, _ := fakeSched(t, c, jitterNone, map[string]Backend{"b": {}})
	att, _ := outcomes(headerAnswer(c, llm.Budget{}, llm.Budget{Known: true, Limit: 1000, Remaining: 250, Reset: 30 * time.Second}))
	if out := s.Generate(context.Background(), Sequence{Backend: "b", Generation: 1, Tokens: 100, Attempt: att}); out.Err != nil {
		t.Fatal(out.Err)
	}
	for range 3 {
		release, err := s.acquire(context.Background(), "b", 100, false)
		if err != nil {
			t.Fatal(err)
		}
		release()
	}
	// Two estimates of 100 fit in 250; the third waits for the reset.
	sameWaits(t, c.Waits(), 30*time.Second)
}

func TestHeaderBudgetPastDeadlineFailsAtOnce(t *testing.T) {
	t.Parallel()
	start := time.Now()
	c := testkit.NewClock(start) // deadlines are real: start the fake clock at real now
	s, _ := fakeSched(t, c, jitterNone, map[string]Backend{"b": {}})
	att, _ := outcomes(headerAnswer(c, llm.Budget{Known: true, Limit: 10, Remaining: 0, Reset: time.Hour}, llm.Budget{}))
	s.Generate(context.Background(), Sequence{Backend: "b", Generation: 1, Attempt: att})
	ctx, cancel := context.WithDeadline(context.Background(), start.Add(time.Minute))
	defer cancel()
	_, err := s.acquire(ctx, "b", 1, true)
	var ce *CapacityError
	if !errors.As(err, &ce) || !ce.NotBefore.Equal(start.Add(time.Hour)) {
		t.Fatalf("err = %v, want a CapacityError with NotBefore at the reset", err)
	}
	sameWaits(t, c.Waits())
}

// TestHeaderBudgetHeldInFlightWaitsForAnAnswer: budget held only by an
// attempt in flight frees at its answer, not at the reset.
func TestHeaderBudgetHeldInFlightWaitsForAnAnswer(t *testing.T) {
	t.Parallel()
	c := newClock()
	s := New(Config{Backends: map[string]Backend{"b": {}}, Now: c.Now, Jitter: jitterNone, Wait: c.Wait})
	att, _ := outcomes(headerAnswer(c, llm.Budget{Known: true, Limit: 10, Remaining: 1, Reset: 10 * time.Second}, llm.Budget{}))
	s.Generate(context.Background(), Sequence{Backend: "b", Generation: 1, Attempt: att})
	inFlight, err := s.acquireTicket(context.Background(), "b", 1, waitLimit{}) // takes the last one
	if err != nil {
		t.Fatal(err)
	}
	// The wait for the budget lasts until its context ends: the answer.
	c.OnWait(func(ctx context.Context, d time.Duration) error {
		<-ctx.Done()
		return ctx.Err()
	})
	g := s.gates["b"]
	s.onWait = func(what string) {
		if what != "backend budget" {
			t.Errorf("waited for %q", what)
		}
		// The provider answers: it had counted the attempt in its 1.
		g.learn.observe(headerAnswer(c, llm.Budget{Known: true, Limit: 10, Remaining: 1, Reset: 10 * time.Second}, llm.Budget{}), epoch, c.Now(), inFlight.reqCost, inFlight.tokCost, 1)
	}
	release, err := s.acquire(context.Background(), "b", 1, false)
	if err != nil {
		t.Fatal(err)
	}
	release()
	sameWaits(t, c.Waits(), 10*time.Second) // begun, ended by the answer
	if !c.Now().Equal(epoch) {
		t.Fatalf("the clock moved to %v: the wait lasted until the reset", c.Now())
	}
}

// TestLearnedRateAfterPause: when a backend-wide pause ends, callers leave
// at the learned rate, not all at once.
func TestLearnedRateAfterPause(t *testing.T) {
	t.Parallel()
	c := newClock()
	s, waiting := fakeSched(t, c, jitterNone, map[string]Backend{"b": {}})
	outs := make([]llm.Outcome, 0, 11)
	for range 10 {
		outs = append(outs, success())
	}
	outs = append(outs, statusAt(429, epoch.Add(time.Second)))
	att, _ := outcomes(outs...)
	for range 11 { // ten admitted in this instant, then a 429
		s.Generate(context.Background(), Sequence{Backend: "b", Generation: 1, Attempt: att})
	}
	// 95 % of the ten admitted in the last second.
	if pc := s.Pacing()["b"]; pc.Source != Source429 || math.Abs(pc.RequestsPerSecond-9.5) > 1e-9 {
		t.Fatalf("pacing = %+v, want 9.5/s learned", pc)
	}
	ok, _ := outcomes(success())
	for range 3 {
		if out := s.Generate(context.Background(), Sequence{Backend: "b", Generation: 1, Attempt: ok}); out.Err != nil {
			t.Fatal(out.Err)
		}
	}
	w := c.Waits()
	sameStrings(t, "announced", announced(waiting), []string{"backend pause", "backend pacing", "backend pacing"})
	rate := 9.5 // a variable: the constant division is not an integer
	gap := time.Duration(float64(time.Second) / rate)
	if len(w) != 3 || w[0] != time.Second || w[1] < gap-time.Millisecond || w[1] > gap || w[2] < gap-time.Millisecond || w[2] > gap {
		t.Fatalf("waits = %v, want the pause then two of ~%v", w, gap)
	}
}
