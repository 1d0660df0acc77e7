package jobstest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/promptkit/promptkit/jobs"
)

func testEnqueueAndGet(t *testing.T, h Harness) {
	f := setup(t, h)
	now := f.now()
	e := f.enqueue(jobs.EnqueueParams{
		OrgID: "org-a", CreatedBy: "alice", Text: "hello", Profile: "fast", CorrelationID: "corr-1",
		Priority: ptr(20), MaxAttempts: 5, ExecutionOptions: jobs.ExecutionOptions{Model: "m1", Depth: ptr(2)},
		IdempotencyKey: "key-1",
	})
	if e.PromptID == "" || e.JobID == "" || e.PromptID == e.JobID || e.State != jobs.Queued || e.Existing {
		t.Fatalf("Enqueue = %+v", e)
	}

	p, err := f.store.GetPrompt(f.ctx, "org-a", e.PromptID)
	if err != nil {
		t.Fatalf("GetPrompt: %v", err)
	}
	if p.ID != e.PromptID || p.OrgID != "org-a" || p.CreatedBy != "alice" || p.Text != "hello" ||
		p.Profile != "fast" || p.CorrelationID != "corr-1" || p.IdempotencyKey != "key-1" || p.ParentID != "" {
		t.Errorf("GetPrompt = %+v", p)
	}
	sameTime(t, "prompt CreatedAt", p.CreatedAt, now)

	j, err := f.store.GetJob(f.ctx, "org-a", e.JobID)
	if err != nil {
		t.Fatalf("GetJob: %v", err)
	}
	if j.ID != e.JobID || j.PromptID != e.PromptID || j.State != jobs.Queued || j.Priority != 20 ||
		j.Attempt != 1 || j.MaxAttempts != 5 || j.OrgID != "org-a" || j.CreatedBy != "alice" ||
		j.WorkerClaim != "" || j.ResponseID != "" || j.ErrorKind != "" || j.ErrorMessage != "" ||
		j.Supersedes != "" || j.DependsOn != "" {
		t.Errorf("GetJob = %+v", j)
	}
	if !jsonEqual(j.ExecutionOptions.JSON(), []byte(`{"depth":2,"model":"m1"}`)) {
		t.Errorf("ExecutionOptions = %s", j.ExecutionOptions.JSON())
	}
	for name, tm := range map[string]time.Time{"ClaimedAt": j.ClaimedAt, "StartedAt": j.StartedAt,
		"HeartbeatAt": j.HeartbeatAt, "FinishedAt": j.FinishedAt} {
		if !tm.IsZero() {
			t.Errorf("queued job %s = %v, want zero", name, tm)
		}
	}
	sameTime(t, "CreatedAt", j.CreatedAt, now)
	sameTime(t, "UpdatedAt", j.UpdatedAt, now)
	sameTime(t, "AvailableAt", j.AvailableAt, now)
	f.expectTransition(e.JobID, "", jobs.Queued)
	f.expectData(f.lastTransition(e.JobID), jobs.TransitionData{}, "enqueue")

	// Org scoping: empty org means any org; another org sees nothing.
	if _, err := f.store.GetPrompt(f.ctx, "", e.PromptID); err != nil {
		t.Errorf("GetPrompt any org: %v", err)
	}
	if _, err := f.store.GetJob(f.ctx, "", e.JobID); err != nil {
		t.Errorf("GetJob any org: %v", err)
	}
	_, err = f.store.GetPrompt(f.ctx, "org-b", e.PromptID)
	wantErr(t, err, jobs.ErrNotFound, "GetPrompt other org")
	_, err = f.store.GetJob(f.ctx, "org-b", e.JobID)
	wantErr(t, err, jobs.ErrNotFound, "GetJob other org")
	_, err = f.store.GetPrompt(f.ctx, "", jobs.NewID())
	wantErr(t, err, jobs.ErrNotFound, "GetPrompt unknown")
	_, err = f.store.GetJob(f.ctx, "", jobs.NewID())
	wantErr(t, err, jobs.ErrNotFound, "GetJob unknown")
	_, err = f.store.GetResponse(f.ctx, "", jobs.NewID())
	wantErr(t, err, jobs.ErrNotFound, "GetResponse unknown")
	_, err = f.store.PromptJobs(f.ctx, "", jobs.NewID())
	wantErr(t, err, jobs.ErrNotFound, "PromptJobs unknown")
	_, err = f.store.PromptJobs(f.ctx, "org-b", e.PromptID)
	wantErr(t, err, jobs.ErrNotFound, "PromptJobs other org")

	// Defaults.
	d := f.enqueue(jobs.EnqueueParams{OrgID: "org-a"})
	dj := f.job(d.JobID)
	if dj.Priority != 50 || dj.MaxAttempts != 3 || !jsonEqual(dj.ExecutionOptions.JSON(), []byte(`{}`)) {
		t.Errorf("defaults: priority %d, max_attempts %d, options %s; want 50, 3, {}", dj.Priority, dj.MaxAttempts, dj.ExecutionOptions.JSON())
	}

	// A named prompt with inputs, continuing the first prompt's thread and
	// depending on its job.
	later := f.advance(time.Second)
	n := f.enqueue(jobs.EnqueueParams{OrgID: "org-a", PromptRef: "summarize@2", Inputs: json.RawMessage(`{"doc": "x", "n": [1, 2]}`),
		ParentID: e.PromptID, DependsOn: e.JobID, AvailableAt: later.Add(time.Hour)})
	np, err := f.store.GetPrompt(f.ctx, "org-a", n.PromptID)
	if err != nil {
		t.Fatalf("GetPrompt: %v", err)
	}
	if np.PromptRef != "summarize@2" || np.Text != "" || np.ParentID != e.PromptID || !jsonEqual(np.Inputs, []byte(`{"n":[1,2],"doc":"x"}`)) {
		t.Errorf("named prompt = %+v (inputs %s)", np, np.Inputs)
	}
	nj := f.job(n.JobID)
	if nj.DependsOn != e.JobID {
		t.Errorf("DependsOn = %q, want %q", nj.DependsOn, e.JobID)
	}
	sameTime(t, "AvailableAt", nj.AvailableAt, later.Add(time.Hour))
	sameTime(t, "CreatedAt", nj.CreatedAt, later)
}

