package jobstest

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/promptkit/promptkit/jobs"
	"github.com/promptkit/promptkit/pktype"
)

// syncPacing syncs and fails the test on an error.
func (f *fixture) syncPacing(p jobs.PacingSyncParams) []jobs.BackendPacing {
	f.t.Helper()
	got, err := f.store.SyncPacing(f.ctx, p)
	if err != nil {
		f.t.Fatalf("SyncPacing: %v", err)
	}
	return got
}

// pacingOf returns backend's entry of got; ok false when absent.
func pacingOf(got []jobs.BackendPacing, backend string) (jobs.BackendPacing, bool) {
	for _, b := range got {
		if b.Backend == backend {
			return b, true
		}
	}
	return jobs.BackendPacing{}, false
}

func peersString(ps []jobs.PacingPeer) string {
	var b strings.Builder
	for _, p := range ps {
		fmt.Fprintf(&b, "%s=%d@%s", p.ID, p.Demand, p.SeenAt.Format(time.RFC3339Nano))
		if !p.Estimate.At.IsZero() {
			fmt.Fprintf(&b, "(%d@%s)", p.Estimate.Admitted, p.Estimate.At.Format(time.RFC3339Nano))
		}
		b.WriteString(" ")
	}
	return b.String()
}

// SyncPacing merges as jobs.PacingUpdate says: the later pause end, the
// later decrease, a peer's demand replaced and stamped with the store's
// time, its estimate replaced unless older; a read without updates
// writes nothing.
func testPacingMerge(t *testing.T, h Harness) {
	f := setup(t, h)
	if got := f.syncPacing(jobs.PacingSyncParams{}); len(got) != 0 {
		t.Fatalf("fresh store: %+v, want nothing", got)
	}
	t0 := f.now()
	ts := func(t time.Time) string { return t.Format(time.RFC3339Nano) }
	pause := t0.Add(time.Second)
	rateAt := t0.Add(-time.Second)
	got := f.syncPacing(jobs.PacingSyncParams{Peer: "a", Updates: []jobs.PacingUpdate{
		{Backend: "b2", Demand: 3},
		{Backend: "b1", Demand: 32, PauseUntil: pause, Rate: pktype.LearnedRate{Cap: 19.5, Floor: 9, At: rateAt}, Estimate: pktype.RateEstimate{Admitted: 10, At: rateAt}},
	}})
	if len(got) != 2 || got[0].Backend != "b1" || got[1].Backend != "b2" {
		t.Fatalf("want b1 and b2 in order: %+v", got)
	}
	b1, b2 := got[0], got[1]
	if !b1.PauseUntil.Equal(pause) || b1.Rate.Cap != 19.5 || b1.Rate.Floor != 9 || !b1.Rate.At.Equal(rateAt) || !b1.UpdatedAt.Equal(t0) {
		t.Fatalf("b1 after the first news: %+v", b1)
	}
	if want := "a=32@" + ts(t0) + "(10@" + ts(rateAt) + ") "; peersString(b1.Peers) != want {
		t.Fatalf("b1 peers: %s, want %s", peersString(b1.Peers), want)
	}
	if !b2.PauseUntil.IsZero() || !b2.Rate.At.IsZero() || b2.Rate.Cap != 0 || !b2.UpdatedAt.IsZero() ||
		peersString(b2.Peers) != "a=3@"+ts(t0)+" " {
		t.Fatalf("b2, present only: %+v", b2)
	}

	t1 := f.advance(100 * time.Millisecond)
	steps := []struct {
		name      string
		u         jobs.PacingUpdate
		pause, at time.Time
		rateCap   float64
		bEstimate string
	}{
		{"an earlier pause end and an older decrease change nothing; b's estimate is its own",
			jobs.PacingUpdate{Backend: "b1", Demand: 30, PauseUntil: t0, Rate: pktype.LearnedRate{Cap: 50, At: rateAt.Add(-time.Second)}, Estimate: pktype.RateEstimate{Admitted: 5, At: rateAt}},
			pause, rateAt, 19.5, "(5@" + ts(rateAt) + ")"},
		{"a decrease at the same time changes nothing; an estimate at the same time replaces",
			jobs.PacingUpdate{Backend: "b1", Demand: 30, Rate: pktype.LearnedRate{Cap: 5, At: rateAt}, Estimate: pktype.RateEstimate{Admitted: 7, At: rateAt}},
			pause, rateAt, 19.5, "(7@" + ts(rateAt) + ")"},
		{"an older estimate changes nothing",
			jobs.PacingUpdate{Backend: "b1", Demand: 30, Estimate: pktype.RateEstimate{Admitted: 30, At: rateAt.Add(-time.Microsecond)}},
			pause, rateAt, 19.5, "(7@" + ts(rateAt) + ")"},
		{"a later decrease replaces, however high, and a later pause extends",
			jobs.PacingUpdate{Backend: "b1", Demand: 30, PauseUntil: pause.Add(time.Second), Rate: pktype.LearnedRate{Cap: 40, At: t1}, Estimate: pktype.RateEstimate{Admitted: 4, At: t1}},
			pause.Add(time.Second), t1, 40, "(4@" + ts(t1) + ")"},
	}
	for _, s := range steps {
		got := f.syncPacing(jobs.PacingSyncParams{Peer: "b", Updates: []jobs.PacingUpdate{s.u}})
		b1, _ := pacingOf(got, "b1")
		if !b1.PauseUntil.Equal(s.pause) || b1.Rate.Cap != s.rateCap || !b1.Rate.At.Equal(s.at) || (b1.Rate.Floor == 0) != (s.rateCap == 40) {
			t.Errorf("%s: %+v", s.name, b1)
		}
		if want := "a=32@" + ts(t0) + "(10@" + ts(rateAt) + ") b=30@" + ts(t1) + s.bEstimate + " "; peersString(b1.Peers) != want {
			t.Errorf("%s: peers %s, want %s", s.name, peersString(b1.Peers), want)
		}
	}

	// Presence alone moves neither the state, nor its time, nor the
	// peer's estimate.
	t2 := f.advance(time.Second)
	got = f.syncPacing(jobs.PacingSyncParams{Peer: "a", Updates: []jobs.PacingUpdate{{Backend: "b1", Demand: 0}}})
	b1, _ = pacingOf(got, "b1")
	if !b1.UpdatedAt.Equal(t1) || b1.Rate.Cap != 40 || !b1.PauseUntil.Equal(pause.Add(time.Second)) {
		t.Errorf("after presence only: %+v", b1)
	}
	want := "a=0@" + ts(t2) + "(10@" + ts(rateAt) + ") b=30@" + ts(t1) + "(4@" + ts(t1) + ") "
	if peersString(b1.Peers) != want {
		t.Errorf("peers after a=0: %s, want %s", peersString(b1.Peers), want)
	}
	// A read returns the same.
	again := f.syncPacing(jobs.PacingSyncParams{})
	if b, _ := pacingOf(again, "b1"); peersString(b.Peers) != want || !b.PauseUntil.Equal(b1.PauseUntil) || !b.Rate.At.Equal(t1) {
		t.Errorf("read: %+v, want %+v", b, b1)
	}
}

