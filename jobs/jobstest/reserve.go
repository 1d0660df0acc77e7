package jobstest

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/promptkit/promptkit/jobs"
)

// reserved reads the open reservations of a subject, failing the test on
// an error.
func (f *fixture) reserved(scope jobs.LimitScope, subject string) jobs.Reserved {
	f.t.Helper()
	r, err := f.store.Reserved(f.ctx, jobs.ReservedParams{Scope: scope, Subject: subject})
	if err != nil {
		f.t.Fatalf("Reserved(%s %s): %v", scope, subject, err)
	}
	return r
}

// reserve stores p, failing the test on an error.
func (f *fixture) reserve(p jobs.ReserveParams) string {
	f.t.Helper()
	id, err := f.store.Reserve(f.ctx, p)
	if err != nil || id == "" {
		f.t.Fatalf("Reserve(%+v) = %q, %v", p, id, err)
	}
	return id
}

// Reservations count while they are open: a request for its TTL, a call
// until it is released or expires; an org's and a token's are summed
// apart; a check reads them, and the ledger, and its refusal is returned
// as it is, storing nothing.
func testReserve(t *testing.T, h Harness) {
	f := setup(t, h)
	half, two := 0.5, 2.0
	f.reserve(jobs.ReserveParams{OrgID: "org-a", TokenID: "tok-1", Request: true, TTL: time.Minute})
	f.clock.Advance(time.Second)
	f.reserve(jobs.ReserveParams{OrgID: "org-a", TokenID: "tok-1", Request: true, TTL: time.Minute})
	call := f.reserve(jobs.ReserveParams{OrgID: "org-a", TokenID: "tok-1", Call: true, Tokens: 100, USD: &half, TTL: 10 * time.Second})
	f.reserve(jobs.ReserveParams{OrgID: "org-a", Call: true, Tokens: 50, TTL: 30 * time.Second})
	f.reserve(jobs.ReserveParams{OrgID: "org-b", TokenID: "tok-2", Call: true, Tokens: 7, USD: &two, TTL: time.Minute})

	want := jobs.Reserved{Requests: 2, NextExpiry: T0.Add(time.Minute), Calls: 2, UnknownCost: 1, Tokens: 150, CostUSD: 0.5}
	if got := f.reserved(jobs.LimitOrg, "org-a"); got != want {
		t.Errorf("Reserved(org-a) = %+v, want %+v", got, want)
	}
	want = jobs.Reserved{Requests: 2, NextExpiry: T0.Add(time.Minute), Calls: 1, Tokens: 100, CostUSD: 0.5}
	if got := f.reserved(jobs.LimitToken, "tok-1"); got != want {
		t.Errorf("Reserved(tok-1) = %+v, want %+v", got, want)
	}
	if got := f.reserved(jobs.LimitToken, ""); got != (jobs.Reserved{}) {
		t.Errorf("Reserved(no token) = %+v, want none: calls without a token are no token's", got)
	}

	// A check sees what was reserved, and the ledger; its error comes back
	// as it is, and nothing is stored.
	if err := f.store.RecordCalls(f.ctx, jobs.RecordCallsParams{OrgID: "org-a", UserID: "u", Calls: []jobs.UsageCall{
		{Model: "m", InputTokens: ptr(int64(3)), OutputTokens: ptr(int64(4)), CostUSD: &two}}}); err != nil {
		t.Fatal(err)
	}
	full := errors.New("full")
	var seen jobs.Reserved
	var spent []jobs.UsageBucket
	_, err := f.store.Reserve(f.ctx, jobs.ReserveParams{OrgID: "org-a", Request: true, TTL: time.Minute,
		Check: func(ctx context.Context, r jobs.ReserveReader, now time.Time) error {
			if !now.Equal(f.clock.Now()) {
				t.Errorf("check's now = %v, want the store's %v", now, f.clock.Now())
			}
			var err error
			if seen, err = r.Reserved(ctx, jobs.ReservedParams{Scope: jobs.LimitOrg, Subject: "org-a"}); err != nil {
				return err
			}
			if spent, err = r.Usage(ctx, jobs.UsageParams{OrgID: "org-a"}); err != nil {
				return err
			}
			return full
		}})
	if err != full {
		t.Errorf("a refusing check: Reserve error %v, want the check's own", err)
	}
	if seen.Requests != 2 || seen.Calls != 2 {
		t.Errorf("the check saw %+v, want the 2 requests and 2 calls reserved before", seen)
	}
	if len(spent) != 1 || spent[0].CostUSD != 2 {
		t.Errorf("the check read the usage %+v, want the ledger's $2 call", spent)
	}
	if got := f.reserved(jobs.LimitOrg, "org-a"); got.Requests != 2 {
		t.Errorf("a refused reservation was stored: %+v", got)
	}

	// Release ends a call's; again, no error.
	for range 2 {
		if err := f.store.Release(f.ctx, call); err != nil {
			t.Errorf("Release: %v", err)
		}
	}
	if got := f.reserved(jobs.LimitToken, "tok-1"); got.Calls != 0 || got.Tokens != 0 || got.Requests != 2 {
		t.Errorf("after Release: %+v, want the requests alone", got)
	}
	// Expiry: the unknown call 30 s after it was made, the first request after a
	// minute, the second a second later.
	f.clock.Set(T0.Add(31 * time.Second))
	if got := f.reserved(jobs.LimitOrg, "org-a"); got.Calls != 0 || got.Requests != 2 {
		t.Errorf("at 31 s: %+v, want the call expired and both requests", got)
	}
	f.clock.Set(T0.Add(time.Minute))
	want = jobs.Reserved{Requests: 1, NextExpiry: T0.Add(time.Minute + time.Second)}
	if got := f.reserved(jobs.LimitOrg, "org-a"); got != want {
		t.Errorf("at 60 s: %+v, want %+v", got, want)
	}

	// A job's call counts while the job runs under the claim that made it:
	// cancelled (which records the call as lost), it no longer does.
	f.enqueue(jobs.EnqueueParams{OrgID: "org-j", CreatedBy: "u", Text: "run"})
	j := f.claim("w", 1)[0]
	f.reserve(jobs.ReserveParams{OrgID: "org-j", Call: true, Tokens: 9, USD: &half, TTL: time.Hour, JobID: j.ID, ClaimedAt: j.ClaimedAt})
	f.reserve(jobs.ReserveParams{OrgID: "org-j", Call: true, Tokens: 1, USD: &half, TTL: time.Hour, JobID: j.ID, ClaimedAt: j.ClaimedAt.Add(-time.Second)})
	if got := f.reserved(jobs.LimitOrg, "org-j"); got.Calls != 1 || got.Tokens != 9 {
		t.Errorf("a running job's calls: %+v, want the one of its claim", got)
	}
	if _, err := f.store.Cancel(f.ctx, jobs.CancelParams{OrgID: "org-j", JobID: j.ID}); err != nil {
		t.Fatal(err)
	}
	if got := f.reserved(jobs.LimitOrg, "org-j"); got.Calls != 0 {
		t.Errorf("a cancelled job's call: %+v, want none", got)
	}

	for name, p := range map[string]jobs.ReserveParams{
		"no org":            {Request: true, TTL: time.Minute},
		"neither":           {OrgID: "o", TTL: time.Minute},
		"both":              {OrgID: "o", Request: true, Call: true, TTL: time.Minute},
		"no TTL":            {OrgID: "o", Request: true},
		"negative tokens":   {OrgID: "o", Call: true, Tokens: -1, TTL: time.Minute},
		"negative cost":     {OrgID: "o", Call: true, USD: ptr(-1.0), TTL: time.Minute},
		"NUL in the org":    {OrgID: "o\x00", Request: true, TTL: time.Minute},
		"NUL in the token":  {OrgID: "o", TokenID: "t\x00", Request: true, TTL: time.Minute},
		"NUL in the job":    {OrgID: "o", JobID: "j\x00", Call: true, TTL: time.Minute},
		"a cost not finite": {OrgID: "o", Call: true, USD: ptr(1 / zero()), TTL: time.Minute},
	} {
		_, err := f.store.Reserve(f.ctx, p)
		wantNormalizeErr(t, err, p, "Reserve "+name)
	}
}

