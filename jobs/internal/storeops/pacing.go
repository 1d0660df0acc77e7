package storeops

import (
	"cmp"
	"context"
	"slices"
	"time"

	"github.com/promptkit/promptkit/jobs"
)

// PeerRow is one row of pacing_peers, as both stores read it.
type PeerRow struct {
	Backend string
	jobs.PacingPeer
}

// PacingSync says which rows a sync locks and merges.
type PacingSync struct {
	// Peer is the process whose pacing_peers rows the sync writes.
	Peer string
	// Backends are the backends of the sync's updates, sorted, each once:
	// Peer's row on each is written.
	Backends []string
	// News are those of Backends with news (jobs.PacingUpdate.News),
	// sorted: their pacing rows are written.
	News []string
	// TTL is jobs.PacingSyncParams.PeerTTL.
	TTL time.Duration
}

// PacingWrite is what a sync writes, as it is: rows to upsert.
type PacingWrite struct {
	// States are pacing rows: every column but held, which only
	// HoldBackend writes. Their Peers are ignored.
	States []jobs.BackendPacing
	// Peers are pacing_peers rows.
	Peers []PeerRow
}

// SyncPacing records one process's pacing news: the parameters checked,
// the rows merged by MergePacing (DB.PacingSync locks them), the answer
// grouped by GroupPacing. See jobs.Store.
func (o Ops) SyncPacing(ctx context.Context, p jobs.PacingSyncParams) ([]jobs.BackendPacing, error) {
	p, err := p.Normalize()
	if err != nil {
		return nil, o.fail("sync pacing", err)
	}
	s := PacingSync{Peer: p.Peer, TTL: p.PeerTTL}
	for _, u := range p.Updates { // sorted by backend (Normalize)
		s.Backends = append(s.Backends, u.Backend)
		if u.News() {
			s.News = append(s.News, u.Backend)
		}
	}
	s.Backends, s.News = slices.Compact(s.Backends), slices.Compact(s.News)
	states, peers, err := o.db.PacingSync(ctx, s, func(now time.Time, states []jobs.BackendPacing, peers []PeerRow) PacingWrite {
		return MergePacing(p, now, states, peers)
	})
	if err != nil {
		return nil, o.fail("sync pacing", err)
	}
	return GroupPacing(states, peers), nil
}

// MergePacing is what the sync p (normalized) writes at now, given the
// stored rows it locked: the pacing rows of the backends with news and
// p.Peer's rows, each merged with p's updates in order by
// jobs.BackendPacing.Merge. A backend with no news gets no pacing row:
// presence alone is not shared state.
func MergePacing(p jobs.PacingSyncParams, now time.Time, states []jobs.BackendPacing, peers []PeerRow) PacingWrite {
	by := map[string]jobs.BackendPacing{}
	for _, st := range GroupPacing(states, peers) {
		by[st.Backend] = st
	}
	news := map[string]bool{}
	var order []string // the backends, once each, sorted as p.Updates are
	for _, u := range p.Updates {
		st := by[u.Backend]
		st.Backend = u.Backend
		by[u.Backend] = st.Merge(p.Peer, u, now)
		news[u.Backend] = news[u.Backend] || u.News()
		if len(order) == 0 || order[len(order)-1] != u.Backend {
			order = append(order, u.Backend)
		}
	}
	var w PacingWrite
	for _, b := range order {
		st := by[b]
		for _, pr := range st.Peers {
			if pr.ID == p.Peer {
				w.Peers = append(w.Peers, PeerRow{Backend: b, PacingPeer: pr})
			}
		}
		if news[b] {
			st.Peers = nil
			w.States = append(w.States, st)
		}
	}
	return w
}

// GroupPacing makes SyncPacing's answer from the rows of pacing (states)
// and of pacing_peers (peers): one entry per backend that has either,
// by backend, its peers by peer.
func GroupPacing(states []jobs.BackendPacing, peers []PeerRow) []jobs.BackendPacing {
	by := make(map[string]int, len(states))
	out := slices.Clone(states)
	for i, s := range out {
		by[s.Backend] = i
	}
	for _, p := range peers {
		i, ok := by[p.Backend]
		if !ok {
			i = len(out)
			by[p.Backend] = i
			out = append(out, jobs.BackendPacing{Backend: p.Backend})
		}
		out[i].Peers = append(out[i].Peers, p.PacingPeer)
	}
	slices.SortFunc(out, func(a, b jobs.BackendPacing) int { return cmp.Compare(a.Backend, b.Backend) })
	for _, s := range out {
		slices.SortFunc(s.Peers, func(a, b jobs.PacingPeer) int { return cmp.Compare(a.ID, b.ID) })
	}
	return out
}
