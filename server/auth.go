package server

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"math"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/time/rate"

	"github.com/promptkit/promptkit/internal/openaiapi"
	"github.com/promptkit/promptkit/jobs"
)

// identity is who a request acts as.
type identity struct {
	org, user string
	role      jobs.Role
	// key names the identity's submission budget: its token's ID, or
	// localKey.
	key string
	// hash is the token's hash, for looking again whether it was revoked
	// (see valid); zero for the local identity.
	hash [sha256.Size]byte
}

// localKey is the local identity's key; token IDs never take it.
const localKey = "local"

// localIdentity is who every request acts as while local mode holds.
var localIdentity = identity{org: LocalOrg, user: LocalUser, role: jobs.RoleAdmin, key: localKey}

// createdBy is the user filter of the identity's reads: a member sees its
// own prompts, an admin every prompt of its org.
func (id identity) createdBy() string {
	if id.role == jobs.RoleAdmin {
		return ""
	}
	return id.user
}

// owns reports whether the identity may see a job or prompt of this org
// created by this user.
func (id identity) owns(org, createdBy string) bool {
	return org == id.org && (id.role == jobs.RoleAdmin || createdBy == id.user)
}

type identityKey struct{}

func identityOf(r *http.Request) identity {
	id, _ := r.Context().Value(identityKey{}).(identity)
	return id
}

// authenticate resolves the request's identity: a valid bearer token, or
// the local identity while local mode holds. Anything else is 401.
func (s *Server) authenticate(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id, err := s.identify(r)
		if err != nil {
			if errors.Is(err, errUnauthorized) {
				w.Header().Set("WWW-Authenticate", `Bearer realm="promptkit"`)
				writeError(w, http.StatusUnauthorized, "unauthorized", "a valid bearer token is required")
				return
			}
			s.internal(w, r, "authenticating", err)
			return
		}
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), identityKey{}, id)))
	})
}

var errUnauthorized = errors.New("unauthorized")

// tokenIdentity is the identity of token t, proved by a secret with this
// hash.
func tokenIdentity(t jobs.Token, hash []byte) identity {
	id := identity{org: t.OrgID, user: t.UserID, role: t.Role, key: t.ID}
	copy(id.hash[:], hash)
	return id
}

// valid reports whether id still holds: its token has not been revoked
// (here or by another process), or, for the local identity, local mode
// has not ended. A stream or a ticket outlives the request that proved
// the identity, so each looks again.
func (s *Server) valid(ctx context.Context, id identity) (bool, error) {
	if id.key == localKey {
		return s.LocalMode(ctx)
	}
	_, err := s.st.TokenByHash(ctx, id.hash[:])
	if errors.Is(err, jobs.ErrNotFound) {
		return false, nil
	}
	return err == nil, err
}

// authenticateOpenAI is authenticate for the OpenAI-compatible routes,
// answering in OpenAI's error shape. OpenAI's SDKs always send a bearer
// token (perhaps the user's real OPENAI_API_KEY), so while local mode
// holds any token that is not a valid promptkit token acts as the local
// identity; otherwise a missing or unknown token is 401.
func (s *Server) authenticateOpenAI(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id, err := s.identifyOpenAI(r)
		if err != nil {
			if errors.Is(err, errUnauthorized) {
				w.Header().Set("WWW-Authenticate", `Bearer realm="promptkit"`)
				writeJSON(w, http.StatusUnauthorized, openaiapi.NewError(
					"A valid promptkit token is required: send it as the API key (Authorization: Bearer pk_...).",
					openaiapi.TypeInvalidRequest, "", "invalid_api_key"))
				return
			}
			s.oaInternal(w, r, "authenticating", err)
			return
		}
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), identityKey{}, id)))
	})
}

// identifyOpenAI is identify, except that in local mode a token that is
// unknown (or no promptkit token at all) is the local identity. It does
// not make LocalMode look again on an unknown token, as identify does:
// here every request of a local user carries one.
func (s *Server) identifyOpenAI(r *http.Request) (identity, error) {
	scheme, secret, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	if ok && strings.EqualFold(scheme, "Bearer") && strings.TrimSpace(secret) != "" {
		hash := jobs.HashToken(secret)
		t, err := s.st.TokenByHash(r.Context(), hash)
		switch {
		case err == nil:
			s.sawTokens(true)
			return tokenIdentity(t, hash), nil
		case !errors.Is(err, jobs.ErrNotFound):
			return identity{}, err
		}
	}
	local, err := s.LocalMode(r.Context())
	if err != nil {
		return identity{}, err
	}
	if !local {
		return identity{}, errUnauthorized
	}
	return localIdentity, nil
}