func testEnqueueInvalid(t *testing.T, h Harness) {
	f := setup(t, h)
	other := f.enqueue(jobs.EnqueueParams{OrgID: "org-b"})
	mine := f.enqueue(jobs.EnqueueParams{OrgID: "org-a"})
	// What EnqueueParams.Normalize refuses, with its error text on every
	// store. Text is "x" unless the case sets Text or PromptRef.
	refused := map[string]jobs.EnqueueParams{
		"priority -1":                      {Priority: ptr(-1)},
		"priority 101":                     {Priority: ptr(101)},
		"max_attempts -1":                  {MaxAttempts: -1},
		"no text and no prompt_ref":        {Text: " \t\n"},
		"text and prompt_ref":              {Text: "x", PromptRef: "summarize"},
		"inputs with text":                 {Inputs: json.RawMessage(`{"a": 1}`)},
		"inputs not an object":             {PromptRef: "summarize", Inputs: json.RawMessage(`[1]`)},
		"inputs not JSON":                  {PromptRef: "summarize", Inputs: json.RawMessage(`{"a":`)},
		"execution_options depth negative": {ExecutionOptions: jobs.ExecutionOptions{Depth: ptr(-1)}},
		"execution_options depth too deep": {ExecutionOptions: jobs.ExecutionOptions{Depth: ptr(jobs.MaxDepth + 1)}},
		"execution_options model NUL":      {ExecutionOptions: jobs.ExecutionOptions{Model: "m\x00"}},
		"execution_options provider NUL":   {ExecutionOptions: jobs.ExecutionOptions{PreferProvider: "b\x00"}},
	}
	for name, p := range refused {
		p.OrgID, p.CreatedBy = "org-a", "u"
		if p.Text == "" && p.PromptRef == "" {
			p.Text = "x"
		}
		_, err := f.store.Enqueue(f.ctx, p)
		wantNormalizeErr(t, err, p, name)
		_, err = f.store.EnqueueBatch(f.ctx, []jobs.EnqueueParams{{OrgID: "org-a", Text: "ok"}, p})
		wantNormalizeErr(t, err, p, "EnqueueBatch with "+name)
	}
	// What only the database can tell.
	for name, p := range map[string]jobs.EnqueueParams{
		"unknown parent":            {ParentID: jobs.NewID()},
		"parent in another org":     {ParentID: other.PromptID},
		"unknown depends_on":        {DependsOn: jobs.NewID()},
		"depends_on in another org": {DependsOn: other.JobID},
	} {
		p.OrgID, p.Text, p.CreatedBy = "org-a", "x", "u"
		_, err := f.store.Enqueue(f.ctx, p)
		wantErr(t, err, jobs.ErrInvalid, name)
	}
	// Boundaries are valid.
	f.enqueue(jobs.EnqueueParams{OrgID: "org-a", Priority: ptr(0), MaxAttempts: 1, ParentID: mine.PromptID, DependsOn: mine.JobID})
	f.enqueue(jobs.EnqueueParams{OrgID: "org-a", Priority: ptr(100),
		ExecutionOptions: jobs.ExecutionOptions{Model: "m", Depth: ptr(0), PreferProvider: "b"}})
	f.enqueue(jobs.EnqueueParams{OrgID: "org-a", PromptRef: "summarize"})
	page, err := f.store.ListJobs(f.ctx, jobs.ListParams{})
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Jobs) != 5 {
		t.Errorf("after invalid enqueues: %d jobs stored, want 5", len(page.Jobs))
	}
}

