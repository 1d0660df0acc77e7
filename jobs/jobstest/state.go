package jobstest

import (
	"testing"
	"time"

	"github.com/promptkit/promptkit/jobs"
)

// edge is one allowed transition driven through the store: drive takes a
// job in From (claimed by worker, if running) and returns the job after
// the operation that moves it to To; data is the Data its transition event
// must carry (jobs.TransitionData documents it per transition).
type edge struct {
	name  string
	from  jobs.State
	to    jobs.State
	drive func(f *fixture, j jobs.Job, worker string) jobs.Job
	data  func(f *fixture, before jobs.Job, worker string) jobs.TransitionData
}

// noData is the data of a transition that records nothing more.
func noData(*fixture, jobs.Job, string) jobs.TransitionData { return jobs.TransitionData{} }

// reclaimData is the data of a reclaim at the fixture's time: the lost
// worker and ReclaimParams.Decide's kind and message.
func reclaimData(f *fixture, before jobs.Job, worker string) jobs.TransitionData {
	d := defaultReclaim.Decide(before)
	return jobs.TransitionData{Worker: worker, ErrorKind: d.Kind, ErrorMessage: d.Message}
}

var edges = []edge{
	{"claim", jobs.Queued, jobs.Running, func(f *fixture, j jobs.Job, _ string) jobs.Job {
		got := f.claimID("worker-x", j.ID)
		if got.WorkerClaim != "worker-x" || got.Attempt != j.Attempt {
			f.t.Errorf("claimed job: worker %q attempt %d", got.WorkerClaim, got.Attempt)
		}
		return got
	}, func(f *fixture, _ jobs.Job, _ string) jobs.TransitionData {
		return jobs.TransitionData{Worker: "worker-x"}
	}},
	{"cancel queued", jobs.Queued, jobs.Cancelled, func(f *fixture, j jobs.Job, _ string) jobs.Job {
		got, err := f.store.Cancel(f.ctx, jobs.CancelParams{JobID: j.ID})
		if err != nil {
			f.t.Fatalf("Cancel: %v", err)
		}
		sameTime(f.t, "FinishedAt", got.FinishedAt, f.now())
		return got
	}, noData},
	{"succeed", jobs.Running, jobs.Succeeded, func(f *fixture, j jobs.Job, w string) jobs.Job {
		got, err := f.store.Succeed(f.ctx, jobs.SucceedParams{JobID: j.ID, Worker: w, Answer: jobs.Answer{Output: "out"}})
		if err != nil {
			f.t.Fatalf("Succeed: %v", err)
		}
		if got.ResponseID != jobs.ResponseID(j.PromptID, j.ID) {
			f.t.Errorf("ResponseID = %q", got.ResponseID)
		}
		sameTime(f.t, "FinishedAt", got.FinishedAt, f.now())
		return got
	}, noData},
	{"requeue", jobs.Running, jobs.Queued, func(f *fixture, j jobs.Job, w string) jobs.Job {
		got, err := f.store.Requeue(f.ctx, jobs.RequeueParams{JobID: j.ID, Worker: w, Kind: jobs.KindTimeout, Message: "slow"})
		if err != nil {
			f.t.Fatalf("Requeue: %v", err)
		}
		if got.Attempt != j.Attempt+1 || got.WorkerClaim != "" {
			f.t.Errorf("requeued job: attempt %d worker %q", got.Attempt, got.WorkerClaim)
		}
		return got
	}, func(_ *fixture, _ jobs.Job, w string) jobs.TransitionData {
		return jobs.TransitionData{Worker: w, ErrorKind: jobs.KindTimeout, ErrorMessage: "slow"}
	}},
	{"reclaim", jobs.Running, jobs.Queued, func(f *fixture, j jobs.Job, _ string) jobs.Job {
		f.advance(5*time.Minute + time.Microsecond)
		r, err := f.store.Reclaim(f.ctx, defaultReclaim)
		if err != nil || len(r.Requeued) != 1 || r.Requeued[0] != j.ID {
			f.t.Fatalf("Reclaim = %+v, %v", r, err)
		}
		return f.job(j.ID)
	}, reclaimData},
	{"fail", jobs.Running, jobs.Failed, func(f *fixture, j jobs.Job, w string) jobs.Job {
		got, err := f.store.Fail(f.ctx, jobs.FailParams{JobID: j.ID, Worker: w, Kind: jobs.KindAuth, Message: "denied"})
		if err != nil {
			f.t.Fatalf("Fail: %v", err)
		}
		if got.ErrorKind != jobs.KindAuth || got.ErrorMessage != "denied" {
			f.t.Errorf("failed job: %q %q", got.ErrorKind, got.ErrorMessage)
		}
		return got
	}, func(_ *fixture, _ jobs.Job, w string) jobs.TransitionData {
		return jobs.TransitionData{Worker: w, ErrorKind: jobs.KindAuth, ErrorMessage: "denied"}
	}},
	{"reclaim stuck", jobs.Running, jobs.Failed, func(f *fixture, j jobs.Job, w string) jobs.Job {
		// Stuck means heart-beaten for stuck_after, then silent.
		f.advance(defaultReclaim.StuckAfter)
		if _, err := f.store.Heartbeat(f.ctx, jobs.HeartbeatParams{Worker: w, JobIDs: []string{j.ID}}); err != nil {
			f.t.Fatal(err)
		}
		f.advance(defaultReclaim.ReclaimAfter + time.Microsecond)
		r, err := f.store.Reclaim(f.ctx, defaultReclaim)
		if err != nil || len(r.Failed) != 1 || r.Failed[0] != j.ID {
			f.t.Fatalf("Reclaim = %+v, %v", r, err)
		}
		return f.job(j.ID)
	}, func(f *fixture, before jobs.Job, w string) jobs.TransitionData {
		before.HeartbeatAt = before.StartedAt.Add(defaultReclaim.StuckAfter)
		return reclaimData(f, before, w)
	}},
	{"cancel running", jobs.Running, jobs.Cancelled, func(f *fixture, j jobs.Job, _ string) jobs.Job {
		got, err := f.store.Cancel(f.ctx, jobs.CancelParams{JobID: j.ID})
		if err != nil {
			f.t.Fatalf("Cancel: %v", err)
		}
		return got
	}, noData},
}

