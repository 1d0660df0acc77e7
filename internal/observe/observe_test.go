package observe

import (
	"errors"
	"testing"
	"time"

	"github.com/promptkit/promptkit/internal/testkit"
	"github.com/promptkit/promptkit/pktype"
)

// cnt is an observed count.
func cnt(v int, known, complete bool) pktype.ObservedTokenCount {
	return pktype.ObservedTokenCount{Value: v, Known: known, Complete: complete}
}

type sink struct{ evs []pktype.ExecutionEvent }

func (s *sink) observe(ev pktype.ExecutionEvent) { s.evs = append(s.evs, ev) }

func all(c pktype.ObservedTokenCount) pktype.ObservedTokenUsage {
	return pktype.ObservedTokenUsage{PromptTokens: c, CompletionTokens: c, TotalTokens: c, CachedTokens: c, ReasoningTokens: c}
}

var (
	fullPresence = pktype.TokenUsagePresence{PromptTokens: true, CompletionTokens: true, TotalTokens: true, CachedTokens: true, ReasoningTokens: true}
	knownZero    = pktype.ObservedTokenCount{Known: true, Complete: true}
)

func TestTotalsCountDispatchedOnly(t *testing.T) {
	t.Parallel()
	r := New(func() time.Time { return time.Unix(100, 0) }, nil, nil)
	u := pktype.TokenUsage{PromptTokens: 3, CompletionTokens: 2, TotalTokens: 5}
	r.RecordAttempt(Attempt{Generation: 1, Attempt: 1, CapacityWait: time.Second, Usage: u, Presence: fullPresence}) // canceled before dispatch
	r.RecordAttempt(Attempt{Generation: 1, Attempt: 2, Dispatched: true, Duration: 2 * time.Second, Usage: u})
	r.RecordAttempt(Attempt{Generation: 2, Attempt: 1, Dispatched: true, Duration: time.Second, Usage: u})
	r.RecordAttempt(Attempt{Generation: 2, Attempt: 2, Dispatched: true, Duration: time.Second})
	r.RecordAttempt(Attempt{Generation: 3, Attempt: 1, Duration: time.Hour}) // a repair that never dispatched
	r.RecordDelay(1, 1, 3*time.Second)
	r.RecordDelay(2, 1, 4*time.Second)
	got := r.Totals()
	want := Totals{
		Attempts:         3,
		TransientRetries: 2,
		RepairCalls:      1,
		Usage:            pktype.TokenUsage{PromptTokens: 6, CompletionTokens: 4, TotalTokens: 10},
		CapacityWait:     time.Second,
		Generation:       4 * time.Second,
		RetryDelay:       7 * time.Second,
	}
	if got != want {
		t.Fatalf("totals = %+v, want %+v", got, want)
	}
}

func TestRepairCountedOncePerGeneration(t *testing.T) {
	t.Parallel()
	r := New(nil, nil, nil)
	r.RecordAttempt(Attempt{Generation: 1, Attempt: 1, Dispatched: true})
	r.RecordAttempt(Attempt{Generation: 2, Attempt: 1}) // undispatched first try
	r.RecordAttempt(Attempt{Generation: 2, Attempt: 2, Dispatched: true})
	r.RecordAttempt(Attempt{Generation: 2, Attempt: 3, Dispatched: true})
	r.RecordAttempt(Attempt{Generation: 3, Attempt: 1, Dispatched: true})
	r.RecordAttempt(Attempt{Generation: 4, Attempt: 1})
	got := r.Totals()
	if got.RepairCalls != 2 || got.Attempts != 4 || got.TransientRetries != 2 {
		t.Fatalf("repairs/attempts/retries = %d/%d/%d, want 2/4/2", got.RepairCalls, got.Attempts, got.TransientRetries)
	}
}

