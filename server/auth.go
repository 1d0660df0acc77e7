package server

import (
	"context"
	"errors"
	"math"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/time/rate"

	"github.com/promptkit/promptkit/jobs"
)

// identity is who a request acts as.
type identity struct {
	org, user string
	role      jobs.Role
	// key names the identity's submission budget: its token, or "local".
	key string
}

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
		return identity{org: LocalOrg, user: LocalUser, role: jobs.RoleAdmin, key: "local"}, nil
	}
	scheme, secret, ok := strings.Cut(h, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") || strings.TrimSpace(secret) == "" {
		return identity{}, errUnauthorized
	}
	t, err := s.st.TokenByHash(r.Context(), jobs.HashToken(secret))
	switch {
	case errors.Is(err, jobs.ErrNotFound):
		return identity{}, errUnauthorized
	case err != nil:
		return identity{}, err
	}
	return identity{org: t.OrgID, user: t.UserID, role: t.Role, key: t.ID}, nil
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
