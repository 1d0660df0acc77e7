package storeops

import (
	"cmp"
	"slices"

	"github.com/promptkit/promptkit/jobs"
)

// PeerRow is one row of pacing_peers, as both stores read it.
type PeerRow struct {
	Backend string
	jobs.PacingPeer
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
		slices.SortFunc(s.Peers, func(a, b jobs.PacingPeer) int { return cmp.Compare(a.Peer, b.Peer) })
	}
	return out
}
