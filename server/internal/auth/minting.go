package auth

import (
	"cmp"
	"context"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/promptkit/promptkit/server/internal/httpapi"
)

// TokenLimits bound what an org's admins may create through POST
// /v1/admin/tokens. Every per-token bound (submissions, stream tickets,
// event streams) has a per-org one beside it, so more tokens buy an org
// no larger share; these keep the tokens themselves few: each is a row
// read on every request and an identity the streams recheck. Operators
// (and the CLI, which writes the store directly) are not bound: they set
// orgs up.
type TokenLimits struct {
	// PerMinute is how many tokens an org's admins may create a minute,
	// in bursts of as many.
	PerMinute int
	// Live is the most unrevoked tokens an org may hold when its admin
	// creates another.
	Live int
}

// DefaultTokenLimits: 20 a minute (a team's tokens in one go, a script
// minting hundreds slowed to a crawl) and 1,000 live tokens an org.
var DefaultTokenLimits = TokenLimits{PerMinute: 20, Live: 1000}

func (l TokenLimits) withDefaults() TokenLimits {
	return TokenLimits{PerMinute: cmp.Or(l.PerMinute, DefaultTokenLimits.PerMinute), Live: cmp.Or(l.Live, DefaultTokenLimits.Live)}
}

// minting is the state of TokenLimits: a bucket per org, and a lock per
// org so that counting its live tokens and creating one are not raced by
// another creation in this process.
type minting struct {
	limit TokenLimits
	rate  *limiter

	mu   sync.Mutex
	orgs map[string]*orgLock
}

type orgLock struct {
	held  chan struct{} // capacity 1: full while held
	users int           // guarded by minting.mu
}

func newMinting(now func() time.Time, limit TokenLimits) *minting {
	return &minting{limit: limit, rate: newLimiter(float64(limit.PerMinute)/60, limit.PerMinute, now), orgs: map[string]*orgLock{}}
}

// lock holds org's lock until release, or fails when ctx ends first. The
// lock is per org: a slow request of one org holds up no other.
func (m *minting) lock(ctx context.Context, org string) (release func(), err error) {
	m.mu.Lock()
	l := m.orgs[org]
	if l == nil {
		l = &orgLock{held: make(chan struct{}, 1)}
		m.orgs[org] = l
	}
	l.users++
	m.mu.Unlock()
	leave := func() {
		m.mu.Lock()
		if l.users--; l.users == 0 {
			delete(m.orgs, org)
		}
		m.mu.Unlock()
	}
	select {
	case l.held <- struct{}{}:
		return func() { <-l.held; leave() }, nil
	case <-ctx.Done():
		leave()
		return nil, ctx.Err()
	}
}

// LimitTokenCreation wraps the handler of POST /v1/admin/tokens with
// TokenLimits for an org admin: beyond the rate, 429 with Retry-After;
// with the org's live tokens at the bound, 409 until one is revoked. A
// refused request spends none of the rate. Operators and members pass
// through (the handler refuses a member).
func (a *Auth) LimitTokenCreation(next httpapi.HandlerFunc) httpapi.HandlerFunc {
	m := a.minting
	return func(w http.ResponseWriter, r *http.Request) error {
		id := Of(r)
		if id.Operator() || !id.Role.Admin() {
			return next(w, r)
		}
		undo, delay := m.rate.take(a.cfg.Now(), id.Org)
		if undo == nil {
			return httpapi.RateLimited(delay, fmt.Sprintf("the organisation's token creation rate of %d a minute", m.limit.PerMinute))
		}
		release, err := m.lock(r.Context(), id.Org)
		if err != nil {
			undo()
			return err
		}
		defer release()
		ts, err := a.st.ListTokens(r.Context(), id.Org)
		if err != nil {
			undo()
			return httpapi.About("tokens", err)
		}
		live := 0
		for _, t := range ts {
			if t.RevokedAt.IsZero() {
				live++
			}
		}
		if live >= m.limit.Live {
			undo()
			return &httpapi.Problem{Status: http.StatusConflict, Code: "conflict",
				Message: fmt.Sprintf("the organisation's limit of %d live tokens is reached; revoke one before creating another", m.limit.Live)}
		}
		return next(w, r)
	}
}
