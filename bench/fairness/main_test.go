package main

import (
	"testing"
	"time"
)

// A tiny trial on SQLite runs to its end: every one of B's jobs succeeds
// and the measures are filled in (no timing is asserted).
func TestSmoke(t *testing.T) {
	for _, ref := range []bool{false, true} {
		r, err := run(t.Context(), config{db: "sqlite", dir: t.TempDir(), a: 40, b: 5, concurrency: 2,
			latency: time.Millisecond, warmup: 0, reference: ref})
		if err != nil {
			t.Fatalf("reference %v: %v", ref, err)
		}
		if r.bMax < r.bP50 || r.bShare <= 0 || r.bShare > 1 {
			t.Errorf("reference %v: result %+v", ref, r)
		}
	}
}

// measure takes B's completion times from its submit and splits A's
// completions into before and during B's window.
func TestMeasure(t *testing.T) {
	start := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	submit := start.Add(3 * time.Second)
	at := func(d time.Duration) time.Time { return start.Add(d) }
	finished := []done{
		{at(500 * time.Millisecond), "a0"}, // start-up: not counted
		{at(1500 * time.Millisecond), "a1"},
		{at(2500 * time.Millisecond), "a2"},
		{at(3200 * time.Millisecond), "b0"},
		{at(3400 * time.Millisecond), "a3"},
		{at(4000 * time.Millisecond), "b1"},
		{at(4500 * time.Millisecond), "a4"}, // after B's last
	}
	r := measure(finished, map[string]bool{"b0": true, "b1": true}, start, submit)
	if r.bP50 != 200*time.Millisecond || r.bMax != time.Second || r.aBefore != 1 || r.aDuring != 1 || r.bShare != 2.0/3 {
		t.Errorf("measure = %+v", r)
	}
}
