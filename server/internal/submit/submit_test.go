package submit_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/promptkit/promptkit/internal/testkit"
	"github.com/promptkit/promptkit/internal/testkit/storekit"
	"github.com/promptkit/promptkit/jobs"
	"github.com/promptkit/promptkit/jobs/quota"
	"github.com/promptkit/promptkit/server/internal/apitest"
	"github.com/promptkit/promptkit/server/internal/auth"
	"github.com/promptkit/promptkit/server/internal/events"
	"github.com/promptkit/promptkit/server/internal/httpapi"
	"github.com/promptkit/promptkit/server/internal/submit"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// The identities the tests act as (apitest's).
var (
	ann = apitest.Ann
	bob = apitest.Bob
	bea = apitest.Bea
)

// fixture is a submit.Jobs on a SQLite store in t's directory, with a
// started events hub that polls only hourly (a wait is woken by the
// store's notifications), every part on one fake clock.
type fixture struct {
	t   *testing.T
	st  *storekit.Counting
	clk *testkit.Clock
	// stopServing ends Jobs.Serving, as the server's closing does.
	stopServing context.CancelFunc
	jobs        submit.Jobs
}

// setup builds the fixture; cfg, when set, changes the Auth's config
// (its store and clock are the fixture's).
func setup(t *testing.T, cfg *auth.Config) *fixture {
	t.Helper()
	clk := testkit.NewClock(apitest.Start)
	st := storekit.Count(storekit.SQLite.New(t).Open(t, jobs.Options{Now: clk.Now}))
	ac := auth.Config{SubmitRate: -1, OrgSubmitRate: -1}
	if cfg != nil {
		ac = *cfg
	}
	ac.Store, ac.Now = st, clk.Now
	hub := events.New(events.Config{Store: st, Poll: time.Hour, Recheck: time.Hour, KeepAlive: time.Hour, Buffer: 16,
		Log: testkit.TestLogger(t)})
	if err := hub.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := hub.Stop(context.Background()); err != nil {
			t.Error(err)
		}
	})
	serving, stop := context.WithCancel(context.Background())
	t.Cleanup(stop)
	return &fixture{t: t, st: st, clk: clk, stopServing: stop,
		jobs: submit.Jobs{Store: st, Auth: auth.New(ac), Hub: hub, Serving: serving}}
}

// admit admits p as id without a key, failing the test on an error.
func (f *fixture) admit(id auth.Identity, p jobs.EnqueueParams) submit.Admitted {
	f.t.Helper()
	a, err := f.jobs.Admit(context.Background(), id, p, "", "", "submission", false)
	if err != nil {
		f.t.Fatalf("Admit: %v", err)
	}
	return a
}

// succeed claims the oldest queued job, which must be jobID, and answers
// it.
func (f *fixture) succeed(jobID string) { f.t.Helper(); apitest.Succeed(f.t, f.st, jobID, "done") }

// count is how many jobs of org the store holds.
func (f *fixture) count(org string) int {
	f.t.Helper()
	n, err := f.st.CountJobs(context.Background(), jobs.JobFilter{OrgID: org})
	if err != nil {
		f.t.Fatal(err)
	}
	return n
}

// status is the HTTP status and code err is answered with.
func status(err error) (int, string) {
	p := httpapi.Classify(err)
	return p.Status, p.Code
}

