package jobs_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/promptkit/promptkit"
	"github.com/promptkit/promptkit/jobs"
	"github.com/promptkit/promptkit/providertest"
)

// engineError makes the engine produce a real error, so the policy is
// tested against what the engine actually returns.
func engineError(t *testing.T, cfg func(*promptkit.Config, *promptkit.RunRequest), replies ...providertest.Response) error {
	t.Helper()
	srv := providertest.NewServer()
	t.Cleanup(srv.Close)
	srv.Enqueue(replies...)
	zero := 0
	c := promptkit.Config{
		Backends:         []promptkit.Backend{{ID: "b", BaseURL: srv.URL}},
		Profiles:         []promptkit.Profile{{ID: "p", Backend: "b", Model: "m"}},
		TransientRetries: &zero,
	}
	req := promptkit.RunRequest{Text: "x"}
	if cfg != nil {
		cfg(&c, &req)
	}
	eng, err := promptkit.New(c)
	if err != nil {
		t.Fatal(err)
	}
	_, err = eng.Run(context.Background(), req)
	if err == nil {
		t.Fatal("want an error")
	}
	return err
}

// Every row of the policy table in docs/service.md, from a real engine
// error where the engine can make one.
func TestClassifyEngineErrors(t *testing.T) {
	t.Parallel()
	status := func(code int) func(t *testing.T) error {
		return func(t *testing.T) error { return engineError(t, nil, providertest.Status(code)) }
	}
	cases := []struct {
		name string
		err  func(t *testing.T) error
		kind jobs.ErrorKind
	}{
		{"429", status(429), jobs.KindRateLimit},
		{"500", status(500), jobs.KindProvider5xx},
		{"501", status(501), jobs.KindProvider5xx},
		{"502", status(502), jobs.KindProvider5xx},
		{"503", status(503), jobs.KindProvider5xx},
		{"504", status(504), jobs.KindProvider5xx},
		{"505", status(505), jobs.KindProvider5xx},
		{"599", status(599), jobs.KindProvider5xx},
		{"400", status(400), jobs.KindProvider4xx},
		{"404", status(404), jobs.KindProvider4xx},
		{"422", status(422), jobs.KindProvider4xx},
		{"401", status(401), jobs.KindAuth},
		{"403", status(403), jobs.KindAuth},
		{"malformed", func(t *testing.T) error { return engineError(t, nil, providertest.Malformed()) }, jobs.KindParse},
		{"missing credential", func(t *testing.T) error {
			return engineError(t, func(c *promptkit.Config, _ *promptkit.RunRequest) {
				c.Backends[0].APIKeyEnv = "PROMPTKIT_TEST_SURELY_UNSET_KEY"
			})
		}, jobs.KindAuth},
		{"unknown profile", func(t *testing.T) error {
			return engineError(t, func(_ *promptkit.Config, r *promptkit.RunRequest) { r.ProfileID = "nope" })
		}, jobs.KindInvalidRequest},
		{"connection refused", func(t *testing.T) error {
			srv := providertest.NewServer()
			url := srv.URL
			srv.Close()
			return engineError(t, func(c *promptkit.Config, _ *promptkit.RunRequest) { c.Backends[0].BaseURL = url })
		}, jobs.KindTransport},
		{"exhausted keeps the last status's kind", func(t *testing.T) error {
			return engineError(t, func(c *promptkit.Config, _ *promptkit.RunRequest) { one := 1; c.TransientRetries = &one },
				providertest.Status(503), providertest.Status(429).WithRetryAfter("7"))
		}, jobs.KindRateLimit},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			err := c.err(t)
			if f := jobs.Classify(err); f.Kind != c.kind {
				t.Fatalf("Classify(%v) = %+v, want %s", err, f, c.kind)
			}
		})
	}
	t.Run("Retry-After is kept", func(t *testing.T) {
		t.Parallel()
		err := engineError(t, nil, providertest.Status(429).WithRetryAfter("7"))
		if f := jobs.Classify(err); f.RetryAfter.IsZero() {
			t.Fatalf("Classify = %+v: lost the Retry-After", f)
		}
	})
}

