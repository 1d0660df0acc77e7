package worker_test

import (
	"strings"
	"testing"
	"time"

	"github.com/promptkit/promptkit"
	"github.com/promptkit/promptkit/jobs"
	"github.com/promptkit/promptkit/jobs/worker"
	"github.com/promptkit/promptkit/providertest"
)

// Cancelling a running job cancels its engine call; the job stays
// cancelled, with no response and no error written into it.
func TestCancelWhileRunning(t *testing.T) {
	eachStore(t, func(t *testing.T, f *fixture) {
		hold := make(chan struct{}) // never released: only the cancel ends the call
		defer close(hold)
		f.srv.Enqueue(providertest.Response{Text: "too late", Hold: hold})
		e := f.enqueue(jobs.EnqueueParams{Text: "long one"})
		stop := f.start(f.worker("w1"))
		f.arrivals(1)
		if _, err := f.store.Cancel(f.ctx, jobs.CancelParams{JobID: e.JobID}); err != nil {
			t.Fatalf("Cancel: %v", err)
		}
		// The provider sees the request's context end: the engine call was
		// cancelled, not left to run (HeartbeatInterval is an hour, so
		// the worker learnt it from the store's notification).
		f.waitFor("the provider to see the request cancelled", func() bool { return f.srv.Stats().Canceled == 1 })
		stop()

		j := f.job(e.JobID)
		if j.State != jobs.Cancelled || j.ResponseID != "" || j.ErrorKind != "" || j.ErrorMessage != "" {
			t.Fatalf("job = state=%s response=%q kind=%q msg=%q", j.State, j.ResponseID, j.ErrorKind, j.ErrorMessage)
		}
		if n := f.responses(e.JobID); n != 0 {
			t.Fatalf("%d response rows, want 0", n)
		}
		evs, _ := f.events(e.JobID)
		if want := []string{"→queued", "queued→running", "running→cancelled"}; !eq(evs, want) {
			t.Fatalf("events = %v, want %v", evs, want)
		}
		if f.srv.Count() != 1 {
			t.Fatalf("provider saw %d requests, want 1", f.srv.Count())
		}
	})
}

// A child job runs after its parent succeeds and sees nothing special; a
// child whose parent failed or was cancelled fails, naming the dependency.
func TestChains(t *testing.T) {
	t.Run("parent succeeds", func(t *testing.T) {
		eachStore(t, func(t *testing.T, f *fixture) {
			parent := f.enqueue(jobs.EnqueueParams{Text: "first", Priority: ptr(90)})
			child := f.enqueue(jobs.EnqueueParams{Text: "second", Priority: ptr(10), DependsOn: parent.JobID})
			hold := make(chan struct{})
			f.srv.Enqueue(providertest.Response{Text: "parent done", Hold: hold}, providertest.Reply("child done"))
			stop := f.start(f.worker("w1", func(c *worker.Config) { c.Concurrency = 2 }))
			f.arrivals(1)
			// With a free slot and a better priority, the child still
			// waits for its parent.
			if j := f.job(child.JobID); j.State != jobs.Queued {
				t.Fatalf("child is %s while its parent runs", j.State)
			}
			close(hold)
			c := f.waitState(child.JobID, jobs.Succeeded)
			stop()
			if p := f.job(parent.JobID); p.State != jobs.Succeeded {
				t.Fatalf("parent is %s", p.State)
			}
			if c.ErrorKind != "" || c.ErrorMessage != "" || c.Attempt != 1 {
				t.Fatalf("child = %+v", c)
			}
			reqs := f.srv.Requests()
			if len(reqs) != 2 || len(reqs[1].Messages) != 1 || reqs[1].Messages[0].Content != "second" {
				t.Fatalf("requests = %+v; the child should send only its own text", reqs)
			}
		})
	})
	for _, how := range []string{"fails", "is cancelled"} {
		t.Run("parent "+how, func(t *testing.T) {
			eachStore(t, func(t *testing.T, f *fixture) {
				parent := f.enqueue(jobs.EnqueueParams{Text: "first"})
				child := f.enqueue(jobs.EnqueueParams{Text: "second", DependsOn: parent.JobID})
				want := jobs.Failed
				if how == "fails" {
					f.srv.Enqueue(providertest.Status(400))
				} else {
					if _, err := f.store.Cancel(f.ctx, jobs.CancelParams{JobID: parent.JobID}); err != nil {
						t.Fatal(err)
					}
					want = jobs.Cancelled
				}
				stop := f.start(f.worker("w1"))
				c := f.waitJob(child.JobID, "terminal", func(j jobs.Job) bool { return j.State.Terminal() })
				stop()
				if p := f.job(parent.JobID); p.State != want {
					t.Fatalf("parent is %s, want %s", p.State, want)
				}
				if c.State != jobs.Failed || c.ErrorKind != jobs.KindDependencyFailed || !strings.Contains(c.ErrorMessage, parent.JobID) || !strings.Contains(c.ErrorMessage, string(want)) {
					t.Fatalf("child: state=%s kind=%q msg=%q; want failed naming %s and %s", c.State, c.ErrorKind, c.ErrorMessage, parent.JobID, want)
				}
				if c.ResponseID != "" || f.responses(child.JobID) != 0 {
					t.Fatal("the child has a response")
				}
				for _, text := range userTexts(f.srv) {
					if text == "second" {
						t.Fatal("the child was sent to the provider")
					}
				}
			})
		})
	}
	// A dependency that succeeded keeps counting after a retry superseded
	// it, or after it was archived.
	for _, how := range []string{"retried", "archived"} {
		t.Run("parent succeeded, then "+how, func(t *testing.T) {
			eachStore(t, func(t *testing.T, f *fixture) {
				parent := f.enqueue(jobs.EnqueueParams{Text: "first"})
				f.srv.Enqueue(providertest.Reply("parent done"), providertest.Reply("child done"))
				f.runOnce(f.worker("w1"), 1)
				child := f.enqueue(jobs.EnqueueParams{Text: "second", DependsOn: parent.JobID})
				switch how {
				case "retried":
					if _, err := f.store.Retry(f.ctx, jobs.RetryParams{JobID: parent.JobID}); err != nil {
						t.Fatal(err)
					}
				case "archived":
					f.clock.Advance(time.Hour)
					if n, err := f.store.Archive(f.ctx, f.clock.Now()); err != nil || n != 1 {
						t.Fatalf("Archive = %d, %v", n, err)
					}
				}
				// The retry, if any, waits behind the child (same
				// priority, created later).
				w := f.worker("w1")
				for f.job(child.JobID).State == jobs.Queued {
					f.runOnce(w, 1)
				}
				if c := f.job(child.JobID); c.State != jobs.Succeeded {
					t.Fatalf("child: state=%s kind=%q msg=%q", c.State, c.ErrorKind, c.ErrorMessage)
				}
			})
		})
	}
}

