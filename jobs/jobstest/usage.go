package jobstest

import (
	"encoding/json"
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/promptkit/promptkit/jobs"
	"github.com/promptkit/promptkit/pktype"
)

// attemptEvent is a dispatched call's event data as the worker writes it:
// prompt and completion counts when p >= 0, with the cached and the
// reasoning count each when it is >= 0, and a cost when cost >= 0.
func attemptEvent(model, backend string, p, c, cached, reasoning int, cost float64) json.RawMessage {
	e := jobs.AttemptEvent{Dispatched: true, Generation: 1, Attempt: 1, Outcome: "success", Model: model, Backend: backend}
	if p >= 0 {
		e.Usage = jobs.AttemptUsage{
			TokenUsage: pktype.TokenUsage{PromptTokens: p, CompletionTokens: c, CachedTokens: max(cached, 0), ReasoningTokens: max(reasoning, 0)},
			Known:      pktype.TokenUsagePresence{PromptTokens: true, CompletionTokens: true, CachedTokens: cached >= 0, ReasoningTokens: reasoning >= 0}}
	}
	if cost >= 0 {
		e.CostUSD = &cost
	}
	return e.JSON()
}

// usage reads the ledger, failing the test on an error.
func (f *fixture) usage(p jobs.UsageParams) []jobs.UsageBucket {
	f.t.Helper()
	got, err := f.store.Usage(f.ctx, p)
	if err != nil {
		f.t.Fatalf("Usage(%+v): %v", p, err)
	}
	return got
}

// expectUsage compares buckets, costs within a rounding error.
func expectUsage(t *testing.T, what string, got, want []jobs.UsageBucket) {
	t.Helper()
	same := len(got) == len(want)
	for i := 0; same && i < len(got); i++ {
		g, w := got[i], want[i]
		same = math.Abs(g.CostUSD-w.CostUSD) < 1e-9 && g.Day.Equal(w.Day)
		g.CostUSD, w.CostUSD, g.Day, w.Day = 0, 0, time.Time{}, time.Time{}
		same = same && g == w
	}
	if !same {
		t.Errorf("%s:\n got %s\nwant %s", what, fmtBuckets(got), fmtBuckets(want))
	}
}

func fmtBuckets(bs []jobs.UsageBucket) string {
	s := ""
	for _, b := range bs {
		s += fmt.Sprintf("\n  %+v", b)
	}
	return s
}

