package auth

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/promptkit/promptkit/internal/testkit"
	"github.com/promptkit/promptkit/jobs"
	"github.com/promptkit/promptkit/jobs/sqlitestore"
	"github.com/promptkit/promptkit/server/internal/httpapi"
)

// TestSubmitBurstPerOrg: an org's tokens together get the org's burst,
// however many there are; another org's token is not held up; a
// submission refused by the org's bound spends none of the token's; the
// clock refills both.
func TestSubmitBurstPerOrg(t *testing.T) {
	t.Parallel()
	clock := testkit.NewClock(time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC))
	a := New(Config{SubmitRate: 1, SubmitBurst: 3, OrgSubmitRate: 2, OrgSubmitBurst: 10, Now: clock.Now})
	tok := func(org string, i int) Identity {
		return Identity{Org: org, User: fmt.Sprint("u", i), Role: jobs.RoleMember, Key: fmt.Sprint(org, "-tok", i)}
	}
	taken := 0
	var last *httpapi.Problem
	for i := range 20 {
		for {
			err := a.Take(tok("hog", i))
			if err != nil {
				if !errors.As(err, &last) {
					t.Fatalf("%v, want a problem", err)
				}
				break
			}
			taken++
		}
	}
	if taken != 10 {
		t.Fatalf("20 tokens of one org took %d submissions, want the org's burst of 10", taken)
	}
	if last.Status != http.StatusTooManyRequests || last.RetryAfter != 500*time.Millisecond ||
		last.Message != "the organisation's submission rate of 2 a second, in bursts of 10 is reached; retry after the Retry-After delay" {
		t.Fatalf("over the org's burst: %+v", last)
	}
	if err := a.Take(tok("other", 0)); err != nil {
		t.Fatalf("another org after the hog: %v", err)
	}
	// Refusals by the org spend none of the token's own burst: after
	// three more, tok 19 still has its 3, and takes the one place the
	// org's bucket refills in half a second (a spent bucket of 1 a
	// second would have half a submission).
	for range 3 {
		if a.Take(tok("hog", 19)) == nil {
			t.Fatal("the org's bound let a submission through")
		}
	}
	clock.Advance(500 * time.Millisecond)
	if err := a.Take(tok("hog", 19)); err != nil {
		t.Fatalf("a token the org refused, once the org has a place: %v", err)
	}
	clock.Advance(5 * time.Second)
	for i := range 3 {
		if err := a.Take(tok("hog", 5)); err != nil {
			t.Fatalf("submission %d: %v", i, err)
		}
	}
	var p *httpapi.Problem
	if err := a.Take(tok("hog", 5)); !errors.As(err, &p) || p.RetryAfter != time.Second ||
		!strings.HasPrefix(p.Message, "the token's submission rate of 1 a second, in bursts of 3 is reached") {
		t.Fatalf("over the token's burst: %v", err)
	}
}