// A job scheduled for later is not run until the store clock reaches it.
func TestScheduled(t *testing.T) {
	eachStore(t, func(t *testing.T, f *fixture) {
		at := t0.Add(time.Hour)
		e := f.enqueue(jobs.EnqueueParams{Text: "at two", AvailableAt: at})
		w := f.worker("w1")
		f.runOnce(w, 0)
		f.clock.Advance(time.Hour - time.Second)
		f.runOnce(w, 0)
		if f.srv.Count() != 0 {
			t.Fatalf("provider saw %d requests before the schedule", f.srv.Count())
		}
		if j := f.job(e.JobID); j.State != jobs.Queued || !j.AvailableAt.Equal(at) {
			t.Fatalf("before the schedule: state=%s available_at=%v", j.State, j.AvailableAt)
		}
		f.clock.Advance(time.Second)
		f.runOnce(w, 1)
		if j := f.job(e.JobID); j.State != jobs.Succeeded || !j.StartedAt.Equal(at) {
			t.Fatalf("after the schedule: state=%s started_at=%v", j.State, j.StartedAt)
		}
	})
}

// Stopping the worker while a job is running hands it back after the
// grace period: queued, same attempt, no claim, no response.
func TestGracefulShutdownHandsBack(t *testing.T) {
	eachStore(t, func(t *testing.T, f *fixture) {
		hold := make(chan struct{})
		defer close(hold)
		f.srv.Enqueue(providertest.Response{Text: "never", Hold: hold})
		e := f.enqueue(jobs.EnqueueParams{Text: "slow", MaxAttempts: 1})
		stop := f.start(f.worker("w1", func(c *worker.Config) { c.ShutdownGrace = time.Millisecond }))
		f.arrivals(1)
		f.clock.Advance(time.Minute)
		stop() // returns only after the hand-back

		j := f.job(e.JobID)
		if j.State != jobs.Queued || j.Attempt != 1 || j.WorkerClaim != "" || j.ResponseID != "" || j.ErrorKind != "" {
			t.Fatalf("after shutdown: state=%s attempt=%d claim=%q response=%q kind=%q", j.State, j.Attempt, j.WorkerClaim, j.ResponseID, j.ErrorKind)
		}
		if !j.AvailableAt.Equal(t0.Add(time.Minute)) {
			t.Fatalf("available_at = %v, want now (%v)", j.AvailableAt, t0.Add(time.Minute))
		}
		if n := f.responses(e.JobID); n != 0 {
			t.Fatalf("%d response rows, want 0", n)
		}
		evs, _ := f.events(e.JobID)
		if want := []string{"→queued", "queued→running", "running→queued"}; !eq(transitions(evs), want) {
			t.Fatalf("events = %v, want transitions %v", evs, want)
		}
		f.waitFor("the provider to see the request cancelled", func() bool { return f.srv.Stats().Canceled == 1 })

		// MaxAttempts 1 and the hand-back did not spend it: it still runs.
		f.srv.Enqueue(providertest.Reply("done"))
		f.runOnce(f.worker("w2"), 1)
		if j := f.job(e.JobID); j.State != jobs.Succeeded || j.Attempt != 1 {
			t.Fatalf("rerun: state=%s attempt=%d", j.State, j.Attempt)
		}
	})
}