// The ledger gets one row per dispatched call, with the attempt event that
// reports it and only when that write takes effect, plus one of unknown
// usage and cost for the call a lost worker may have made; Usage sums it
// by group and filter, counting unknowns apart: a call whose cached or
// reasoning count is unknown counts in UnknownCached or UnknownReasoning,
// whether or not its other counts are known.
func testUsageLedger(t *testing.T, h Harness) {
	f := setup(t, h)
	day1 := T0.Truncate(24 * time.Hour)
	a := f.enqueue(jobs.EnqueueParams{OrgID: "org-1", CreatedBy: "alice", TokenID: "tok-a"})
	f.claimID("w", a.JobID)
	call := attemptEvent("m1", "b1", 100, 10, 20, 4, 0.5)
	wantErr(t, f.store.AppendAttempt(f.ctx, jobs.AttemptParams{JobID: a.JobID, Worker: "other", Data: call}), jobs.ErrNotClaimed,
		"AppendAttempt by another worker")
	_, err := f.store.Succeed(f.ctx, jobs.SucceedParams{JobID: a.JobID, Worker: "other", Answer: jobs.Answer{Output: "x"},
		AttemptEvents: []json.RawMessage{call}})
	wantErr(t, err, jobs.ErrNotClaimed, "Succeed by another worker")
	if got := f.usage(jobs.UsageParams{}); len(got) != 0 {
		t.Fatalf("ledger after refused writes: %s", fmtBuckets(got))
	}
	if err := f.store.AppendAttempt(f.ctx, jobs.AttemptParams{JobID: a.JobID, Worker: "w", Data: call}); err != nil {
		t.Fatal(err)
	}
	// Not dispatched: no call, no row.
	idle := (&jobs.AttemptEvent{Generation: 1, Attempt: 2, Outcome: "error", Failure: "canceled", Model: "m1"}).JSON()
	if err := f.store.AppendAttempt(f.ctx, jobs.AttemptParams{JobID: a.JobID, Worker: "w", Data: idle}); err != nil {
		t.Fatal(err)
	}
	expectUsage(t, "after one appended call", f.usage(jobs.UsageParams{}), []jobs.UsageBucket{
		{Requests: 1, InputTokens: 100, OutputTokens: 10, CachedInputTokens: 20, ReasoningTokens: 4, CostUSD: 0.5}})
	// The last call's usage went unreported: unknown usage and cost.
	if _, err := f.store.Succeed(f.ctx, jobs.SucceedParams{JobID: a.JobID, Worker: "w", Answer: jobs.Answer{Output: "x"},
		AttemptEvents: []json.RawMessage{attemptEvent("m1", "b1", -1, 0, -1, -1, -1)}}); err != nil {
		t.Fatal(err)
	}

	f.advance(24 * time.Hour)
	b := f.enqueue(jobs.EnqueueParams{OrgID: "org-1", CreatedBy: "bob", TokenID: "tok-b"})
	f.claimID("w", b.JobID)
	if _, err := f.store.Fail(f.ctx, jobs.FailParams{JobID: b.JobID, Worker: "w", Kind: jobs.KindProvider4xx,
		AttemptEvents: []json.RawMessage{attemptEvent("m2", "b2", 5, 5, -1, 0, 0.25)}}); err != nil {
		t.Fatal(err)
	}
	c := f.enqueue(jobs.EnqueueParams{OrgID: "org-2", CreatedBy: "carol"})
	f.claimID("w", c.JobID)
	if _, err := f.store.Requeue(f.ctx, jobs.RequeueParams{JobID: c.JobID, Worker: "w", Kind: jobs.KindRateLimit,
		AttemptEvents: []json.RawMessage{attemptEvent("m1", "b1", 7, 3, 0, -1, 0.125)}}); err != nil {
		t.Fatal(err)
	}
	f.claimID("lost", c.JobID)
	f.advance(5*time.Minute + time.Microsecond)
	if r, err := f.store.Reclaim(f.ctx, defaultReclaim); err != nil || len(r.Requeued) != 1 {
		t.Fatalf("Reclaim = %+v, %v", r, err)
	}
	day2 := day1.Add(24 * time.Hour)

	// The calls: a's first (all counts known) and last (usage unknown),
	// b's (cached count unreported, reasoning a known 0), c's (reasoning
	// unreported, cached a known 0) and c's lost one (all unknown).
	firstTwo := jobs.UsageBucket{Requests: 2, InputTokens: 100, OutputTokens: 10, CachedInputTokens: 20, ReasoningTokens: 4,
		UnknownUsage: 1, UnknownCached: 1, UnknownReasoning: 1, CostUSD: 0.5, UnknownCost: 1}
	bs := jobs.UsageBucket{Requests: 1, InputTokens: 5, OutputTokens: 5, UnknownCached: 1, CostUSD: 0.25}
	expectUsage(t, "everything", f.usage(jobs.UsageParams{}), []jobs.UsageBucket{{Requests: 5, InputTokens: 112,
		OutputTokens: 18, CachedInputTokens: 20, ReasoningTokens: 4, UnknownUsage: 2, UnknownCached: 3, UnknownReasoning: 3,
		CostUSD: 0.875, UnknownCost: 2}})
	expectUsage(t, "by org", f.usage(jobs.UsageParams{GroupBy: []jobs.UsageGroup{jobs.UsageByOrg}}), []jobs.UsageBucket{
		{OrgID: "org-1", Requests: 3, InputTokens: 105, OutputTokens: 15, CachedInputTokens: 20, ReasoningTokens: 4, UnknownUsage: 1,
			UnknownCached: 2, UnknownReasoning: 1, CostUSD: 0.75, UnknownCost: 1},
		{OrgID: "org-2", Requests: 2, InputTokens: 7, OutputTokens: 3, UnknownUsage: 1, UnknownCached: 1, UnknownReasoning: 2,
			CostUSD: 0.125, UnknownCost: 1},
	})
	tokA, tokB := firstTwo, bs
	tokA.TokenID, tokA.UserID, tokB.TokenID, tokB.UserID = "tok-a", "alice", "tok-b", "bob"
	expectUsage(t, "org-1 by token and user", f.usage(jobs.UsageParams{OrgID: "org-1",
		GroupBy: []jobs.UsageGroup{jobs.UsageByToken, jobs.UsageByUser}}), []jobs.UsageBucket{tokA, tokB})
	// The lost call's model and backend are unknown: "".
	first, second := firstTwo, bs
	first.Day, first.Model, first.Backend = day1, "m1", "b1"
	second.Day, second.Model, second.Backend = day2, "m2", "b2"
	expectUsage(t, "by day, model and backend", f.usage(jobs.UsageParams{
		GroupBy: []jobs.UsageGroup{jobs.UsageByModel, jobs.UsageByDay, jobs.UsageByBackend}}), []jobs.UsageBucket{
		first,
		{Day: day2, Requests: 1, UnknownUsage: 1, UnknownCached: 1, UnknownReasoning: 1, UnknownCost: 1},
		{Day: day2, Model: "m1", Backend: "b1", Requests: 1, InputTokens: 7, OutputTokens: 3, UnknownReasoning: 1, CostUSD: 0.125},
		second,
	})
	for _, c := range []struct {
		name string
		p    jobs.UsageParams
		want []jobs.UsageBucket
	}{
		{"one token", jobs.UsageParams{TokenID: "tok-b"}, []jobs.UsageBucket{bs}},
		{"one token in another org", jobs.UsageParams{OrgID: "org-2", TokenID: "tok-b"}, nil},
		{"one user", jobs.UsageParams{OrgID: "org-2", UserID: "carol"}, []jobs.UsageBucket{{Requests: 2, InputTokens: 7, OutputTokens: 3,
			UnknownUsage: 1, UnknownCached: 1, UnknownReasoning: 2, CostUSD: 0.125, UnknownCost: 1}}},
		{"one model", jobs.UsageParams{Model: "m1"}, []jobs.UsageBucket{{Requests: 3, InputTokens: 107, OutputTokens: 13, CachedInputTokens: 20,
			ReasoningTokens: 4, UnknownUsage: 1, UnknownCached: 1, UnknownReasoning: 2, CostUSD: 0.625, UnknownCost: 1}}},
		{"one backend", jobs.UsageParams{Backend: "b2"}, []jobs.UsageBucket{bs}},
		{"from the second day", jobs.UsageParams{From: day2}, []jobs.UsageBucket{{Requests: 3, InputTokens: 12, OutputTokens: 8,
			UnknownUsage: 1, UnknownCached: 2, UnknownReasoning: 2, CostUSD: 0.375, UnknownCost: 1}}},
		{"before the second day", jobs.UsageParams{To: day2}, []jobs.UsageBucket{firstTwo}},
		// To is exclusive: the first call was at T0.
		{"up to the first call", jobs.UsageParams{To: T0}, nil},
		{"nothing matches", jobs.UsageParams{Model: "m3", GroupBy: []jobs.UsageGroup{jobs.UsageByOrg}}, nil},
	} {
		expectUsage(t, c.name, f.usage(c.p), c.want)
	}
	for _, p := range []jobs.UsageParams{
		{GroupBy: []jobs.UsageGroup{"week"}},
		{GroupBy: []jobs.UsageGroup{jobs.UsageByOrg, jobs.UsageByOrg}},
		{From: day2, To: day1},
	} {
		_, err := f.store.Usage(f.ctx, p)
		wantErr(t, err, jobs.ErrInvalid, fmt.Sprintf("Usage(%+v)", p))
	}
}

