package dispatch

import (
	"context"
	"errors"
	"math"
	"sync"
	"testing"
	"time"

	"github.com/promptkit/promptkit/internal/llm"
	"github.com/promptkit/promptkit/internal/testkit"
	"github.com/promptkit/promptkit/pktype"
)

// memShared is a Shared in memory, merging as the stores do
// (pktype.SharedPacing.Merge).
type memShared struct {
	mu     sync.Mutex
	states map[string]pktype.SharedPacing
	syncs  int
	fail   error                    // returned by the next Sync, then cleared
	got    chan []pktype.PacingNews // when set, receives every Sync's news
}

func newMemShared() *memShared {
	return &memShared{states: map[string]pktype.SharedPacing{}}
}

func (m *memShared) SyncPacing(_ context.Context, peer string, news []pktype.PacingNews) ([]pktype.SharedPacing, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.syncs++
	if m.got != nil {
		m.got <- news
	}
	if err := m.fail; err != nil {
		m.fail = nil
		return nil, err
	}
	for _, n := range news {
		st := m.states[n.Backend]
		st.Backend = n.Backend
		// The store's time matters to nothing here (no peer expires).
		m.states[n.Backend] = st.Merge(peer, n, time.Time{})
	}
	var out []pktype.SharedPacing
	for _, st := range m.states {
		out = append(out, st)
	}
	return out, nil
}

func (m *memShared) count() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.syncs
}

// sharing makes s share through m as peer, stepped by the test.
func sharing(s *Scheduler, m Shared, peer string) *sharer {
	s.peer = peer
	s.shareOn.Store(true)
	for _, g := range s.gates {
		g.learn.setShared()
	}
	return &sharer{s: s, sh: m, opts: ShareOptions{Peer: peer, Interval: DefaultShareInterval, Heartbeat: DefaultShareHeartbeat}}
}

func answer(out llm.Outcome) func(context.Context) llm.Outcome {
	return func(context.Context) llm.Outcome { return out }
}

// A Retry-After one process receives pauses the backend in the others:
// their next call waits for it.
func TestSharePauseReachesOthers(t *testing.T) {
	t.Parallel()
	c := newClock()
	m := newMemShared()
	s1, _ := fakeSched(t, c, jitterNone, map[string]Backend{"b": {}})
	s2, waits := fakeSched(t, c, jitterNone, map[string]Backend{"b": {}})
	sr1, sr2 := sharing(s1, m, "p1"), sharing(s2, m, "p2")
	sr1.step(t.Context())
	sr2.step(t.Context())

	until := c.Now().Add(3 * time.Second)
	s1.Generate(t.Context(), Sequence{Backend: "b", Attempt: answer(statusAt(429, until))})
	if got := s2.Pacing()["b"].PausedUntil; !got.IsZero() {
		t.Fatalf("p2 paused before any sync: %v", got)
	}
	sr1.step(t.Context())
	sr2.step(t.Context()) // idle: p2 reads nothing
	if got := s2.Pacing()["b"].PausedUntil; !got.IsZero() {
		t.Fatalf("idle p2 read the pause: %v", got)
	}
	leave := s2.enter(s2.gates["b"]) // a caller comes
	sr2.step(t.Context())
	leave()
	if got := s2.Pacing()["b"].PausedUntil; !got.Equal(until) {
		t.Fatalf("p2 paused until %v, want %v", got, until)
	}
	start := c.Now()
	if out := s2.Generate(t.Context(), Sequence{Backend: "b", Attempt: answer(success())}); out.Err != nil {
		t.Fatal(out.Err)
	}
	if w := announced(waits); len(w) != 1 || w[0] != "backend pause" {
		t.Errorf("p2 waits %v, want one backend pause", w)
	}
	if waited := c.Now().Sub(start); waited != 3*time.Second {
		t.Errorf("p2 waited %v, want 3s", waited)
	}
}

