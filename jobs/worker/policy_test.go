package worker

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/promptkit/promptkit"
	"github.com/promptkit/promptkit/jobs"
	"github.com/promptkit/promptkit/providertest"
)

// engineError makes the engine produce a real error for a scripted reply,
// so the policy is tested against what the engine actually returns.
func engineError(t *testing.T, retries int, replies ...providertest.Response) error {
	t.Helper()
	srv := providertest.NewServer()
	t.Cleanup(srv.Close)
	srv.Enqueue(replies...)
	eng, err := promptkit.New(promptkit.Config{
		Backends:         []promptkit.Backend{{ID: "b", BaseURL: srv.URL}},
		Profiles:         []promptkit.Profile{{ID: "p", Backend: "b", Model: "m"}},
		TransientRetries: &retries,
	})
	if err != nil {
		t.Fatal(err)
	}
	_, err = eng.Run(context.Background(), promptkit.RunRequest{Text: "x"})
	if err == nil {
		t.Fatal("want an error")
	}
	return err
}

func TestClassifyEngineErrors(t *testing.T) {
	t.Parallel()
	cases := []struct {
		status    int
		kind      jobs.ErrorKind
		retryable bool
	}{
		{429, jobs.KindRateLimit, true},
		{500, jobs.KindProvider5xx, true},
		{502, jobs.KindProvider5xx, true},
		{503, jobs.KindProvider5xx, true},
		{504, jobs.KindProvider5xx, true},
		{400, jobs.KindProvider4xx, false},
		{404, jobs.KindProvider4xx, false},
		{422, jobs.KindProvider4xx, false},
		{401, jobs.KindAuth, false},
		{403, jobs.KindAuth, false},
		{501, jobs.KindUnknown, true},
	}
	for _, c := range cases {
		t.Run(fmt.Sprint(c.status), func(t *testing.T) {
			t.Parallel()
			d := Classify(engineError(t, 0, providertest.Status(c.status)))
			if d.Kind != c.kind || d.Retryable != c.retryable {
				t.Fatalf("Classify = %+v, want %s retryable=%v", d, c.kind, c.retryable)
			}
		})
	}
	t.Run("exhausted keeps the status kind", func(t *testing.T) {
		t.Parallel()
		err := engineError(t, 1, providertest.Status(503), providertest.Status(429).WithRetryAfter("7"))
		if !errors.Is(err, promptkit.ErrRetriesExhausted) {
			t.Fatalf("setup: %v", err)
		}
		d := Classify(err)
		if d.Kind != jobs.KindRateLimit || !d.Retryable || d.NotBefore.IsZero() {
			t.Fatalf("Classify = %+v", d)
		}
	})
	t.Run("malformed", func(t *testing.T) {
		t.Parallel()
		if d := Classify(engineError(t, 0, providertest.Malformed())); d.Kind != jobs.KindParse || d.Retryable {
			t.Fatalf("Classify = %+v", d)
		}
	})
}

func TestClassifyOtherErrors(t *testing.T) {
	t.Parallel()
	cases := []struct {
		err       error
		kind      jobs.ErrorKind
		retryable bool
	}{
		{fmt.Errorf("attempt: %w", context.DeadlineExceeded), jobs.KindTimeout, true},
		{fmt.Errorf("%w: x", promptkit.ErrInvalidRequest), jobs.KindUnknown, false},
		{fmt.Errorf("%w: x", promptkit.ErrPromptNotFound), jobs.KindUnknown, false},
		{errors.New("something else"), jobs.KindUnknown, true},
	}
	for _, c := range cases {
		if d := Classify(c.err); d.Kind != c.kind || d.Retryable != c.retryable {
			t.Errorf("Classify(%v) = %+v, want %s retryable=%v", c.err, d, c.kind, c.retryable)
		}
	}
}

func TestBackoff(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	none := func(time.Duration) time.Duration { return 0 }
	full := func(n time.Duration) time.Duration { return n }
	cases := []struct {
		name    string
		d       Decision
		attempt int
		jitter  func(time.Duration) time.Duration
		want    time.Duration
	}{
		{"first failure, no jitter", Decision{Kind: jobs.KindProvider5xx}, 1, none, 5 * time.Second},
		{"first failure, full jitter", Decision{Kind: jobs.KindProvider5xx}, 1, full, 10 * time.Second},
		{"second failure, no jitter", Decision{Kind: jobs.KindTimeout}, 2, none, 25 * time.Second},
		{"second failure, full jitter", Decision{Kind: jobs.KindTimeout}, 2, full, 40 * time.Second},
		{"rate limit without Retry-After", Decision{Kind: jobs.KindRateLimit}, 1, full, 60 * time.Second},
		{"rate limit with a long Retry-After", Decision{Kind: jobs.KindRateLimit, NotBefore: now.Add(90 * time.Second)}, 2, full, 90 * time.Second},
		{"rate limit with a short Retry-After", Decision{Kind: jobs.KindRateLimit, NotBefore: now.Add(2 * time.Second)}, 1, none, 5 * time.Second},
	}
	for _, c := range cases {
		if got := Backoff(c.d, c.attempt, now, c.jitter).Sub(now); got != c.want {
			t.Errorf("%s: backoff %v, want %v", c.name, got, c.want)
		}
	}
	for i := 0; i < 100; i++ { // the default jitter stays in range
		got := Backoff(Decision{Kind: jobs.KindUnknown}, 1, now, nil).Sub(now)
		if got < 5*time.Second || got > 10*time.Second {
			t.Fatalf("default jitter backoff %v out of [5s, 10s]", got)
		}
	}
}
