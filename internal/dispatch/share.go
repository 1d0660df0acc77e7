package dispatch

import (
	"context"
	"fmt"
	"math"
	"time"

	"github.com/google/uuid"

	"github.com/promptkit/promptkit/pktype"
)

// Sharing pacing between processes.
//
// Schedulers in several processes that call the same providers (workers
// on one job database) share, per backend, what their pacers learned, so
// that N processes behave like one:
//
//   - a pause until T (Retry-After): when one process is told to wait,
//     all of them wait;
//   - a cooldown until T (route.go): when one process finds a backend
//     unwell, the model groups of all of them avoid it;
//   - the provider-wide learned rate: the last decrease (when, and the
//     bound of the rate it cut: at, estCap in learn.go) and, per process,
//     how many of its attempts the provider admitted in the second before
//     it (est). The rate is learnShare of their sum, within its bounds,
//     growing from at as learn.go describes: every process computes the
//     same rate at any time, so only a decrease and the counts (a process
//     counts its part when it adopts a decrease, late answers add to it)
//     are published;
//   - presence: each process publishes its demand on a backend (callers
//     waiting for it or in flight on it) about once a second while it
//     has any, and takes its part of every rate — the configured and
//     learned request rates and the token rate — in proportion to the
//     demand published. The header budgets need nothing more: every
//     answer reports the provider-wide budget, so each process spends
//     only its part of what the last answer said was left.
//
// Why counts rather than this process's count divided by its share: at
// a cold start, or when the demand moves, a process's part of what was
// admitted is not its share, and an estimate off by the difference
// costs a cut too deep or a rate above the limit; the counts add up
// exactly, and a decrease is normally followed by a pause (the 429's
// Retry-After) that outlasts the ~2 intervals the others take to add
// theirs. Until they do, the rate is at least learnMinCut of the one cut.
//
// Share runs the loop that publishes and reads. Nothing in the request
// path touches the shared store: a dispatch reads this process's copy,
// and a backend that is never limited costs one small write a second per
// process while it is busy, whatever its request rate. The loop publishes
// news (a pause, a decrease) at once, and reads the others' every
// ShareOptions.Interval while any backend has demand (sooner on a
// ShareOptions.Wake), and while none has, only on a Wake, at most every
// Heartbeat: so that an idle process learns of an operator's hold
// (pktype.SharedPacing.Held) before it takes work for the backend.

// Shared is where schedulers in several processes share their pacing
// (promptkit.PacingStore is one).
type Shared interface {
	// SyncPacing records news, published by peer, and returns every
	// backend's shared state, merged as pktype.SharedPacing.Merge says.
	SyncPacing(ctx context.Context, peer string, news []pktype.PacingNews) ([]pktype.SharedPacing, error)
}

// ShareOptions tune Share. Zero values take the defaults.
type ShareOptions struct {
	// Peer identifies this process to the others. Defaults to a random
	// UUID.
	Peer string
	// Interval is how often the others' state is read while any backend
	// has demand. Defaults to DefaultShareInterval.
	Interval time.Duration
	// Heartbeat is how often this process's demand is published while it
	// has any. Defaults to DefaultShareHeartbeat.
	Heartbeat time.Duration
	// OnSync, if set, is called after every sync with its error (nil on
	// success), so that a caller can report failures, once per outage.
	OnSync func(error)
	// Wake, if set, hints that the shared state may have changed (a
	// store's change notifications): the loop then reads at once, at
	// most every DefaultShareMinInterval, instead of at its next
	// Interval. A closed Wake is ignored from then on.
	Wake <-chan struct{}
}

// Defaults of ShareOptions.
const (
	DefaultShareInterval  = 200 * time.Millisecond
	DefaultShareHeartbeat = time.Second
	// DefaultShareMinInterval bounds how often Wake makes the loop read.
	DefaultShareMinInterval = 20 * time.Millisecond
)

// shareGoodbye bounds the last publication, of no demand, when Share ends.
const shareGoodbye = 2 * time.Second

