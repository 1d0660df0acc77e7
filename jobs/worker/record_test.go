package worker_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/promptkit/promptkit"
	"github.com/promptkit/promptkit/internal/testkit"
	"github.com/promptkit/promptkit/internal/testkit/enginekit"
	"github.com/promptkit/promptkit/jobs"
	"github.com/promptkit/promptkit/jobs/worker"
	"github.com/promptkit/promptkit/providertest"
)

// recordProbe is a fake provider of two backends, /primary and
// /fallback, each a scripted providertest.Handler. As each call arrives,
// before it is answered, it notes what the job's record holds then: its
// attempt events and the ledger's rows. A worker killed at that moment
// leaves exactly that record.
type recordProbe struct {
	f       *fixture
	primary *providertest.Handler
	backup  *providertest.Handler
	srv     *httptest.Server

	mu    sync.Mutex
	jobID string
	seen  []recordAt // one per call, in arrival order
}

// recordAt is the record as one call arrived.
type recordAt struct{ events, ledger int }

func newRecordProbe(f *fixture) *recordProbe {
	p := &recordProbe{f: f, primary: providertest.NewHandler(), backup: providertest.NewHandler()}
	mux := http.NewServeMux()
	mux.Handle("/primary/", p.noting(p.primary))
	mux.Handle("/fallback/", p.noting(p.backup))
	p.srv = httptest.NewServer(mux)
	f.t.Cleanup(p.srv.Close)
	return p
}

func (p *recordProbe) noting(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p.mu.Lock()
		id := p.jobID
		p.mu.Unlock()
		at := recordAt{events: -1, ledger: -1}
		if evs, err := p.f.store.JobEvents(r.Context(), "", id); err == nil {
			at.events = 0
			for _, e := range evs {
				if e.Type == jobs.EventAttempt {
					at.events++
				}
			}
		}
		if b, err := p.f.store.Usage(r.Context(), jobs.UsageParams{To: t0.Add(time.Hour)}); err == nil {
			at.ledger = 0
			for _, x := range b {
				at.ledger += int(x.Requests)
			}
		}
		p.mu.Lock()
		p.seen = append(p.seen, at)
		p.mu.Unlock()
		h.ServeHTTP(w, r)
	})
}

// engine is an engine on the probe: profile "default" on the primary
// alone, or, with group, on the primary with the fallback behind it.
func (p *recordProbe) engine(group bool) *promptkit.Engine {
	p.f.t.Helper()
	prof := promptkit.Profile{ID: enginekit.ProfileID, Model: enginekit.Model, RepairBudget: 1}
	if group {
		prof.Backends = []promptkit.ProfileBackend{{ID: "primary"}, {ID: "fallback", Fallback: true}}
	} else {
		prof.Backend = "primary"
	}
	return enginekit.New(p.f.t, promptkit.Config{
		Backends: []promptkit.Backend{{ID: "primary", BaseURL: p.srv.URL + "/primary/v1", Cooldown: time.Hour},
			{ID: "fallback", BaseURL: p.srv.URL + "/fallback/v1"}},
		Profiles: []promptkit.Profile{prof},
	}, enginekit.Retries(1))
}

// brokenStream is a streamed answer that an error event ends after its
// first piece: a 500 in the middle of the stream.
func brokenStream() providertest.Response {
	return providertest.Response{Header: http.Header{"Content-Type": {"text/event-stream"}}, Body: []byte(
		`data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"role":"assistant","content":"Half"},"finish_reason":null}]}` + "\n\n" +
			`data: {"error":{"message":"stream broke","type":"server_error"}}` + "\n\n")}
}

