package promptkit_test

import (
	"context"
	"testing"
	"testing/fstest"
	"time"

	"github.com/promptkit/promptkit"
	"github.com/promptkit/promptkit/providertest"
)

// TestEnginePacingLearnsFrom429: five answers, then a 429 without
// rate-limit headers, all at one instant of a frozen clock: the engine
// learns 95 % of the five it was granted in that second.
func TestEnginePacingLearnsFrom429(t *testing.T) {
	t.Parallel()
	for _, learn := range []bool{true, false} {
		srv := providertest.NewServer()
		t.Cleanup(srv.Close)
		// On the microsecond, as the learner stamps its cut (the stores
		// keep microseconds): otherwise the rate has grown a hair by now.
		at := time.Now().Truncate(time.Microsecond)
		var w recordingWait
		zero := 0
		b := promptkit.Backend{ID: "b", BaseURL: srv.URL}
		if !learn {
			b.LearnRate = &learn
		}
		eng, err := promptkit.NewWithSeams(promptkit.Config{
			Backends:         []promptkit.Backend{b},
			Profiles:         []promptkit.Profile{{ID: "p", Backend: "b", Model: "m"}},
			TransientRetries: &zero,
		}, func() time.Time { return at }, func(time.Duration) time.Duration { return 0 }, w.Wait)
		if err != nil {
			t.Fatal(err)
		}
		if got := eng.Pacing()["b"]; got != (promptkit.Pacing{}) {
			t.Fatalf("before any call: %+v", got)
		}
		ok := providertest.Status(200)
		srv.Enqueue(ok, ok, ok, ok, ok, providertest.Status(429))
		for i := range 6 {
			_, err := eng.Run(context.Background(), promptkit.RunRequest{Text: "x"})
			if (err != nil) != (i == 5) {
				t.Fatalf("learn %v, run %d: %v", learn, i+1, err)
			}
		}
		want := promptkit.Pacing{}
		if learn {
			want = promptkit.Pacing{RequestsPerSecond: 4.75, Source: promptkit.Pacing429}
		}
		if got := eng.Pacing()["b"]; got != want {
			t.Fatalf("learn %v: pacing %+v, want %+v", learn, got, want)
		}
	}
}

func TestLearnRateConfig(t *testing.T) {
	t.Parallel()
	yaml := `backends:
  - id: b
    base_url: http://127.0.0.1:1/v1
    requests_per_second: 10
    tokens_per_minute: 6000
    learn_rate: false
profiles:
  - id: p
    backend: b
    model: m
`
	cfg, err := promptkit.LoadConfig(fstest.MapFS{"promptkit.yaml": {Data: []byte(yaml)}}, "promptkit.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if lr := cfg.Backends[0].LearnRate; lr == nil || *lr {
		t.Fatalf("learn_rate = %v", lr)
	}
	eng, err := promptkit.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	want := promptkit.Pacing{RequestsPerSecond: 9.8, TokensPerMinute: 6000, Source: promptkit.PacingConfigured}
	if got := eng.Pacing()["b"]; got != want {
		t.Fatalf("pacing %+v, want %+v", got, want)
	}
}
