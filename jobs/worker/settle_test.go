package worker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/promptkit/promptkit"
	"github.com/promptkit/promptkit/internal/dispatch"
	"github.com/promptkit/promptkit/jobs"
	"github.com/promptkit/promptkit/pktype"
)

func TestSettle(t *testing.T) {
	t.Parallel()
	now := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	// The run started at wall time wall, which was now−10s on the
	// worker's clock: provider times move by the same offset.
	wall := time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC)
	start := now.Add(-10 * time.Second)
	half := func(n time.Duration) time.Duration { return n / 2 }
	job := func(attempt, max int) jobs.Job {
		return jobs.Job{ID: "j1", PromptID: "p1", State: jobs.Running, Attempt: attempt, MaxAttempts: max, WorkerClaim: "w"}
	}
	// A job whose client stops waiting 20 s from now (a chat completion's).
	waited := func(attempt, max int) jobs.Job {
		j := job(attempt, max)
		j.ExecutionOptions.Deadline = new(now.Add(20 * time.Second))
		return j
	}
	// The same job retried by hand: its client is not the one waiting.
	retried := func(attempt, max int) jobs.Job {
		j := waited(attempt, max)
		j.Supersedes = "j0"
		return j
	}
	ran := func(res *promptkit.RunResult, err error) outcome {
		return outcome{res: res, err: err, wallStart: wall, clockStart: start}
	}
	status := func(code int, retryAfter time.Time) error {
		return fmt.Errorf("profile \"p\": generation 1: %w", pktype.NewGenerationError("b", code, "provider text", retryAfter))
	}
	usage := promptkit.Usage{TokenUsage: promptkit.TokenUsage{TotalTokens: 9}, Known: promptkit.TokenUsagePresence{TotalTokens: true}}
	valid := &promptkit.RunResult{Text: `{"a":1}`, Output: json.RawMessage(`{"a":1}`), Model: "m2", Usage: usage,
		Validation: promptkit.Validation{Status: promptkit.ValidationValid},
		Raw:        json.RawMessage(`{"choices":[{"index":0,"message":{"content":"{\"a\":1}"},"logprobs":{"content":[]}}]}`)}
	invalid := &promptkit.RunResult{Text: "SECRET OUTPUT", Validation: promptkit.Validation{Status: promptkit.ValidationInvalid}}

	requeue := func(at time.Time, kind jobs.ErrorKind, handback bool) write {
		return write{op: opRequeue, jobID: "j1", requeue: jobs.RequeueParams{JobID: "j1", Worker: "w", AvailableAt: at, Kind: kind, Handback: handback}}
	}
	fail := func(kind jobs.ErrorKind) write {
		return write{op: opFail, jobID: "j1", fail: jobs.FailParams{JobID: "j1", Worker: "w", Kind: kind}}
	}
	cases := []struct {
		name string
		j    jobs.Job
		o    outcome
		want write
	}{
		{"cancelled: discarded", job(1, 3), outcome{stopped: errCancelled, res: valid}, write{op: opDiscard, jobID: "j1"}},
		{"shutdown: handed back now", job(2, 3), outcome{stopped: errShutdown, err: context.Canceled}, requeue(now, jobs.KindNone, true)},
		{"dependency failed", job(1, 3), outcome{refused: jobs.KindDependencyFailed, reason: "dependency d is failed"}, fail(jobs.KindDependencyFailed)},
		{"budget spent", job(1, 3), outcome{refused: jobs.KindBudgetExceeded, reason: "the token's daily budget of $5.00 is reached"}, fail(jobs.KindBudgetExceeded)},
		{"tokens per minute before the first call: waits, no attempt spent", job(1, 3), outcome{err: errors.New("full"), waitUntil: now.Add(40 * time.Second), handback: true, reason: "the org's limit"},
			requeue(now.Add(40*time.Second), jobs.KindRateLimit, true)},
		{"tokens per minute before a later call: waits, the attempt spent", job(3, 3), outcome{err: errors.New("full"), waitUntil: now.Add(40 * time.Second), reason: "the org's limit"},
			requeue(now.Add(40*time.Second), jobs.KindRateLimit, false)},
		{"tokens per minute past the client's deadline", waited(1, 3), outcome{err: errors.New("full"), waitUntil: now.Add(40 * time.Second), handback: true, reason: "the org's limit"},
			fail(jobs.KindRateLimit)},
		{"success", job(1, 3), ran(valid, nil), write{op: opSucceed, jobID: "j1", succeed: jobs.SucceedParams{JobID: "j1", Worker: "w",
			Answer: jobs.Answer{Output: valid.Text, Parsed: valid.Output, Model: "m2", Usage: usage, Body: valid.Raw}}}},
		{"invalid after repair: parse", job(1, 3), ran(invalid, nil), fail(jobs.KindParse)},
		{"503, attempts left: backoff", job(1, 3), ran(nil, status(503, time.Time{})), requeue(now.Add(7500*time.Millisecond), jobs.KindProvider5xx, false)},
		{"503, second attempt: 25s", job(2, 3), ran(nil, status(503, time.Time{})), requeue(now.Add(32500*time.Millisecond), jobs.KindProvider5xx, false)},
		{"501 is provider_5xx too", job(1, 3), ran(nil, status(501, time.Time{})), requeue(now.Add(7500*time.Millisecond), jobs.KindProvider5xx, false)},
		{"503 on the last attempt: failed", job(3, 3), ran(nil, status(503, time.Time{})), fail(jobs.KindProvider5xx)},
		{"429 waits for Retry-After, on the worker's clock", job(1, 3), ran(nil, status(429, wall.Add(5*time.Minute))),
			requeue(start.Add(5*time.Minute), jobs.KindRateLimit, false)},
		{"429 without Retry-After waits 60s", job(1, 3), ran(nil, status(429, time.Time{})), requeue(now.Add(time.Minute), jobs.KindRateLimit, false)},
		{"400: failed", job(1, 3), ran(nil, status(400, time.Time{})), fail(jobs.KindProvider4xx)},
		{"401: auth", job(1, 3), ran(nil, status(401, time.Time{})), fail(jobs.KindAuth)},
		{"missing credential: auth", job(1, 3), ran(nil, fmt.Errorf("backend \"b\": %w: X", pktype.ErrMissingCredential)), fail(jobs.KindAuth)},
		{"unknown profile: invalid_request", job(1, 3), ran(nil, fmt.Errorf("%w: \"x\"", pktype.ErrProfileNotFound)), fail(jobs.KindInvalidRequest)},
		{"bad stored options: invalid_request", job(1, 3), outcome{err: fmt.Errorf("%w: x", jobs.ErrInvalid)}, fail(jobs.KindInvalidRequest)},
		{"job deadline: timeout", job(1, 3), ran(nil, context.DeadlineExceeded), requeue(now.Add(7500*time.Millisecond), jobs.KindTimeout, false)},
		{"transport: retried", job(1, 3), ran(nil, fmt.Errorf("%w: %w: connection refused", pktype.ErrLLMGenerate, pktype.ErrTransport)),
			requeue(now.Add(7500*time.Millisecond), jobs.KindTransport, false)},
		{"store hiccup reading the prompt: unknown, retried", job(1, 3), outcome{err: fmt.Errorf("reading the prompt: connection reset")},
			requeue(now.Add(7500*time.Millisecond), jobs.KindUnknown, false)},
		{"503, next attempt before the client's deadline: backoff", waited(1, 3), ran(nil, status(503, time.Time{})),
			requeue(now.Add(7500*time.Millisecond), jobs.KindProvider5xx, false)},
		{"503, next attempt after the client's deadline: failed now", waited(2, 3), ran(nil, status(503, time.Time{})), fail(jobs.KindProvider5xx)},
		{"429 whose Retry-After passes the client's deadline: failed now", waited(1, 3), ran(nil, status(429, wall.Add(time.Minute))),
			fail(jobs.KindRateLimit)},
		{"a retried job's copied deadline does not count", retried(2, 3), ran(nil, status(503, time.Time{})),
			requeue(now.Add(32500*time.Millisecond), jobs.KindProvider5xx, false)},
		{"backend paused past the client's deadline: failed now", waited(1, 3),
			ran(nil, &dispatch.CapacityError{What: "backend pause outlasts the deadline", NotBefore: wall.Add(10 * time.Minute)}),
			fail(jobs.KindRateLimit)},
		{"backend paused past the deadline: handed back", job(2, 3),
			ran(nil, &dispatch.CapacityError{What: "backend pause outlasts the deadline", NotBefore: wall.Add(10 * time.Minute)}),
			requeue(start.Add(10*time.Minute), jobs.KindRateLimit, true)},
	}
	for _, c := range cases {
		got := settle(c.j, c.o, "w", now, half)
		// Messages are checked apart: they come from the errors.
		msg := got.requeue.Message + got.fail.Message
		got.requeue.Message, got.fail.Message = "", ""
		if fmt.Sprintf("%+v", got) != fmt.Sprintf("%+v", c.want) {
			t.Errorf("%s:\n got  %+v\n want %+v", c.name, got, c.want)
		}
		if (got.op == opFail || (got.op == opRequeue && !got.requeue.Handback)) && msg == "" {
			t.Errorf("%s: no error message", c.name)
		}
		if got.op == opFail && c.j.ExecutionOptions.Deadline != nil && c.j.Supersedes == "" && !strings.HasSuffix(msg, msgPastDeadline) &&
			c.j.Attempt < c.j.MaxAttempts {
			t.Errorf("%s: message %q does not say why it was not retried", c.name, msg)
		}
		for _, secret := range []string{"SECRET OUTPUT", "provider text"} {
			if strings.Contains(msg, secret) {
				t.Errorf("%s: message %q quotes %q", c.name, msg, secret)
			}
		}
	}
}
