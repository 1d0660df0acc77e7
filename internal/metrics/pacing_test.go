package metrics

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/promptkit/promptkit"
)

func TestPacingGauges(t *testing.T) {
	t.Parallel()
	pacing := map[string]promptkit.Pacing{
		"learned": {RequestsPerSecond: 95, Source: promptkit.Pacing429},
		"headers": {Source: promptkit.PacingHeaders,
			Requests: promptkit.RateBudget{Known: true, Limit: 100, Remaining: 40, ResetAt: time.Now()}},
		"free": {},
	}
	now := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	pacing["shared"] = promptkit.Pacing{RequestsPerSecond: 19, Source: promptkit.Pacing429,
		Shared: true, Share: 0.25, Processes: 3, PausedUntil: now.Add(1500 * time.Millisecond),
		CooldownUntil: now.Add(20 * time.Second), Unwell: true}
	m := newTest(t, countsStore(nil), Options{Now: func() time.Time { return now }, Pacing: func() map[string]promptkit.Pacing { return pacing }})
	for _, c := range []struct {
		backend, source string
		want            float64
	}{{"learned", "429", 95}, {"headers", "headers", 0}, {"free", "none", 0}, {"shared", "429", 19}} {
		s := series(t, m, "promptkit_backend_learned_rate", "backend", c.backend, "source", c.source)
		if s == nil || s.GetGauge().GetValue() != c.want {
			t.Errorf("%s: %v, want %v", c.backend, s, c.want)
		}
	}
	if s := series(t, m, "promptkit_backend_rate_budget_remaining", "backend", "headers", "budget", "requests"); s == nil || s.GetGauge().GetValue() != 40 {
		t.Errorf("requests budget: %v", s)
	}
	if s := series(t, m, "promptkit_backend_rate_budget_remaining", "backend", "learned", "budget", "requests"); s != nil {
		t.Errorf("a budget without headers: %v", s)
	}
	for _, c := range []struct {
		name, backend string
		want          float64 // -1: absent
	}{
		{"promptkit_backend_pacing_share", "shared", 0.25},
		{"promptkit_backend_pacing_processes", "shared", 3},
		{"promptkit_backend_pause_seconds", "shared", 1.5},
		{"promptkit_backend_pause_seconds", "learned", 0},
		{"promptkit_backend_cooldown_seconds", "shared", 20},
		{"promptkit_backend_cooldown_seconds", "free", 0},
		{"promptkit_backend_pacing_share", "learned", -1},
		{"promptkit_backend_pacing_processes", "free", -1},
	} {
		s := series(t, m, c.name, "backend", c.backend)
		switch {
		case c.want < 0 && s != nil:
			t.Errorf("%s{%s}: %v, want absent (not shared)", c.name, c.backend, s)
		case c.want >= 0 && (s == nil || s.GetGauge().GetValue() != c.want):
			t.Errorf("%s{%s}: %v, want %v", c.name, c.backend, s, c.want)
		}
	}
	problems, err := testutil.GatherAndLint(m.reg, "promptkit_backend_learned_rate", "promptkit_backend_rate_budget_remaining",
		"promptkit_backend_pacing_share", "promptkit_backend_pacing_processes", "promptkit_backend_pause_seconds",
		"promptkit_backend_cooldown_seconds")
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("lint: %s: %s", p.Metric, p.Text)
	}
}