// TestAttemptRecordedBeforeNextCall: whatever makes a run call the
// provider again — a failover to a fallback backend, a schema repair, a
// streamed answer that broke, a plain transient retry — the earlier
// call's attempt event and its ledger row are in the store before the
// next call reaches the provider. So a worker killed during any call
// leaves that call, alone, unrecorded: provider calls ≤ attempt events +
// reclaims. At the end every call has its event and its row.
func TestAttemptRecordedBeforeNextCall(t *testing.T) {
	cases := []struct {
		name   string
		group  bool
		params jobs.EnqueueParams
		first  providertest.Response // the primary's answer to the first call
		status string                // its attempt event's status
	}{
		{"failover", true, jobs.EnqueueParams{Text: "fail over"}, providertest.Status(500), "500"},
		{"repair", false, jobs.EnqueueParams{Chat: &jobs.ChatRequest{
			Messages:       []promptkit.Message{{Role: promptkit.RoleUser, Content: "an object, please"}},
			ResponseFormat: jobs.FormatJSONObject}},
			providertest.Reply("not an object"), "200"}, // the default answer, next, is one
		{"stream", true, jobs.EnqueueParams{Text: "stream it", ExecutionOptions: jobs.ExecutionOptions{Stream: true}},
			brokenStream(), "500"},
		{"retry", false, jobs.EnqueueParams{Text: "try again"}, providertest.Status(503), "503"},
		{"embedding", true, jobs.EnqueueParams{Embedding: &jobs.EmbeddingRequest{Input: []string{"embed me"}}},
			providertest.Status(500), "500"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			eachStore(t, func(t *testing.T, f *fixture) {
				p := newRecordProbe(f)
				p.primary.Enqueue(tc.first)
				w := f.worker("w1", func(c *worker.Config) { c.Engine = p.engine(tc.group) })
				e := p.run(w, tc.params)
				if j := f.job(e.JobID); j.State != jobs.Succeeded {
					t.Fatalf("state=%s kind=%q", j.State, j.ErrorKind)
				}
				if seen, want := p.record(), []recordAt{{0, 0}, {1, 1}}; !eq(seen, want) {
					t.Errorf("(attempt events, ledger rows) as each provider call arrived = %v, want %v: a call went out while the one before it was unrecorded", seen, want)
				}
				evs, _ := f.events(e.JobID)
				if want := []string{"→queued", "queued→running", "attempt:" + tc.status, "attempt:200", "running→succeeded"}; !eq(evs, want) {
					t.Errorf("events = %v, want %v", evs, want)
				}
				b, err := f.store.Usage(f.ctx, jobs.UsageParams{To: t0.Add(time.Hour)})
				if err != nil || len(b) != 1 || b[0].Requests != 2 {
					t.Errorf("ledger = %+v (%v), want 2 calls", b, err)
				}
			})
		})
	}
}

// run enqueues the job params asks for and runs it once with worker w.
func (p *recordProbe) run(w *worker.Worker, params jobs.EnqueueParams) jobs.Enqueued {
	p.f.t.Helper()
	e := p.f.enqueue(params)
	p.mu.Lock()
	p.jobID = e.JobID
	p.mu.Unlock()
	p.f.runOnce(w, 1)
	return e
}

// record returns the record as each call so far arrived.
func (p *recordProbe) record() []recordAt {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]recordAt(nil), p.seen...)
}

// failover starts a job on the probe's model group whose primary answers
// 500, so that the run calls the fallback next, and runs it once with
// worker w.
func (p *recordProbe) failover(w *worker.Worker) jobs.Enqueued {
	p.f.t.Helper()
	p.primary.Enqueue(providertest.Status(500))
	return p.run(w, jobs.EnqueueParams{Text: "fail over", MaxAttempts: 3})
}

// calls counts the provider calls the probe saw.
func (p *recordProbe) calls() int { return len(p.record()) }

// appendStore makes AppendAttempt fail with err, the first n times (all
// of them when n < 0), as a database outage or a lost claim does, and
// tells failed (when set) how many tries there have been.
type appendStore struct {
	jobs.Store
	err    error
	n      atomic.Int32
	tries  atomic.Int32
	failed func(tries int32)
}

func (s *appendStore) AppendAttempt(ctx context.Context, p jobs.AttemptParams) error {
	tries := s.tries.Add(1)
	if s.n.Load() != 0 {
		s.n.Add(-1)
		if s.failed != nil {
			s.failed(tries)
		}
		return s.err
	}
	return s.Store.AppendAttempt(ctx, p)
}