// A 429's Retry-After decides when the job runs again; without one the job
// waits 60 s. The engine makes no retries of its own here.
func TestRetryAfterAtJobLevel(t *testing.T) {
	cases := []struct {
		name  string
		reply providertest.Response
		min   time.Duration
	}{
		{"Retry-After 120", providertest.Status(429).WithRetryAfter("120"), 120 * time.Second},
		{"no Retry-After", providertest.Status(429), 60 * time.Second},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			eachStore(t, func(t *testing.T, f *fixture) {
				f.srv.Enqueue(c.reply)
				e := f.enqueue(jobs.EnqueueParams{Text: "busy"})
				f.runOnce(f.worker("w1"), 1)
				j := f.job(e.JobID)
				if j.State != jobs.Queued || j.Attempt != 2 || j.ErrorKind != jobs.KindRateLimit {
					t.Fatalf("state=%s attempt=%d kind=%q", j.State, j.Attempt, j.ErrorKind)
				}
				if lo, hi := t0.Add(c.min), t0.Add(c.min+5*time.Second); j.AvailableAt.Before(lo) || j.AvailableAt.After(hi) {
					t.Fatalf("available_at = now+%v, want within [%v, %v]", j.AvailableAt.Sub(t0), c.min, c.min+5*time.Second)
				}
				if f.srv.Count() != 1 {
					t.Fatalf("provider saw %d requests, want 1", f.srv.Count())
				}
			})
		})
	}
}

// A prompt continuing a thread is sent with its ancestors' texts and
// answers as history, up to the depth its options allow.
func TestThreadHistory(t *testing.T) {
	eachStore(t, func(t *testing.T, f *fixture) {
		w := f.worker("w1")
		f.srv.Enqueue(providertest.Reply("answer one"), providertest.Reply("answer two"))
		p1 := f.enqueue(jobs.EnqueueParams{Text: "question one"})
		f.runOnce(w, 1)
		p2 := f.enqueue(jobs.EnqueueParams{Text: "question two", ParentID: p1.PromptID})
		f.runOnce(w, 1)
		f.enqueue(jobs.EnqueueParams{Text: "question three", ParentID: p2.PromptID})
		f.runOnce(w, 1)
		f.enqueue(jobs.EnqueueParams{Text: "question four", ParentID: p2.PromptID, ExecutionOptions: jobs.ExecutionOptions{Depth: ptr(1)}})
		f.runOnce(w, 1)
		f.enqueue(jobs.EnqueueParams{Text: "question five", ParentID: p2.PromptID, ExecutionOptions: jobs.ExecutionOptions{Depth: ptr(0)}})
		f.runOnce(w, 1)

		want := [][]string{
			{"user:question one"},
			{"user:question one", "assistant:answer one", "user:question two"},
			{"user:question one", "assistant:answer one", "user:question two", "assistant:answer two", "user:question three"},
			{"user:question two", "assistant:answer two", "user:question four"},
			{"user:question five"},
		}
		reqs := f.srv.Requests()
		if len(reqs) != len(want) {
			t.Fatalf("%d requests, want %d", len(reqs), len(want))
		}
		for i, r := range reqs {
			var got []string
			for _, m := range r.Messages {
				got = append(got, m.Role+":"+m.Content)
			}
			if !eq(got, want[i]) {
				t.Errorf("request %d messages = %q, want %q", i+1, got, want[i])
			}
		}
	})
}