// TestAdmitEnqueuesAsTheIdentity: the job is stored as the identity's
// (org, creator, token, whatever the params said), queued with the
// priority, schedule and dependency it was given.
func TestAdmitEnqueuesAsTheIdentity(t *testing.T) {
	t.Parallel()
	f := setup(t, nil)
	ctx := context.Background()
	first := f.admit(ann, jobs.EnqueueParams{Text: "first"})
	prio, later := 7, apitest.Start.Add(time.Hour)
	a := f.admit(ann, jobs.EnqueueParams{OrgID: "beta", CreatedBy: "mallory", TokenID: "tok_other", Text: "second",
		Priority: &prio, AvailableAt: later, DependsOn: first.JobID})
	if a.PromptID == "" || a.JobID == "" || a.State != jobs.Queued || a.Existing {
		t.Fatalf("admitted %+v, want a new queued job with ids", a.Enqueued)
	}
	j, err := f.st.GetJob(ctx, "acme", a.JobID)
	if err != nil {
		t.Fatalf("the job in acme: %v", err)
	}
	if j.OrgID != "acme" || j.CreatedBy != "ann" || j.TokenID != "tok_ann" || j.Priority != 7 ||
		!j.AvailableAt.Equal(later) || j.DependsOn != first.JobID {
		t.Errorf("stored %+v; want acme's, by ann with tok_ann, priority 7, available at %v, after %s", j, later, first.JobID)
	}
	if p, err := f.st.GetPrompt(ctx, "acme", a.PromptID); err != nil || p.Text != "second" || p.CreatedBy != "ann" {
		t.Errorf("stored prompt %+v %v", p, err)
	}
	// A member may depend on its own jobs only: bob cannot wait for ann's.
	_, err = f.jobs.Admit(ctx, bob, jobs.EnqueueParams{Text: "x", DependsOn: first.JobID}, "", "", "submission", false)
	if code, _ := status(err); code < 400 || code >= 500 {
		t.Errorf("bob depending on ann's job: %v (%d), want a 4xx", err, code)
	}
	if n := f.count("acme"); n != 2 {
		t.Errorf("acme holds %d jobs, want 2", n)
	}
}

// TestAdmitIdempotencyKey: a repeat of a key with the same request finds
// the same job and stores nothing; the key with another request, or the
// same request by another user of the org, is a 422 conflict; another
// org's key of the same name is its own.
func TestAdmitIdempotencyKey(t *testing.T) {
	t.Parallel()
	f := setup(t, nil)
	ctx := context.Background()
	p := jobs.EnqueueParams{Text: "once"}
	a, err := f.jobs.Admit(ctx, ann, p, "k1", "hash-1", "submission", false)
	if err != nil || a.Existing {
		t.Fatalf("first: %+v %v", a.Enqueued, err)
	}
	again, err := f.jobs.Admit(ctx, ann, p, "k1", "hash-1", "submission", false)
	if err != nil || !again.Existing || again.JobID != a.JobID || again.PromptID != a.PromptID {
		t.Fatalf("repeat: %+v %v, want the first job (%s) again", again.Enqueued, err, a.JobID)
	}
	for _, c := range []struct {
		name string
		id   auth.Identity
		hash string
	}{{"another request", ann, "hash-2"}, {"another user", bob, "hash-1"}} {
		_, err := f.jobs.Admit(ctx, c.id, p, "k1", c.hash, "submission", false)
		if code, name := status(err); code != http.StatusUnprocessableEntity || name != "idempotency_conflict" {
			t.Errorf("%s with the key: %v (%d %s), want 422 idempotency_conflict", c.name, err, code, name)
		}
	}
	if n := f.count("acme"); n != 1 {
		t.Errorf("acme holds %d jobs, want the first alone", n)
	}
	other, err := f.jobs.Admit(ctx, bea, p, "k1", "hash-1", "submission", false)
	if err != nil || other.Existing || other.JobID == a.JobID {
		t.Errorf("beta's k1: %+v %v, want a job of its own", other.Enqueued, err)
	}
}

// TestAdmitCheck: the admission check's refusal is the submission's,
// naming the field at fault, and nothing is queued.
func TestAdmitCheck(t *testing.T) {
	t.Parallel()
	f := setup(t, nil)
	var checked jobs.EnqueueParams
	f.jobs.Check = func(_ context.Context, p jobs.EnqueueParams) error {
		checked = p
		if p.Profile == "nowhere" {
			return &jobs.InvalidError{Field: "profile", Reason: "no worker serves it"}
		}
		return nil
	}
	_, err := f.jobs.Admit(context.Background(), ann, jobs.EnqueueParams{Text: "x", Profile: "nowhere"}, "", "", "submission", false)
	p := httpapi.Classify(err)
	if p.Status != http.StatusBadRequest || p.Param != "profile" || !strings.Contains(p.Message, "profile") {
		t.Errorf("refused by the check: %v (%+v), want a 400 naming profile", err, p)
	}
	if checked.Profile != "nowhere" {
		t.Errorf("the check saw %+v", checked)
	}
	if n := f.count("acme"); n != 0 {
		t.Errorf("%d jobs queued after the check refused, want none", n)
	}
	f.admit(ann, jobs.EnqueueParams{Text: "y", Profile: "somewhere"})
	if n := f.count("acme"); n != 1 {
		t.Errorf("%d jobs queued after the check passed, want 1", n)
	}
}