// A 429 in one process cuts the provider-wide rate to 95 % of what the
// provider admitted of every process's attempts in the second before,
// and every process follows it, each with its share.
func TestShareLearnedRateCountsEveryProcess(t *testing.T) {
	t.Parallel()
	c := newClock()
	m := newMemShared()
	s1 := learnSched(c, Backend{})
	s2 := learnSched(c, Backend{})
	sr1, sr2 := sharing(s1, m, "p1"), sharing(s2, m, "p2")
	// Both present, one caller each.
	for _, s := range []*Scheduler{s1, s2} {
		s.gates["b"].demand.Store(1)
	}
	sr1.step(t.Context())
	sr2.step(t.Context())
	sr1.step(t.Context())
	for _, s := range []*Scheduler{s1, s2} {
		s.gates["b"].demand.Store(0)
		s.gates["b"].peak.Store(0)
	}
	if sh := s1.Pacing()["b"].Share; sh != 0.5 {
		t.Fatalf("p1 share %v, want 0.5", sh)
	}
	// In one second the provider admits 12 of p1's attempts and 7 of
	// p2's, then answers p1 429.
	for i := range 12 {
		s1.Generate(t.Context(), Sequence{Backend: "b", Attempt: answer(success())})
		if i < 7 {
			s2.Generate(t.Context(), Sequence{Backend: "b", Attempt: answer(success())})
		}
		c.Advance(50 * time.Millisecond)
	}
	s1.Generate(t.Context(), Sequence{Backend: "b", Attempt: answer(failStatus(429))})
	before := s1.Pacing()["b"]
	if before.Source != Source429 {
		t.Fatalf("p1 learned nothing: %+v", before)
	}
	sr1.step(t.Context()) // publishes the decrease and p1's 12
	sr2.step(t.Context()) // p2 adopts it, counts its 7
	sr2.step(t.Context()) // and publishes them
	sr1.step(t.Context()) // p1 adds them
	want := learnShare * 19
	for i, s := range []*Scheduler{s1, s2} {
		p := s.Pacing()["b"]
		if math.Abs(p.RequestsPerSecond-want) > 1e-9 || p.Source != Source429 || !p.Shared || p.Processes != 2 {
			t.Errorf("p%d: %+v, want %v requests/s learned, shared by 2", i+1, p, want)
		}
	}
	if r := m.snapshot("b").RequestsPerSecond(c.Now()); math.Abs(r-want) > 1e-9 {
		t.Errorf("SharedPacing.RequestsPerSecond = %v, want %v", r, want)
	}
}

func (m *memShared) snapshot(backend string) pktype.SharedPacing {
	m.mu.Lock()
	defer m.mu.Unlock()
	st := m.states[backend]
	st.Backend = backend
	return st
}

// Each process takes its part of the rates in proportion to the demand
// published: with 3 callers here and 1 there, 3/4 of the configured rate
// here.
func TestShareDemandWeightsTheRates(t *testing.T) {
	t.Parallel()
	c := newClock()
	m := newMemShared()
	s1 := learnSched(c, Backend{RequestsPerSecond: 10})
	s2 := learnSched(c, Backend{RequestsPerSecond: 10})
	sr1, sr2 := sharing(s1, m, "p1"), sharing(s2, m, "p2")
	s1.gates["b"].demand.Store(3)
	s2.gates["b"].demand.Store(1)
	sr1.step(t.Context())
	sr2.step(t.Context())
	sr1.step(t.Context())
	s1.gates["b"].demand.Store(0)
	s2.gates["b"].demand.Store(0)
	if p1, p2 := s1.Pacing()["b"], s2.Pacing()["b"]; p1.Share != 0.75 || p2.Share != 0.25 || p1.RequestsPerSecond != 9.8 {
		t.Fatalf("shares %v and %v, rate %v; want 0.75, 0.25 of 9.8", p1.Share, p2.Share, p1.RequestsPerSecond)
	}
	start := c.Now()
	for range 4 {
		s1.Generate(t.Context(), Sequence{Backend: "b", Attempt: answer(success())})
	}
	// Four dispatches: the first at once, then 1/(9.8 × 0.75) s apart.
	wantSecs := 3 / (9.8 * 0.75)
	want := time.Duration(wantSecs * float64(time.Second))
	if got := c.Now().Sub(start); got < want-time.Millisecond || got > want+time.Millisecond {
		t.Errorf("four dispatches took %v, want %v", got, want)
	}
}

