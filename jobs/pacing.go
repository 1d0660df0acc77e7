package jobs

import (
	"math"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/promptkit/promptkit/pktype"
)

// Shared pacing: the engines of every process on one database (each
// `promptkit worker` and `serve`) share, per backend, what their pacers
// learned from the provider, so that N processes pace like one (see
// Store.SyncPacing, promptkit.Engine.SharePacing and docs/retries.md).
// The store keeps, per backend, one row of shared state, merged as
// BackendPacing.Merge says, and one row of presence per process.

// DefaultPacingPeerTTL is PacingSyncParams.PeerTTL when zero: a process
// publishes its presence about once a second while it has demand.
const DefaultPacingPeerTTL = 5 * time.Second

// MaxPacingUpdates bounds PacingSyncParams.Updates; MaxPacingName the
// bytes of a backend or peer name.
const (
	MaxPacingUpdates = 1000
	MaxPacingName    = 256
)

// The values of shared pacing are pktype's, the engine's too
// (promptkit.PacingNews, promptkit.SharedPacing): no conversion between
// the engine and the store.
type (
	// PacingUpdate is one process's news about one backend
	// (pktype.PacingNews): its demand replaces the peer's last one,
	// stamped with the store's time; a pause and a cooldown keep the later
	// end; a decrease (Rate) replaces the shared one when Rate.At is
	// later; the estimate replaces the peer's last one unless that one is
	// later. BackendPacing.Merge is that rule.
	PacingUpdate = pktype.PacingNews
	// BackendPacing is one backend's shared pacing (pktype.SharedPacing);
	// UpdatedAt is zero when only presence was published, Peers are the
	// processes seen within PacingSyncParams.PeerTTL, by ID.
	BackendPacing = pktype.SharedPacing
	// PacingPeer is one process's presence on a backend
	// (pktype.PacingPeer).
	PacingPeer = pktype.PacingPeer
)

// PacingSyncParams are one sync of one process's pacing.
type PacingSyncParams struct {
	// Peer identifies the process; required with Updates.
	Peer string
	// Updates are the process's news; none only reads.
	Updates []PacingUpdate
	// PeerTTL is how long a peer's presence lasts without news: peers
	// seen longer ago are left out of the answer, and deleted by a sync
	// that writes. Defaults to DefaultPacingPeerTTL.
	PeerTTL time.Duration
}

// Normalize checks the parameters: a peer and backend names of 1 to
// MaxPacingName bytes of UTF-8 without NUL, demand and estimate not
// negative, a finite positive Rate.Cap with Rate.At and a Rate.Floor from
// 0 to it, at most
// MaxPacingUpdates updates and a PeerTTL not negative. Times are cut to
// microseconds, in UTC; a rate or estimate without its time is dropped.
func (p PacingSyncParams) Normalize() (PacingSyncParams, error) {
	if p.PeerTTL < 0 {
		return p, invalidField("peer_ttl", "must not be negative")
	}
	if p.PeerTTL == 0 {
		p.PeerTTL = DefaultPacingPeerTTL
	}
	if len(p.Updates) > MaxPacingUpdates {
		return p, invalidField("updates", "%d updates, more than %d", len(p.Updates), MaxPacingUpdates)
	}
	if len(p.Updates) > 0 {
		if err := checkPacingName("peer", p.Peer); err != nil {
			return p, err
		}
	}
	ups := make([]PacingUpdate, len(p.Updates))
	for i, u := range p.Updates {
		if err := checkPacingName("backend", u.Backend); err != nil {
			return p, err
		}
		if u.Demand < 0 || u.Estimate.Admitted < 0 {
			return p, invalidField("demand", "demand and estimate must not be negative")
		}
		if r := u.Rate.Cap; r < 0 || math.IsNaN(r) || math.IsInf(r, 0) || (r == 0 && !u.Rate.At.IsZero()) {
			return p, invalidField("rate_cap", "must be a finite positive number with rate_at")
		}
		if r := u.Rate.Floor; r < 0 || math.IsNaN(r) || r > u.Rate.Cap {
			return p, invalidField("rate_floor", "must be a number from 0 to rate_cap")
		}
		u.PauseUntil = pacingTime(u.PauseUntil)
		u.CooldownUntil = pacingTime(u.CooldownUntil)
		u.Rate.At = pacingTime(u.Rate.At)
		u.Estimate.At = pacingTime(u.Estimate.At)
		if u.Rate.At.IsZero() {
			u.Rate.Cap, u.Rate.Floor = 0, 0
		}
		if u.Estimate.At.IsZero() {
			u.Estimate.Admitted = 0
		}
		ups[i] = u
	}
	// By backend: concurrent syncs then lock the rows of several
	// backends in one order.
	slices.SortStableFunc(ups, func(a, b PacingUpdate) int { return strings.Compare(a.Backend, b.Backend) })
	p.Updates = ups
	return p, nil
}

func checkPacingName(field, s string) error {
	switch {
	case s == "":
		return invalidField(field, "required")
	case len(s) > MaxPacingName:
		return invalidField(field, "longer than %d bytes", MaxPacingName)
	case !utf8.ValidString(s):
		return invalidField(field, "not UTF-8")
	case strings.ContainsRune(s, 0):
		return invalidField(field, msgNUL)
	}
	return nil
}

func pacingTime(t time.Time) time.Time {
	if t.IsZero() {
		return t
	}
	return t.UTC().Truncate(time.Microsecond)
}

// NormalizeBackend checks the backend of Store.HoldBackend: 1 to
// MaxPacingName bytes of UTF-8 without NUL.
func NormalizeBackend(backend string) (string, error) {
	return backend, checkPacingName("backend", backend)
}
