package auth

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/promptkit/promptkit/internal/problem"
	"github.com/promptkit/promptkit/jobs"
	"github.com/promptkit/promptkit/server/internal/httpapi"
)

// Config configures an Auth.
type Config struct {
	// Store holds the tokens. Required.
	Store jobs.Store
	// Addr is the address the server was told to listen on: its host is
	// one the local-mode guard accepts in Host.
	Addr string
	// InsecureNoAuth accepts requests without a token on a non-loopback
	// address while no token exists.
	InsecureNoAuth bool
	// SubmitRate is how many submissions per second one identity may
	// make, with bursts of SubmitBurst; negative: no limit.
	SubmitRate  float64
	SubmitBurst int
	// OrgSubmitRate and OrgSubmitBurst are the same for all the
	// identities of one org together, so that an org's many tokens do not
	// multiply its share; negative rate: no limit.
	OrgSubmitRate  float64
	OrgSubmitBurst int
	// Tickets bounds the unspent stream tickets; zero fields take
	// DefaultTicketShares'.
	Tickets Shares
	// Tokens bounds an org admin's token creation; zero fields take
	// DefaultTokenLimits'.
	Tokens TokenLimits
	// Now is the clock of the budget, the tickets and the token check.
	Now func() time.Time
	Log *slog.Logger
}

// Auth resolves and checks identities. It is safe for concurrent use.
type Auth struct {
	cfg     Config
	st      jobs.Store
	limits  *limiter // submissions per identity
	orgs    *limiter // submissions per org
	tickets *tickets
	minting *minting
	// loopback: requests without a token may act as the local identity
	// only on a loopback listener (or with InsecureNoAuth).
	loopback  atomic.Bool
	hasTokens atomic.Pointer[tokensSeen]
	// lastSeen is the last look that succeeded, never cleared, and creds
	// the tokens RequireCached saw valid: what an outage falls back on.
	lastSeen atomic.Pointer[tokensSeen]
	creds    credentials
}

// New builds an Auth; SetLoopback tells it the listener it serves.
func New(cfg Config) *Auth {
	return &Auth{cfg: cfg, st: cfg.Store,
		limits:  newLimiter(cfg.SubmitRate, cfg.SubmitBurst, cfg.Now),
		orgs:    newLimiter(cfg.OrgSubmitRate, cfg.OrgSubmitBurst, cfg.Now),
		tickets: newTickets(cfg.Now, cfg.Tickets.Or(DefaultTicketShares)),
		minting: newMinting(cfg.Now, cfg.Tokens.withDefaults())}
}

// SetLoopback says whether the listener is on a loopback address.
func (a *Auth) SetLoopback(loopback bool) { a.loopback.Store(loopback) }

// LocalMode reports whether requests without a token are accepted as the
// local identity right now (no token exists and the address allows it).
// Whether a token exists is read at most once per TokensTTL: a token
// created by another process takes effect within that time, or at once
// when a request presents it; a request with an unknown or revoked token
// makes the next call look again.
func (a *Auth) LocalMode(ctx context.Context) (bool, error) {
	if !a.loopback.Load() && !a.cfg.InsecureNoAuth {
		return false, nil
	}
	now := a.cfg.Now()
	if c := a.hasTokens.Load(); c != nil && now.Before(c.until) && !now.Before(c.at) {
		return !c.has, nil
	}
	has, err := a.st.HasTokens(ctx)
	if err != nil {
		return false, err
	}
	a.sawTokens(has)
	return !has, nil
}

// sawTokens records whether a token exists, for LocalMode to trust for
// TokensTTL.
func (a *Auth) sawTokens(has bool) {
	now := a.cfg.Now()
	seen := &tokensSeen{has: has, at: now, until: now.Add(TokensTTL)}
	a.hasTokens.Store(seen)
	a.lastSeen.Store(seen)
}

// TokensTTL is how long LocalMode trusts its last look at the tokens: the
// look is a query, and in local mode every request needs the answer.
const TokensTTL = time.Second