// A process with no callers syncs once, to start with what the others
// know, and then not at all: an idle or unpaced backend costs nothing.
// With callers it reads at every step, and publishes its demand on a
// heartbeat.
func TestShareIdleDoesNotSync(t *testing.T) {
	t.Parallel()
	c := newClock()
	m := newMemShared()
	s := learnSched(c, Backend{})
	sr := sharing(s, m, "p")
	m.got = make(chan []pktype.PacingNews, 10)
	for range 5 {
		sr.step(t.Context())
		c.Advance(time.Second)
	}
	if n := m.count(); n != 1 {
		t.Fatalf("idle: %d syncs, want 1", n)
	}
	if news := <-m.got; len(news) != 0 {
		t.Fatalf("idle first sync published %+v", news)
	}
	g := s.gates["b"]
	var leave []func()
	for range 4 {
		leave = append(leave, s.enter(g))
	}
	sr.step(t.Context())
	if news := <-m.got; len(news) != 1 || news[0].Demand != 4 {
		t.Fatalf("busy: published %+v, want demand 4", news)
	}
	c.Advance(DefaultShareInterval)
	sr.step(t.Context()) // between heartbeats: a read, nothing new
	if news := <-m.got; len(news) != 0 {
		t.Fatalf("between heartbeats: published %+v", news)
	}
	for _, l := range leave {
		l()
	}
	c.Advance(DefaultShareHeartbeat)
	sr.step(t.Context()) // the peak of the last heartbeat still counts
	if news := <-m.got; len(news) != 1 || news[0].Demand != 4 {
		t.Fatalf("the heartbeat after: published %+v, want the peak 4", news)
	}
	c.Advance(DefaultShareHeartbeat)
	sr.step(t.Context())
	if news := <-m.got; len(news) != 1 || news[0].Demand != 0 {
		t.Fatalf("once idle: published %+v, want demand 0 once", news)
	}
	c.Advance(DefaultShareHeartbeat)
	sr.step(t.Context())
	if n := m.count(); n != 5 {
		t.Errorf("idle again: %d syncs, want 5", n)
	}
}

// A failed sync is reported, and its news published by the next one.
func TestShareFailedSyncPublishesAgain(t *testing.T) {
	t.Parallel()
	c := newClock()
	m := newMemShared()
	s := learnSched(c, Backend{})
	var errs []error
	sr := sharing(s, m, "p")
	sr.opts.OnSync = func(err error) { errs = append(errs, err) }
	sr.step(t.Context())
	until := c.Now().Add(time.Second)
	s.Generate(t.Context(), Sequence{Backend: "b", Attempt: answer(statusAt(429, until))})
	down := errors.New("database down")
	m.fail = down
	sr.step(t.Context())
	if got := m.snapshot("b").PauseUntil; !got.IsZero() {
		t.Fatalf("a failed sync stored %v", got)
	}
	sr.step(t.Context())
	if len(errs) != 3 || errs[0] != nil || !errors.Is(errs[1], down) || errs[2] != nil {
		t.Fatalf("OnSync got %v, want nil, the failure, nil", errs)
	}
	if got := m.snapshot("b").PauseUntil; !got.Equal(until) {
		t.Errorf("shared pause %v, want %v", got, until)
	}
}

// Share runs until ctx ends: news wakes it at once, whatever its
// interval, and so does Wake (until closed) for a read; when it ends it
// tells the others it left.
func TestShareLoop(t *testing.T) {
	t.Parallel()
	m := newMemShared()
	m.got = make(chan []pktype.PacingNews, 10)
	s := New(Config{Backends: map[string]Backend{"b": {}}})
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	wake := make(chan struct{})
	go func() {
		done <- s.Share(ctx, m, ShareOptions{Peer: "p", Interval: time.Hour, Heartbeat: time.Hour, Wake: wake})
	}()
	if news := <-m.got; len(news) != 0 {
		t.Fatalf("first sync published %+v", news)
	}
	if err := s.Share(t.Context(), m, ShareOptions{}); err == nil {
		t.Error("a second Share did not fail")
	}
	g := s.gates["b"]
	leave := s.enter(g) // a caller arrives: grown demand wakes the loop
	if news := <-m.got; len(news) != 1 || news[0].Demand != 1 {
		t.Fatalf("after a caller came: %+v, want demand 1", news)
	}
	wake <- struct{}{} // the store changed: a read
	if news := <-m.got; len(news) != 0 {
		t.Fatalf("after a wake: published %+v, want a read", news)
	}
	until := time.Now().Add(time.Minute)
	s.pause("b", until)
	if news := <-m.got; len(news) != 1 || !news[0].PauseUntil.Equal(until) || news[0].Demand != 1 {
		t.Fatalf("after a pause: %+v, want it, demand 1", news)
	}
	close(wake) // at most one more read, not a read per turn of the loop
	leave()
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	var last []pktype.PacingNews
	for len(m.got) > 0 {
		last = <-m.got
	}
	if n := m.count(); n > 6 {
		t.Fatalf("%d syncs, want 5 or 6: a closed Wake spun the loop", n)
	}
	if len(last) != 1 || last[0].Demand != 0 || !last[0].PauseUntil.IsZero() {
		t.Fatalf("goodbye: %+v, want demand 0", last)
	}
}