func zero() float64 { return 0 }

// Concurrent reservations of one org, from many goroutines, pass a check
// one at a time: a check admitting 5 requests admits exactly 5, however
// they race, and a token's are serialised with its org's.
func testReserveConcurrent(t *testing.T, h Harness) {
	f := setupRealClock(t, h)
	const limit, tries = 5, 24
	full := errors.New("full")
	admit := func(scope jobs.LimitScope, subject string) func(context.Context, jobs.ReserveReader, time.Time) error {
		return func(ctx context.Context, r jobs.ReserveReader, _ time.Time) error {
			got, err := r.Reserved(ctx, jobs.ReservedParams{Scope: scope, Subject: subject})
			if err != nil {
				return err
			}
			if got.Requests >= limit {
				return full
			}
			return nil
		}
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	admitted, refused := map[string]int{}, 0
	for i := range tries {
		wg.Go(func() {
			p := jobs.ReserveParams{OrgID: "org-c", Request: true, TTL: time.Hour, Check: admit(jobs.LimitOrg, "org-c")}
			if i%2 == 1 { // half through a token, limited by the org all the same
				p.TokenID = "tok-c"
			}
			_, err := f.store.Reserve(f.ctx, p)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				admitted[p.TokenID]++
			case err == full:
				refused++
			default:
				t.Errorf("Reserve: %v", err)
			}
		})
	}
	wg.Wait()
	if n := admitted[""] + admitted["tok-c"]; n != limit || refused != tries-limit {
		t.Errorf("%d racing reservations under a limit of %d: %d admitted, %d refused", tries, limit, n, refused)
	}
	if got := f.reserved(jobs.LimitOrg, "org-c"); got.Requests != limit {
		t.Errorf("Reserved(org-c).Requests = %d, want %d", got.Requests, limit)
	}
}