// Every other parameter check is Normalize's too: ErrInvalid with its text
// on every store, and nothing changes.
func testParamsInvalid(t *testing.T, h Harness) {
	f := setup(t, h)
	done, _ := f.jobIn(jobs.Failed)
	e := f.enqueue(jobs.EnqueueParams{OrgID: "org-1"})
	f.claimID("w", e.JobID)
	before := f.snapshot(e.JobID)

	claim := jobs.ClaimParams{Worker: "w", PriorityCeiling: ptr(101)}
	_, err := f.store.Claim(f.ctx, claim)
	wantNormalizeErr(t, err, claim, "Claim with ceiling 101")
	claim = jobs.ClaimParams{Worker: "w", PriorityCeiling: ptr(-1)}
	_, err = f.store.Claim(f.ctx, claim)
	wantNormalizeErr(t, err, claim, "Claim with ceiling -1")
	claim = jobs.ClaimParams{}
	_, err = f.store.Claim(f.ctx, claim)
	wantNormalizeErr(t, err, claim, "Claim without a worker")
	succeed := jobs.SucceedParams{JobID: e.JobID, Worker: "w", Answer: jobs.Answer{Output: "x", Parsed: json.RawMessage(`{"a":`)}}
	_, err = f.store.Succeed(f.ctx, succeed)
	wantNormalizeErr(t, err, succeed, "Succeed with parsed output not JSON")
	att := jobs.AttemptParams{JobID: e.JobID, Worker: "w", Data: json.RawMessage(`nope`)}
	wantNormalizeErr(t, f.store.AppendAttempt(f.ctx, att), att, "AppendAttempt with data not JSON")
	f.unchanged(before, "refused finishing writes")

	retry := jobs.RetryParams{JobID: done.ID, Priority: ptr(101)}
	_, err = f.store.Retry(f.ctx, retry)
	wantNormalizeErr(t, err, retry, "Retry with priority 101")
	list := jobs.ListParams{JobFilter: jobs.JobFilter{State: "done"}}
	_, err = f.store.ListJobs(f.ctx, list)
	wantNormalizeErr(t, err, list, "ListJobs with an unknown state")
	list = jobs.ListParams{After: "not a cursor!"}
	_, err = f.store.ListJobs(f.ctx, list)
	wantNormalizeErr(t, err, list, "ListJobs with a bad cursor")
	thread := jobs.ThreadParams{PromptID: e.PromptID, Depth: -1}
	_, err = f.store.Thread(f.ctx, thread)
	wantNormalizeErr(t, err, thread, "Thread with depth -1")
	if j := f.job(done.ID); j.State != jobs.Failed {
		t.Errorf("refused Retry changed the job: %s", j.State)
	}
}

