package worker_test

import (
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/promptkit/promptkit"
	"github.com/promptkit/promptkit/internal/testkit/enginekit"
	"github.com/promptkit/promptkit/internal/testkit/storekit"
	"github.com/promptkit/promptkit/jobs"
	"github.com/promptkit/promptkit/jobs/worker"
	"github.com/promptkit/promptkit/providertest"
)

// A job deep in a thread reads its prompt and its whole history in two
// store queries, however many ancestors it has.
func TestHistoryIsOneQuery(t *testing.T) {
	eachStore(t, func(t *testing.T, f *fixture) {
		w := f.worker("w1")
		parent := ""
		for _, text := range []string{"one", "two", "three"} {
			f.srv.Enqueue(providertest.Reply("answer " + text))
			e := f.enqueue(jobs.EnqueueParams{Text: text, ParentID: parent})
			f.runOnce(w, 1)
			parent = e.PromptID
		}
		counting := storekit.Count(f.store)
		f.srv.Enqueue(providertest.Reply("answer four"))
		f.enqueue(jobs.EnqueueParams{Text: "four", ParentID: parent})
		f.runOnce(f.worker("w2", func(c *worker.Config) { c.Store = counting }), 1)
		if g, th, pj, gr := counting.Calls("GetPrompt"), counting.Calls("Thread"), counting.Calls("PromptJobs"), counting.Calls("GetResponse"); g != 1 || th != 1 || pj != 0 || gr != 0 {
			t.Fatalf("reads: GetPrompt %d, Thread %d, PromptJobs %d, GetResponse %d; want 1, 1, 0, 0", g, th, pj, gr)
		}
		reqs := f.srv.Requests()
		var got []string
		for _, m := range reqs[len(reqs)-1].Messages {
			got = append(got, m.Role+":"+m.Content)
		}
		want := []string{"user:one", "assistant:answer one", "user:two", "assistant:answer two", "user:three", "assistant:answer three", "user:four"}
		if !eq(got, want) {
			t.Fatalf("messages = %q, want %q", got, want)
		}
	})
}

// execution_options: model replaces the profile's model, and
// prefer_provider runs the profile on another backend that serves its
// model.
func TestExecutionOptionsHonoured(t *testing.T) {
	eachStore(t, func(t *testing.T, f *fixture) {
		other := providertest.NewServer()
		t.Cleanup(other.Close)
		zero := 0
		eng, err := promptkit.New(promptkit.Config{
			Backends: []promptkit.Backend{{ID: "main", BaseURL: f.srv.URL}, {ID: "other", BaseURL: other.URL}},
			Profiles: []promptkit.Profile{
				{ID: "default", Backend: "main", Model: "m"},
				{ID: "spare", Backend: "other", Model: "m"},
			},
			TransientRetries: &zero,
		})
		if err != nil {
			t.Fatal(err)
		}
		w := f.worker("w1", func(c *worker.Config) { c.Engine = eng })

		f.enqueue(jobs.EnqueueParams{Text: "with a model", ExecutionOptions: jobs.ExecutionOptions{Model: "m-large"}})
		f.runOnce(w, 1)
		if r := f.srv.Requests(); len(r) != 1 || r[0].Model != "m-large" {
			t.Fatalf("main saw %+v, want one request for m-large", r)
		}
		e := f.enqueue(jobs.EnqueueParams{Text: "elsewhere", ExecutionOptions: jobs.ExecutionOptions{PreferProvider: "other"}})
		f.runOnce(w, 1)
		if other.Count() != 1 || f.srv.Count() != 1 {
			t.Fatalf("other saw %d requests, main %d; want the job on other", other.Count(), f.srv.Count())
		}
		if j := f.job(e.JobID); j.State != jobs.Succeeded {
			t.Fatalf("job %s: %s %s", j.State, j.ErrorKind, j.ErrorMessage)
		}
		// A backend that does not serve the model is refused before any
		// call, and the job fails for good.
		bad := f.enqueue(jobs.EnqueueParams{Text: "nowhere", ExecutionOptions: jobs.ExecutionOptions{PreferProvider: "other", Model: "m-large"}})
		f.runOnce(w, 1)
		if j := f.job(bad.JobID); j.State != jobs.Failed || j.ErrorKind != jobs.KindInvalidRequest {
			t.Fatalf("job %s %s %q, want failed invalid_request", j.State, j.ErrorKind, j.ErrorMessage)
		}
		if other.Count() != 1 || f.srv.Count() != 1 {
			t.Fatal("a refused job reached a provider")
		}
	})
}