// Every engine attempt is an attempt event with its status and usage.
func TestAttemptEvents(t *testing.T) {
	eachStore(t, func(t *testing.T, f *fixture) {
		f.srv.Enqueue(providertest.Status(503), providertest.Response{Text: "ok", Usage: providertest.Usage{PromptTokens: 7, CompletionTokens: 3, TotalTokens: 10}})
		e := f.enqueue(jobs.EnqueueParams{Text: "retry inside"})
		f.runOnce(f.worker("w1", func(c *worker.Config) { c.Engine = f.engine(1) }), 1)

		j := f.job(e.JobID)
		if j.State != jobs.Succeeded || j.Attempt != 1 {
			t.Fatalf("state=%s attempt=%d", j.State, j.Attempt)
		}
		evs, atts := f.events(e.JobID)
		if want := []string{"→queued", "queued→running", "attempt:503", "attempt:200", "running→succeeded"}; !eq(evs, want) {
			t.Fatalf("events = %v, want %v", evs, want)
		}
		a1, a2 := atts[0], atts[1]
		if a1.JobAttempt != 1 || a1.Attempt != 1 || a1.Generation != 1 || !a1.Dispatched || a1.Failure == "" || a1.Usage != nil {
			t.Errorf("first attempt = %+v", a1)
		}
		if a2.JobAttempt != 1 || a2.Attempt != 2 || a2.Generation != 1 || !a2.Dispatched || a2.Failure != "" ||
			a2.Usage["prompt_tokens"].Value != 7 || a2.Usage["completion_tokens"].Value != 3 || a2.Usage["total_tokens"].Value != 10 {
			t.Errorf("second attempt = %+v", a2)
		}
		if a1.Outcome == "" || a2.Outcome == "" || a1.Outcome == a2.Outcome {
			t.Errorf("outcomes %q, %q", a1.Outcome, a2.Outcome)
		}
		r, err := f.store.GetResponse(f.ctx, "", j.ResponseID)
		// A stored count is known when the provider reported it on at least
		// one attempt of the run (the 503 reported none), and its value is
		// the sum of what was reported; a count never reported is unknown.
		want := promptkit.Usage{
			TokenUsage: promptkit.TokenUsage{PromptTokens: 7, CompletionTokens: 3, TotalTokens: 10},
			Known:      promptkit.TokenUsagePresence{PromptTokens: true, CompletionTokens: true, TotalTokens: true, CachedTokens: true, ReasoningTokens: true},
		}
		if err != nil || r.Usage != want {
			t.Fatalf("response usage = %+v, %v; want %+v", r.Usage, err, want)
		}
	})
}

// A 400 fails at once; a 503 on every job attempt fails after the last.
func TestFailures(t *testing.T) {
	t.Run("400 is not retried", func(t *testing.T) {
		eachStore(t, func(t *testing.T, f *fixture) {
			f.srv.Enqueue(providertest.Status(400))
			e := f.enqueue(jobs.EnqueueParams{Text: "bad"})
			f.runOnce(f.worker("w1"), 1)
			j := f.job(e.JobID)
			if j.State != jobs.Failed || j.ErrorKind != jobs.KindProvider4xx || j.Attempt != 1 || j.ErrorMessage == "" || j.FinishedAt.IsZero() {
				t.Fatalf("state=%s kind=%q attempt=%d msg=%q", j.State, j.ErrorKind, j.Attempt, j.ErrorMessage)
			}
			if f.srv.Count() != 1 {
				t.Fatalf("provider saw %d requests, want 1", f.srv.Count())
			}
		})
	})
	t.Run("503 exhausts the attempts", func(t *testing.T) {
		eachStore(t, func(t *testing.T, f *fixture) {
			f.srv.Enqueue(providertest.Status(503), providertest.Status(503), providertest.Status(503))
			e := f.enqueue(jobs.EnqueueParams{Text: "down", MaxAttempts: 3})
			w := f.worker("w1")
			waits := []time.Duration{7500 * time.Millisecond, 32500 * time.Millisecond} // 5s+2.5s, 25s+7.5s
			for attempt := 1; attempt <= 3; attempt++ {
				now := f.clock.Now()
				f.runOnce(w, 1)
				j := f.job(e.JobID)
				if attempt < 3 {
					if j.State != jobs.Queued || j.Attempt != attempt+1 || j.ErrorKind != jobs.KindProvider5xx || !j.AvailableAt.Equal(now.Add(waits[attempt-1])) {
						t.Fatalf("after attempt %d: state=%s attempt=%d kind=%q available_at=now+%v", attempt, j.State, j.Attempt, j.ErrorKind, j.AvailableAt.Sub(now))
					}
					f.runOnce(w, 0)
					f.clock.Advance(waits[attempt-1])
					continue
				}
				if j.State != jobs.Failed || j.Attempt != 3 || j.ErrorKind != jobs.KindProvider5xx {
					t.Fatalf("after attempt 3: state=%s attempt=%d kind=%q", j.State, j.Attempt, j.ErrorKind)
				}
			}
			if f.srv.Count() != 3 {
				t.Fatalf("provider saw %d requests, want 3", f.srv.Count())
			}
		})
	})
}

// transitions drops the attempt events of a summary.
func transitions(evs []string) []string {
	var out []string
	for _, e := range evs {
		if !strings.HasPrefix(e, "attempt:") {
			out = append(out, e)
		}
	}
	return out
}