func TestClassifyOtherErrors(t *testing.T) {
	t.Parallel()
	cases := []struct {
		err  error
		kind jobs.ErrorKind
	}{
		{fmt.Errorf("attempt: %w", context.DeadlineExceeded), jobs.KindTimeout},
		{fmt.Errorf("%w: x", promptkit.ErrInvalidRequest), jobs.KindInvalidRequest},
		{fmt.Errorf("%w: x", promptkit.ErrPromptRender), jobs.KindInvalidRequest},
		{fmt.Errorf("%w: x", promptkit.ErrPromptNotFound), jobs.KindInvalidRequest},
		{fmt.Errorf("%w: x", promptkit.ErrProfileNotFound), jobs.KindInvalidRequest},
		{fmt.Errorf("%w: x", promptkit.ErrInvalidConfig), jobs.KindInvalidRequest},
		{fmt.Errorf("%w: x", jobs.ErrInvalid), jobs.KindInvalidRequest},
		{fmt.Errorf("%w: x", promptkit.ErrMissingCredential), jobs.KindAuth},
		{fmt.Errorf("%w: x", promptkit.ErrTransport), jobs.KindTransport},
		{fmt.Errorf("%w: x", promptkit.ErrCapacity), jobs.KindUnknown},
		{fmt.Errorf("attempt: %w", context.Canceled), jobs.KindUnknown},
		{errors.New("something else"), jobs.KindUnknown},
	}
	for _, c := range cases {
		if f := jobs.Classify(c.err); f.Kind != c.kind {
			t.Errorf("Classify(%v) = %+v, want %s", c.err, f, c.kind)
		}
	}
}

// The policy table (docs/service.md): which kinds are retried.
func TestRetryable(t *testing.T) {
	t.Parallel()
	want := map[jobs.ErrorKind]bool{
		jobs.KindTimeout: true, jobs.KindRateLimit: true, jobs.KindProvider5xx: true, jobs.KindWorkerCrash: true, jobs.KindTransport: true, jobs.KindUnknown: true,
		jobs.KindProvider4xx: false, jobs.KindParse: false, jobs.KindAuth: false, jobs.KindStuck: false,
		jobs.KindInvalidRequest: false, jobs.KindDependencyFailed: false, jobs.KindUnstorable: false, jobs.KindBudgetExceeded: false,
	}
	kinds := jobs.ErrorKinds()
	if len(kinds) != len(want) {
		t.Fatalf("ErrorKinds() has %d kinds, the table %d", len(kinds), len(want))
	}
	for _, k := range kinds {
		if got, ok := want[k]; !ok || k.Retryable() != got {
			t.Errorf("%s.Retryable() = %t, want %t (listed %t)", k, k.Retryable(), got, ok)
		}
	}
}

func TestBackoff(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	none := func(time.Duration) time.Duration { return 0 }
	full := func(n time.Duration) time.Duration { return n }
	f := func(k jobs.ErrorKind) jobs.Failure { return jobs.Failure{Kind: k} }
	cases := []struct {
		name    string
		f       jobs.Failure
		attempt int
		jitter  func(time.Duration) time.Duration
		want    time.Duration
	}{
		{"first failure, no jitter", f(jobs.KindProvider5xx), 1, none, 5 * time.Second},
		{"first failure, full jitter", f(jobs.KindProvider5xx), 1, full, 10 * time.Second},
		{"second failure, no jitter", f(jobs.KindTimeout), 2, none, 25 * time.Second},
		{"second failure, full jitter", f(jobs.KindTimeout), 2, full, 40 * time.Second},
		{"third failure, no jitter", f(jobs.KindUnknown), 3, none, 125 * time.Second},
		{"third failure, full jitter", f(jobs.KindUnknown), 3, full, 140 * time.Second},
		{"fourth failure", f(jobs.KindUnknown), 4, none, 625 * time.Second},
		{"capped", f(jobs.KindUnknown), 40, none, time.Hour},
		{"rate limit without Retry-After", f(jobs.KindRateLimit), 1, full, 60 * time.Second},
		{"rate limit with a long Retry-After", jobs.Failure{Kind: jobs.KindRateLimit, RetryAfter: now.Add(90 * time.Second)}, 2, full, 90 * time.Second},
		{"rate limit with a short Retry-After", jobs.Failure{Kind: jobs.KindRateLimit, RetryAfter: now.Add(2 * time.Second)}, 1, none, 5 * time.Second},
		{"a 503's Retry-After counts too", jobs.Failure{Kind: jobs.KindProvider5xx, RetryAfter: now.Add(30 * time.Second)}, 1, full, 30 * time.Second},
	}
	for _, c := range cases {
		if got := jobs.Backoff(c.f, c.attempt, now, c.jitter).Sub(now); got != c.want {
			t.Errorf("%s: backoff %v, want %v", c.name, got, c.want)
		}
	}
	for range 100 { // the default jitter stays in range
		got := jobs.Backoff(f(jobs.KindUnknown), 2, now, nil).Sub(now)
		if got < 25*time.Second || got > 40*time.Second {
			t.Fatalf("default jitter backoff %v out of [25s, 40s]", got)
		}
	}
}

