package events

import (
	"net/http"
	"sync"
	"time"

	"github.com/promptkit/promptkit/server/internal/auth"
	"github.com/promptkit/promptkit/server/internal/httpapi"
)

// DefaultStreamShares bound the open event streams of a process (a
// connection, a goroutine and a buffer each): 10,000 in all, an org a
// tenth of them, a token a tenth of its org's (a page opens one per tab).
var DefaultStreamShares = auth.Shares{Total: 10000, PerOrg: 1000, PerIdentity: 100}

// open counts the streams open.
type open struct {
	mu   sync.Mutex
	held auth.Held
}

// acquire counts a stream of id, or names the bound it would cross.
func (o *open) acquire(s auth.Shares, id auth.Identity) (release func(), full string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if full := o.held.Full(s, id, "open event streams"); full != "" {
		return nil, full
	}
	o.held.Add(id)
	return func() {
		o.mu.Lock()
		defer o.mu.Unlock()
		o.held.Remove(id)
	}, ""
}

// tooManyStreams is the 429 of a stream beyond a bound. Retry-After is
// how long a stream whose client went away may keep its place: until a
// write to it fails, at the latest a keep-alive and the write deadline
// later.
func tooManyStreams(full string, keepAlive time.Duration) *httpapi.Problem {
	return &httpapi.Problem{Status: http.StatusTooManyRequests, Code: "rate_limited", RetryAfter: keepAlive + writeGrace,
		Message: full + " is reached; close one, or retry after the Retry-After delay"}
}