// TestDefaultReclaimWorstCase holds the defaults to the design's promise
// that a crashed worker's job is back in the queue within 5 minutes, with
// margin (issue 28 measured 300.1 s with the old 5m threshold). The worst
// case, counted from the kill: the worker dies just after a heartbeat, so
// its last heartbeat is as young as it can be; the heartbeat turns
// ReclaimAfter old just after a sweep, so the next sweep, an Interval
// later, is the one that reclaims it.
func TestDefaultReclaimWorstCase(t *testing.T) {
	t.Parallel()
	f := newFixture(t, storekit.SQLite.New(t))
	r, err := worker.NewReclaimer(worker.ReclaimerConfig{Store: f.store})
	if err != nil {
		t.Fatal(err)
	}
	const promise = 5 * time.Minute
	// Margin for what the arithmetic leaves out: the sweep's own time, a
	// ticker late on a loaded host, clocks of several hosts a little apart.
	const margin = 30 * time.Second
	worst := jobs.DefaultReclaimAfter + r.Interval()
	if worst != 4*time.Minute+24*time.Second {
		t.Errorf("worst case %v = reclaim_after %v + interval %v; docs/service.md says 4m24s", worst, jobs.DefaultReclaimAfter, r.Interval())
	}
	if worst > promise-margin {
		t.Errorf("worst case %v: want at most %v (%v under the promised %v)", worst, promise-margin, margin, promise)
	}
	// A live worker is not taken for dead: the defaults pass the rules
	// serve and worker check at start, and a worker must miss several
	// heartbeats in a row (a slow store, a GC pause) before it is.
	if err := worker.CheckTimings(worker.DefaultHeartbeatInterval, jobs.DefaultReclaimAfter, jobs.DefaultStuckAfter); err != nil {
		t.Errorf("the default timings fail CheckTimings: %v", err)
	}
	if missed := jobs.DefaultReclaimAfter / worker.DefaultHeartbeatInterval; missed < 4 {
		t.Errorf("reclaim_after %v is only %d heartbeats of %v", jobs.DefaultReclaimAfter, missed, worker.DefaultHeartbeatInterval)
	}
}

func TestReclaimerConfig(t *testing.T) {
	t.Parallel()
	f := newFixture(t, storekit.SQLite.New(t))
	r, err := worker.NewReclaimer(worker.ReclaimerConfig{Store: f.store})
	if err != nil || r.Interval() != 24*time.Second {
		t.Fatalf("default interval %v, %v; want a tenth of 4m", r.Interval(), err)
	}
	// The sweep follows the threshold: a job of a dead worker is back
	// within reclaim_after plus a tenth of it.
	r, err = worker.NewReclaimer(worker.ReclaimerConfig{Store: f.store, ReclaimAfter: 3 * time.Second})
	if err != nil || r.Interval() != 300*time.Millisecond {
		t.Fatalf("interval %v, %v; want 300ms", r.Interval(), err)
	}
	for _, bad := range []worker.ReclaimerConfig{
		{Store: f.store, ReclaimAfter: -time.Second},
		{Store: f.store, ReclaimAfter: 20 * time.Minute}, // not below stuck_after's 15m
		{Store: f.store, Interval: -time.Second},
		{},
	} {
		if _, err := worker.NewReclaimer(bad); err == nil {
			t.Errorf("NewReclaimer(%+v): no error", bad)
		}
	}
}

func TestCheckTimings(t *testing.T) {
	t.Parallel()
	cases := []struct {
		hb, reclaim, stuck time.Duration
		ok                 bool
	}{
		{0, 0, 0, true},
		{time.Second, 3 * time.Second, 10 * time.Second, true},
		{5 * time.Minute, 0, 0, false},  // heartbeat not below reclaim_after
		{0, 20 * time.Minute, 0, false}, // reclaim_after not below stuck_after
		{0, -time.Minute, 0, false},
	}
	for _, c := range cases {
		err := worker.CheckTimings(c.hb, c.reclaim, c.stuck)
		if (err == nil) != c.ok || (err != nil && !errors.Is(err, jobs.ErrInvalid)) {
			t.Errorf("CheckTimings(%v, %v, %v) = %v, want ok=%t", c.hb, c.reclaim, c.stuck, err, c.ok)
		}
	}
}

func TestWorkerConfigRefusesImpossibleValues(t *testing.T) {
	t.Parallel()
	f := newFixture(t, storekit.SQLite.New(t))
	for name, mod := range map[string]func(*worker.Config){
		"no store":         func(c *worker.Config) { c.Store = nil },
		"no engine":        func(c *worker.Config) { c.Engine = nil },
		"concurrency":      func(c *worker.Config) { c.Concurrency = -1 },
		"batch":            func(c *worker.Config) { c.BatchSize = -2 },
		"heartbeat":        func(c *worker.Config) { c.HeartbeatInterval = -time.Second },
		"job timeout":      func(c *worker.Config) { c.JobTimeout = -time.Second },
		"priority ceiling": func(c *worker.Config) { c.PriorityCeiling = ptr(101) },
	} {
		cfg := worker.Config{Store: f.store, Engine: f.engine(0)}
		mod(&cfg)
		if _, err := worker.New(cfg); err == nil {
			t.Errorf("%s: New accepted %+v", name, cfg)
		}
	}
}

