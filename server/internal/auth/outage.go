package auth

import (
	"crypto/sha256"
	"errors"
	"net/http"
	"sync"
	"time"

	"github.com/promptkit/promptkit/jobs"
	"github.com/promptkit/promptkit/server/internal/httpapi"
)

// OutageTTL is how long, while the store cannot be asked, RequireCached
// trusts what it last learnt from it: that no token existed (local mode),
// or that a token was valid and whose it was.
const OutageTTL = time.Hour

// maxCredentials bounds the tokens RequireCached remembers.
const maxCredentials = 1024

// RequireCached is Require (strict, as the REST routes) for a read that
// matters most while the store is down: GET /metrics, whose
// promptkit_store_up then says so. When the store cannot be asked, a
// token that passed here in the last OutageTTL acts as it did then, and a
// request without one acts as the local identity if the last look at the
// tokens, as recent, found none. Anything else is a 503 (never a 500,
// never access on a guess). A token the store answers unknown (revoked)
// is forgotten at once, so only a revocation this process has not yet
// seen outlives the outage's start.
func (a *Auth) RequireCached(d httpapi.Dialect, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id, err := a.identifyCached(r, d)
		if err != nil {
			d.Fail(w, r, a.cfg.Log, err)
			return
		}
		next.ServeHTTP(w, r.WithContext(With(r.Context(), id)))
	})
}

func (a *Auth) identifyCached(r *http.Request, d httpapi.Dialect) (Identity, error) {
	id, err := a.identify(r, d, false)
	hash, bearer := keyHash(r, d)
	if err == nil {
		if id.Key != localKey {
			a.creds.remember(id, a.cfg.Now())
		}
		return id, nil
	}
	if _, refused := errors.AsType[*httpapi.Problem](err); refused || r.Context().Err() != nil {
		if bearer {
			a.creds.forget(hash)
		}
		return Identity{}, err
	}
	// The store could not answer.
	if bearer {
		if id, ok := a.creds.recall(hash, a.cfg.Now()); ok {
			return id, nil
		}
	} else if local, known := a.lastLocalMode(); known && local {
		return Local, nil
	}
	return Identity{}, &httpapi.Problem{Status: http.StatusServiceUnavailable, Code: "unavailable", RetryAfter: 10 * time.Second,
		Message: "the token cannot be checked while the database is unavailable; retry after the Retry-After delay"}
}

// keyHash is the hash of the request's key, as identify reads it in d;
// false without one.
func keyHash(r *http.Request, d httpapi.Dialect) ([sha256.Size]byte, bool) {
	var h [sha256.Size]byte
	secret, _ := d.Spec().Credential(r)
	if secret == "" {
		return h, false
	}
	copy(h[:], jobs.HashToken(secret))
	return h, true
}

// lastLocalMode is what LocalMode said at its last successful look, if
// that was within OutageTTL: for when the store cannot be asked now.
func (a *Auth) lastLocalMode() (local, known bool) {
	if !a.loopback.Load() && !a.cfg.InsecureNoAuth {
		return false, true
	}
	now := a.cfg.Now()
	c := a.lastSeen.Load()
	if c == nil || now.Before(c.at) || now.Sub(c.at) > OutageTTL {
		return false, false
	}
	return !c.has, true
}

// credentials are the identities of the tokens RequireCached saw valid,
// by hash, each with when it was last checked. The zero value is ready.
type credentials struct {
	mu sync.Mutex
	m  map[[sha256.Size]byte]credential
}

type credential struct {
	id Identity
	at time.Time
}

func (c *credentials) remember(id Identity, now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = map[[sha256.Size]byte]credential{}
	}
	if _, ok := c.m[id.hash]; !ok && len(c.m) >= maxCredentials {
		for h, cr := range c.m {
			if now.Sub(cr.at) > OutageTTL {
				delete(c.m, h)
			}
		}
		for h := range c.m { // still full: any one makes room
			if len(c.m) < maxCredentials {
				break
			}
			delete(c.m, h)
		}
	}
	c.m[id.hash] = credential{id: id, at: now}
}

func (c *credentials) forget(hash [sha256.Size]byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.m, hash)
}

func (c *credentials) recall(hash [sha256.Size]byte, now time.Time) (Identity, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	cr, ok := c.m[hash]
	if !ok || now.Before(cr.at) || now.Sub(cr.at) > OutageTTL {
		return Identity{}, false
	}
	return cr.id, true
}