func TestUsageAggregation(t *testing.T) {
	t.Parallel()
	type in struct {
		dispatched bool
		u          pktype.TokenUsage
		p          pktype.TokenUsagePresence
	}
	cases := []struct {
		name     string
		attempts []in
		want     pktype.ObservedTokenUsage
	}{
		{"no attempts", nil, all(knownZero)},
		{"only undispatched", []in{{false, pktype.TokenUsage{PromptTokens: 9}, fullPresence}}, all(knownZero)},
		{"complete zeros", []in{{true, pktype.TokenUsage{}, fullPresence}}, all(knownZero)},
		{"nothing reported", []in{{true, pktype.TokenUsage{PromptTokens: 7}, pktype.TokenUsagePresence{}}}, all(pktype.ObservedTokenCount{})},
		{"unknown value is dropped", []in{{true, pktype.TokenUsage{PromptTokens: 7, CompletionTokens: 2}, pktype.TokenUsagePresence{CompletionTokens: true}}},
			pktype.ObservedTokenUsage{CompletionTokens: pktype.ObservedTokenCount{Value: 2, Known: true, Complete: true}}},
		{"partial then full", []in{
			{true, pktype.TokenUsage{PromptTokens: 5, CompletionTokens: 2}, pktype.TokenUsagePresence{PromptTokens: true, CompletionTokens: true}},
			{true, pktype.TokenUsage{PromptTokens: 7, CompletionTokens: 3, TotalTokens: 10, CachedTokens: 1, ReasoningTokens: 4}, fullPresence},
		}, pktype.ObservedTokenUsage{
			PromptTokens:     cnt(12, true, true),
			CompletionTokens: cnt(5, true, true),
			TotalTokens:      cnt(10, true, false),
			CachedTokens:     cnt(1, true, false),
			ReasoningTokens:  cnt(4, true, false),
		}},
		{"full then nothing", []in{
			{true, pktype.TokenUsage{PromptTokens: 1, CompletionTokens: 1, TotalTokens: 2}, fullPresence},
			{true, pktype.TokenUsage{}, pktype.TokenUsagePresence{}},
		}, pktype.ObservedTokenUsage{
			PromptTokens:     cnt(1, true, false),
			CompletionTokens: cnt(1, true, false),
			TotalTokens:      cnt(2, true, false),
			CachedTokens:     cnt(0, true, false),
			ReasoningTokens:  cnt(0, true, false),
		}},
		{"undispatched does not spoil completeness", []in{
			{false, pktype.TokenUsage{}, pktype.TokenUsagePresence{}},
			{true, pktype.TokenUsage{PromptTokens: 2, CompletionTokens: 2, TotalTokens: 4}, fullPresence},
			{false, pktype.TokenUsage{PromptTokens: 100}, pktype.TokenUsagePresence{}},
		}, pktype.ObservedTokenUsage{
			PromptTokens:     cnt(2, true, true),
			CompletionTokens: cnt(2, true, true),
			TotalTokens:      cnt(4, true, true),
			CachedTokens:     knownZero,
			ReasoningTokens:  knownZero,
		}},
		{"values are not reconciled", []in{
			{true, pktype.TokenUsage{PromptTokens: 3, CompletionTokens: 4, TotalTokens: 100}, pktype.TokenUsagePresence{PromptTokens: true, CompletionTokens: true, TotalTokens: true}},
		}, pktype.ObservedTokenUsage{
			PromptTokens:     cnt(3, true, true),
			CompletionTokens: cnt(4, true, true),
			TotalTokens:      cnt(100, true, true),
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			var s sink
			r := New(nil, nil, s.observe)
			for i, a := range c.attempts {
				r.RecordAttempt(Attempt{Generation: 1, Attempt: uint64(i + 1), Dispatched: a.dispatched, Usage: a.u, Presence: a.p})
			}
			if got := r.ObservedUsage(); got != c.want {
				t.Fatalf("observed usage = %+v\nwant %+v", got, c.want)
			}
			r.Finish(pktype.ExecutionOutcomeSuccess, pktype.ExecutionFailureNone, false)
			if fin := s.evs[len(s.evs)-1]; fin.Usage != c.want {
				t.Fatalf("finished usage = %+v\nwant %+v", fin.Usage, c.want)
			}
		})
	}
}

func TestAttemptEventUsage(t *testing.T) {
	t.Parallel()
	var s sink
	r := New(nil, nil, s.observe)
	u := pktype.TokenUsage{PromptTokens: 3, CompletionTokens: 0, TotalTokens: 8, CachedTokens: 1}
	r.RecordAttempt(Attempt{Generation: 1, Attempt: 1, Dispatched: true, Usage: u, Presence: pktype.TokenUsagePresence{PromptTokens: true, CompletionTokens: true}})
	r.RecordAttempt(Attempt{Generation: 1, Attempt: 2, Usage: u, Presence: fullPresence}) // undispatched
	want := pktype.ObservedTokenUsage{PromptTokens: cnt(3, true, true), CompletionTokens: knownZero}
	if got := s.evs[0].Usage; got != want {
		t.Fatalf("dispatched attempt usage = %+v, want %+v", got, want)
	}
	if got := s.evs[1].Usage; got != all(pktype.ObservedTokenCount{}) {
		t.Fatalf("undispatched attempt usage = %+v, want unknown", got)
	}
}

