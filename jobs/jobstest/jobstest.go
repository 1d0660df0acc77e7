// Package jobstest is the conformance suite every jobs.Store runs: one
// behaviour, two databases. A store's test calls Run with a Harness that
// opens fresh stores, and its TestMain calls Main (or RunChildIfRequested)
// so the suite can re-exec the test binary as a second claiming process
// (and check that no goroutine outlives the tests).
//
// The suite never sleeps to synchronise and has no timing thresholds:
// time-dependent rules run against a fake Clock passed as Options.Now, and
// concurrency tests check outcomes (every job claimed exactly once, every
// event seen exactly once), not speed.
//
// # Readings of the contract
//
// Where the jobs.Store documentation leaves a choice, the suite pins one:
//
//   - Heartbeat returns how many jobs it updated and, when that is fewer
//     than the distinct IDs given, also ErrNotClaimed (a stale worker's
//     heartbeat is a finalizing write in the package doc's sense).
//   - ChangesSince loses no change stamped in the same clock instant as
//     the previous AsOf, even with a clock that does not move; a job may
//     come back more than once, always in its current state.
//   - An idempotent repeat returns the first job's current state.
//   - An expiring key's grace runs from the latest finished_at of its
//     prompt's jobs, and the key holds strictly before it ends; a job
//     queued by a retry of the prompt makes the key hold again.
//   - A RequestHash is compared with the one stored with the key's prompt
//     (the first call's, which a later repeat never replaces): when the
//     first call had none, no repeat conflicts. Within a batch, the first
//     item with a key is that first call.
//   - A token hash is stored once: CreateToken with a hash already stored
//     (revoked or not) is ErrInvalid.
//   - Every parameter the jobs Normalize methods refuse is ErrInvalid with
//     Normalize's error text, on every store; a ListJobs Limit above 1000
//     is capped, not refused.
//   - A transition event's Data is exactly jobs.TransitionData's JSON for
//     that transition (compared as decoded JSON), and none when it is
//     empty.
//   - ListJobs' Next is jobs.CursorAfter(the page's last job).String().
//   - JobEvents for a job outside the org is ErrNotFound or empty.
//   - Store.Notifier returns one Notifier for the store's life. Its
//     Notify on a closed store returns a closed channel, and Close may be
//     called again (returning nil).
//   - A store's Notifier wakes once when the store starts watching the
//     database for other stores' writes (on its first subscription), and
//     from then on for every batch status change (MoveBatch, CancelBatch,
//     FinishBatch) another store on the database commits, as it does for
//     enqueues and job state changes.
//   - Check looks at the database each time: it fails once its context
//     has ended and on a closed store. Refusals (ErrNotClaimed,
//     ErrInvalid, ErrNotFound, an illegal transition, an idempotency
//     conflict) and calls whose context ended leave it passing.
//   - A prompt's chat request comes back as it was stored, byte for byte
//     once encoded as JSON: a JSON schema's keys keep their order (a
//     provider writes a structured answer's keys in the schema's order).
//   - Refused file and batch writes (ErrFileTooLarge, ErrBatchChanged, a
//     failing upload reader) leave Check passing, and store nothing.
//   - MoveBatch to validating or to a status that does not exist, and
//     FinishBatch to a status that is not terminal, are ErrInvalid.
//     MoveBatch with Errors empty but not nil clears the batch's errors.
//   - CancelBatch of a batch already cancelling or cancelled writes
//     nothing and returns it as GetBatch would (its cancelling_at is the
//     first cancel's).
//   - A refused FinishBatch (ErrInvalid, ErrBatchChanged, ErrNotFound, a
//     failing reader) stores nothing, neither a file nor a move; of
//     concurrent FinishBatch calls from one status, one finishes the
//     batch and the others are ErrBatchChanged.
//   - A retry's priority is RetryParams.Priority when set (0 included),
//     else the superseded job's.
//   - A finished batch's output and error files are named
//     "<batch ID>_output.jsonl" and "<batch ID>_error.jsonl".
//   - BatchProgress of an unknown batch is ErrNotFound; BatchResults of
//     one is empty, and CancelBatchJobs cancels nothing.
//   - DeletePrompt leaves every other prompt's jobs, events and
//     responses as they were (event numbers included), and a thread whose
//     parent it deleted ends there, as after Archive.
//   - A JobFilter's Until is exclusive at the stored microsecond: a time
//     within a job's microsecond but after it lets the job in. A job
//     matches a Backend when any ledger row of it names that backend
//     (a retry's new job has none of its predecessor's).
//   - Metrics percentiles are nearest-rank; superseded jobs are not in the
//     data. Per org, the average latency is in whole microseconds, rounded
//     down.
package jobstest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/promptkit/promptkit/internal/testkit"
	"github.com/promptkit/promptkit/jobs"
)

