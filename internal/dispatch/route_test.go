package dispatch

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/promptkit/promptkit/internal/llm"
	"github.com/promptkit/promptkit/pktype"
)

// pickAll picks n times among routes, all available with permits free.
func pickAll(routes []Route, n int) string {
	av := make([]availability, len(routes))
	for i := range av {
		av[i] = availability{ok: true, free: true}
	}
	cur := make([]int, len(routes))
	var b strings.Builder
	for range n {
		b.WriteString(routes[pick(routes, av, cur)].Backend)
	}
	return b.String()
}

// The round-robin is nginx's smooth weighted one: exact, and spread out.
func TestPickSmoothWeighted(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		weights []int
		want    string
	}{
		{[]int{5, 1, 1}, "aabacaa" + "aabacaa"},
		{[]int{3, 1}, "aaba" + "aaba"},
		{[]int{1, 1, 1}, "abcabc"},
	} {
		var routes []Route
		for i, w := range c.weights {
			routes = append(routes, Route{Backend: string(rune('a' + i)), Weight: w})
		}
		if got := pickAll(routes, len(c.want)); got != c.want {
			t.Errorf("weights %v: %s, want %s", c.weights, got, c.want)
		}
	}
}

// Availability decides before weight: a free permit is preferred, the
// fallbacks come in order only without an available primary, and with
// nothing available the backend free again first is used.
func TestPickAvailability(t *testing.T) {
	t.Parallel()
	now := epoch
	routes := []Route{{Backend: "a", Weight: 5}, {Backend: "b", Weight: 1}, {Backend: "f1", Fallback: true}, {Backend: "f2", Fallback: true}}
	ok, busy := availability{ok: true, free: true}, availability{ok: true}
	off := func(d time.Duration) availability { return availability{until: now.Add(d)} }
	for _, c := range []struct {
		name string
		av   []availability
		want string
	}{
		{"a's permits are taken", []availability{busy, ok, ok, ok}, "b"},
		{"every permit is taken: by weight", []availability{busy, busy, ok, ok}, "a"},
		{"a cools down", []availability{off(time.Second), ok, ok, ok}, "b"},
		{"no primary: the first fallback", []availability{off(time.Second), off(time.Second), ok, ok}, "f1"},
		{"no primary, f1 busy: f2", []availability{off(time.Second), off(time.Second), busy, ok}, "f2"},
		{"nothing: the earliest end", []availability{off(3 * time.Second), off(2 * time.Second), off(4 * time.Second), off(time.Second)}, "f2"},
	} {
		if got := routes[pick(routes, c.av, make([]int, len(routes)))].Backend; got != c.want {
			t.Errorf("%s: %s, want %s", c.name, got, c.want)
		}
	}
}