// TestSubmitBurstConcurrent: under -race, many goroutines of one org's
// tokens take exactly the org's burst.
func TestSubmitBurstConcurrent(t *testing.T) {
	t.Parallel()
	clock := testkit.NewClock(time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC))
	a := New(Config{SubmitRate: 1, SubmitBurst: 5, OrgSubmitRate: 1, OrgSubmitBurst: 25, Now: clock.Now})
	var mu sync.Mutex
	taken := 0
	var wg sync.WaitGroup
	for i := range 40 {
		wg.Go(func() {
			id := Identity{Org: "o", Key: fmt.Sprint("tok", i%10)}
			if a.Take(id) == nil {
				mu.Lock()
				taken++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if taken != 25 {
		t.Fatalf("%d admitted, want the org's burst of 25", taken)
	}
}

// TestTokenCreationPerOrg: an org admin's token creation beyond the
// org's rate is 429 with Retry-After naming the rate; another org's admin
// and an operator are not held up; with the org's live tokens at the
// bound, 409 until one is revoked.
func TestTokenCreationPerOrg(t *testing.T) {
	t.Parallel()
	st, err := sqlitestore.Open(context.Background(), filepath.Join(t.TempDir(), "auth.db"), jobs.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	clock := testkit.NewClock(time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC))
	a := New(Config{Store: st, Tokens: TokenLimits{PerMinute: 3, Live: 5}, Now: clock.Now})
	// The handler behind the limit creates a token of the caller's org.
	h := a.LimitTokenCreation(func(w http.ResponseWriter, r *http.Request) error {
		_, hash := jobs.NewTokenSecret()
		_, err := st.CreateToken(r.Context(), jobs.CreateTokenParams{OrgID: Of(r).Org, UserID: "new", Hash: hash})
		if err == nil {
			w.WriteHeader(http.StatusCreated)
		}
		return err
	})
	create := func(id Identity) (int, *httpapi.Problem) {
		t.Helper()
		r := httptest.NewRequest("POST", "/v1/admin/tokens", nil)
		r = r.WithContext(With(r.Context(), id))
		w := httptest.NewRecorder()
		if err := h(w, r); err != nil {
			var p *httpapi.Problem
			if !errors.As(err, &p) {
				t.Fatalf("create: %v", err)
			}
			return p.Status, p
		}
		return w.Code, nil
	}
	boss := Identity{Org: "acme", User: "boss", Role: jobs.RoleAdmin, Key: "boss"}
	for i := range 3 {
		if code, p := create(boss); code != http.StatusCreated {
			t.Fatalf("token %d: %d %+v", i, code, p)
		}
	}
	code, p := create(boss)
	if code != http.StatusTooManyRequests || p.RetryAfter != 20*time.Second ||
		p.Message != "the organisation's token creation rate of 3 a minute is reached; retry after the Retry-After delay" {
		t.Fatalf("over the rate: %d %+v", code, p)
	}
	if code, p := create(Identity{Org: "beta", User: "b", Role: jobs.RoleAdmin, Key: "b"}); code != http.StatusCreated {
		t.Fatalf("another org's admin: %d %+v", code, p)
	}
	op := Identity{Org: "acme", User: "olga", Role: jobs.RoleOperator, Key: "olga"}
	for i := range 2 {
		if code, p := create(op); code != http.StatusCreated {
			t.Fatalf("operator's token %d: %d %+v", i, code, p)
		}
	}
	// acme holds 5 live tokens: its admin is refused whatever the rate,
	// and the refusal spends none of it.
	clock.Advance(time.Minute)
	code, p = create(boss)
	if code != http.StatusConflict || p.Message != "the organisation's limit of 5 live tokens is reached; revoke one before creating another" {
		t.Fatalf("at the live bound: %d %+v", code, p)
	}
	ts, err := st.ListTokens(context.Background(), "acme")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.RevokeToken(context.Background(), ts[0].ID); err != nil {
		t.Fatal(err)
	}
	if code, p := create(boss); code != http.StatusCreated {
		t.Fatalf("after a revocation: %d %+v", code, p)
	}
	// A member passes through to the handler, which refuses it (here the
	// stand-in creates): the limit neither counts nor answers for it.
	if code, _ := create(Identity{Org: "acme", User: "m", Role: jobs.RoleMember, Key: "m"}); code != http.StatusCreated {
		t.Fatalf("a member reached the limit: %d", code)
	}
}

// TestTokenCreationLockPerOrg: the per-org lock serializes one org and
// holds up no other; a waiter whose request ends gives up.
func TestTokenCreationLockPerOrg(t *testing.T) {
	t.Parallel()
	m := newMinting(time.Now, DefaultTokenLimits)
	release, err := m.lock(context.Background(), "a")
	if err != nil {
		t.Fatal(err)
	}
	other, err := m.lock(context.Background(), "b")
	if err != nil {
		t.Fatalf("another org waited: %v", err)
	}
	other()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := m.lock(ctx, "a"); !errors.Is(err, context.Canceled) {
		t.Fatalf("a waiter whose request ended: %v", err)
	}
	release()
	m.mu.Lock()
	n := len(m.orgs)
	m.mu.Unlock()
	if n != 0 {
		t.Fatalf("%d org locks left, want 0", n)
	}
}