func TestReclaimDecide(t *testing.T) {
	t.Parallel()
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	p, err := jobs.ReclaimParams{}.Normalize()
	if err != nil || p.ReclaimAfter != 4*time.Minute || p.StuckAfter != 15*time.Minute {
		t.Fatalf("defaults = %+v, %v", p, err)
	}
	// ran is how long the heartbeats say it ran; the last beat was an hour
	// ago, so the wall time since start is always past StuckAfter.
	job := func(attempt, max int, ran time.Duration) jobs.Job {
		beat := now.Add(-time.Hour)
		return jobs.Job{Attempt: attempt, MaxAttempts: max, StartedAt: beat.Add(-ran), HeartbeatAt: beat}
	}
	cases := []struct {
		name string
		j    jobs.Job
		to   jobs.State
		kind jobs.ErrorKind
	}{
		{"attempts left, ran briefly before an outage", job(1, 3, 10*time.Minute), jobs.Queued, jobs.KindWorkerCrash},
		{"never beat after the claim", job(1, 3, 0), jobs.Queued, jobs.KindWorkerCrash},
		{"last attempt", job(3, 3, time.Minute), jobs.Failed, jobs.KindStuck},
		{"ran exactly stuck_after", job(1, 3, 15*time.Minute), jobs.Failed, jobs.KindStuck},
		{"ran longer", job(1, 3, time.Hour), jobs.Failed, jobs.KindStuck},
	}
	msgs := map[string]bool{}
	for _, c := range cases {
		d := p.Decide(c.j)
		if d.To != c.to || d.Kind != c.kind || d.Message == "" {
			t.Errorf("%s: %+v, want %s %s", c.name, d, c.to, c.kind)
		}
		msgs[d.Message] = true
	}
	if len(msgs) != 3 {
		t.Errorf("messages %v: want one per outcome", msgs)
	}
	if got := p.HeartbeatCutoff(now); !got.Equal(now.Add(-jobs.DefaultReclaimAfter)) {
		t.Errorf("HeartbeatCutoff = %v, want DefaultReclaimAfter before now", got)
	}
	for _, bad := range []jobs.ReclaimParams{{ReclaimAfter: -1}, {StuckAfter: -time.Second}, {ReclaimAfter: time.Hour}, {ReclaimAfter: time.Minute, StuckAfter: time.Minute}} {
		if _, err := bad.Normalize(); !errors.Is(err, jobs.ErrInvalid) {
			t.Errorf("Normalize(%+v) = %v, want ErrInvalid", bad, err)
		}
	}
}

func TestDependencyOutcome(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		dep  *jobs.Job
		run  bool
	}{
		{"archived", nil, true},
		{"succeeded", &jobs.Job{State: jobs.Succeeded, ResponseID: "r"}, true},
		{"succeeded, then retried", &jobs.Job{State: jobs.Superseded, ResponseID: "r"}, true},
		{"failed", &jobs.Job{State: jobs.Failed}, false},
		{"cancelled", &jobs.Job{State: jobs.Cancelled}, false},
		{"failed, then retried", &jobs.Job{State: jobs.Superseded}, false},
	}
	for _, c := range cases {
		run, reason := jobs.DependencyOutcome(c.dep)
		if run != c.run || (run == (reason != "")) {
			t.Errorf("%s: run=%t reason=%q, want run=%t", c.name, run, reason, c.run)
		}
	}
}

// Every kind is worded for the person who asked, so the page never shows
// a bare kind; an unknown kind reads as unknown.
func TestErrorKindWording(t *testing.T) {
	for _, k := range jobs.ErrorKinds() {
		title, advice := k.Title(), k.Advice()
		if title == "" || !strings.HasSuffix(title, ".") || strings.ToUpper(title[:1]) != title[:1] {
			t.Errorf("%s: title %q is not a sentence", k, title)
		}
		if advice == "" || !strings.HasSuffix(advice, ".") {
			t.Errorf("%s: advice %q is not a sentence", k, advice)
		}
	}
	if got, want := jobs.KindTransport.Title(), "The provider could not be reached."; got != want {
		t.Errorf("transport title %q, want %q", got, want)
	}
	if got := jobs.ErrorKind("new_kind").Advice(); got != jobs.KindUnknown.Advice() {
		t.Errorf("an unknown kind's advice %q, want unknown's", got)
	}
	if jobs.KindNone.Title() != "" || jobs.KindNone.Advice() != "" {
		t.Error("no kind has words")
	}
}