func TestEventOrderAndFields(t *testing.T) {
	t.Parallel()
	clock := testkit.NewClock(time.Unix(1000, 0))
	var s sink
	r := New(clock.Now, nil, s.observe)
	clock.Advance(time.Second)
	r.Begin()
	id := Identity{PromptID: "p", PromptVersion: "1", ProfileID: "prof", BackendID: "b", Model: "m"}
	r.SetIdentity(id)
	r.RecordAttempt(Attempt{Generation: 1, Attempt: 1, Dispatched: true, CapacityWait: 2 * time.Second, Duration: 3 * time.Second,
		StatusCode: 503, Failure: pktype.ExecutionFailureProviderStatus})
	clock.Advance(time.Second)
	r.RecordDelay(1, 1, 5*time.Second)
	clock.Advance(time.Second)
	r.RecordAttempt(Attempt{Generation: 1, Attempt: 2, Dispatched: true, Duration: time.Second, StatusCode: 200,
		Usage: pktype.TokenUsage{PromptTokens: 4}, Presence: pktype.TokenUsagePresence{PromptTokens: true}})
	clock.Advance(time.Minute)
	r.Finish(pktype.ExecutionOutcomeSuccess, pktype.ExecutionFailureNone, false)
	r.Finish(pktype.ExecutionOutcomeError, pktype.ExecutionFailureOther, true) // ignored: Finish emits once

	kinds := []pktype.ExecutionEventKind{pktype.ExecutionStarted, pktype.ExecutionAttempt, pktype.ExecutionRetryDelay, pktype.ExecutionAttempt, pktype.ExecutionFinished}
	if len(s.evs) != len(kinds) {
		t.Fatalf("got %d events: %+v", len(s.evs), s.evs)
	}
	for i, ev := range s.evs {
		if ev.Kind != kinds[i] {
			t.Fatalf("event %d kind = %s, want %s", i, ev.Kind, kinds[i])
		}
		if ev.RunID == "" || ev.RunID != r.RunID() {
			t.Errorf("event %d RunID = %q", i, ev.RunID)
		}
		if i > 0 && ev.Time.Before(s.evs[i-1].Time) {
			t.Errorf("event %d time %v before %v", i, ev.Time, s.evs[i-1].Time)
		}
		if ev.Kind != pktype.ExecutionFinished && (ev.Attempts != 0 || ev.TransientRetries != 0 || ev.RepairCalls != 0) {
			t.Errorf("nonterminal event %d carries totals: %+v", i, ev)
		}
		if (i == 0) != (ev.PromptID == "" && ev.ProfileID == "" && ev.Model == "") {
			t.Errorf("event %d identity = %q %q %q", i, ev.PromptID, ev.ProfileID, ev.Model)
		}
	}
	st, a1, d, a2, fin := s.evs[0], s.evs[1], s.evs[2], s.evs[3], s.evs[4]
	if want := (pktype.ExecutionEvent{Kind: pktype.ExecutionStarted, RunID: st.RunID, Time: st.Time}); st != want {
		t.Errorf("started = %+v, want only kind, RunID and time", st)
	}
	if a1.Generation != 1 || a1.Attempt != 1 || !a1.Dispatched || a1.CapacityWait != 2*time.Second || a1.GenerationDuration != 3*time.Second ||
		a1.Duration != 5*time.Second || a1.Outcome != pktype.ExecutionOutcomeError || a1.Failure != pktype.ExecutionFailureProviderStatus || a1.StatusCode != 503 || a1.RetryDelay != 0 {
		t.Errorf("attempt 1 = %+v", a1)
	}
	if d.Generation != 1 || d.Attempt != 1 || d.RetryDelay != 5*time.Second || d.Duration != 5*time.Second || d.Dispatched ||
		d.Outcome != pktype.ExecutionOutcomeNone || d.CapacityWait != 0 || d.GenerationDuration != 0 || d.Usage != (pktype.ObservedTokenUsage{}) {
		t.Errorf("retry delay = %+v", d)
	}
	if a2.Attempt != 2 || a2.Outcome != pktype.ExecutionOutcomeSuccess || a2.Failure != pktype.ExecutionFailureNone || a2.Usage.PromptTokens != (cnt(4, true, true)) {
		t.Errorf("attempt 2 = %+v", a2)
	}
	if fin.Generation != 0 || fin.Attempt != 0 || fin.Dispatched || fin.StatusCode != 0 ||
		fin.Outcome != pktype.ExecutionOutcomeSuccess || fin.Failure != pktype.ExecutionFailureNone || fin.RetriesExhausted ||
		fin.Attempts != 2 || fin.TransientRetries != 1 || fin.RepairCalls != 0 ||
		fin.CapacityWait != 2*time.Second || fin.GenerationDuration != 4*time.Second || fin.RetryDelay != 5*time.Second {
		t.Errorf("finished = %+v", fin)
	}
	if want := time.Minute + 3*time.Second; fin.Duration != want || !fin.Time.Equal(r.Start().Add(want)) {
		t.Errorf("finished Duration = %v at %v, want wall time since start %v", fin.Duration, fin.Time, want)
	}
	if !st.Time.Equal(r.Start().Add(time.Second)) || !a2.Time.Equal(r.Start().Add(3*time.Second)) {
		t.Errorf("event times %v %v, start %v", st.Time, a2.Time, r.Start())
	}
	if fin.Usage.PromptTokens != (cnt(4, true, false)) || fin.Usage.TotalTokens != (pktype.ObservedTokenCount{}) {
		t.Errorf("finished usage = %+v", fin.Usage)
	}
}