func testEnqueueBatch(t *testing.T, h Harness) {
	f := setup(t, h)
	got, err := f.store.EnqueueBatch(f.ctx, nil)
	if err != nil || len(got) != 0 {
		t.Errorf("EnqueueBatch(nil) = %v, %v", got, err)
	}
	ps := make([]jobs.EnqueueParams, 50)
	for i := range ps {
		ps[i] = jobs.EnqueueParams{OrgID: "org-a", CreatedBy: "u", Text: fmt.Sprintf("prompt %d", i), Priority: ptr(i % 101)}
	}
	got, err = f.store.EnqueueBatch(f.ctx, ps)
	if err != nil {
		t.Fatalf("EnqueueBatch: %v", err)
	}
	if len(got) != len(ps) {
		t.Fatalf("EnqueueBatch returned %d results for %d", len(got), len(ps))
	}
	seen := map[string]bool{}
	for i, e := range got {
		if e.State != jobs.Queued || e.Existing || seen[e.JobID] {
			t.Errorf("result %d = %+v", i, e)
		}
		seen[e.JobID] = true
		p, err := f.store.GetPrompt(f.ctx, "", e.PromptID)
		if err != nil {
			t.Fatal(err)
		}
		if p.Text != ps[i].Text {
			t.Errorf("result %d is prompt %q, want %q: results not in input order", i, p.Text, ps[i].Text)
		}
		f.expectTransition(e.JobID, "", jobs.Queued)
	}

	// All or nothing.
	for name, bad := range map[string]jobs.EnqueueParams{
		"unknown depends_on": {OrgID: "org-a", Text: "x", DependsOn: jobs.NewID()},
		"bad priority":       {OrgID: "org-a", Text: "x", Priority: ptr(500)},
	} {
		batch := []jobs.EnqueueParams{{OrgID: "org-a", Text: "ok 1"}, {OrgID: "org-a", Text: "ok 2"}, bad, {OrgID: "org-a", Text: "ok 3"}}
		_, err := f.store.EnqueueBatch(f.ctx, batch)
		wantErr(t, err, jobs.ErrInvalid, "EnqueueBatch with "+name)
	}
	page, err := f.store.ListJobs(f.ctx, jobs.ListParams{Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Jobs) != len(ps) {
		t.Errorf("%d jobs stored, want %d: a failed batch stored some of its items", len(page.Jobs), len(ps))
	}
}

// Concurrent Enqueue calls are independent: one invalid call fails alone,
// and a call whose context is already cancelled stores nothing.
func testEnqueueConcurrentIsolation(t *testing.T, h Harness) {
	f := setupRealClock(t, h)
	taken := f.enqueue(jobs.EnqueueParams{OrgID: "org-a", IdempotencyKey: "taken", RequestHash: "h1"})
	const n = 32
	results := make([]jobs.Enqueued, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			p := jobs.EnqueueParams{OrgID: "org-a", CreatedBy: "u", Text: fmt.Sprintf("p%d", i)}
			ctx := f.ctx
			switch i {
			case 7:
				p.DependsOn = jobs.NewID()
			case 11:
				c, cancel := context.WithCancel(ctx)
				cancel()
				ctx = c
			case 13:
				p.IdempotencyKey, p.RequestHash = "taken", "h2"
			case 17:
				p.IdempotencyKey, p.RequestHash = "taken", "h1"
			}
			results[i], errs[i] = f.store.Enqueue(ctx, p)
		})
	}
	wg.Wait()
	seen := map[string]bool{}
	for i := range n {
		switch i {
		case 7:
			wantErr(t, errs[i], jobs.ErrInvalid, "invalid call")
		case 11:
			if errs[i] == nil {
				t.Errorf("Enqueue with a cancelled context succeeded")
			}
		case 13:
			wantErr(t, errs[i], jobs.ErrIdempotencyConflict, "conflicting call")
		case 17:
			if errs[i] != nil || results[i].JobID != taken.JobID || !results[i].Existing {
				t.Errorf("repeat = %+v, %v; want job %s", results[i], errs[i], taken.JobID)
			}
		default:
			if errs[i] != nil {
				t.Errorf("call %d: %v", i, errs[i])
				continue
			}
			if seen[results[i].JobID] {
				t.Errorf("call %d: duplicate job ID", i)
			}
			seen[results[i].JobID] = true
		}
	}
	page, err := f.store.ListJobs(f.ctx, jobs.ListParams{Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	if want := 1 + n - 4; len(page.Jobs) != want { // the taken key's, and all but four calls'
		t.Errorf("%d jobs stored, want %d", len(page.Jobs), want)
	}
}

func testIdempotency(t *testing.T, h Harness) {
	f := setup(t, h)
	a := f.enqueue(jobs.EnqueueParams{OrgID: "org-a", Text: "one", IdempotencyKey: "k1"})
	b := f.enqueue(jobs.EnqueueParams{OrgID: "org-a", Text: "two", IdempotencyKey: "k1"})
	if b.PromptID != a.PromptID || b.JobID != a.JobID || !b.Existing || b.State != jobs.Queued {
		t.Errorf("repeat = %+v, want the first IDs %+v with Existing", b, a)
	}
	if p, _ := f.store.GetPrompt(f.ctx, "", a.PromptID); p.Text != "one" {
		t.Errorf("repeat changed the prompt text to %q", p.Text)
	}
	c := f.enqueue(jobs.EnqueueParams{OrgID: "org-b", Text: "one", IdempotencyKey: "k1"})
	if c.JobID == a.JobID || c.PromptID == a.PromptID || c.Existing {
		t.Errorf("same key in another org = %+v, want a new prompt", c)
	}
	d := f.enqueue(jobs.EnqueueParams{OrgID: "org-a", Text: "one", IdempotencyKey: "k2"})
	if d.JobID == a.JobID || d.Existing {
		t.Errorf("another key = %+v, want a new prompt", d)
	}
	e1 := f.enqueue(jobs.EnqueueParams{OrgID: "org-a", Text: "one"})
	e2 := f.enqueue(jobs.EnqueueParams{OrgID: "org-a", Text: "one"})
	if e1.JobID == e2.JobID || e1.Existing || e2.Existing {
		t.Errorf("no key: %+v, %+v; want two new prompts", e1, e2)
	}

	// Within a batch, and against earlier calls.
	got, err := f.store.EnqueueBatch(f.ctx, []jobs.EnqueueParams{
		{OrgID: "org-a", Text: "x", IdempotencyKey: "k3"},
		{OrgID: "org-a", Text: "y", IdempotencyKey: "k3"},
		{OrgID: "org-a", Text: "z", IdempotencyKey: "k1"},
	})
	if err != nil {
		t.Fatalf("EnqueueBatch: %v", err)
	}
	if got[0].Existing || !got[1].Existing || got[1].JobID != got[0].JobID || !got[2].Existing || got[2].JobID != a.JobID {
		t.Errorf("batch = %+v", got)
	}

	// The repeat reports the job's current state.
	f.claimID("w", a.JobID)
	r := f.enqueue(jobs.EnqueueParams{OrgID: "org-a", Text: "one", IdempotencyKey: "k1"})
	if r.JobID != a.JobID || !r.Existing || r.State != jobs.Running {
		t.Errorf("repeat after claim = %+v, want job %s running", r, a.JobID)
	}

	page, err := f.store.ListJobs(f.ctx, jobs.ListParams{JobFilter: jobs.JobFilter{OrgID: "org-a"}})
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Jobs) != 5 { // k1, k2, two without a key, k3
		t.Errorf("org-a has %d jobs, want 5", len(page.Jobs))
	}
}