// unwell tells a backend's failure from the request's.
func TestUnwell(t *testing.T) {
	t.Parallel()
	transport := llm.Outcome{Err: &llm.AttemptError{Kind: pktype.ErrTransport, Cause: errors.New("refused")}}
	for _, c := range []struct {
		name string
		ctx  context.Context
		out  llm.Outcome
		want bool
	}{
		{"500", context.Background(), failStatus(500), true},
		{"503", context.Background(), failStatus(503), true},
		{"transport", context.Background(), transport, true},
		{"transport after the caller ended", ctxDone(), transport, false},
		{"429", context.Background(), failStatus(429), false},
		{"400", context.Background(), failStatus(400), false},
		{"success", context.Background(), success(), false},
	} {
		if got := unwell(c.ctx, c.out); got != c.want {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
}

// In a group a transport failure moves the retry to another backend at
// once; alone it is returned, as before.
func TestTransportFailureFailsOver(t *testing.T) {
	t.Parallel()
	c := newClock()
	s, _ := fakeSched(t, c, jitterNone, map[string]Backend{"a": {}, "b": {}})
	refused := llm.Outcome{Err: &llm.AttemptError{Kind: pktype.ErrTransport, Cause: errors.New("refused")}}
	var a, b atomic.Int32
	seq := Sequence{Group: "g", Retries: 1, Routes: []Route{
		{Backend: "a", Weight: 1, Attempt: func(context.Context) llm.Outcome { a.Add(1); return refused }},
		{Backend: "b", Weight: 1, Attempt: func(context.Context) llm.Outcome { b.Add(1); return success() }},
	}}
	out := s.Generate(t.Context(), seq)
	if out.Err != nil || out.Backend != "b" || a.Load() != 1 || b.Load() != 1 {
		t.Fatalf("group: %+v; a %d, b %d", out, a.Load(), b.Load())
	}
	if len(c.Waits()) != 0 {
		t.Fatalf("waited %v", c.Waits())
	}
	alone := s.Generate(t.Context(), Sequence{Backend: "a", Retries: 1, Attempt: answer(refused)})
	if !errors.Is(alone.Err, pktype.ErrTransport) || isExhausted(alone.Err) {
		t.Fatalf("alone: %v", alone.Err)
	}
}

// A 429 still refused after every retry cools its backend down; one
// refused with retries left does not.
func TestExhausted429Cools(t *testing.T) {
	t.Parallel()
	c := newClock()
	s, _ := fakeSched(t, c, jitterNone, map[string]Backend{"b": {Cooldown: time.Minute}})
	attempt, _ := outcomes(failStatus(429), success())
	if out := s.Generate(t.Context(), Sequence{Backend: "b", Retries: 1, Attempt: attempt}); out.Err != nil {
		t.Fatal(out.Err)
	}
	if p := s.Pacing()["b"]; p.Unwell || !p.CooldownUntil.IsZero() {
		t.Fatalf("after a 429 then a success: %+v", p)
	}
	out := s.Generate(t.Context(), Sequence{Backend: "b", Retries: 1, Attempt: answer(failStatus(429))})
	if !isExhausted(out.Err) {
		t.Fatalf("err = %v", out.Err)
	}
	if p := s.Pacing()["b"]; !p.Unwell || !p.CooldownUntil.Equal(c.Now().Add(time.Minute)) {
		t.Fatalf("after exhausted 429s: %+v", p)
	}
}

// A cooldown one process begins reaches the others with the pauses: it
// is published once, adopted as unwell, and their groups avoid the
// backend. A cooldown already over is not adopted.
func TestShareCooldownReachesOthers(t *testing.T) {
	t.Parallel()
	c := newClock()
	m := newMemShared()
	backends := map[string]Backend{"bad": {}, "good": {}}
	s1, _ := fakeSched(t, c, jitterNone, backends)
	s2, _ := fakeSched(t, c, jitterNone, backends)
	sr1, sr2 := sharing(s1, m, "p1"), sharing(s2, m, "p2")
	got := make(chan []pktype.PacingNews, 8)
	m.got = got
	var bad atomic.Int32
	group := func() Sequence {
		return Sequence{Group: "g", Retries: 1, Routes: []Route{
			{Backend: "bad", Weight: 1, Attempt: func(context.Context) llm.Outcome { bad.Add(1); return failStatus(500) }},
			{Backend: "good", Weight: 1, Attempt: answer(success())},
		}}
	}
	if out := s1.Generate(t.Context(), group()); out.Err != nil || out.Backend != "good" {
		t.Fatalf("s1: %+v", out)
	}
	until := c.Now().Add(DefaultCooldown)
	cools := func(news []pktype.PacingNews) (out []string) {
		for _, n := range news {
			if !n.CooldownUntil.IsZero() {
				out = append(out, n.Backend+"@"+n.CooldownUntil.Sub(epoch).String())
			}
		}
		return out
	}
	sr1.step(t.Context())
	if got := cools(<-got); len(got) != 1 || got[0] != "bad@"+until.Sub(epoch).String() {
		t.Fatalf("s1 published cooldowns %v", got)
	}
	sr1.step(t.Context()) // nothing new: no second publication
	select {
	case news := <-got:
		if len(cools(news)) != 0 {
			t.Fatalf("s1 published again: %+v", news)
		}
	default: // no sync at all
	}
	sr2.step(t.Context()) // the first step reads
	<-got
	if p := s2.Pacing()["bad"]; !p.CooldownUntil.Equal(until) || !p.Unwell {
		t.Fatalf("s2: %+v", p)
	}
	for range 3 {
		if out := s2.Generate(t.Context(), group()); out.Err != nil || out.Backend != "good" {
			t.Fatalf("s2: %+v", out)
		}
	}
	if bad.Load() != 1 {
		t.Fatalf("bad got %d attempts, want s1's only", bad.Load())
	}

	// A third process starting after the cooldown ended does not adopt it.
	c.Advance(DefaultCooldown)
	s3, _ := fakeSched(t, c, jitterNone, backends)
	sharing(s3, m, "p3").step(t.Context())
	<-got
	if p := s3.Pacing()["bad"]; p.Unwell || !p.CooldownUntil.IsZero() {
		t.Fatalf("s3 adopted an old cooldown: %+v", p)
	}
}

// A failed sync publishes its cooldown again at the next.
func TestShareCooldownRequeued(t *testing.T) {
	t.Parallel()
	c := newClock()
	m := newMemShared()
	s, _ := fakeSched(t, c, jitterNone, map[string]Backend{"b": {}})
	sr := sharing(s, m, "p1")
	s.Generate(t.Context(), Sequence{Backend: "b", Attempt: answer(failStatus(502))})
	m.fail = errors.New("down")
	sr.step(t.Context())
	sr.step(t.Context())
	m.mu.Lock()
	st, ok := m.states["b"]
	m.mu.Unlock()
	if !ok || !st.CooldownUntil.Equal(c.Now().Add(DefaultCooldown)) {
		t.Fatalf("after a failed sync and a good one: %+v", st)
	}
}