func init() {
	for _, from := range []jobs.State{jobs.Succeeded, jobs.Failed, jobs.Cancelled} {
		edges = append(edges, edge{"retry " + string(from), from, jobs.Superseded, func(f *fixture, j jobs.Job, _ string) jobs.Job {
			n, err := f.store.Retry(f.ctx, jobs.RetryParams{JobID: j.ID})
			if err != nil {
				f.t.Fatalf("Retry: %v", err)
			}
			if n.Supersedes != j.ID || n.State != jobs.Queued || n.ID == j.ID {
				f.t.Errorf("retry job = %+v", n)
			}
			// The new job's first event names the job it supersedes.
			f.expectData(f.lastTransition(n.ID), jobs.TransitionData{Supersedes: j.ID}, "the retry's → queued")
			return f.job(j.ID)
		}, func(f *fixture, before jobs.Job, _ string) jobs.TransitionData {
			return jobs.TransitionData{SupersededBy: f.retryOf(before.ID)}
		}})
	}
}

// Every edge of jobs.Transitions() is driven through the store and recorded
// as a transition event.
func testTransitionsAllowed(t *testing.T, h Harness) {
	covered := map[jobs.Transition]bool{}
	for _, e := range edges {
		covered[jobs.Transition{From: e.from, To: e.to}] = true
	}
	for _, tr := range jobs.Transitions() {
		if !covered[jobs.Transition{From: tr.From, To: tr.To}] {
			t.Errorf("suite drives no operation for allowed transition %s → %s", tr.From, tr.To)
		}
	}
	for _, e := range edges {
		t.Run(e.name, func(t *testing.T) {
			t.Parallel()
			if !jobs.CanTransition(e.from, e.to) {
				t.Fatalf("%s → %s is not in jobs.Transitions()", e.from, e.to)
			}
			f := setup(t, h)
			j, worker := f.jobIn(e.from)
			got := e.drive(f, j, worker)
			if got.State != e.to {
				t.Errorf("returned job is %s, want %s", got.State, e.to)
			}
			if st := f.job(j.ID).State; st != e.to {
				t.Errorf("stored job is %s, want %s", st, e.to)
			}
			f.expectTransition(j.ID, e.from, e.to)
			f.expectData(f.lastTransition(j.ID), e.data(f, j, worker), string(e.from)+" → "+string(e.to))
			sameTime(t, "UpdatedAt", f.job(j.ID).UpdatedAt, f.now())
		})
	}
}