// storedCounts is how many jobs and events the store holds.
func (f *fixture) storedCounts() (jobCount, eventCount int) {
	f.t.Helper()
	return len(f.listAll(jobs.ListParams{Limit: 1000})), len(f.allEvents())
}

// A repeated idempotency key whose request hash differs from the first
// call's (both set) is ErrIdempotencyConflict and stores nothing; an
// empty hash on either side never conflicts.
func testIdempotencyConflict(t *testing.T, h Harness) {
	f := setup(t, h)
	a := f.enqueue(jobs.EnqueueParams{OrgID: "org-a", Text: "one", IdempotencyKey: "k1", RequestHash: "h1"})
	same := f.enqueue(jobs.EnqueueParams{OrgID: "org-a", Text: "one", IdempotencyKey: "k1", RequestHash: "h1"})
	if same.JobID != a.JobID || !same.Existing {
		t.Errorf("repeat with the same hash = %+v, want the first IDs %+v with Existing", same, a)
	}
	jobsBefore, eventsBefore := f.storedCounts()
	_, err := f.store.Enqueue(f.ctx, jobs.EnqueueParams{OrgID: "org-a", CreatedBy: "u", Text: "two", IdempotencyKey: "k1", RequestHash: "h2"})
	wantErr(t, err, jobs.ErrIdempotencyConflict, "repeat with another hash")
	if errors.Is(err, jobs.ErrInvalid) {
		t.Errorf("conflict %v also matches ErrInvalid", err)
	}
	if j, e := f.storedCounts(); j != jobsBefore || e != eventsBefore {
		t.Errorf("the conflicting Enqueue stored something: jobs %d → %d, events %d → %d", jobsBefore, j, eventsBefore, e)
	}
	if p, _ := f.store.GetPrompt(f.ctx, "", a.PromptID); p.Text != "one" {
		t.Errorf("the conflicting Enqueue changed the prompt text to %q", p.Text)
	}
	// No hash on the repeat: an ordinary repeat.
	if r := f.enqueue(jobs.EnqueueParams{OrgID: "org-a", Text: "two", IdempotencyKey: "k1"}); r.JobID != a.JobID || !r.Existing {
		t.Errorf("repeat without a hash = %+v", r)
	}
	// The key in another org is another key.
	if r := f.enqueue(jobs.EnqueueParams{OrgID: "org-b", Text: "two", IdempotencyKey: "k1", RequestHash: "h2"}); r.Existing {
		t.Errorf("same key, other hash, other org = %+v, want a new prompt", r)
	}
	// No hash stored: any repeat is a repeat.
	b := f.enqueue(jobs.EnqueueParams{OrgID: "org-a", Text: "three", IdempotencyKey: "k2"})
	if r := f.enqueue(jobs.EnqueueParams{OrgID: "org-a", Text: "four", IdempotencyKey: "k2", RequestHash: "h4"}); r.JobID != b.JobID || !r.Existing {
		t.Errorf("repeat with a hash of a call without one = %+v", r)
	}
	// The first call's hash stays: the repeat above did not store its own.
	if r := f.enqueue(jobs.EnqueueParams{OrgID: "org-a", Text: "five", IdempotencyKey: "k2", RequestHash: "h5"}); r.JobID != b.JobID || !r.Existing {
		t.Errorf("second repeat with another hash of a call without one = %+v", r)
	}
	// Without a key, the hash means nothing.
	c1 := f.enqueue(jobs.EnqueueParams{OrgID: "org-a", RequestHash: "h1"})
	c2 := f.enqueue(jobs.EnqueueParams{OrgID: "org-a", RequestHash: "h2"})
	if c1.Existing || c2.Existing || c1.JobID == c2.JobID {
		t.Errorf("hashes without a key: %+v, %+v", c1, c2)
	}
}