// Share publishes this scheduler's pacing news to sh and adopts the
// others' until ctx ends; then it publishes that this process has no
// demand left, so that the others take its share at once, and returns
// nil. A failed sync is passed to opts.OnSync and retried at the next
// interval, its news included; meanwhile the scheduler paces on what it
// knows. Call it once per scheduler.
func (s *Scheduler) Share(ctx context.Context, sh Shared, opts ShareOptions) error {
	if opts.Peer == "" {
		opts.Peer = uuid.NewString()
	}
	if opts.Interval <= 0 {
		opts.Interval = DefaultShareInterval
	}
	if opts.Heartbeat <= 0 {
		opts.Heartbeat = DefaultShareHeartbeat
	}
	s.shareMu.Lock()
	if s.peer != "" {
		s.shareMu.Unlock()
		return fmt.Errorf("dispatch: Share called twice")
	}
	s.peer = opts.Peer
	s.shareMu.Unlock()
	s.shareOn.Store(true)
	for _, g := range s.gates {
		g.learn.setShared()
	}
	sr := &sharer{s: s, sh: sh, opts: opts}
	wake := opts.Wake
	for sr.step(ctx) {
		t := time.NewTimer(opts.Interval)
		select {
		case <-ctx.Done():
		case <-t.C:
		case <-s.newsCh():
			s.takeNews()
		case _, ok := <-wake:
			if !ok {
				wake = nil // closed: the store is closing
				break
			}
			// A change somewhere: read soon, but not more often than
			// DefaultShareMinInterval however busy the store.
			sr.woken = true
			gap := time.NewTimer(DefaultShareMinInterval)
			select {
			case <-ctx.Done():
			case <-gap.C:
			}
			gap.Stop()
		}
		t.Stop()
	}
	sr.goodbye(ctx)
	return nil
}

// sharer is Share's loop state.
type sharer struct {
	s        *Scheduler
	sh       Shared
	opts     ShareOptions
	lastBeat time.Time
	synced   bool // at least one sync was tried
	// woken: a wait ended on opts.Wake since the last read. An idle
	// process then reads too, at most every Heartbeat, so that it learns of an operator's
	// hold (pktype.SharedPacing.Held) before it takes work for the backend.
	woken    bool
	lastRead time.Time
}

// step publishes what there is to publish and, while any backend has
// demand, reads the others' state; the first step reads in any case, so
// that a process starting while the others are paused starts paused. It
// reports false once ctx has ended.
func (sr *sharer) step(ctx context.Context) bool {
	if ctx.Err() != nil {
		return false
	}
	s := sr.s
	now := s.now()
	beat := now.Sub(sr.lastBeat) >= sr.opts.Heartbeat
	news, busy := s.collect(beat)
	// A wake too soon after the last read stays pending for a later step.
	woken := sr.woken && now.Sub(sr.lastRead) >= sr.opts.Heartbeat
	if len(news) == 0 && !busy && sr.synced && !woken {
		return true
	}
	sr.synced, sr.lastRead, sr.woken = true, now, false
	states, err := sr.sh.SyncPacing(ctx, sr.opts.Peer, news)
	if err != nil && ctx.Err() != nil {
		s.requeue(news)
		return false
	}
	if err != nil {
		s.requeue(news)
		err = fmt.Errorf("dispatch: sharing pacing: %w", err)
	} else {
		s.adopt(sr.opts.Peer, states)
		if beat {
			sr.lastBeat = now
		}
	}
	if sr.opts.OnSync != nil {
		sr.opts.OnSync(err)
	}
	return true
}

// goodbye publishes, bounded by shareGoodbye, that this process has no
// demand left on the backends it said it had some.
func (sr *sharer) goodbye(ctx context.Context) {
	var bye []pktype.PacingNews
	for id, g := range sr.s.gates {
		if g.published.Load() > 0 {
			bye = append(bye, pktype.PacingNews{Backend: id})
		}
	}
	if len(bye) == 0 {
		return
	}
	bctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), shareGoodbye)
	defer cancel()
	if _, err := sr.sh.SyncPacing(bctx, sr.opts.Peer, bye); err == nil {
		for _, n := range bye {
			sr.s.gates[n.Backend].published.Store(0)
		}
	}
}

// newsCh returns the channel closed when news is ready to publish, or when
// a backend gets demand after none: the loop then wakes at once.
func (s *Scheduler) newsCh() <-chan struct{} {
	s.shareMu.Lock()
	defer s.shareMu.Unlock()
	if s.newsPending {
		// A wake came while the loop was not waiting (it was stepping,
		// or its last channel had been closed): step again at once.
		s.newsPending = false
		return closedCh
	}
	if s.news == nil {
		s.news = make(chan struct{})
	}
	return s.news
}

// takeNews marks the pending wake taken: the loop woke on newsCh and
// steps now, collecting whatever came before.
func (s *Scheduler) takeNews() {
	s.shareMu.Lock()
	s.newsPending = false
	s.shareMu.Unlock()
}

// closedCh is a closed channel: a wake already pending.
var closedCh = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

// wake makes the sharing loop run now, if there is one: at once when it
// waits, else as soon as it next waits (a wake is never lost).
func (s *Scheduler) wake() {
	s.shareMu.Lock()
	s.newsPending = true
	if s.news != nil {
		close(s.news)
		s.news = nil
	}
	s.shareMu.Unlock()
}

// grown reports whether demand grew well past what was published.
func grown(demand, published int64) bool { return demand > 2*published }

