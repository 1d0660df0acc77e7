package pktype_test

import (
	"math"
	"reflect"
	"testing"
	"time"

	"github.com/promptkit/promptkit/pktype"
)

// Merge, rule by rule: what one piece of news does to a stored state.
func TestSharedPacingMerge(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	now := t0.Add(time.Minute)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	rate := func(c float64, s int) pktype.LearnedRate { return pktype.LearnedRate{Cap: c, Floor: c / 2, At: at(s)} }
	est := func(n, s int) pktype.RateEstimate { return pktype.RateEstimate{Admitted: n, At: at(s)} }
	// stored is a backend's row with two peers, a and b.
	stored := pktype.SharedPacing{Backend: "x", PauseUntil: at(10), CooldownUntil: at(20), Rate: rate(8, 5),
		Held: true, UpdatedAt: at(5), Peers: []pktype.PacingPeer{
			{ID: "a", Demand: 3, SeenAt: at(1), Estimate: est(7, 5)},
			{ID: "b", Demand: 1, SeenAt: at(2), Estimate: est(2, 5)},
		}}
	// with returns stored changed by f, on a copy of its peers.
	with := func(f func(*pktype.SharedPacing)) pktype.SharedPacing {
		s := stored
		s.Peers = append([]pktype.PacingPeer(nil), stored.Peers...)
		f(&s)
		return s
	}
	before := with(func(*pktype.SharedPacing) {})
	presence := func(s *pktype.SharedPacing) { s.Peers[0].Demand, s.Peers[0].SeenAt = 4, now }
	for _, c := range []struct {
		name  string
		start pktype.SharedPacing
		peer  string
		news  pktype.PacingNews
		want  pktype.SharedPacing
	}{
		{"presence alone: the peer's demand replaced and stamped, nothing else", stored, "a",
			pktype.PacingNews{Backend: "x", Demand: 4}, with(presence)},
		{"presence of a new peer adds it, stamped", stored, "c",
			pktype.PacingNews{Backend: "x", Demand: 2},
			with(func(s *pktype.SharedPacing) {
				s.Peers = append(s.Peers, pktype.PacingPeer{ID: "c", Demand: 2, SeenAt: now})
			})},
		{"a demand of 0 replaces too", stored, "a", pktype.PacingNews{Backend: "x"},
			with(func(s *pktype.SharedPacing) { s.Peers[0].Demand, s.Peers[0].SeenAt = 0, now })},
		{"a later pause extends, and stamps UpdatedAt", stored, "a",
			pktype.PacingNews{Backend: "x", Demand: 4, PauseUntil: at(11)},
			with(func(s *pktype.SharedPacing) { presence(s); s.PauseUntil, s.UpdatedAt = at(11), now })},
		{"an earlier pause changes nothing but UpdatedAt", stored, "a",
			pktype.PacingNews{Backend: "x", Demand: 4, PauseUntil: at(9)},
			with(func(s *pktype.SharedPacing) { presence(s); s.UpdatedAt = now })},
		{"a later cooldown extends", stored, "a",
			pktype.PacingNews{Backend: "x", Demand: 4, CooldownUntil: at(21)},
			with(func(s *pktype.SharedPacing) { presence(s); s.CooldownUntil, s.UpdatedAt = at(21), now })},
		{"an earlier cooldown changes nothing but UpdatedAt", stored, "a",
			pktype.PacingNews{Backend: "x", Demand: 4, CooldownUntil: at(19)},
			with(func(s *pktype.SharedPacing) { presence(s); s.UpdatedAt = now })},
		{"a later decrease replaces, however high", stored, "a",
			pktype.PacingNews{Backend: "x", Demand: 4, Rate: rate(100, 6)},
			with(func(s *pktype.SharedPacing) { presence(s); s.Rate, s.UpdatedAt = rate(100, 6), now })},
		{"a decrease at the same time changes nothing", stored, "a",
			pktype.PacingNews{Backend: "x", Demand: 4, Rate: rate(1, 5)},
			with(func(s *pktype.SharedPacing) { presence(s); s.UpdatedAt = now })},
		{"an older decrease changes nothing", stored, "a",
			pktype.PacingNews{Backend: "x", Demand: 4, Rate: rate(1, 4)},
			with(func(s *pktype.SharedPacing) { presence(s); s.UpdatedAt = now })},
		{"a later estimate replaces", stored, "a",
			pktype.PacingNews{Backend: "x", Demand: 4, Estimate: est(1, 6)},
			with(func(s *pktype.SharedPacing) { presence(s); s.Peers[0].Estimate = est(1, 6) })},
		{"an estimate at the same time replaces (late answers raised it)", stored, "a",
			pktype.PacingNews{Backend: "x", Demand: 4, Estimate: est(9, 5)},
			with(func(s *pktype.SharedPacing) { presence(s); s.Peers[0].Estimate = est(9, 5) })},
		{"an older estimate changes nothing", stored, "a",
			pktype.PacingNews{Backend: "x", Demand: 4, Estimate: est(50, 4)},
			with(presence)},
		{"all at once, into an empty state", pktype.SharedPacing{Backend: "x"}, "a",
			pktype.PacingNews{Backend: "x", Demand: 1, PauseUntil: at(1), CooldownUntil: at(2), Rate: rate(3, 3), Estimate: est(4, 3)},
			pktype.SharedPacing{Backend: "x", PauseUntil: at(1), CooldownUntil: at(2), Rate: rate(3, 3), UpdatedAt: now,
				Peers: []pktype.PacingPeer{{ID: "a", Demand: 1, SeenAt: now, Estimate: est(4, 3)}}}},
	} {
		got := c.start.Merge(c.peer, c.news, now)
		if !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s:\n got %+v\nwant %+v", c.name, got, c.want)
		}
		if !reflect.DeepEqual(stored, before) {
			t.Fatalf("%s: Merge modified its receiver: %+v", c.name, stored)
		}
	}
}