// TestAdmitTakesTheSubmissionRate: each admission spends one of the
// identity's submissions; past the burst it is a 429 with a Retry-After,
// until the clock refills the bucket; another identity has its own.
func TestAdmitTakesTheSubmissionRate(t *testing.T) {
	t.Parallel()
	f := setup(t, &auth.Config{SubmitRate: 1, SubmitBurst: 2, OrgSubmitRate: -1})
	ctx := context.Background()
	f.admit(ann, jobs.EnqueueParams{Text: "1"})
	f.admit(ann, jobs.EnqueueParams{Text: "2"})
	_, err := f.jobs.Admit(ctx, ann, jobs.EnqueueParams{Text: "3"}, "", "", "submission", false)
	p := httpapi.Classify(err)
	if p.Status != http.StatusTooManyRequests || p.Code != "rate_limited" || p.RetryAfter <= 0 {
		t.Fatalf("the third in a burst of two: %v (%+v), want a 429 with a Retry-After", err, p)
	}
	f.admit(bob, jobs.EnqueueParams{Text: "bob's"})
	f.clk.Advance(time.Second)
	f.admit(ann, jobs.EnqueueParams{Text: "3 again"})
	if n := f.count("acme"); n != 4 {
		t.Errorf("%d jobs queued, want 4", n)
	}
}

// TestAdmitReleasesWhatDidNotRun: under an org limit of two requests a
// minute, a repeat of a key and a submission the check refuses do not
// count: two new jobs are still admitted, and the next is a 429 naming
// the limit.
func TestAdmitReleasesWhatDidNotRun(t *testing.T) {
	t.Parallel()
	f := setup(t, nil)
	ctx := context.Background()
	if _, err := f.st.SetLimit(ctx, jobs.Limit{Scope: jobs.LimitOrg, Subject: "acme", RequestsPerMinute: 2}); err != nil {
		t.Fatal(err)
	}
	f.jobs.Quotas = quota.New(quota.Config{Store: f.st, Now: f.clk.Now})
	f.jobs.Check = func(_ context.Context, p jobs.EnqueueParams) error {
		if p.Text == "refused" {
			return &jobs.InvalidError{Field: "text", Reason: "refused"}
		}
		return nil
	}
	if _, err := f.jobs.Admit(ctx, ann, jobs.EnqueueParams{Text: "keyed"}, "k", "h", "submission", false); err != nil {
		t.Fatal(err)
	}
	if a, err := f.jobs.Admit(ctx, ann, jobs.EnqueueParams{Text: "keyed"}, "k", "h", "submission", false); err != nil || !a.Existing {
		t.Fatalf("the repeat: %+v %v", a.Enqueued, err)
	}
	if _, err := f.jobs.Admit(ctx, ann, jobs.EnqueueParams{Text: "refused"}, "", "", "submission", false); err == nil {
		t.Fatal("the check's refusal was admitted")
	}
	f.admit(ann, jobs.EnqueueParams{Text: "second"})
	_, err := f.jobs.Admit(ctx, ann, jobs.EnqueueParams{Text: "third"}, "", "", "submission", false)
	p := httpapi.Classify(err)
	if p.Status != http.StatusTooManyRequests || !strings.Contains(p.Message, "requests") {
		t.Errorf("the third new job: %v (%+v), want a 429 naming the request rate", err, p)
	}
	if err := f.jobs.Spendable(ctx, ann); err != nil {
		t.Errorf("Spendable with no budget set: %v", err)
	}
}