// attempt tries to move a job to a state through the operation that would
// do it, and checks the store refuses.
func attempt(f *fixture, j jobs.Job, worker string, to jobs.State) {
	t := f.t
	t.Helper()
	if worker == "" {
		worker = "worker-never"
	}
	what := string(j.State) + " → " + string(to)
	switch to {
	case jobs.Queued:
		_, err := f.store.Requeue(f.ctx, jobs.RequeueParams{JobID: j.ID, Worker: worker, Kind: jobs.KindTimeout})
		wantErr(t, err, jobs.ErrNotClaimed, what+" (Requeue)")
	case jobs.Running:
		if got := f.claim("worker-y", 10); len(got) != 0 {
			t.Errorf("%s (Claim): claimed %v", what, ids(got))
		}
	case jobs.Succeeded:
		_, err := f.store.Succeed(f.ctx, jobs.SucceedParams{JobID: j.ID, Worker: worker, Answer: jobs.Answer{Output: "late"}})
		wantErr(t, err, jobs.ErrNotClaimed, what+" (Succeed)")
	case jobs.Failed:
		_, err := f.store.Fail(f.ctx, jobs.FailParams{JobID: j.ID, Worker: worker, Kind: jobs.KindUnknown})
		wantErr(t, err, jobs.ErrNotClaimed, what+" (Fail)")
	case jobs.Cancelled:
		_, err := f.store.Cancel(f.ctx, jobs.CancelParams{JobID: j.ID})
		wantTransitionError(t, err, j.State, to, what+" (Cancel)")
	case jobs.Superseded:
		_, err := f.store.Retry(f.ctx, jobs.RetryParams{JobID: j.ID})
		wantTransitionError(t, err, j.State, to, what+" (Retry)")
	}
}

// Every pair outside jobs.Transitions() is refused and changes nothing.
func testTransitionsForbidden(t *testing.T, h Harness) {
	pairs := 0
	for _, from := range jobs.States() {
		for _, to := range jobs.States() {
			if !jobs.CanTransition(from, to) {
				pairs++
			}
		}
	}
	if pairs != len(jobs.States())*len(jobs.States())-len(jobs.Transitions()) {
		t.Fatalf("%d forbidden pairs; jobs.Transitions() has duplicates", pairs)
	}
	for _, from := range jobs.States() {
		t.Run(string(from), func(t *testing.T) {
			t.Parallel()
			f := setup(t, h)
			j, worker := f.jobIn(from)
			if from == jobs.Superseded {
				// Its retry is queued; take it out of the way of Claim.
				if _, err := f.store.Cancel(f.ctx, jobs.CancelParams{JobID: f.retryOf(j.ID)}); err != nil {
					t.Fatal(err)
				}
			}
			for _, to := range jobs.States() {
				if jobs.CanTransition(from, to) {
					continue
				}
				before := f.snapshot(j.ID)
				attempt(f, j, worker, to)
				f.unchanged(before, string(from)+" → "+string(to))
			}
		})
	}
}

// retryOf returns the job that supersedes id.
func (f *fixture) retryOf(id string) string {
	f.t.Helper()
	js, err := f.store.PromptJobs(f.ctx, "", f.job(id).PromptID)
	if err != nil {
		f.t.Fatal(err)
	}
	for _, j := range js {
		if j.Supersedes == id {
			return j.ID
		}
	}
	f.t.Fatalf("no job supersedes %s", id)
	return ""
}