// News is whether an update changes the shared row: presence and an
// estimate are the peer's own.
func TestPacingNewsNews(t *testing.T) {
	t.Parallel()
	at := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		n    pktype.PacingNews
		want bool
	}{
		{pktype.PacingNews{Demand: 3, Estimate: pktype.RateEstimate{Admitted: 1, At: at}}, false},
		{pktype.PacingNews{PauseUntil: at}, true},
		{pktype.PacingNews{CooldownUntil: at}, true},
		{pktype.PacingNews{Rate: pktype.LearnedRate{Cap: 1, At: at}}, true},
	} {
		if got := c.n.News(); got != c.want {
			t.Errorf("%+v: News() = %v, want %v", c.n, got, c.want)
		}
	}
}

// RequestsPerSecond: LearnShare of every peer's estimate for the
// decrease (not older ones), within Floor and Cap, grown with time, and 0
// once grown past recovery or with none learned.
func TestSharedPacingRequestsPerSecond(t *testing.T) {
	t.Parallel()
	at := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	st := pktype.SharedPacing{Rate: pktype.LearnedRate{Cap: 100, Floor: 5, At: at}, Peers: []pktype.PacingPeer{
		{ID: "a", Estimate: pktype.RateEstimate{Admitted: 12, At: at}},
		{ID: "b", Estimate: pktype.RateEstimate{Admitted: 8, At: at}},
		{ID: "c", Estimate: pktype.RateEstimate{Admitted: 1000, At: at.Add(-time.Second)}},
	}}
	near := func(a, b float64) bool { return math.Abs(a-b) < 1e-9 }
	if got := st.RequestsPerSecond(at); !near(got, pktype.LearnShare*20) {
		t.Errorf("at the decrease: %v, want %v", got, pktype.LearnShare*20)
	}
	if got := st.RequestsPerSecond(at.Add(12 * time.Second)); !near(got, pktype.LearnShare*20*1.05) {
		t.Errorf("12 s on: %v, want 5 %% more", got)
	}
	if got := st.RequestsPerSecond(at.Add(time.Hour)); got != 0 {
		t.Errorf("an hour on: %v, want 0 (grown back to unpaced)", got)
	}
	floor := st
	floor.Peers = nil
	if got := floor.RequestsPerSecond(at); got != 5 {
		t.Errorf("no estimates: %v, want the floor 5", got)
	}
	capped := st
	capped.Rate.Cap = 10
	if got := capped.RequestsPerSecond(at); got != 10 {
		t.Errorf("capped: %v, want 10", got)
	}
	if got := (pktype.SharedPacing{}).RequestsPerSecond(at); got != 0 {
		t.Errorf("none learned: %v, want 0", got)
	}
}