// TestAdmitRunNow: with RunNow set, an admission the caller waits for
// runs at once when a slot is free (nothing is queued by Admit), goes to
// the queue when none is, and one not waited for never asks.
func TestAdmitRunNow(t *testing.T) {
	t.Parallel()
	f := setup(t, nil)
	ctx := context.Background()
	var asked []jobs.EnqueueParams
	slot := true
	f.jobs.RunNow = func(_ context.Context, p jobs.EnqueueParams) (jobs.Enqueued, <-chan jobs.Job, error) {
		asked = append(asked, p)
		if !slot {
			return jobs.Enqueued{}, nil, jobs.ErrNoSlot
		}
		return jobs.Enqueued{PromptID: "p_now", JobID: "j_now", State: jobs.Running}, make(chan jobs.Job), nil
	}
	a, err := f.jobs.Admit(ctx, ann, jobs.EnqueueParams{Text: "now"}, "", "", "submission", true)
	if err != nil || a.JobID != "j_now" || len(asked) != 1 || asked[0].OrgID != "acme" || asked[0].CreatedBy != "ann" {
		t.Fatalf("with a slot: %+v %v, asked %+v; want RunNow's job, asked as ann of acme", a.Enqueued, err, asked)
	}
	slot = false
	a, err = f.jobs.Admit(ctx, ann, jobs.EnqueueParams{Text: "queued"}, "", "", "submission", true)
	if err != nil || len(asked) != 2 || a.State != jobs.Queued || f.count("acme") != 1 {
		t.Fatalf("without a slot: %+v %v; want it queued in the store", a.Enqueued, err)
	}
	if _, err := f.jobs.Admit(ctx, ann, jobs.EnqueueParams{Text: "later"}, "", "", "submission", false); err != nil || len(asked) != 2 {
		t.Fatalf("not waited for: %v, RunNow asked %d times; want it not asked", err, len(asked))
	}
}

// awaitResult is what AwaitJob returned.
type awaitResult struct {
	job jobs.Job
	err error
}

// await runs AwaitJob in a goroutine; its result arrives on the channel.
func (f *fixture) await(ctx context.Context, a submit.Admitted, wait time.Duration) <-chan awaitResult {
	out := make(chan awaitResult, 1)
	go func() {
		j, err := f.jobs.AwaitJob(ctx, "acme", a, a.JobID, wait)
		out <- awaitResult{j, err}
	}()
	return out
}

// result receives AwaitJob's result; a guard against a hang, not a
// measure: every wait under test ends on a signal.
func result(t *testing.T, ch <-chan awaitResult) awaitResult {
	t.Helper()
	select {
	case r := <-ch:
		return r
	case <-time.After(time.Minute):
		t.Fatal("AwaitJob did not return")
		return awaitResult{}
	}
}

// TestAwaitJobWokenByTheEnd: a wait for a queued job looks once, then is
// woken by the hub when the job ends, and returns it as it ended.
func TestAwaitJobWokenByTheEnd(t *testing.T) {
	t.Parallel()
	f := setup(t, nil)
	a := f.admit(ann, jobs.EnqueueParams{Text: "wait for me"})
	f.st.Take()
	done := f.await(context.Background(), a, time.Hour)
	testkit.WaitFor(t, time.Minute, "the wait's first look", func() (bool, string) {
		n := f.st.Calls("GetJob")
		return n >= 1, "no look yet"
	})
	f.succeed(a.JobID)
	r := result(t, done)
	if r.err != nil || r.job.ID != a.JobID || r.job.State != jobs.Succeeded {
		t.Fatalf("AwaitJob: %+v %v, want the job succeeded", r.job, r.err)
	}
}