// A terminal job never changes, whatever is tried, except a retry moving
// it to superseded.
func testTerminalImmutable(t *testing.T, h Harness) {
	for _, st := range []jobs.State{jobs.Succeeded, jobs.Failed, jobs.Cancelled, jobs.Superseded} {
		t.Run(string(st), func(t *testing.T) {
			t.Parallel()
			f := setup(t, h)
			j, worker := f.jobIn(st)
			if st == jobs.Superseded {
				if _, err := f.store.Cancel(f.ctx, jobs.CancelParams{JobID: f.retryOf(j.ID)}); err != nil {
					t.Fatal(err)
				}
			}
			if worker == "" {
				worker = "worker-never"
			}
			f.advance(time.Hour)
			before := f.snapshot(j.ID)
			ops := map[string]func() error{
				"Claim": func() error { f.claim("worker-z", 10); return nil },
				"Heartbeat": func() error {
					_, err := f.store.Heartbeat(f.ctx, jobs.HeartbeatParams{Worker: worker, JobIDs: []string{j.ID}})
					return err
				},
				"Succeed": func() error {
					_, err := f.store.Succeed(f.ctx, jobs.SucceedParams{JobID: j.ID, Worker: worker, Answer: jobs.Answer{Output: "again"}})
					return err
				},
				"Fail": func() error {
					_, err := f.store.Fail(f.ctx, jobs.FailParams{JobID: j.ID, Worker: worker, Kind: jobs.KindTimeout})
					return err
				},
				"Requeue": func() error {
					_, err := f.store.Requeue(f.ctx, jobs.RequeueParams{JobID: j.ID, Worker: worker})
					return err
				},
				"Requeue handback": func() error {
					_, err := f.store.Requeue(f.ctx, jobs.RequeueParams{JobID: j.ID, Worker: worker, Handback: true})
					return err
				},
				"AppendAttempt": func() error {
					return f.store.AppendAttempt(f.ctx, jobs.AttemptParams{JobID: j.ID, Worker: worker, Data: []byte(`{}`)})
				},
				"Cancel": func() error {
					_, err := f.store.Cancel(f.ctx, jobs.CancelParams{JobID: j.ID})
					return err
				},
				"Reclaim": func() error {
					_, err := f.store.Reclaim(f.ctx, jobs.ReclaimParams{ReclaimAfter: time.Minute, StuckAfter: 2 * time.Minute})
					return err
				},
			}
			if st == jobs.Superseded {
				ops["Retry"] = func() error {
					_, err := f.store.Retry(f.ctx, jobs.RetryParams{JobID: j.ID})
					return err
				}
			}
			for name, op := range ops {
				err := op()
				switch name {
				case "Claim", "Reclaim":
					if err != nil {
						t.Errorf("%s: %v", name, err)
					}
				case "Cancel", "Retry":
					var to = jobs.Cancelled
					if name == "Retry" {
						to = jobs.Superseded
					}
					wantTransitionError(t, err, st, to, name)
				default:
					wantErr(t, err, jobs.ErrNotClaimed, name)
				}
				f.unchanged(before, name+" on a "+string(st)+" job")
			}
		})
	}
}