// A peer not seen for PeerTTL is left out of every answer, and a sync
// that writes deletes it.
func testPacingPeersExpire(t *testing.T, h Harness) {
	f := setup(t, h)
	f.syncPacing(jobs.PacingSyncParams{Peer: "old", Updates: []jobs.PacingUpdate{{Backend: "b", Demand: 4}}})
	f.advance(jobs.DefaultPacingPeerTTL)
	got := f.syncPacing(jobs.PacingSyncParams{})
	if b, _ := pacingOf(got, "b"); len(b.Peers) != 1 {
		t.Fatalf("at exactly the TTL: %+v, want the peer", got)
	}
	f.advance(time.Microsecond)
	if got := f.syncPacing(jobs.PacingSyncParams{}); len(got) != 0 {
		t.Fatalf("past the TTL: %+v, want nothing", got)
	}
	// A longer TTL still finds it: reading deletes nothing.
	if got := f.syncPacing(jobs.PacingSyncParams{PeerTTL: time.Hour}); len(got) != 1 || len(got[0].Peers) != 1 {
		t.Fatalf("read with a longer TTL: %+v", got)
	}
	got = f.syncPacing(jobs.PacingSyncParams{Peer: "new", Updates: []jobs.PacingUpdate{{Backend: "b", Demand: 1}}})
	if b, _ := pacingOf(got, "b"); peersString(b.Peers) != "new=1@"+f.now().Format(time.RFC3339Nano)+" " {
		t.Fatalf("after a write: %s", peersString(b.Peers))
	}
	got = f.syncPacing(jobs.PacingSyncParams{PeerTTL: time.Hour})
	if b, _ := pacingOf(got, "b"); len(b.Peers) != 1 || b.Peers[0].ID != "new" {
		t.Fatalf("the write did not delete the old peer: %s", peersString(b.Peers))
	}
}

