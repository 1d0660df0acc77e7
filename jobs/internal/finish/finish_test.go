package finish

import (
	"testing"
	"time"

	"github.com/promptkit/promptkit/jobs"
	"github.com/promptkit/promptkit/pktype"
)

// Attempts spent and event data, per write (the conformance suite checks
// that both stores apply them).
func TestWrites(t *testing.T) {
	requeue := Requeue(jobs.RequeueParams{JobID: "j", Worker: "w", Kind: jobs.KindTimeout, Message: "slow"})
	handback := Requeue(jobs.RequeueParams{JobID: "j", Worker: "w", Handback: true})
	lost := jobs.Job{ID: "j", WorkerClaim: "dead", Attempt: 1, MaxAttempts: 3, StartedAt: time.Unix(0, 0), HeartbeatAt: time.Unix(600, 0)}
	long := lost
	long.HeartbeatAt = time.Unix(3600, 0)
	p, _ := jobs.ReclaimParams{}.Normalize()
	back := Reclaim(lost, p.Decide(lost))
	stuck := Reclaim(long, p.Decide(long))
	for _, c := range []struct {
		name     string
		w        Write
		to       jobs.State
		attempts int
		data     jobs.TransitionData
	}{
		{"requeue", requeue, jobs.Queued, 1, jobs.TransitionData{Worker: "w", ErrorKind: jobs.KindTimeout, ErrorMessage: "slow"}},
		{"hand-back", handback, jobs.Queued, 0, jobs.TransitionData{Worker: "w", Handback: true}},
		{"fail", Fail(jobs.FailParams{JobID: "j", Worker: "w", Kind: jobs.KindAuth, Message: "no"}), jobs.Failed, 0,
			jobs.TransitionData{Worker: "w", ErrorKind: jobs.KindAuth, ErrorMessage: "no"}},
		{"reclaim requeue", back, jobs.Queued, 1, jobs.TransitionData{Worker: "dead", ErrorKind: jobs.KindWorkerCrash, ErrorMessage: back.Message}},
		{"reclaim stuck", stuck, jobs.Failed, 0, jobs.TransitionData{Worker: "dead", ErrorKind: jobs.KindStuck, ErrorMessage: stuck.Message}},
	} {
		if c.w.To != c.to || c.w.Attempts != c.attempts || string(c.w.Data) != string(c.data.JSON()) || !c.w.Transition() {
			t.Errorf("%s: to %s, attempts %d, data %s; want %s, %d, %s", c.name, c.w.To, c.w.Attempts, c.w.Data, c.to, c.attempts, c.data.JSON())
		}
		// Only a job going back to the queue leaves its worker.
		if c.w.ClearClaim != (c.to == jobs.Queued) {
			t.Errorf("%s: ClearClaim %v for a move to %s", c.name, c.w.ClearClaim, c.to)
		}
	}
	if back.Worker != "dead" || back.Message == "" || stuck.Message == back.Message {
		t.Errorf("reclaim writes: %+v, %+v", back, stuck)
	}
	if a := Attempt(jobs.AttemptParams{JobID: "j", Worker: "w", Data: []byte(`{}`)}); a.Transition() || a.ClearClaim || string(a.Data) != `{}` {
		t.Errorf("attempt write: %+v", a)
	}
	s := Succeed(jobs.SucceedParams{JobID: "j", Worker: "w", Answer: jobs.Answer{Output: "ok"}})
	if s.To != jobs.Succeeded || s.ClearClaim || s.Data != nil || s.Answer.Output != "ok" {
		t.Errorf("succeed write: %+v", s)
	}
	// The stored usage of an answer with no counts is all nulls; no tool
	// calls store none.
	if usage, calls := s.AnswerJSON(); string(usage) != `{"prompt_tokens":null,"completion_tokens":null,"total_tokens":null,"cached_tokens":null,"reasoning_tokens":null}` || calls != nil {
		t.Errorf("succeed write's JSON: %s, %s", usage, calls)
	}
	s.Answer.ToolCalls = []pktype.ToolCall{{ID: "c1", Type: pktype.ToolTypeFunction, Function: pktype.FunctionCall{Name: "f", Arguments: "{}"}}}
	if _, calls := s.AnswerJSON(); string(calls) != `[{"id":"c1","type":"function","function":{"name":"f","arguments":"{}"}}]` {
		t.Errorf("tool calls' JSON: %s", calls)
	}
	// A write that is not a success stores no answer.
	if usage, calls := back.AnswerJSON(); usage != nil || calls != nil {
		t.Errorf("reclaim write's answer JSON: %s, %s", usage, calls)
	}
}