// Every way in keeps a job's token, a retry keeps it too, and a batch
// keeps its creator's.
func testUsageTokenOnJobs(t *testing.T, h Harness) {
	f := setup(t, h)
	e := f.enqueue(jobs.EnqueueParams{OrgID: "org-1", TokenID: "tok-1"})
	if j := f.job(e.JobID); j.TokenID != "tok-1" {
		t.Errorf("enqueued job's token = %q", j.TokenID)
	}
	batch, err := f.store.EnqueueBatch(f.ctx, []jobs.EnqueueParams{
		{OrgID: "org-1", CreatedBy: "u", Text: "a", TokenID: "tok-2"},
		{OrgID: "org-1", CreatedBy: "u", Text: "b"},
	})
	if err != nil {
		t.Fatal(err)
	}
	if a, b := f.job(batch[0].JobID), f.job(batch[1].JobID); a.TokenID != "tok-2" || b.TokenID != "" {
		t.Errorf("batch jobs' tokens = %q, %q", a.TokenID, b.TokenID)
	}
	now, err := f.store.Enqueue(f.ctx, jobs.EnqueueParams{OrgID: "org-1", CreatedBy: "u", Text: "c", TokenID: "tok-3", ClaimAs: "w"})
	if err != nil {
		t.Fatal(err)
	}
	if now.Claimed == nil || now.Claimed.TokenID != "tok-3" {
		t.Fatalf("claimed as it was enqueued: %+v", now.Claimed)
	}
	if _, err := f.store.Fail(f.ctx, jobs.FailParams{JobID: now.JobID, Worker: "w", Kind: jobs.KindParse}); err != nil {
		t.Fatal(err)
	}
	r, err := f.store.Retry(f.ctx, jobs.RetryParams{JobID: now.JobID})
	if err != nil {
		t.Fatal(err)
	}
	if r.TokenID != "tok-3" || f.job(r.ID).TokenID != "tok-3" {
		t.Errorf("retry's token = %q", r.TokenID)
	}
	// A batch keeps its creator's token for its lines' jobs.
	in := f.newFile("org-1", "in.jsonl", "{}\n")
	b, err := f.store.CreateBatch(f.ctx, jobs.CreateBatchParams{OrgID: "org-1", CreatedBy: "u", TokenID: "tok-4", InputFileID: in.ID,
		Endpoint: "/v1/chat/completions", CompletionWindow: "24h", Window: 24 * time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if b.TokenID != "tok-4" || f.batch(b.ID).TokenID != "tok-4" {
		t.Errorf("batch's token = %q", b.TokenID)
	}
}

// Cancelling a running job counts the call its worker may have had out,
// which its refused settling write can no longer report, as a lost one;
// cancelling a queued job counts nothing.
func testUsageCancel(t *testing.T, h Harness) {
	f := setup(t, h)
	run := f.enqueue(jobs.EnqueueParams{OrgID: "org-1", TokenID: "tok"})
	f.claimID("w", run.JobID)
	queued := f.enqueue(jobs.EnqueueParams{OrgID: "org-1", TokenID: "tok"})
	for _, id := range []string{run.JobID, queued.JobID} {
		if _, err := f.store.Cancel(f.ctx, jobs.CancelParams{JobID: id}); err != nil {
			t.Fatal(err)
		}
	}
	_, err := f.store.Succeed(f.ctx, jobs.SucceedParams{JobID: run.JobID, Worker: "w", Answer: jobs.Answer{Output: "x"},
		AttemptEvents: []json.RawMessage{attemptEvent("m", "b", 1, 1, 0, 0, 1)}})
	wantErr(t, err, jobs.ErrNotClaimed, "Succeed after Cancel")
	expectUsage(t, "after cancels", f.usage(jobs.UsageParams{TokenID: "tok", GroupBy: []jobs.UsageGroup{jobs.UsageByOrg}}),
		[]jobs.UsageBucket{{OrgID: "org-1", Requests: 1, UnknownUsage: 1, UnknownCached: 1, UnknownReasoning: 1, UnknownCost: 1}})
	if c := jobs.JobCost(f.events(run.JobID)); c.Known {
		t.Errorf("cancelled running job's cost %+v, want unknown", c)
	}
	if c := jobs.JobCost(f.events(queued.JobID)); c != (pktype.Cost{Known: true}) {
		t.Errorf("cancelled queued job's cost %+v, want a known zero", c)
	}
}

// testRecordCalls checks RecordCalls: calls made for no job (the front
// door's embeddings) join the ledger as their org, user and token's,
// counted by Usage like a job's; what Normalize refuses stores nothing.
func testRecordCalls(t *testing.T, h Harness) {
	f := setup(t, h)
	in, cost := int64(40), 0.25
	p := jobs.RecordCallsParams{OrgID: "org-1", UserID: "alice", TokenID: "tok-a", Calls: []jobs.UsageCall{
		{Model: "embed", Backend: "b1", InputTokens: &in, OutputTokens: new(int64(0)), CachedInputTokens: new(int64(8)),
			ReasoningTokens: new(int64(0)), CostUSD: &cost},
		{Model: "embed", Backend: "b2"}, // usage and cost unknown
	}}
	for name, bad := range map[string]jobs.RecordCallsParams{
		"no org":             {UserID: "alice", Calls: p.Calls},
		"no user":            {OrgID: "org-1", Calls: p.Calls},
		"negative cost":      {OrgID: "org-1", UserID: "alice", Calls: []jobs.UsageCall{{Model: "m", CostUSD: new(-1.0)}}},
		"negative reasoning": {OrgID: "org-1", UserID: "alice", Calls: []jobs.UsageCall{{Model: "m", ReasoningTokens: new(int64(-1))}}},
		"NUL in model":       {OrgID: "org-1", UserID: "alice", Calls: []jobs.UsageCall{{Model: "m\x00"}}},
		"bad status":         {OrgID: "org-1", UserID: "alice", Calls: []jobs.UsageCall{{Model: "m", StatusCode: -1}}},
	} {
		wantErr(t, f.store.RecordCalls(f.ctx, bad), jobs.ErrInvalid, "RecordCalls "+name)
	}
	if err := f.store.RecordCalls(f.ctx, jobs.RecordCallsParams{OrgID: "org-1", UserID: "alice"}); err != nil {
		t.Fatalf("RecordCalls without calls: %v", err)
	}
	if got := f.usage(jobs.UsageParams{}); len(got) != 0 {
		t.Fatalf("ledger after refused and empty calls: %s", fmtBuckets(got))
	}
	if err := f.store.RecordCalls(f.ctx, p); err != nil {
		t.Fatalf("RecordCalls: %v", err)
	}
	expectUsage(t, "the token's calls", f.usage(jobs.UsageParams{TokenID: "tok-a", GroupBy: []jobs.UsageGroup{jobs.UsageByOrg, jobs.UsageByUser, jobs.UsageByBackend}}),
		[]jobs.UsageBucket{
			{OrgID: "org-1", UserID: "alice", Backend: "b1", Requests: 1, InputTokens: 40, CachedInputTokens: 8, CostUSD: 0.25},
			{OrgID: "org-1", UserID: "alice", Backend: "b2", Requests: 1, UnknownUsage: 1, UnknownCached: 1, UnknownReasoning: 1, UnknownCost: 1},
		})
	if got := f.usage(jobs.UsageParams{OrgID: "org-2"}); len(got) != 0 {
		t.Errorf("another org's usage: %s", fmtBuckets(got))
	}
}

// resultEvent is a dispatched call's event data with its result: an HTTP
// status (0: none), and for a failure its kind; usage and cost unknown.
func resultEvent(backend string, status int, failure pktype.ExecutionFailureKind) json.RawMessage {
	e := jobs.AttemptEvent{Dispatched: true, Generation: 1, Attempt: 1, Outcome: string(pktype.ExecutionOutcomeSuccess),
		Model: "m", Backend: backend, StatusCode: status, Failure: string(failure)}
	if failure != pktype.ExecutionFailureNone {
		e.Outcome = string(pktype.ExecutionOutcomeError)
	}
	return e.JSON()
}

// backendActivity reads the ledger's activity, failing the test on an
// error.
func (f *fixture) backendActivity(since time.Time) []jobs.BackendActivity {
	f.t.Helper()
	got, err := f.store.BackendActivity(f.ctx, since)
	if err != nil {
		f.t.Fatalf("BackendActivity(%v): %v", since, err)
	}
	return got
}

// expectActivity compares activities, costs within a rounding error and
// times by Equal.
func expectActivity(t *testing.T, what string, got, want []jobs.BackendActivity) {
	t.Helper()
	same := len(got) == len(want)
	for i := 0; same && i < len(got); i++ {
		g, w := got[i], want[i]
		same = math.Abs(g.CostUSD-w.CostUSD) < 1e-9 && g.LastRateLimitedAt.Equal(w.LastRateLimitedAt) && g.LastErrorAt.Equal(w.LastErrorAt)
		g.CostUSD, w.CostUSD = 0, 0
		g.LastRateLimitedAt, w.LastRateLimitedAt, g.LastErrorAt, w.LastErrorAt = time.Time{}, time.Time{}, time.Time{}, time.Time{}
		same = same && g == w
	}
	if !same {
		s := ""
		for _, bs := range [][]jobs.BackendActivity{got, want} {
			s += "\n"
			for _, a := range bs {
				s += fmt.Sprintf("\n  %+v", a)
			}
		}
		t.Errorf("%s: got, then want:%s", what, s)
	}
}

// BackendActivity counts each backend's calls since a time by result: a
// 429 is rate limited, any other failure (a 5xx, a transport failure, a
// lost call) an error, with the times of the latest of each; a call of
// unknown result counts only as a call.
func testBackendActivity(t *testing.T, h Harness) {
	f := setup(t, h)
	if got := f.backendActivity(time.Time{}); len(got) != 0 {
		t.Fatalf("empty ledger's activity: %+v", got)
	}
	a := f.enqueue(jobs.EnqueueParams{OrgID: "org-1"})
	f.claimID("w", a.JobID)
	appendCall := func(data json.RawMessage) {
		t.Helper()
		if err := f.store.AppendAttempt(f.ctx, jobs.AttemptParams{JobID: a.JobID, Worker: "w", Data: data}); err != nil {
			t.Fatal(err)
		}
	}
	t0 := f.now()
	ok, cost := jobs.AttemptEvent{Dispatched: true, Generation: 1, Attempt: 1, Outcome: "success", StatusCode: 200,
		Model: "m", Backend: "b1", Usage: jobs.AttemptUsage{TokenUsage: pktype.TokenUsage{PromptTokens: 10, CompletionTokens: 5},
			Known: pktype.TokenUsagePresence{PromptTokens: true, CompletionTokens: true}}}, 0.5
	ok.CostUSD = &cost
	appendCall(ok.JSON())
	t1 := f.advance(time.Second)
	appendCall(resultEvent("b1", 429, pktype.ExecutionFailureProviderStatus))
	t2 := f.advance(time.Second)
	appendCall(resultEvent("b2", 503, pktype.ExecutionFailureProviderStatus))
	t3 := f.advance(time.Second)
	appendCall(resultEvent("b2", 0, pktype.ExecutionFailureTransport))
	// Not dispatched: no call.
	appendCall((&jobs.AttemptEvent{Generation: 1, Attempt: 3, Outcome: "error", Failure: "canceled", Backend: "b2"}).JSON())
	t4 := f.advance(time.Second)
	if _, err := f.store.Succeed(f.ctx, jobs.SucceedParams{JobID: a.JobID, Worker: "w", Answer: jobs.Answer{Output: "x"},
		AttemptEvents: []json.RawMessage{resultEvent("b2", 200, pktype.ExecutionFailureNone)}}); err != nil {
		t.Fatal(err)
	}
	// A lost worker's call: an error of unknown backend.
	c := f.enqueue(jobs.EnqueueParams{OrgID: "org-2"})
	f.claimID("lost", c.JobID)
	t5 := f.advance(5*time.Minute + time.Microsecond)
	if r, err := f.store.Reclaim(f.ctx, defaultReclaim); err != nil || len(r.Requeued) != 1 {
		t.Fatalf("Reclaim = %+v, %v", r, err)
	}
	t6 := f.advance(time.Second)
	// The front door's calls carry their results too; one of unknown
	// result (as rows written before the ledger kept results) is only a
	// call.
	in, embedCost := int64(40), 0.25
	if err := f.store.RecordCalls(f.ctx, jobs.RecordCallsParams{OrgID: "org-1", UserID: "alice", Calls: []jobs.UsageCall{
		{Model: "embed", Backend: "b1", StatusCode: 429, Outcome: "error", Failure: "provider_status"},
		{Model: "embed", Backend: "b3", InputTokens: &in, OutputTokens: new(int64(0)), CostUSD: &embedCost},
	}}); err != nil {
		t.Fatal(err)
	}
	// A cancelled running job's call is lost too.
	f.claimID("w", c.JobID)
	if _, err := f.store.Cancel(f.ctx, jobs.CancelParams{JobID: c.JobID}); err != nil {
		t.Fatal(err)
	}

	lost := jobs.BackendActivity{Backend: "", Calls: 2, Errors: 2, LastErrorAt: t6}
	b1 := jobs.BackendActivity{Backend: "b1", Calls: 3, Succeeded: 1, RateLimited: 2, LastRateLimitedAt: t6,
		InputTokens: 10, OutputTokens: 5, CostUSD: 0.5}
	b2 := jobs.BackendActivity{Backend: "b2", Calls: 3, Succeeded: 1, Errors: 2, LastErrorAt: t3}
	b3 := jobs.BackendActivity{Backend: "b3", Calls: 1, InputTokens: 40, CostUSD: 0.25}
	expectActivity(t, "since the start", f.backendActivity(t0), []jobs.BackendActivity{lost, b1, b2, b3})
	expectActivity(t, "since the zero time", f.backendActivity(time.Time{}), []jobs.BackendActivity{lost, b1, b2, b3})
	expectActivity(t, "since the first 429", f.backendActivity(t1), []jobs.BackendActivity{lost,
		{Backend: "b1", Calls: 2, RateLimited: 2, LastRateLimitedAt: t6}, b2, b3})
	// Since is inclusive: the 503 at t2 counts, the 429 at t1 does not.
	expectActivity(t, "since the 503", f.backendActivity(t2), []jobs.BackendActivity{lost,
		{Backend: "b1", Calls: 1, RateLimited: 1, LastRateLimitedAt: t6}, b2, b3})
	expectActivity(t, "after the success", f.backendActivity(t4.Add(time.Microsecond)), []jobs.BackendActivity{lost,
		{Backend: "b1", Calls: 1, RateLimited: 1, LastRateLimitedAt: t6}, b3})
	expectActivity(t, "since the reclaim", f.backendActivity(t5), []jobs.BackendActivity{lost,
		{Backend: "b1", Calls: 1, RateLimited: 1, LastRateLimitedAt: t6}, b3})
	expectActivity(t, "since the last calls", f.backendActivity(t6), []jobs.BackendActivity{
		{Backend: "", Calls: 1, Errors: 1, LastErrorAt: t6},
		{Backend: "b1", Calls: 1, RateLimited: 1, LastRateLimitedAt: t6}, b3})
	expectActivity(t, "after every call", f.backendActivity(t6.Add(time.Microsecond)), nil)
}