// Harness opens stores for the suite.
type Harness struct {
	// NewDatabase returns a DSN naming a new, empty database for t, and
	// registers with t.Cleanup whatever removes it (cleanups run after the
	// suite has closed the test's stores, so one may also check the
	// database first).
	NewDatabase func(t *testing.T) string
	// Open opens a store on the database dsn names, migrating it if
	// needed; the caller closes it. The suite calls it in this process
	// and in child processes (see RunChildIfRequested).
	Open func(ctx context.Context, dsn string, opts jobs.Options) (jobs.Store, error)
	// CrossProcessDeltas says that answer pieces one store publishes
	// reach the readers of another store on the same database
	// (PostgreSQL's notifications), not only its own.
	CrossProcessDeltas bool
}

// Opener adapts a store's Open function to Harness.Open.
func Opener[S jobs.Store](open func(ctx context.Context, dsn string, opts jobs.Options) (S, error)) func(context.Context, string, jobs.Options) (jobs.Store, error) {
	return func(ctx context.Context, dsn string, opts jobs.Options) (jobs.Store, error) {
		s, err := open(ctx, dsn, opts)
		if err != nil {
			return nil, err
		}
		return s, nil
	}
}

// Run runs every conformance test as a parallel subtest of t; each opens
// its own store.
func Run(t *testing.T, h Harness) {
	tests := []struct {
		name string
		fn   func(*testing.T, Harness)
	}{
		{"EnqueueAndGet", testEnqueueAndGet},
		{"EnqueueInvalid", testEnqueueInvalid},
		{"EnqueueReferenceUser", testEnqueueReferenceUser},
		{"LookupNUL", testLookupNUL},
		{"ParamsInvalid", testParamsInvalid},
		{"EnqueueBatch", testEnqueueBatch},
		{"EnqueueBatchLargeKeyed", testEnqueueBatchLargeKeyed},
		{"EnqueueConcurrentIsolation", testEnqueueConcurrentIsolation},
		{"Idempotency", testIdempotency},
		{"IdempotencyConflict", testIdempotencyConflict},
		{"IdempotencyConflictBatch", testIdempotencyConflictBatch},
		{"ExpiringKey", testExpiringKey},
		{"ExpiringKeyConcurrent", testExpiringKeyConcurrent},
		{"TransitionsAllowed", testTransitionsAllowed},
		{"TransitionsForbidden", testTransitionsForbidden},
		{"TerminalImmutable", testTerminalImmutable},
		{"StaleClaim", testStaleClaim},
		{"ClaimFields", testClaimFields},
		{"ClaimConcurrent", testClaimConcurrent},
		{"ClaimTwoProcesses", testClaimTwoProcesses},
		{"PriorityThenAge", testPriorityThenAge},
		{"PriorityCeiling", testPriorityCeiling},
		{"NotBefore", testNotBefore},
		{"Dependencies", testDependencies},
		{"Heartbeat", testHeartbeat},
		{"SucceedResponse", testSucceedResponse},
		{"Requeue", testRequeue},
		{"FailAndAttempt", testFailAndAttempt},
		{"FinishWithAttempts", testFinishWithAttempts},
		{"Claimed", testClaimed},
		{"EnqueueClaimAs", testEnqueueClaimAs},
		{"ErrorMessageBounded", testErrorMessageBounded},
		{"ReclaimHeartbeatEdge", testReclaimHeartbeatEdge},
		{"ReclaimStuckEdges", testReclaimStuckEdges},
		{"ReclaimInvalid", testReclaimInvalid},
		{"Cancel", testCancel},
		{"Retry", testRetry},
		{"RetryPriority", testRetryPriority},
		{"PromptJobsAndEvents", testPromptJobsAndEvents},
		{"BatchReads", testBatchReads},
		{"ListJobsFilters", testListJobsFilters},
		{"ListJobsPagination", testListJobsPagination},
		{"ListJobsConcurrentInserts", testListJobsConcurrentInserts},
		{"ListJobsCurrent", testListJobsCurrent},
		{"JobFilter", testJobFilter},
		{"CancelRetryAudit", testCancelRetryAudit},
		{"BulkCancel", testBulkCancel},
		{"BulkTruncated", testBulkTruncated},
		{"BulkRetry", testBulkRetry},
		{"BulkSkipped", testBulkSkipped},
		{"ChangesSince", testChangesSince},
		{"ChangesSinceSameInstant", testChangesSinceSameInstant},
		{"ChangesSincePaging", testChangesSincePaging},
		{"ChangesSinceConcurrent", testChangesSinceConcurrent},
		{"ChangesSinceCreatedBy", testChangesSinceCreatedBy},
		{"EventsAfter", testEventsAfter},
		{"EventsAfterConcurrent", testEventsAfterConcurrent},
		{"EventsAfterJobFields", testEventsAfterJobFields},
		{"LatestEventSeq", testLatestEventSeq},
		{"Metrics", testMetrics},
		{"MetricsByOrg", testMetricsByOrg},
		{"MetricsOrgCounts", testMetricsOrgCounts},
		{"Thread", testThread},
		{"Archive", testArchive},
		{"DeletePrompt", testDeletePrompt},
		{"ArchiveBatches", testArchiveBatches},
		{"Notify", testNotify},
		{"Limits", testLimits},
		{"LimitsInvalid", testLimitsInvalid},
		{"FairOrder", testFairOrder},
		{"FairWeights", testFairWeights},
		{"FairIdleReturn", testFairIdleReturn},
		{"MaxRunning", testMaxRunning},
		{"PauseOrg", testPauseOrg},
		{"ClaimSkipProfiles", testClaimSkipProfiles},
		{"HoldBackend", testHoldBackend},
		{"Workers", testWorkers},
		{"Tokens", testTokens},
		{"TokensInvalid", testTokensInvalid},
		{"Check", testCheck},
		{"CheckAfterRefusals", testCheckAfterRefusals},
		{"CheckConcurrentWrites", testCheckConcurrentWrites},
		{"CheckClosed", testCheckClosed},
		{"FrontDoorFields", testFrontDoorFields},
		{"EmbeddingPrompts", testEmbeddingPrompts},
		{"Files", testFiles},
		{"ListFiles", testListFiles},
		{"FileContent", testFileContent},
		{"CreateBatch", testCreateBatch},
		{"ListBatches", testListBatches},
		{"MoveBatch", testMoveBatch},
		{"CancelBatch", testCancelBatch},
		{"CancelBatchEachStatus", testCancelBatchEachStatus},
		{"MoveBatchRules", testMoveBatchRules},
		{"FinishBatch", testFinishBatch},
		{"FinishBatchRefusals", testFinishBatchRefusals},
		{"FinishBatchOutcomes", testFinishBatchOutcomes},
		{"FinishBatchConcurrent", testFinishBatchConcurrent},
		{"BatchProgress", testBatchProgress},
		{"CancelBatchJobs", testCancelBatchJobs},
		{"BatchNotify", testBatchNotify},
		{"BatchResults", testBatchResults},
		{"ArchiveKeepsBatches", testArchiveKeepsBatches},
		{"Deltas", testDeltas},
		{"PacingMerge", testPacingMerge},
		{"PacingPeersExpire", testPacingPeersExpire},
		{"PacingInvalid", testPacingInvalid},
		{"PacingConcurrent", testPacingConcurrent},
		{"PacingCooldown", testPacingCooldown},
		{"Reserve", testReserve},
		{"ReserveConcurrent", testReserveConcurrent},
		{"UsageLedger", testUsageLedger},
		{"RecordCalls", testRecordCalls},
		{"UsageTokenOnJobs", testUsageTokenOnJobs},
		{"UsageCancel", testUsageCancel},
		{"BackendActivity", testBackendActivity},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.fn(t, h)
		})
	}
}

