package auth

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/promptkit/promptkit/server/internal/httpapi"
)

// Stream tickets: EventSource cannot send an Authorization header, so a
// client with a bearer token first asks POST /v1/events/ticket for a
// ticket and opens GET /v1/events?ticket=T with it. A ticket is random,
// short-lived, spent by its first use and held in memory only (a restart
// voids them all; the page then simply asks again). It acts as the
// identity that asked for it, and only on the event stream.
const (
	// TicketTTL is how long a ticket is valid after it is issued.
	TicketTTL = 60 * time.Second
	// ticketBytes is the ticket's randomness: 256 bits.
	ticketBytes = 32
	// TicketPrefix marks tickets, so they are not mistaken for tokens.
	TicketPrefix = "pkt_"
)

// DefaultTicketShares bound the unspent, unexpired tickets: 10,000 in
// all, an org a tenth of them, an identity a tenth of its org's. A page
// asks for one per (re)connection, so 100 is a hundred tabs reconnecting
// within a minute.
var DefaultTicketShares = Shares{Total: 10000, PerOrg: 1000, PerIdentity: 100}

// tickets holds the unspent tickets, by the SHA-256 of their secret (the
// secret itself is never kept).
type tickets struct {
	now    func() time.Time
	shares Shares

	mu   sync.Mutex
	byID map[[sha256.Size]byte]ticket
	held Held
	// swept is when expired tickets were last dropped.
	swept time.Time
}

type ticket struct {
	id      Identity
	expires time.Time
}

func newTickets(now func() time.Time, shares Shares) *tickets {
	return &tickets{now: now, shares: shares, byID: map[[sha256.Size]byte]ticket{}}
}

// ticketsFull is issue's refusal: the bound reached, named for the 429.
type ticketsFull struct{ bound string }

func (e *ticketsFull) Error() string { return e.bound + " is reached" }

// full is the bound id has reached, or ""; t.mu is held.
func (t *tickets) full(id Identity) string {
	return t.held.Full(t.shares, id, "unspent stream tickets")
}

// issue makes a ticket for id and returns it with its expiry.
func (t *tickets) issue(id Identity) (string, time.Time, error) {
	b := make([]byte, ticketBytes)
	if _, err := rand.Read(b); err != nil {
		return "", time.Time{}, err
	}
	secret := TicketPrefix + base64.RawURLEncoding.EncodeToString(b)
	now := t.now()
	expires := now.Add(TicketTTL)
	t.mu.Lock()
	defer t.mu.Unlock()
	// Drop the expired tickets: at most once a second, or when a bound is
	// reached (sweeping is a pass over all of them).
	if now.Sub(t.swept) >= time.Second || now.Before(t.swept) || t.full(id) != "" {
		t.swept = now
		for k, tk := range t.byID {
			if !now.Before(tk.expires) {
				t.remove(k, tk)
			}
		}
	}
	if bound := t.full(id); bound != "" {
		return "", time.Time{}, &ticketsFull{bound}
	}
	t.byID[sha256.Sum256([]byte(secret))] = ticket{id: id, expires: expires}
	t.held.Add(id)
	return secret, expires, nil
}

func (t *tickets) remove(k [sha256.Size]byte, tk ticket) {
	delete(t.byID, k)
	t.held.Remove(tk.id)
}

// redeem spends a ticket: the identity it was issued to, or
// errBadTicket when it is unknown, spent or expired.
func (t *tickets) redeem(secret string) (Identity, error) {
	if !strings.HasPrefix(secret, TicketPrefix) {
		return Identity{}, errBadTicket
	}
	k := sha256.Sum256([]byte(secret))
	now := t.now()
	t.mu.Lock()
	defer t.mu.Unlock()
	tk, ok := t.byID[k]
	if !ok {
		return Identity{}, errBadTicket
	}
	t.remove(k, tk) // spent, whether or not still valid
	if !now.Before(tk.expires) {
		return Identity{}, errBadTicket
	}
	return tk.id, nil
}

// errBadTicket is a ticket that is unknown, spent or expired.
var errBadTicket = errors.New("unknown, spent or expired stream ticket")

// TicketAnswer is the body of POST /v1/events/ticket.
type TicketAnswer struct {
	Ticket    string    `json:"ticket"`
	ExpiresAt time.Time `json:"expires_at"`
}

// IssueTicket answers POST /v1/events/ticket: a ticket for the caller.
func (a *Auth) IssueTicket(w http.ResponseWriter, r *http.Request) error {
	secret, expires, err := a.tickets.issue(Of(r))
	var full *ticketsFull
	switch {
	case errors.As(err, &full):
		// Within TicketTTL every ticket held now has expired.
		return &httpapi.Problem{Status: http.StatusTooManyRequests, Code: "rate_limited", RetryAfter: TicketTTL,
			Message: full.Error() + "; retry after the Retry-After delay, when some have expired"}
	case err != nil:
		return httpapi.About("issuing a stream ticket", err)
	}
	w.Header().Set("Cache-Control", "no-store")
	httpapi.WriteJSON(w, http.StatusOK, TicketAnswer{Ticket: secret, ExpiresAt: expires.UTC()})
	return nil
}

// RequireStream is Require for GET /v1/events, which also accepts
// ?ticket= instead of a bearer token (EventSource cannot send one): a
// request with that parameter acts as the ticket's identity (and spends
// it), whatever its headers say; an unknown, spent or expired ticket, or
// one whose token has since been revoked, is 401.
func (a *Auth) RequireStream(next http.Handler) http.Handler {
	byHeader := a.Require(httpapi.REST, next)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		if !q.Has("ticket") {
			byHeader.ServeHTTP(w, r)
			return
		}
		id, err := a.tickets.redeem(q.Get("ticket"))
		if err == nil {
			var ok bool
			if ok, err = a.Valid(r.Context(), id); err != nil {
				httpapi.REST.Fail(w, r, a.cfg.Log, httpapi.About("checking a stream ticket's token", err))
				return
			}
			if !ok {
				err = errBadTicket
			}
		}
		if err != nil {
			httpapi.REST.Write(w, &httpapi.Problem{Status: http.StatusUnauthorized, Code: "unauthorized",
				Message: "the stream ticket is unknown, spent or expired; ask POST /v1/events/ticket for another"})
			return
		}
		next.ServeHTTP(w, r.WithContext(With(r.Context(), id)))
	})
}