// TestAwaitJobEnds: a wait ends with the job as it is, without an error,
// when its time is up or when serving ends; the caller's going is its
// context's error.
func TestAwaitJobEnds(t *testing.T) {
	t.Parallel()
	f := setup(t, nil)
	a := f.admit(ann, jobs.EnqueueParams{Text: "nobody runs this"})

	if r := result(t, f.await(context.Background(), a, time.Nanosecond)); r.err != nil || r.job.ID != a.JobID || r.job.State != jobs.Queued {
		t.Errorf("the wait's time up: %+v %v, want the job queued", r.job, r.err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	gone := f.await(ctx, a, time.Hour)
	cancel()
	if r := result(t, gone); !errors.Is(r.err, context.Canceled) {
		t.Errorf("the caller gone: %+v %v, want context.Canceled", r.job, r.err)
	}
	closing := f.await(context.Background(), a, time.Hour)
	f.stopServing()
	if r := result(t, closing); r.err != nil || r.job.State != jobs.Queued {
		t.Errorf("serving ended: %+v %v, want the job queued at once", r.job, r.err)
	}
}

// TestAwaitJobFollowsTheRetry: a wait for a job a retry superseded
// answers with the retry's job.
func TestAwaitJobFollowsTheRetry(t *testing.T) {
	t.Parallel()
	f := setup(t, nil)
	ctx := context.Background()
	a := f.admit(ann, jobs.EnqueueParams{Text: "retried"})
	if _, err := f.st.Cancel(ctx, jobs.CancelParams{JobID: a.JobID}); err != nil {
		t.Fatal(err)
	}
	retry, err := f.st.Retry(ctx, jobs.RetryParams{OrgID: "acme", JobID: a.JobID})
	if err != nil {
		t.Fatal(err)
	}
	f.succeed(retry.ID)
	r := result(t, f.await(ctx, a, time.Hour))
	if r.err != nil || r.job.ID != retry.ID || r.job.State != jobs.Succeeded {
		t.Errorf("AwaitJob of the superseded job: %+v %v, want the retry %s succeeded", r.job, r.err, retry.ID)
	}
}

// TestAwaitJobRunNow: a job this process's worker runs is answered as the
// worker settles it, without a look at the store; one the worker puts
// back in the queue is waited for through the store.
func TestAwaitJobRunNow(t *testing.T) {
	t.Parallel()
	f := setup(t, nil)
	ctx := context.Background()
	queued := f.admit(ann, jobs.EnqueueParams{Text: "in the store"})
	var settled chan jobs.Job
	f.jobs.RunNow = func(_ context.Context, p jobs.EnqueueParams) (jobs.Enqueued, <-chan jobs.Job, error) {
		settled = make(chan jobs.Job, 1)
		return jobs.Enqueued{PromptID: queued.PromptID, JobID: queued.JobID, State: jobs.Running}, settled, nil
	}
	a, err := f.jobs.Admit(ctx, ann, jobs.EnqueueParams{Text: "now"}, "", "", "submission", true)
	if err != nil {
		t.Fatal(err)
	}
	settled <- jobs.Job{ID: queued.JobID, State: jobs.Succeeded}
	f.st.Take()
	r := result(t, f.await(ctx, a, time.Hour))
	if r.err != nil || r.job.State != jobs.Succeeded {
		t.Fatalf("settled by the worker: %+v %v", r.job, r.err)
	}
	if n := f.st.Calls("GetJob"); n != 0 {
		t.Errorf("%d looks at the store for a job the worker settled, want none", n)
	}

	// Back to the queue: the worker hands over a queued job, and the wait
	// goes on in the store, which says queued once the time is up.
	a, err = f.jobs.Admit(ctx, ann, jobs.EnqueueParams{Text: "now again"}, "", "", "submission", true)
	if err != nil {
		t.Fatal(err)
	}
	settled <- jobs.Job{ID: queued.JobID, State: jobs.Queued}
	r = result(t, f.await(ctx, a, time.Nanosecond))
	if r.err != nil || r.job.State != jobs.Queued || f.st.Calls("GetJob") == 0 {
		t.Errorf("requeued by the worker: %+v %v after %d looks, want the store's job, queued", r.job, r.err, f.st.Calls("GetJob"))
	}
}

// TestSameRequestKey: the derived key is marked as derived, the same for
// the same caller and request, and differs when the user, the token or
// the request does.
func TestSameRequestKey(t *testing.T) {
	t.Parallel()
	k := submit.SameRequestKey(ann, "h")
	if !strings.HasPrefix(k, "same-request:") || k != submit.SameRequestKey(ann, "h") {
		t.Fatalf("key %q: want a stable key marked same-request:", k)
	}
	otherToken := ann
	otherToken.Key = "tok_ann2"
	for name, other := range map[string]string{
		"another user":    submit.SameRequestKey(bob, "h"),
		"another token":   submit.SameRequestKey(otherToken, "h"),
		"another request": submit.SameRequestKey(ann, "h2"),
	} {
		if other == k {
			t.Errorf("%s: the same key %q", name, k)
		}
	}
	if s := submit.Subject(ann); s != (quota.Subject{Org: "acme", Token: "tok_ann"}) {
		t.Errorf("Subject(ann) = %+v", s)
	}
	if s := submit.Subject(auth.Local); s != (quota.Subject{Org: auth.LocalOrg}) {
		t.Errorf("Subject(local) = %+v, want the org alone", s)
	}
}