// T0 is where every fake clock in the suite starts: microsecond-aligned,
// as both databases store microseconds.
var T0 = time.Date(2030, 1, 2, 3, 4, 5, 6000, time.UTC)

// Clock is the test kit's fake clock, as jobs.Options.Now: it moves only
// when told to. It is safe for concurrent use.
type Clock = testkit.Clock

// NewClock returns a Clock showing t.
func NewClock(t time.Time) *Clock { return testkit.NewClock(t) }

// fixture is one test's collaborators.
type fixture struct {
	t     *testing.T
	ctx   context.Context
	store jobs.Store
	dsn   string
	clock *Clock // nil when the store runs on the real clock
	n     int    // counter for unique texts and workers
}

// setup opens a store on a fake clock starting at T0.
func setup(t *testing.T, h Harness) *fixture {
	t.Helper()
	c := NewClock(T0)
	f := open(t, h, jobs.Options{Now: c.Now})
	f.clock = c
	return f
}

// setupRealClock opens a store on the real clock, for concurrency tests.
func setupRealClock(t *testing.T, h Harness) *fixture {
	t.Helper()
	return open(t, h, jobs.Options{})
}

func open(t *testing.T, h Harness, opts jobs.Options) *fixture {
	t.Helper()
	dsn := h.NewDatabase(t)
	st, err := h.Open(t.Context(), dsn, opts)
	if err != nil {
		t.Fatalf("Harness.Open: %v", err)
	}
	t.Cleanup(func() {
		if err := st.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return &fixture{t: t, ctx: t.Context(), store: st, dsn: dsn}
}

// now is the fake clock's time.
func (f *fixture) now() time.Time {
	f.t.Helper()
	if f.clock == nil {
		f.t.Fatal("fixture has no fake clock")
	}
	return f.clock.Now()
}

func (f *fixture) advance(d time.Duration) time.Time { return f.clock.Advance(d) }

// enqueue enqueues p, filling Text and CreatedBy when empty.
func (f *fixture) enqueue(p jobs.EnqueueParams) jobs.Enqueued {
	f.t.Helper()
	f.n++
	if p.Text == "" && p.PromptRef == "" && p.Chat == nil && p.Embedding == nil {
		p.Text = "prompt text"
	}
	if p.CreatedBy == "" {
		p.CreatedBy = "user-1"
	}
	e, err := f.store.Enqueue(f.ctx, p)
	if err != nil {
		f.t.Fatalf("Enqueue: %v", err)
	}
	return e
}

// claim claims up to limit jobs for worker.
func (f *fixture) claim(worker string, limit int) []jobs.Job {
	f.t.Helper()
	got, err := f.store.Claim(f.ctx, jobs.ClaimParams{Worker: worker, Limit: limit})
	if err != nil {
		f.t.Fatalf("Claim: %v", err)
	}
	return got
}

// claimID claims exactly one job and fails unless it is id.
func (f *fixture) claimID(worker, id string) jobs.Job {
	f.t.Helper()
	got := f.claim(worker, 1)
	if len(got) != 1 || got[0].ID != id {
		f.t.Fatalf("Claim: got %v, want exactly job %s", ids(got), id)
	}
	return got[0]
}

// job reads a job, failing the test if it is missing.
func (f *fixture) job(id string) jobs.Job {
	f.t.Helper()
	j, err := f.store.GetJob(f.ctx, "", id)
	if err != nil {
		f.t.Fatalf("GetJob(%s): %v", id, err)
	}
	return j
}

// events reads a job's events.
func (f *fixture) events(id string) []jobs.Event {
	f.t.Helper()
	ev, err := f.store.JobEvents(f.ctx, "", id)
	if err != nil {
		f.t.Fatalf("JobEvents(%s): %v", id, err)
	}
	return ev
}

// allEvents pages through the whole event log.
func (f *fixture) allEvents() []jobs.Event {
	f.t.Helper()
	var out []jobs.Event
	var after int64
	for {
		page, err := f.store.EventsAfter(f.ctx, jobs.EventsParams{After: after, Limit: 1000})
		if err != nil {
			f.t.Fatalf("EventsAfter: %v", err)
		}
		if len(page) == 0 {
			return out
		}
		out = append(out, page...)
		after = page[len(page)-1].Seq
	}
}

// lastTransition returns a job's last transition event.
func (f *fixture) lastTransition(id string) jobs.Event {
	f.t.Helper()
	ev := f.events(id)
	for i := len(ev) - 1; i >= 0; i-- {
		if ev[i].Type == jobs.EventTransition {
			return ev[i]
		}
	}
	f.t.Fatalf("job %s has no transition event", id)
	return jobs.Event{}
}

// expectTransition checks a job's last transition event.
func (f *fixture) expectTransition(id string, from, to jobs.State) {
	f.t.Helper()
	e := f.lastTransition(id)
	if e.From != from || e.To != to {
		f.t.Errorf("job %s: last transition event %q → %q, want %q → %q", id, e.From, e.To, from, to)
	}
}

// expectData checks an event's Data against the TransitionData the
// stores must write for it, comparing decoded JSON (PostgreSQL may reorder
// keys); no data must be stored as none.
func (f *fixture) expectData(e jobs.Event, want jobs.TransitionData, what string) {
	f.t.Helper()
	w := want.JSON()
	if len(w) == 0 && len(e.Data) == 0 {
		return
	}
	if len(w) == 0 || !jsonEqual(e.Data, w) {
		f.t.Errorf("%s: event data %s, want %s", what, e.Data, w)
	}
}

// jobIn creates a job and drives it into state, returning it and the
// worker that claimed it ("" if never claimed). It claims, so no other
// claimable job may be queued when it is called. A superseded job's retry
// is left queued.
func (f *fixture) jobIn(state jobs.State) (jobs.Job, string) {
	f.t.Helper()
	f.n++
	worker := "worker-" + strconv.Itoa(f.n)
	e := f.enqueue(jobs.EnqueueParams{OrgID: "org-1"})
	switch state {
	case jobs.Queued:
		return f.job(e.JobID), ""
	case jobs.Cancelled:
		if _, err := f.store.Cancel(f.ctx, jobs.CancelParams{JobID: e.JobID}); err != nil {
			f.t.Fatalf("Cancel: %v", err)
		}
		return f.job(e.JobID), ""
	}
	f.claimID(worker, e.JobID)
	var err error
	switch state {
	case jobs.Running:
	case jobs.Succeeded:
		_, err = f.store.Succeed(f.ctx, jobs.SucceedParams{JobID: e.JobID, Worker: worker, Answer: jobs.Answer{Output: "first output"}})
	case jobs.Failed:
		_, err = f.store.Fail(f.ctx, jobs.FailParams{JobID: e.JobID, Worker: worker, Kind: jobs.KindProvider4xx, Message: "bad request"})
	case jobs.Superseded:
		if _, err = f.store.Fail(f.ctx, jobs.FailParams{JobID: e.JobID, Worker: worker, Kind: jobs.KindParse, Message: "unparsable"}); err == nil {
			_, err = f.store.Retry(f.ctx, jobs.RetryParams{JobID: e.JobID})
		}
	default:
		f.t.Fatalf("jobIn: unknown state %q", state)
	}
	if err != nil {
		f.t.Fatalf("driving job to %s: %v", state, err)
	}
	j := f.job(e.JobID)
	if j.State != state {
		f.t.Fatalf("jobIn(%s): job is %s", state, j.State)
	}
	return j, worker
}

// snapshot is everything an operation on one job could change.
type snapshot struct {
	job      jobs.Job
	events   []jobs.Event
	total    int
	response *jobs.Response
}

func (f *fixture) snapshot(id string) snapshot {
	f.t.Helper()
	s := snapshot{job: f.job(id), events: f.events(id), total: len(f.allEvents())}
	r, err := f.store.GetResponse(f.ctx, "", jobs.ResponseID(s.job.PromptID, id))
	switch {
	case err == nil:
		s.response = &r
	case !errors.Is(err, jobs.ErrNotFound):
		f.t.Fatalf("GetResponse: %v", err)
	}
	return s
}

// unchanged fails the test if the job differs from before.
func (f *fixture) unchanged(before snapshot, what string) {
	f.t.Helper()
	after := f.snapshot(before.job.ID)
	if !reflect.DeepEqual(before.job, after.job) {
		f.t.Errorf("%s changed the job:\nbefore %+v\nafter  %+v", what, before.job, after.job)
	}
	if !reflect.DeepEqual(before.events, after.events) || before.total != after.total {
		f.t.Errorf("%s appended events: job events %d → %d, log %d → %d", what,
			len(before.events), len(after.events), before.total, after.total)
	}
	if !reflect.DeepEqual(before.response, after.response) {
		f.t.Errorf("%s changed the response: %+v → %+v", what, before.response, after.response)
	}
}

// Assertion helpers.

func wantErr(t *testing.T, err, target error, what string) {
	t.Helper()
	if !errors.Is(err, target) {
		t.Errorf("%s: error %v, want %v", what, err, target)
	}
}

// wantNormalizeErr checks that a store refused a call whose parameters p
// Normalize refuses, with Normalize's error: ErrInvalid and the same text
// on every store.
func wantNormalizeErr[P interface{ Normalize() (P, error) }](t *testing.T, err error, p P, what string) {
	t.Helper()
	_, want := p.Normalize()
	if want == nil {
		t.Fatalf("%s: Normalize accepts %+v", what, p)
	}
	if !errors.Is(err, jobs.ErrInvalid) || !strings.Contains(fmt.Sprint(err), want.Error()) {
		t.Errorf("%s: error %v, want ErrInvalid with %q", what, err, want)
	}
}

func wantTransitionError(t *testing.T, err error, from, to jobs.State, what string) {
	t.Helper()
	var te *jobs.TransitionError
	if !errors.As(err, &te) {
		t.Errorf("%s: error %v, want *jobs.TransitionError %s → %s", what, err, from, to)
		return
	}
	if te.From != from || te.To != to {
		t.Errorf("%s: TransitionError %s → %s, want %s → %s", what, te.From, te.To, from, to)
	}
	if !errors.Is(err, jobs.ErrIllegalTransition) {
		t.Errorf("%s: %v does not match ErrIllegalTransition", what, err)
	}
}

func sameTime(t *testing.T, what string, got, want time.Time) {
	t.Helper()
	if !got.Equal(want) {
		t.Errorf("%s = %v, want %v", what, got, want)
	}
}

// jsonEqual compares JSON by value: PostgreSQL's jsonb rewrites spacing
// and key order.
func jsonEqual(a, b []byte) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	return reflect.DeepEqual(x, y)
}

func ids(js []jobs.Job) []string {
	out := make([]string, len(js))
	for i, j := range js {
		out[i] = j.ID
	}
	return out
}

func ptr[T any](v T) *T { return &v }

// recv waits for a value or close on ch. The timeout only turns a hang
// into a failure; it synchronises nothing.
func recv(t *testing.T, ch <-chan struct{}, what string) (ok bool) {
	t.Helper()
	select {
	case _, ok = <-ch:
		return ok
	case <-time.After(time.Minute):
		t.Fatalf("%s: nothing received", what)
		return false
	}
}