// The archiver deletes finished jobs older than After, and nothing else.
func TestArchiver(t *testing.T) {
	eachStore(t, func(t *testing.T, f *fixture) {
		old := f.enqueue(jobs.EnqueueParams{Text: "old"})
		f.srv.Enqueue(providertest.Reply("done"))
		f.runOnce(f.worker("w1"), 1)
		f.clock.Advance(48 * time.Hour)
		queued := f.enqueue(jobs.EnqueueParams{Text: "still queued"})
		a, err := worker.NewArchiver(worker.ArchiverConfig{Store: f.store, After: 24 * time.Hour, Now: f.clock.Now, Logger: f.log})
		if err != nil {
			t.Fatal(err)
		}
		if n, err := a.Archive(f.ctx); err != nil || n != 1 {
			t.Fatalf("Archive = %d, %v; want 1", n, err)
		}
		if _, err := f.store.GetJob(f.ctx, "", old.JobID); !errors.Is(err, jobs.ErrNotFound) {
			t.Fatalf("old job: %v, want ErrNotFound", err)
		}
		if j := f.job(queued.JobID); j.State != jobs.Queued {
			t.Fatalf("queued job is %s", j.State)
		}
		if _, err := worker.NewArchiver(worker.ArchiverConfig{Store: f.store}); err == nil {
			t.Fatal("NewArchiver without After: no error")
		}
	})
}

// Counts the provider never sent are stored as unknown, and read back as
// null, never as 0.
func TestUnreportedUsageIsStoredUnknown(t *testing.T) {
	eachStore(t, func(t *testing.T, f *fixture) {
		f.srv.Enqueue(providertest.Response{Text: "ok", Usage: providertest.Usage{Mode: providertest.UsagePartial, PromptTokens: 4, CompletionTokens: 2}})
		e := f.enqueue(jobs.EnqueueParams{Text: "partial"})
		f.runOnce(f.worker("w1"), 1)
		r, err := f.store.GetResponse(f.ctx, "", jobs.ResponseID(e.PromptID, e.JobID))
		if err != nil {
			t.Fatal(err)
		}
		b, _ := json.Marshal(r.Usage)
		const want = `{"prompt_tokens":4,"completion_tokens":2,"total_tokens":null,"cached_tokens":null,"reasoning_tokens":null}`
		if string(b) != want {
			t.Fatalf("stored usage %s, want %s", b, want)
		}
	})
}

// An attempt event carries the call's cost by the engine's prices (none
// when unknown), cached and reasoning tokens priced apart, and the store
// writes the call to the usage ledger with it and its counts, under the
// job's token.
func TestAttemptCostReachesTheLedger(t *testing.T) {
	eachStore(t, func(t *testing.T, f *fixture) {
		eng := enginekit.Provider(t, f.srv.URL, enginekit.Retries(0), func(c *promptkit.Config) {
			c.Prices = []promptkit.Price{{Model: enginekit.Model, Input: 1, Output: 2, CachedInput: 0.5, Reasoning: 4}}
		})
		f.srv.Enqueue(
			providertest.Response{Text: "ok", Usage: providertest.Usage{PromptTokens: 400, CompletionTokens: 100, TotalTokens: 500,
				CachedTokens: 50, ReasoningTokens: 30}},
			providertest.Response{Text: "ok", Usage: providertest.Usage{Mode: providertest.UsageAbsent}},
		)
		priced := f.enqueue(jobs.EnqueueParams{TokenID: "tok-1", Text: "priced"})
		unknown := f.enqueue(jobs.EnqueueParams{TokenID: "tok-1", Text: "unreported"})
		w := f.worker("w1", func(c *worker.Config) { c.Engine = eng })
		f.runOnce(w, 1)
		f.runOnce(w, 1)

		const want = ((400-50)*1 + 50*0.5 + (100-30)*2 + 30*4) / 1e6
		for _, c := range []struct {
			id   string
			want promptkit.Cost
		}{{priced.JobID, promptkit.Cost{USD: want, Known: true}}, {unknown.JobID, promptkit.Cost{}}} {
			evs, err := f.store.JobEvents(f.ctx, "", c.id)
			if err != nil {
				t.Fatal(err)
			}
			if got := jobs.JobCost(evs); got != c.want {
				t.Errorf("job %s cost %+v, want %+v", c.id, got, c.want)
			}
		}
		got, err := f.store.Usage(f.ctx, jobs.UsageParams{OrgID: "org", TokenID: "tok-1", GroupBy: []jobs.UsageGroup{jobs.UsageByModel}})
		if err != nil {
			t.Fatal(err)
		}
		wantB := []jobs.UsageBucket{{Model: enginekit.Model, Requests: 2, InputTokens: 400, OutputTokens: 100, CachedInputTokens: 50,
			ReasoningTokens: 30, UnknownUsage: 1, UnknownCached: 1, UnknownReasoning: 1, CostUSD: want, UnknownCost: 1}}
		if len(got) != 1 || got[0] != wantB[0] {
			t.Fatalf("usage %+v, want %+v", got, wantB)
		}
	})
}