// tokensSeen is LocalMode's last look: whether a token existed, read at
// at, trusted until until.
type tokensSeen struct {
	has       bool
	at, until time.Time
}

// unauthorized is the 401 of a request with no valid identity; the
// sentence tells how d's callers send their key.
func unauthorized(d httpapi.Dialect) *httpapi.Problem {
	return &httpapi.Problem{Status: http.StatusUnauthorized, Kind: problem.Unauthenticated, Code: "unauthorized",
		Message:  "a valid bearer token is required",
		Sentence: "A valid promptkit token is required: send it as the API key (" + d.Spec().KeyHint + ")."}
}

// identify resolves the request's identity: a valid token, read as d's
// callers send it (DialectSpec.Credential), or the local identity while
// local mode holds. Leniently (a lenient dialect's routes, the OpenAI
// ones), a key that is no promptkit token also acts as the local
// identity in local mode: OpenAI's SDKs always send one (perhaps the
// user's real OPENAI_API_KEY).
func (a *Auth) identify(r *http.Request, d httpapi.Dialect, lenient bool) (Identity, error) {
	ctx := r.Context()
	secret, presented := d.Spec().Credential(r)
	switch {
	case secret != "":
		hash := jobs.HashToken(secret)
		t, err := a.st.TokenByHash(ctx, hash)
		switch {
		case err == nil:
			// A valid token proves that one exists: local mode is over.
			a.sawTokens(true)
			return fromToken(t, hash), nil
		case !errors.Is(err, jobs.ErrNotFound):
			return Identity{}, httpapi.About("authenticating", err)
		case !lenient:
			// The tokens may have changed (this one revoked): LocalMode
			// looks again next time rather than trusting its last look.
			a.hasTokens.Store(nil)
			return Identity{}, unauthorized(d)
		}
	case presented && !lenient:
		return Identity{}, unauthorized(d)
	}
	local, err := a.LocalMode(ctx)
	if err != nil {
		return Identity{}, httpapi.About("authenticating", err)
	}
	if !local {
		return Identity{}, unauthorized(d)
	}
	return Local, nil
}

// Require runs next as the request's identity, its key read as d's
// callers send it, or answers 401 in d's shape. A lenient dialect's
// routes identify leniently (see identify).
func (a *Auth) Require(d httpapi.Dialect, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id, err := a.identify(r, d, d.Spec().Lenient)
		if err != nil {
			d.Fail(w, r, a.cfg.Log, err)
			return
		}
		next.ServeHTTP(w, r.WithContext(With(r.Context(), id)))
	})
}

// Valid reports whether id still holds: its token has not been revoked
// (here or by another process), or, for the local identity, local mode
// has not ended. A stream or a ticket outlives the request that proved
// the identity, so each looks again.
func (a *Auth) Valid(ctx context.Context, id Identity) (bool, error) {
	if id.Key == localKey {
		return a.LocalMode(ctx)
	}
	_, err := a.st.TokenByHash(ctx, id.hash[:])
	if errors.Is(err, jobs.ErrNotFound) {
		return false, nil
	}
	return err == nil, err
}

// Take spends one of the identity's submissions and one of its org's, or
// is a 429 problem naming the rate reached and saying when the next
// submission is available. A refusal spends neither.
func (a *Auth) Take(id Identity) error {
	now := a.cfg.Now()
	undo, delay := a.limits.take(now, id.Key)
	if undo == nil {
		return httpapi.RateLimited(delay, fmt.Sprintf("%s submission rate of %s a second, in bursts of %d",
			id.Whose(), number(a.cfg.SubmitRate), a.cfg.SubmitBurst))
	}
	if _, delay := a.orgs.take(now, id.Org); delay > 0 {
		undo()
		return httpapi.RateLimited(delay, fmt.Sprintf("the organisation's submission rate of %s a second, in bursts of %d",
			number(a.cfg.OrgSubmitRate), a.cfg.OrgSubmitBurst))
	}
	return nil
}

// number prints a rate without trailing zeros: 20, 0.5.
func number(f float64) string { return strconv.FormatFloat(f, 'f', -1, 64) }