func TestFinishFlagsAndOnce(t *testing.T) {
	t.Parallel()
	var s sink
	r := New(nil, nil, s.observe)
	r.Finish(pktype.ExecutionOutcomeError, pktype.ExecutionFailureProviderStatus, true)
	r.Finish(pktype.ExecutionOutcomeSuccess, pktype.ExecutionFailureNone, false)
	r.RecordAttempt(Attempt{Generation: 1, Attempt: 1, Dispatched: true}) // after finish: still counted
	r.Finish(pktype.ExecutionOutcomeSuccess, pktype.ExecutionFailureNone, false)
	fins := 0
	for _, ev := range s.evs {
		if ev.Kind == pktype.ExecutionFinished {
			fins++
			if ev.Outcome != pktype.ExecutionOutcomeError || ev.Failure != pktype.ExecutionFailureProviderStatus || !ev.RetriesExhausted {
				t.Errorf("finished = %+v", ev)
			}
		}
	}
	if fins != 1 {
		t.Fatalf("%d finished events, want 1", fins)
	}
}

func TestObserverPanicPropagates(t *testing.T) {
	t.Parallel()
	calls := 0
	r := New(nil, nil, func(ev pktype.ExecutionEvent) {
		calls++
		if ev.Kind == pktype.ExecutionAttempt {
			panic("observer boom")
		}
	})
	r.Begin()
	got := func() (p any) {
		defer func() { p = recover() }()
		r.RecordAttempt(Attempt{Generation: 1, Attempt: 1, Dispatched: true})
		return nil
	}()
	if got != "observer boom" {
		t.Fatalf("recovered %v", got)
	}
	if calls != 2 {
		t.Fatalf("observer called %d times", calls)
	}
	// The attempt was counted before delivery.
	if r.Totals().Attempts != 1 {
		t.Fatalf("attempts = %d", r.Totals().Attempts)
	}
}

func TestNilObserverStillCounts(t *testing.T) {
	t.Parallel()
	r := New(nil, nil, nil)
	r.Begin()
	r.SetIdentity(Identity{PromptID: "p"})
	r.RecordAttempt(Attempt{Generation: 1, Attempt: 1, Dispatched: true, Usage: pktype.TokenUsage{PromptTokens: 2}, Presence: pktype.TokenUsagePresence{PromptTokens: true}})
	r.RecordAttempt(Attempt{Generation: 1, Attempt: 2, Dispatched: true, Duration: time.Second})
	r.RecordDelay(1, 1, time.Second)
	r.Finish(pktype.ExecutionOutcomeSuccess, pktype.ExecutionFailureNone, false)
	got := r.Totals()
	if got.Attempts != 2 || got.TransientRetries != 1 || got.Usage.PromptTokens != 2 || got.Generation != time.Second || got.RetryDelay != time.Second {
		t.Fatalf("totals = %+v", got)
	}
	if r.ObservedUsage().PromptTokens != (cnt(2, true, false)) {
		t.Fatalf("observed = %+v", r.ObservedUsage())
	}
	if r.RunID() == "" {
		t.Fatal("no run ID without an observer")
	}
}

func TestNilRecorderIsSafe(t *testing.T) {
	t.Parallel()
	var r *Recorder
	r.SetIdentity(Identity{PromptID: "p"})
	r.Begin()
	r.RecordAttempt(Attempt{Dispatched: true})
	r.RecordDelay(1, 1, time.Second)
	r.Finish(pktype.ExecutionOutcomeSuccess, pktype.ExecutionFailureNone, false)
}

func TestRunIDs(t *testing.T) {
	t.Parallel()
	a, b := New(time.Now, nil, nil), New(time.Now, nil, nil)
	if a.RunID() == "" || a.RunID() == b.RunID() {
		t.Fatalf("run IDs %q %q", a.RunID(), b.RunID())
	}
	failing := New(time.Now, func() (string, error) { return "", errors.New("no entropy") }, nil)
	if failing.RunID() != "" {
		t.Fatalf("RunID = %q after the ID source failed, want empty", failing.RunID())
	}
}