// A failing attempt write holds the run's next call until the store takes
// it: the fallback is called once the failover's first call is recorded,
// and the outage is logged once.
func TestAttemptWriteWaitsForTheStore(t *testing.T) {
	eachStore(t, func(t *testing.T, f *fixture) {
		p := newRecordProbe(f)
		st := &appendStore{Store: f.store, err: errHiccup}
		st.n.Store(3)
		var logs testkit.Logs
		w := f.worker("w1", func(c *worker.Config) {
			c.Engine, c.Store, c.Logger = p.engine(true), st, logs.Logger()
		})
		worker.SetFinalizeBackoff(w, func(int) time.Duration { return time.Millisecond })
		e := p.failover(w)
		if j := f.job(e.JobID); j.State != jobs.Succeeded {
			t.Fatalf("state=%s kind=%q", j.State, j.ErrorKind)
		}
		if seen, want := p.record(), []recordAt{{0, 0}, {1, 1}}; !eq(seen, want) || st.tries.Load() != 4 {
			t.Errorf("record as each call arrived = %v after %d writes, want %v after 4", seen, st.tries.Load(), want)
		}
		if evs, _ := f.events(e.JobID); !eq(evs, []string{"→queued", "queued→running", "attempt:500", "attempt:200", "running→succeeded"}) {
			t.Errorf("events = %v", evs)
		}
		if n := strings.Count(logs.String(), "attempt event write failing"); n != 1 || strings.Contains(logs.String(), "fail over") {
			t.Errorf("%d warnings for one outage, want 1 without the prompt:\n%s", n, logs.String())
		}
	})
}

// While the store does not take the record of a run's call, no other call
// is made, however long that lasts: a worker stopped meanwhile hands the
// job back, its one call recorded by the write that hands it back.
func TestAttemptWriteOutageEndsTheRun(t *testing.T) {
	eachStore(t, func(t *testing.T, f *fixture) {
		p := newRecordProbe(f)
		ctx, stop := context.WithCancel(f.ctx)
		defer stop()
		st := &appendStore{Store: f.store, err: errHiccup}
		st.n.Store(-1)
		st.failed = func(tries int32) {
			if tries == 3 {
				stop() // the worker stops, its run waiting for the store
			}
		}
		w := f.worker("w1", func(c *worker.Config) {
			c.Engine, c.Store, c.ShutdownGrace = p.engine(true), st, time.Nanosecond
		})
		worker.SetFinalizeBackoff(w, func(int) time.Duration { return time.Millisecond })
		p.primary.Enqueue(providertest.Status(500))
		e := f.enqueue(jobs.EnqueueParams{Text: "fail over", MaxAttempts: 3})
		p.mu.Lock()
		p.jobID = e.JobID
		p.mu.Unlock()
		if n, err := w.RunOnce(ctx); n != 1 || err != nil {
			t.Fatalf("RunOnce: %d, %v", n, err)
		}
		if j := f.job(e.JobID); j.State != jobs.Queued || j.Attempt != 1 || p.calls() != 1 {
			t.Fatalf("state=%s attempt=%d after %d provider calls, want queued, handed back, after 1", j.State, j.Attempt, p.calls())
		}
		if evs, _ := f.events(e.JobID); !eq(evs, []string{"→queued", "queued→running", "attempt:500", "running→queued"}) {
			t.Errorf("events = %v", evs)
		}
	})
}

// A record the store refuses because the job is no longer ours (cancelled
// or reclaimed: that write counted the call) stops the run: no further
// call is made for a job that is not ours, and its result is discarded.
func TestAttemptWriteRefusedStopsTheRun(t *testing.T) {
	eachStore(t, func(t *testing.T, f *fixture) {
		p := newRecordProbe(f)
		st := &appendStore{Store: f.store, err: jobs.ErrNotClaimed}
		st.n.Store(-1)
		var mu sync.Mutex
		var outcomes []string
		w := f.worker("w1", func(c *worker.Config) {
			c.Engine, c.Store = p.engine(true), st
			c.Observe = func(ev worker.JobEvent) {
				mu.Lock()
				defer mu.Unlock()
				if !ev.Claimed {
					outcomes = append(outcomes, ev.Outcome)
				}
			}
		})
		p.failover(w)
		mu.Lock()
		defer mu.Unlock()
		if p.calls() != 1 || !eq(outcomes, []string{worker.OutcomeDiscarded}) {
			t.Errorf("%d provider calls, settled %v; want 1 call, discarded", p.calls(), outcomes)
		}
	})
}