// Every update Normalize refuses is ErrInvalid, and stores nothing.
func testPacingInvalid(t *testing.T, h Harness) {
	f := setup(t, h)
	at := f.now()
	long := strings.Repeat("x", jobs.MaxPacingName+1)
	for _, c := range []struct {
		name string
		p    jobs.PacingSyncParams
	}{
		{"no peer", jobs.PacingSyncParams{Updates: []jobs.PacingUpdate{{Backend: "b"}}}},
		{"no backend", jobs.PacingSyncParams{Peer: "p", Updates: []jobs.PacingUpdate{{}}}},
		{"long backend", jobs.PacingSyncParams{Peer: "p", Updates: []jobs.PacingUpdate{{Backend: long}}}},
		{"long peer", jobs.PacingSyncParams{Peer: long, Updates: []jobs.PacingUpdate{{Backend: "b"}}}},
		{"NUL", jobs.PacingSyncParams{Peer: "p", Updates: []jobs.PacingUpdate{{Backend: "b\x00"}}}},
		{"negative demand", jobs.PacingSyncParams{Peer: "p", Updates: []jobs.PacingUpdate{{Backend: "b", Demand: -1}}}},
		{"negative estimate", jobs.PacingSyncParams{Peer: "p", Updates: []jobs.PacingUpdate{{Backend: "b", Estimate: pktype.RateEstimate{Admitted: -1, At: at}}}}},
		{"NaN rate", jobs.PacingSyncParams{Peer: "p", Updates: []jobs.PacingUpdate{{Backend: "b", Rate: pktype.LearnedRate{Cap: math.NaN(), At: at}}}}},
		{"infinite rate", jobs.PacingSyncParams{Peer: "p", Updates: []jobs.PacingUpdate{{Backend: "b", Rate: pktype.LearnedRate{Cap: math.Inf(1), At: at}}}}},
		{"rate at without a rate", jobs.PacingSyncParams{Peer: "p", Updates: []jobs.PacingUpdate{{Backend: "b", Rate: pktype.LearnedRate{At: at}}}}},
		{"floor above the cap", jobs.PacingSyncParams{Peer: "p", Updates: []jobs.PacingUpdate{{Backend: "b", Rate: pktype.LearnedRate{Cap: 1, Floor: 2, At: at}}}}},
		{"negative TTL", jobs.PacingSyncParams{PeerTTL: -time.Second}},
		{"too many", jobs.PacingSyncParams{Peer: "p", Updates: make([]jobs.PacingUpdate, jobs.MaxPacingUpdates+1)}},
	} {
		_, err := f.store.SyncPacing(f.ctx, c.p)
		wantErr(t, err, jobs.ErrInvalid, c.name)
	}
	if got := f.syncPacing(jobs.PacingSyncParams{}); len(got) != 0 {
		t.Fatalf("refused syncs stored %+v", got)
	}
}