// A worker whose claim was reclaimed and given to another worker changes
// nothing; the second worker's result is the only one.
func testStaleClaim(t *testing.T, h Harness) {
	f := setup(t, h)
	e := f.enqueue(jobs.EnqueueParams{})
	f.claimID("worker-a", e.JobID)
	f.advance(5*time.Minute + time.Microsecond)
	r, err := f.store.Reclaim(f.ctx, defaultReclaim)
	if err != nil || len(r.Requeued) != 1 {
		t.Fatalf("Reclaim = %+v, %v", r, err)
	}
	b := f.claimID("worker-b", e.JobID)
	if b.Attempt != 2 || b.WorkerClaim != "worker-b" {
		t.Fatalf("second claim: attempt %d worker %q", b.Attempt, b.WorkerClaim)
	}

	before := f.snapshot(e.JobID)
	_, err = f.store.Succeed(f.ctx, jobs.SucceedParams{JobID: e.JobID, Worker: "worker-a", Answer: jobs.Answer{Output: "from a"}})
	wantErr(t, err, jobs.ErrNotClaimed, "stale Succeed")
	_, err = f.store.Fail(f.ctx, jobs.FailParams{JobID: e.JobID, Worker: "worker-a", Kind: jobs.KindTimeout})
	wantErr(t, err, jobs.ErrNotClaimed, "stale Fail")
	_, err = f.store.Requeue(f.ctx, jobs.RequeueParams{JobID: e.JobID, Worker: "worker-a", Kind: jobs.KindTimeout})
	wantErr(t, err, jobs.ErrNotClaimed, "stale Requeue")
	n, err := f.store.Heartbeat(f.ctx, jobs.HeartbeatParams{Worker: "worker-a", JobIDs: []string{e.JobID}})
	if n != 0 {
		t.Errorf("stale Heartbeat updated %d jobs", n)
	}
	wantErr(t, err, jobs.ErrNotClaimed, "stale Heartbeat")
	err = f.store.AppendAttempt(f.ctx, jobs.AttemptParams{JobID: e.JobID, Worker: "worker-a", Data: []byte(`{"by":"a"}`)})
	wantErr(t, err, jobs.ErrNotClaimed, "stale AppendAttempt")
	f.unchanged(before, "the stale worker's writes")

	if n, err := f.store.Heartbeat(f.ctx, jobs.HeartbeatParams{Worker: "worker-b", JobIDs: []string{e.JobID}}); n != 1 || err != nil {
		t.Errorf("Heartbeat by the owner = %d, %v", n, err)
	}
	if err := f.store.AppendAttempt(f.ctx, jobs.AttemptParams{JobID: e.JobID, Worker: "worker-b", Data: []byte(`{"by":"b"}`)}); err != nil {
		t.Errorf("AppendAttempt by the owner: %v", err)
	}
	done, err := f.store.Succeed(f.ctx, jobs.SucceedParams{JobID: e.JobID, Worker: "worker-b", Answer: jobs.Answer{Output: "from b"}})
	if err != nil {
		t.Fatalf("Succeed by the owner: %v", err)
	}
	_, err = f.store.Succeed(f.ctx, jobs.SucceedParams{JobID: e.JobID, Worker: "worker-a", Answer: jobs.Answer{Output: "from a"}})
	wantErr(t, err, jobs.ErrNotClaimed, "stale Succeed after the owner's")
	_, err = f.store.Succeed(f.ctx, jobs.SucceedParams{JobID: e.JobID, Worker: "worker-b", Answer: jobs.Answer{Output: "twice"}})
	wantErr(t, err, jobs.ErrNotClaimed, "second Succeed by the owner")

	resp, err := f.store.GetResponse(f.ctx, "", done.ResponseID)
	if err != nil {
		t.Fatalf("GetResponse: %v", err)
	}
	if resp.Output != "from b" || resp.JobID != e.JobID {
		t.Errorf("response = %+v, want worker-b's", resp)
	}
	attempts := 0
	for _, ev := range f.events(e.JobID) {
		if ev.Type == jobs.EventAttempt {
			attempts++
			if !jsonEqual(ev.Data, []byte(`{"by":"b"}`)) {
				t.Errorf("attempt event from the stale worker: %s", ev.Data)
			}
		}
	}
	if attempts != 1 {
		t.Errorf("%d attempt events, want 1", attempts)
	}
}

