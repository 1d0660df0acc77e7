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
	m := newTest(t, countsStore(nil), Options{Pacing: func() map[string]promptkit.Pacing { return pacing }})
	for _, c := range []struct {
		backend, source string
		want            float64
	}{{"learned", "429", 95}, {"headers", "headers", 0}, {"free", "none", 0}} {
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
	problems, err := testutil.GatherAndLint(m.reg, "promptkit_backend_learned_rate", "promptkit_backend_rate_budget_remaining")
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("lint: %s: %s", p.Metric, p.Text)
	}
}