func (s *Server) identify(r *http.Request) (identity, error) {
	h := r.Header.Get("Authorization")
	if h == "" {
		local, err := s.LocalMode(r.Context())
		if err != nil {
			return identity{}, err
		}
		if !local {
			return identity{}, errUnauthorized
		}
		return localIdentity, nil
	}
	scheme, secret, ok := strings.Cut(h, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") || strings.TrimSpace(secret) == "" {
		return identity{}, errUnauthorized
	}
	hash := jobs.HashToken(secret)
	t, err := s.st.TokenByHash(r.Context(), hash)
	switch {
	case errors.Is(err, jobs.ErrNotFound):
		// The tokens may have changed (this one revoked): LocalMode
		// looks again next time rather than trusting its last look.
		s.hasTokens.Store(nil)
		return identity{}, errUnauthorized
	case err != nil:
		return identity{}, err
	}
	// A valid token proves that one exists: local mode is over now.
	s.sawTokens(true)
	return tokenIdentity(t, hash), nil
}

// limiter is the per-identity submission budget: a token bucket per key.
// Buckets of identities idle long enough to be full again are dropped, so
// the map stays as small as the set of recently active tokens.
type limiter struct {
	rate  rate.Limit
	burst int
	now   func() time.Time

	mu      sync.Mutex
	buckets map[string]*rate.Limiter
	swept   time.Time
}

func newLimiter(perSecond float64, burst int, now func() time.Time) *limiter {
	if perSecond < 0 {
		return nil
	}
	return &limiter{rate: rate.Limit(perSecond), burst: burst, now: now, buckets: map[string]*rate.Limiter{}}
}

// allow takes one submission from key's bucket; when empty it returns
// false and how long until one is available.
func (l *limiter) allow(key string) (bool, time.Duration) {
	if l == nil {
		return true, 0
	}
	now := l.now()
	l.mu.Lock()
	defer l.mu.Unlock()
	l.sweep(now)
	b, ok := l.buckets[key]
	if !ok {
		b = rate.NewLimiter(l.rate, l.burst)
		l.buckets[key] = b
	}
	r := b.ReserveN(now, 1)
	if d := r.DelayFrom(now); d > 0 {
		r.CancelAt(now)
		return false, d
	}
	return true, 0
}

// sweep drops full buckets, at most once per refill period.
func (l *limiter) sweep(now time.Time) {
	full := time.Duration(float64(l.burst) / float64(l.rate) * float64(time.Second))
	if now.Sub(l.swept) < full {
		return
	}
	l.swept = now
	for k, b := range l.buckets {
		if b.TokensAt(now) >= float64(l.burst) {
			delete(l.buckets, k)
		}
	}
}

// retryAfter formats a delay as whole seconds, rounded up, at least 1.
func retryAfter(d time.Duration) string {
	return strconv.Itoa(max(1, int(math.Ceil(d.Seconds()))))
}

// Stream tickets: EventSource cannot send an Authorization header, so a
// client with a bearer token first asks POST /v1/events/ticket for a
// ticket and opens GET /v1/events?ticket=T with it. A ticket is random,
// short-lived, spent by its first use and held in memory only (a restart
// voids them all; the page then simply asks again). It acts as the
// identity that asked for it, and only on the event stream.
const (
	// ticketTTL is how long a ticket is valid after it is issued.
	ticketTTL = 60 * time.Second
	// maxTickets bounds the tickets held: expired ones are dropped when one
	// is added, and beyond this many unspent, unexpired ones no more are
	// issued until some expire (429). maxTicketsPerIdentity is the same
	// bound for one identity, so that one client cannot use up the rest.
	maxTickets            = 10000
	maxTicketsPerIdentity = 100
	// ticketBytes is the ticket's randomness: 256 bits.
	ticketBytes = 32
	// ticketPrefix marks tickets, so they are not mistaken for tokens.
	ticketPrefix = "pkt_"
)

// tickets holds the unspent tickets, by the SHA-256 of their secret (the
// secret itself is never kept).
type tickets struct {
	now func() time.Time

	mu   sync.Mutex
	byID map[[sha256.Size]byte]ticket
	// perKey counts the tickets held by identity key.
	perKey map[string]int
	// swept is when expired tickets were last dropped.
	swept time.Time
}