func testCancel(t *testing.T, h Harness) {
	f := setup(t, h)
	q := f.enqueue(jobs.EnqueueParams{OrgID: "org-1"})
	_, err := f.store.Cancel(f.ctx, jobs.CancelParams{OrgID: "org-2", JobID: q.JobID})
	wantErr(t, err, jobs.ErrNotFound, "Cancel in another org")
	_, err = f.store.Cancel(f.ctx, jobs.CancelParams{JobID: jobs.NewID()})
	wantErr(t, err, jobs.ErrNotFound, "Cancel unknown job")
	c, err := f.store.Cancel(f.ctx, jobs.CancelParams{OrgID: "org-1", JobID: q.JobID})
	if err != nil || c.State != jobs.Cancelled {
		t.Fatalf("Cancel queued = %+v, %v", c, err)
	}
	sameTime(t, "FinishedAt", c.FinishedAt, f.now())
	if got := f.claim("w", 10); len(got) != 0 {
		t.Errorf("claimed a cancelled job: %v", ids(got))
	}

	// Running: the worker's next write finds out.
	r, worker := f.jobIn(jobs.Running)
	f.advance(time.Second)
	c, err = f.store.Cancel(f.ctx, jobs.CancelParams{JobID: r.ID})
	if err != nil || c.State != jobs.Cancelled {
		t.Fatalf("Cancel running = %+v, %v", c, err)
	}
	sameTime(t, "FinishedAt", c.FinishedAt, f.now())
	before := f.snapshot(r.ID)
	_, err = f.store.Succeed(f.ctx, jobs.SucceedParams{JobID: r.ID, Worker: worker, Answer: jobs.Answer{Output: "late"}})
	wantErr(t, err, jobs.ErrNotClaimed, "Succeed after cancel")
	_, err = f.store.Fail(f.ctx, jobs.FailParams{JobID: r.ID, Worker: worker, Kind: jobs.KindTimeout})
	wantErr(t, err, jobs.ErrNotClaimed, "Fail after cancel")
	_, err = f.store.Requeue(f.ctx, jobs.RequeueParams{JobID: r.ID, Worker: worker})
	wantErr(t, err, jobs.ErrNotClaimed, "Requeue after cancel")
	n, err := f.store.Heartbeat(f.ctx, jobs.HeartbeatParams{Worker: worker, JobIDs: []string{r.ID}})
	if n != 0 {
		t.Errorf("Heartbeat after cancel updated %d", n)
	}
	wantErr(t, err, jobs.ErrNotClaimed, "Heartbeat after cancel")
	err = f.store.AppendAttempt(f.ctx, jobs.AttemptParams{JobID: r.ID, Worker: worker, Data: []byte(`{}`)})
	wantErr(t, err, jobs.ErrNotClaimed, "AppendAttempt after cancel")
	f.unchanged(before, "a cancelled job's worker")
	if before.response != nil {
		t.Errorf("a cancelled job has a response")
	}
	f.expectTransition(r.ID, jobs.Running, jobs.Cancelled)
}