// A caller waiting for its turn at the learned rate when a pause begins
// waits for the pause, instead of dispatching into it on its turn.
func TestLearnedPacingWaitEndsOnPause(t *testing.T) {
	t.Parallel()
	s := New(Config{Backends: map[string]Backend{"b": {}}})
	l := s.gates["b"].learn
	l.mu.Lock()
	l.base, l.at, l.estCap = 0.001, time.Now(), 0.001 // one call per 1000 s
	l.mu.Unlock()
	waits := make(chan string, 4)
	s.onWait = func(what string) { waits <- what }
	if out := s.Generate(t.Context(), Sequence{Backend: "b", Attempt: answer(success())}); out.Err != nil {
		t.Fatal(out.Err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan llm.Outcome, 1)
	go func() { done <- s.Generate(ctx, Sequence{Backend: "b", Attempt: answer(success())}) }()
	if w := <-waits; w != "backend pacing" {
		t.Fatalf("first wait %q, want backend pacing", w)
	}
	s.pause("b", time.Now().Add(time.Hour))
	if w := <-waits; w != "backend pause" {
		t.Fatalf("after the pause began: %q, want backend pause", w)
	}
	cancel()
	if out := <-done; out.Err == nil {
		t.Fatal("dispatched during the pause")
	}
}

// A caller whose turn at the configured rate comes during a pause that
// began while it waited waits for the pause before dispatching.
func TestConfiguredPacingThenPause(t *testing.T) {
	t.Parallel()
	c := newClock()
	s, waits := fakeSched(t, c, jitterNone, map[string]Backend{"b": {RequestsPerSecond: 1}})
	if out := s.Generate(t.Context(), Sequence{Backend: "b", Attempt: answer(success())}); out.Err != nil {
		t.Fatal(out.Err)
	}
	until := c.Now().Add(10 * time.Second)
	paused := false
	c.OnWait(func(context.Context, time.Duration) error {
		if !paused { // the pacing wait: a pause begins meanwhile
			paused = true
			s.pause("b", until)
		}
		return nil
	})
	var sentAt time.Time
	out := s.Generate(t.Context(), Sequence{Backend: "b", Attempt: func(context.Context) llm.Outcome {
		sentAt = c.Now()
		return success()
	}})
	if out.Err != nil {
		t.Fatal(out.Err)
	}
	if sentAt.Before(until) {
		t.Errorf("dispatched at %v, inside the pause until %v", sentAt, until)
	}
	if w := announced(waits); len(w) < 2 || w[0] != "backend pacing" || w[1] != "backend pause" {
		t.Errorf("waits %v, want pacing then the pause", w)
	}
}

// The learned limiter forgets the reservations of callers a cut woke:
// they leave at the new rate from now, not after the old queue.
func TestCutRestartsLearnedLimiter(t *testing.T) {
	t.Parallel()
	c := testkit.NewClock(epoch)
	s := learnSched(c, Backend{})
	l := s.gates["b"].learn
	l.mu.Lock()
	l.base, l.at, l.estCap = 10, c.Now(), 10
	l.mu.Unlock()
	lim := l.sync(c.Now(), 1)
	for range 5 {
		lim.Reserve() // a queue of half a second
	}
	s.pause("b", c.Now().Add(time.Millisecond))
	if l.sync(c.Now(), 1) == lim {
		t.Fatal("the learned limiter survived a pause")
	}
}