type ticket struct {
	id      identity
	expires time.Time
}

func newTickets(now func() time.Time) *tickets {
	return &tickets{now: now, byID: map[[sha256.Size]byte]ticket{}, perKey: map[string]int{}}
}

var errTooManyTickets = errors.New("too many unspent stream tickets")

// issue makes a ticket for id and returns it with its expiry.
func (t *tickets) issue(id identity) (string, time.Time, error) {
	b := make([]byte, ticketBytes)
	if _, err := rand.Read(b); err != nil {
		return "", time.Time{}, err
	}
	secret := ticketPrefix + base64.RawURLEncoding.EncodeToString(b)
	now := t.now()
	expires := now.Add(ticketTTL)
	t.mu.Lock()
	defer t.mu.Unlock()
	full := func() bool { return len(t.byID) >= maxTickets || t.perKey[id.key] >= maxTicketsPerIdentity }
	// Drop the expired tickets: at most once a second, or when a bound is
	// reached (sweeping is a pass over all of them).
	if now.Sub(t.swept) >= time.Second || now.Before(t.swept) || full() {
		t.swept = now
		for k, tk := range t.byID {
			if !now.Before(tk.expires) {
				t.remove(k, tk)
			}
		}
	}
	if full() {
		return "", time.Time{}, errTooManyTickets
	}
	t.byID[sha256.Sum256([]byte(secret))] = ticket{id: id, expires: expires}
	t.perKey[id.key]++
	return secret, expires, nil
}

func (t *tickets) remove(k [sha256.Size]byte, tk ticket) {
	delete(t.byID, k)
	if t.perKey[tk.id.key]--; t.perKey[tk.id.key] <= 0 {
		delete(t.perKey, tk.id.key)
	}
}

// redeem spends a ticket: the identity it was issued to, or
// errUnauthorized when it is unknown, spent or expired.
func (t *tickets) redeem(secret string) (identity, error) {
	if !strings.HasPrefix(secret, ticketPrefix) {
		return identity{}, errUnauthorized
	}
	k := sha256.Sum256([]byte(secret))
	now := t.now()
	t.mu.Lock()
	defer t.mu.Unlock()
	tk, ok := t.byID[k]
	if !ok {
		return identity{}, errUnauthorized
	}
	t.remove(k, tk) // spent, whether or not still valid
	if !now.Before(tk.expires) {
		return identity{}, errUnauthorized
	}
	return tk.id, nil
}

// ticketAnswer is the body of POST /v1/events/ticket.
type ticketAnswer struct {
	Ticket    string    `json:"ticket"`
	ExpiresAt time.Time `json:"expires_at"`
}

// issueTicket answers POST /v1/events/ticket: a ticket for the caller.
func (s *Server) issueTicket(tk *tickets) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		secret, expires, err := tk.issue(identityOf(r))
		switch {
		case errors.Is(err, errTooManyTickets):
			w.Header().Set("Retry-After", retryAfter(ticketTTL))
			writeError(w, http.StatusTooManyRequests, "rate_limited", "too many unspent stream tickets; try again later")
			return
		case err != nil:
			s.internal(w, r, "issuing a stream ticket", err)
			return
		}
		w.Header().Set("Cache-Control", "no-store")
		writeJSON(w, http.StatusOK, ticketAnswer{Ticket: secret, ExpiresAt: expires.UTC()})
	}
}

// authenticateStream is authenticate for GET /v1/events, which also
// accepts ?ticket= instead of a bearer token: a request with that
// parameter acts as the ticket's identity (and spends it), whatever its
// headers say; an unknown, spent or expired ticket is 401.
func (s *Server) authenticateStream(tk *tickets, next http.Handler) http.Handler {
	byHeader := s.authenticate(next)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		if !q.Has("ticket") {
			byHeader.ServeHTTP(w, r)
			return
		}
		id, err := tk.redeem(q.Get("ticket"))
		if err == nil {
			// A ticket is void once its token is revoked.
			var ok bool
			if ok, err = s.valid(r.Context(), id); err != nil {
				s.internal(w, r, "checking a stream ticket's token", err)
				return
			}
			if !ok {
				err = errUnauthorized
			}
		}
		if err != nil {
			w.Header().Set("WWW-Authenticate", `Bearer realm="promptkit"`)
			writeError(w, http.StatusUnauthorized, "unauthorized", "the stream ticket is unknown, spent or expired; ask POST /v1/events/ticket for another")
			return
		}
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), identityKey{}, id)))
	})
}