func testRetry(t *testing.T, h Harness) {
	f := setup(t, h)
	e := f.enqueue(jobs.EnqueueParams{OrgID: "org-1", CreatedBy: "alice", Priority: ptr(30), MaxAttempts: 4,
		ExecutionOptions: jobs.ExecutionOptions{Model: "m2"}})
	f.claimID("w1", e.JobID)
	if _, err := f.store.Fail(f.ctx, jobs.FailParams{JobID: e.JobID, Worker: "w1", Kind: jobs.KindParse, Message: "bad json"}); err != nil {
		t.Fatal(err)
	}
	_, err := f.store.Retry(f.ctx, jobs.RetryParams{OrgID: "org-2", JobID: e.JobID})
	wantErr(t, err, jobs.ErrNotFound, "Retry in another org")
	_, err = f.store.Retry(f.ctx, jobs.RetryParams{JobID: jobs.NewID()})
	wantErr(t, err, jobs.ErrNotFound, "Retry unknown job")
	before := f.snapshot(e.JobID)
	_, err = f.store.Retry(f.ctx, jobs.RetryParams{JobID: e.JobID, Priority: ptr(101)})
	wantErr(t, err, jobs.ErrInvalid, "Retry with priority 101")
	f.unchanged(before, "an invalid Retry")

	now := f.advance(time.Minute)
	n1, err := f.store.Retry(f.ctx, jobs.RetryParams{OrgID: "org-1", JobID: e.JobID})
	if err != nil {
		t.Fatalf("Retry: %v", err)
	}
	if n1.ID == e.JobID || n1.PromptID != e.PromptID || n1.State != jobs.Queued || n1.Attempt != 1 ||
		n1.Priority != 30 || n1.MaxAttempts != 4 || n1.Supersedes != e.JobID || n1.OrgID != "org-1" ||
		n1.CreatedBy != "alice" || n1.WorkerClaim != "" || n1.ErrorKind != "" || !jsonEqual(n1.ExecutionOptions.JSON(), []byte(`{"model":"m2"}`)) {
		t.Errorf("retry job = %+v", n1)
	}
	sameTime(t, "retry CreatedAt", n1.CreatedAt, now)
	sameTime(t, "retry AvailableAt", n1.AvailableAt, now)
	old := f.job(e.JobID)
	if old.State != jobs.Superseded || old.ErrorKind != jobs.KindParse {
		t.Errorf("old job = %+v, want superseded keeping its error", old)
	}
	f.expectTransition(e.JobID, jobs.Failed, jobs.Superseded)
	f.expectTransition(n1.ID, "", jobs.Queued)

	// A retry is not retriable while queued; the old job never again.
	_, err = f.store.Retry(f.ctx, jobs.RetryParams{JobID: n1.ID})
	wantTransitionError(t, err, jobs.Queued, jobs.Superseded, "Retry queued")
	_, err = f.store.Retry(f.ctx, jobs.RetryParams{JobID: e.JobID})
	wantTransitionError(t, err, jobs.Superseded, jobs.Superseded, "Retry superseded")
	f.claimID("w2", n1.ID)
	_, err = f.store.Retry(f.ctx, jobs.RetryParams{JobID: n1.ID})
	wantTransitionError(t, err, jobs.Running, jobs.Superseded, "Retry running")
	if _, err := f.store.Succeed(f.ctx, jobs.SucceedParams{JobID: n1.ID, Worker: "w2", Answer: jobs.Answer{Output: "ok"}}); err != nil {
		t.Fatal(err)
	}

	f.advance(time.Minute)
	n2, err := f.store.Retry(f.ctx, jobs.RetryParams{JobID: n1.ID, Priority: ptr(5)})
	if err != nil {
		t.Fatalf("Retry succeeded job: %v", err)
	}
	if n2.Priority != 5 || n2.Supersedes != n1.ID {
		t.Errorf("second retry = %+v", n2)
	}
	// The superseded job keeps its response.
	if _, err := f.store.GetResponse(f.ctx, "", jobs.ResponseID(e.PromptID, n1.ID)); err != nil {
		t.Errorf("superseded job's response: %v", err)
	}

	hist, err := f.store.PromptJobs(f.ctx, "org-1", e.PromptID)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{e.JobID, n1.ID, n2.ID}
	if got := ids(hist); len(got) != 3 || got[0] != want[0] || got[1] != want[1] || got[2] != want[2] {
		t.Errorf("PromptJobs = %v, want %v (oldest first)", got, want)
	} else if hist[0].State != jobs.Superseded || hist[1].State != jobs.Superseded || hist[2].State != jobs.Queued {
		t.Errorf("history states %s %s %s", hist[0].State, hist[1].State, hist[2].State)
	}
}

// testRetryPriority checks the priority of a retry: the one given, 0
// included, else the priority of the job it supersedes (not the enqueue
// default).
func testRetryPriority(t *testing.T, h Harness) {
	f := setup(t, h)
	e := f.enqueue(jobs.EnqueueParams{OrgID: "org-1", Priority: ptr(30)})
	id := e.JobID
	for _, c := range []struct {
		priority *int
		want     int
	}{{ptr(0), 0}, {nil, 0}, {ptr(70), 70}, {nil, 70}} {
		if _, err := f.store.Cancel(f.ctx, jobs.CancelParams{JobID: id}); err != nil {
			t.Fatalf("Cancel: %v", err)
		}
		n, err := f.store.Retry(f.ctx, jobs.RetryParams{JobID: id, Priority: c.priority})
		if err != nil {
			t.Fatalf("Retry: %v", err)
		}
		if n.Priority != c.want || f.job(n.ID).Priority != c.want {
			t.Errorf("Retry of a job of priority %d with priority %v: %d, want %d", f.job(id).Priority, c.priority, n.Priority, c.want)
		}
		id = n.ID
	}
}