// EnqueueBatch: an item that conflicts, with an earlier call or with an
// earlier item of the same batch, fails the whole batch, which stores
// nothing.
func testIdempotencyConflictBatch(t *testing.T, h Harness) {
	f := setup(t, h)
	a := f.enqueue(jobs.EnqueueParams{OrgID: "org-a", IdempotencyKey: "k1", RequestHash: "h1"})
	jobsBefore, eventsBefore := f.storedCounts()
	for _, c := range []struct {
		what  string
		batch []jobs.EnqueueParams
	}{
		{"an item conflicting with an earlier call", []jobs.EnqueueParams{
			{OrgID: "org-a", Text: "new", IdempotencyKey: "k2", RequestHash: "h2"},
			{OrgID: "org-a", Text: "new"},
			{OrgID: "org-a", Text: "again", IdempotencyKey: "k1", RequestHash: "h9"},
		}},
		{"two items with one key and two hashes", []jobs.EnqueueParams{
			{OrgID: "org-a", Text: "x", IdempotencyKey: "k3", RequestHash: "hx"},
			{OrgID: "org-a", Text: "y"},
			{OrgID: "org-a", Text: "y", IdempotencyKey: "k3", RequestHash: "hy"},
		}},
		{"a repeat without a hash between them", []jobs.EnqueueParams{
			{OrgID: "org-a", Text: "x", IdempotencyKey: "k4", RequestHash: "hx"},
			{OrgID: "org-a", Text: "x", IdempotencyKey: "k4"},
			{OrgID: "org-a", Text: "y", IdempotencyKey: "k4", RequestHash: "hy"},
		}},
	} {
		for i := range c.batch {
			c.batch[i].CreatedBy = "u"
		}
		out, err := f.store.EnqueueBatch(f.ctx, c.batch)
		wantErr(t, err, jobs.ErrIdempotencyConflict, c.what)
		if out != nil {
			t.Errorf("%s: results %+v with the error", c.what, out)
		}
		if j, e := f.storedCounts(); j != jobsBefore || e != eventsBefore {
			t.Errorf("%s: the batch stored something: jobs %d → %d, events %d → %d", c.what, jobsBefore, j, eventsBefore, e)
		}
	}
	// Nothing of the failed batches stayed: their keys are new.
	if r := f.enqueue(jobs.EnqueueParams{OrgID: "org-a", IdempotencyKey: "k2", RequestHash: "other"}); r.Existing {
		t.Errorf("key of a failed batch = %+v, want a new prompt", r)
	}

	// Within a batch, repeats agreeing with the first item (or without a
	// hash) are repeats; a first item without a hash stores none.
	got, err := f.store.EnqueueBatch(f.ctx, []jobs.EnqueueParams{
		{OrgID: "org-a", CreatedBy: "u", Text: "x", IdempotencyKey: "k5", RequestHash: "hx"},
		{OrgID: "org-a", CreatedBy: "u", Text: "x", IdempotencyKey: "k5", RequestHash: "hx"},
		{OrgID: "org-a", CreatedBy: "u", Text: "x", IdempotencyKey: "k5"},
		{OrgID: "org-a", CreatedBy: "u", Text: "y", IdempotencyKey: "k6"},
		{OrgID: "org-a", CreatedBy: "u", Text: "y", IdempotencyKey: "k6", RequestHash: "h1"},
		{OrgID: "org-a", CreatedBy: "u", Text: "y", IdempotencyKey: "k6", RequestHash: "h2"},
		{OrgID: "org-a", CreatedBy: "u", Text: "z", IdempotencyKey: "k1", RequestHash: "h1"},
	})
	if err != nil {
		t.Fatalf("EnqueueBatch: %v", err)
	}
	if got[0].Existing || !got[1].Existing || !got[2].Existing || got[1].JobID != got[0].JobID || got[2].JobID != got[0].JobID ||
		got[3].Existing || !got[4].Existing || !got[5].Existing || got[4].JobID != got[3].JobID || got[5].JobID != got[3].JobID ||
		!got[6].Existing || got[6].JobID != a.JobID {
		t.Errorf("batch of agreeing repeats = %+v", got)
	}
}