// Concurrent syncs of many processes on several backends, in any order,
// all succeed, and the merge is their maximum: no update is lost. The
// values are shuffled, not rising with each process's rounds, so that a
// lost update shows: a sync then answers a pause earlier than one its
// process was already answered (each answer is read after the sync's
// writes, and the shared pause only ever grows), or the end state misses
// the largest value.
func testPacingConcurrent(t *testing.T, h Harness) {
	f := setupRealClock(t, h)
	base := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	const procs, rounds = 8, 10
	backends := []string{"x", "y", "z"}
	order := rand.New(rand.NewPCG(41, 1)).Perm(procs * rounds)
	var wg sync.WaitGroup
	errs := make(chan error, procs*rounds*(1+len(backends)))
	for p := range procs {
		wg.Go(func() {
			seen := map[string]time.Time{}
			for r := range rounds {
				var ups []jobs.PacingUpdate
				k := order[p*rounds+r]
				at := base.Add(time.Duration(k) * time.Millisecond)
				for i := range backends {
					// Each process publishes the backends in its own order.
					b := backends[(i+p)%len(backends)]
					ups = append(ups, jobs.PacingUpdate{Backend: b, Demand: p + 1,
						PauseUntil: at, Rate: pktype.LearnedRate{Cap: float64(1 + k), At: at},
						Estimate: pktype.RateEstimate{Admitted: r, At: base.Add(time.Duration(r) * time.Millisecond)}})
				}
				got, err := f.store.SyncPacing(f.ctx, jobs.PacingSyncParams{Peer: fmt.Sprint("p", p), Updates: ups, PeerTTL: time.Hour})
				if err != nil {
					errs <- err
					continue
				}
				for _, b := range backends {
					st, _ := pacingOf(got, b)
					if want := later(seen[b], at); st.PauseUntil.Before(want) || st.Rate.At.Before(want) {
						errs <- fmt.Errorf("p%d round %d, %s: pause until %v, rate at %v; an update was lost, want at least %v",
							p, r, b, st.PauseUntil, st.Rate.At, want)
					}
					seen[b] = later(seen[b], st.PauseUntil)
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("concurrent SyncPacing: %v", err)
	}
	last := base.Add(time.Duration(procs*rounds-1) * time.Millisecond)
	got := f.syncPacing(jobs.PacingSyncParams{PeerTTL: time.Hour})
	if len(got) != len(backends) {
		t.Fatalf("got %d backends, want %d", len(got), len(backends))
	}
	for _, b := range got {
		if !b.PauseUntil.Equal(last) || !b.Rate.At.Equal(last) || b.Rate.Cap != procs*rounds || len(b.Peers) != procs {
			t.Errorf("%s: pause %v, rate %v at %v, %d peers; want %v, %d at %v, %d", b.Backend, b.PauseUntil, b.Rate.Cap, b.Rate.At, len(b.Peers), last, procs*rounds, last, procs)
		}
		for _, p := range b.Peers {
			if p.Estimate.Admitted != rounds-1 || p.Demand == 0 {
				t.Errorf("%s: peer %+v, want its last estimate %d", b.Backend, p, rounds-1)
			}
		}
	}
}

// later returns the later of a and b.
func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// A cooldown merges like a pause, independently of it: the later end
// wins, an earlier one changes nothing, and a cooldown alone is news
// (it stamps UpdatedAt) that leaves the pause and the rate as they are.
func testPacingCooldown(t *testing.T, h Harness) {
	f := setup(t, h)
	t0 := f.now()
	cool := t0.Add(30 * time.Second)
	got := f.syncPacing(jobs.PacingSyncParams{Peer: "a", Updates: []jobs.PacingUpdate{{Backend: "b", Demand: 1, CooldownUntil: cool}}})
	b, ok := pacingOf(got, "b")
	if !ok || !b.CooldownUntil.Equal(cool) || !b.PauseUntil.IsZero() || !b.Rate.At.IsZero() || !b.UpdatedAt.Equal(t0) {
		t.Fatalf("after a cooldown: %+v", b)
	}
	pause := t0.Add(time.Second)
	t1 := f.advance(time.Second)
	steps := []struct {
		name        string
		u           jobs.PacingUpdate
		cool, pause time.Time
	}{
		{"an earlier cooldown end changes nothing; a pause alone leaves the cooldown",
			jobs.PacingUpdate{Backend: "b", CooldownUntil: cool.Add(-time.Second), PauseUntil: pause}, cool, pause},
		{"a later cooldown end replaces, however far",
			jobs.PacingUpdate{Backend: "b", CooldownUntil: cool.Add(time.Hour)}, cool.Add(time.Hour), pause},
		{"presence alone changes nothing",
			jobs.PacingUpdate{Backend: "b", Demand: 2}, cool.Add(time.Hour), pause},
	}
	for _, s := range steps {
		got := f.syncPacing(jobs.PacingSyncParams{Peer: "b", Updates: []jobs.PacingUpdate{s.u}})
		b, _ := pacingOf(got, "b")
		if !b.CooldownUntil.Equal(s.cool) || !b.PauseUntil.Equal(s.pause) || !b.UpdatedAt.Equal(t1) {
			t.Errorf("%s: %+v, want cooldown until %v, pause until %v, updated at %v", s.name, b, s.cool, s.pause, t1)
		}
	}
	// A read returns the same; an unrelated backend has none.
	got = f.syncPacing(jobs.PacingSyncParams{Peer: "a", Updates: []jobs.PacingUpdate{{Backend: "c", PauseUntil: pause}}})
	if b, _ := pacingOf(got, "b"); !b.CooldownUntil.Equal(cool.Add(time.Hour)) {
		t.Errorf("read: %+v", b)
	}
	if c, _ := pacingOf(got, "c"); !c.CooldownUntil.IsZero() {
		t.Errorf("a pause alone made a cooldown: %+v", c)
	}
}