// collect gathers the news to publish: pauses and decreases not yet
// published, and, on a heartbeat, the demand of every backend that has
// or had some since the last one (so that a process leaving a backend
// says so once). busy reports whether any backend has demand: the loop
// reads the others' state only then.
func (s *Scheduler) collect(beat bool) (news []pktype.PacingNews, busy bool) {
	for id, g := range s.gates {
		d, pub := g.demand.Load(), g.published.Load()
		// Demand is published on a heartbeat, and at once when it grew
		// well past what was published (a process starting its callers):
		// meanwhile the others would take too much.
		now := beat || grown(d, pub)
		peak := int(g.peak.Load())
		if now {
			// The next period's peak starts from the demand now.
			peak = int(g.peak.Swap(d))
		}
		busy = busy || d > 0 || peak > 0
		n := pktype.PacingNews{Backend: id, Demand: max(int(d), peak)}
		item := false
		g.mu.Lock()
		if g.pauseNews {
			n.PauseUntil, g.pauseNews = g.pausedUntil, false
			item = true
		}
		if g.health.coolNews {
			n.CooldownUntil, g.health.coolNews = g.health.coolUntil, false
			item = true
		}
		g.mu.Unlock()
		if r, e := g.learn.takeNews(); !e.At.IsZero() {
			n.Rate, n.Estimate, item = r, e, true
		}
		if now && (n.Demand > 0 || pub > 0) {
			item = true
		}
		if !now {
			// Between heartbeats the demand published stays the last one
			// (the store replaces it, so it is sent again).
			n.Demand = int(pub)
		}
		if item {
			g.published.Store(int64(n.Demand))
			news = append(news, n)
		}
	}
	return news, busy
}

// requeue marks the news of a failed sync as unpublished again.
func (s *Scheduler) requeue(news []pktype.PacingNews) {
	for _, n := range news {
		g := s.gates[n.Backend]
		g.mu.Lock()
		g.pauseNews = g.pauseNews || !n.PauseUntil.IsZero()
		g.health.coolNews = g.health.coolNews || !n.CooldownUntil.IsZero()
		g.mu.Unlock()
		if !n.Estimate.At.IsZero() {
			g.learn.requeueNews(!n.Rate.At.IsZero(), true)
		}
	}
}

// adopt takes the shared state: a later pause, a later cooldown, a newer
// rate, and the others' demand.
func (s *Scheduler) adopt(self string, states []pktype.SharedPacing) {
	now := s.now()
	for _, st := range states {
		g := s.gates[st.Backend]
		if g == nil {
			continue // a backend of another process's configuration
		}
		// A hold, or its release, wakes the callers waiting for the
		// backend: they look again.
		g.mu.Lock()
		if g.held != st.Held {
			g.held = st.Held
			g.change()
		}
		g.mu.Unlock()
		// A cooldown still running makes the backend unwell here too:
		// once it ends, a probe finds out whether it recovered.
		if st.CooldownUntil.After(now) {
			g.mu.Lock()
			if st.CooldownUntil.After(g.health.coolUntil) {
				g.health.coolUntil, g.health.unwell = st.CooldownUntil, true
			}
			g.mu.Unlock()
		}
		if !g.noPause && !st.PauseUntil.IsZero() {
			g.mu.Lock()
			paused := st.PauseUntil.After(g.pausedUntil)
			if paused {
				g.pausedUntil = st.PauseUntil
				g.change()
			}
			g.mu.Unlock()
			if paused {
				g.learn.restart()
			}
		}
		others, peers, est := 0, 0, 0
		for _, p := range st.Peers {
			if p.ID == self {
				continue
			}
			if p.Demand > 0 {
				others += p.Demand
				peers++
			}
			if !st.Rate.At.IsZero() && p.Estimate.At.Equal(st.Rate.At) {
				est += p.Estimate.Admitted
			}
		}
		g.others.Store(int64(others))
		if g.learn.adopt(st.Rate, est, peers) {
			g.cut()
		}
	}
}

// share is this process's part of a backend's rates given its demand and
// the others', as published; 1 when not shared. Every process computes
// its part from what all published, so that the parts add up to 1; a
// process that has not published its demand yet counts what it has, at
// least one caller, so that a caller arriving after idleness is not
// paced at nothing.
func share(published, demand int64, others int) float64 {
	if others <= 0 {
		return 1
	}
	d := published
	if d <= 0 {
		d = max(demand, 1)
	}
	return float64(d) / float64(d+int64(others))
}

// scaled is r × sh, for a limiter: never below a floor that keeps a
// reservation's delay finite and short enough to be re-examined.
func scaled(r, sh float64) float64 {
	return max(r*sh, math.SmallestNonzeroFloat64)
}