// A member may continue or wait for only what it could read:
// ReferenceUser scopes ParentID and DependsOn to that user's own prompts
// and jobs, in Enqueue and EnqueueBatch alike, with the answer an unknown
// id gets (nothing tells the other user's ids exist).
func testEnqueueReferenceUser(t *testing.T, h Harness) {
	f := setup(t, h)
	amy := f.enqueue(jobs.EnqueueParams{OrgID: "org-a", CreatedBy: "amy"})
	alice := f.enqueue(jobs.EnqueueParams{OrgID: "org-a", CreatedBy: "alice"})
	for name, p := range map[string]jobs.EnqueueParams{
		"another user's parent":     {ParentID: amy.PromptID},
		"another user's depends_on": {DependsOn: amy.JobID},
	} {
		p.OrgID, p.CreatedBy, p.ReferenceUser, p.Text = "org-a", "alice", "alice", "x"
		_, err := f.store.Enqueue(f.ctx, p)
		wantErr(t, err, jobs.ErrInvalid, name)
		var ie *jobs.InvalidError
		if !errors.As(err, &ie) || (ie.Field != "parent_id" && ie.Field != "depends_on") {
			t.Errorf("%s: %v does not name the field", name, err)
		}
		_, err = f.store.EnqueueBatch(f.ctx, []jobs.EnqueueParams{{OrgID: "org-a", CreatedBy: "alice", Text: "ok"}, p})
		wantErr(t, err, jobs.ErrInvalid, "EnqueueBatch with "+name)
	}
	// Its own, and (without ReferenceUser: an admin) anyone's in the org.
	f.enqueue(jobs.EnqueueParams{OrgID: "org-a", CreatedBy: "alice", ReferenceUser: "alice", ParentID: alice.PromptID, DependsOn: alice.JobID})
	f.enqueue(jobs.EnqueueParams{OrgID: "org-a", CreatedBy: "boss", ParentID: amy.PromptID, DependsOn: amy.JobID})
	page, err := f.store.ListJobs(f.ctx, jobs.ListParams{})
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Jobs) != 4 {
		t.Errorf("%d jobs stored, want 4: a refused enqueue stored something", len(page.Jobs))
	}
}

// An id with a NUL (which no store can hold) names nothing: ErrNotFound
// from every look-up and action by id, on every store, never a database
// error.
func testLookupNUL(t *testing.T, h Harness) {
	f := setup(t, h)
	const id = "a\x00b"
	errs := map[string]error{}
	_, errs["GetPrompt"] = f.store.GetPrompt(f.ctx, "org-a", id)
	_, errs["GetJob"] = f.store.GetJob(f.ctx, "org-a", id)
	_, errs["GetResponse"] = f.store.GetResponse(f.ctx, "org-a", id)
	_, errs["GetFile"] = f.store.GetFile(f.ctx, "org-a", id)
	_, errs["GetBatch"] = f.store.GetBatch(f.ctx, "org-a", id)
	_, errs["Cancel"] = f.store.Cancel(f.ctx, jobs.CancelParams{OrgID: "org-a", JobID: id})
	_, errs["Retry"] = f.store.Retry(f.ctx, jobs.RetryParams{OrgID: "org-a", JobID: id})
	for op, err := range errs {
		wantErr(t, err, jobs.ErrNotFound, op)
	}
}
