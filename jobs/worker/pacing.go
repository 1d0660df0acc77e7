package worker

import (
	"context"

	"github.com/promptkit/promptkit"
	"github.com/promptkit/promptkit/jobs"
)

// PacingStore makes st the place where the engines of every process on
// its database share their pacing (Engine.SharePacing): run
//
//	go engine.SharePacing(ctx, worker.PacingStore(st), promptkit.SharePacingOptions{})
//
// next to the workers, so that the processes pace each provider like
// one. `promptkit serve` and `promptkit worker` do.
func PacingStore(st jobs.Store) promptkit.PacingStore { return pacingStore{st} }

type pacingStore struct{ st jobs.Store }

func (p pacingStore) SyncPacing(ctx context.Context, peer string, news []promptkit.PacingNews) ([]promptkit.SharedPacing, error) {
	ups := make([]jobs.PacingUpdate, len(news))
	for i, n := range news {
		ups[i] = jobs.PacingUpdate{Backend: n.Backend, Demand: n.Demand, PauseUntil: n.PauseUntil, CooldownUntil: n.CooldownUntil,
			RateCap: n.Rate.Cap, RateFloor: n.Rate.Floor, RateAt: n.Rate.At, Estimate: n.Estimate.Admitted, EstimateAt: n.Estimate.At}
	}
	got, err := p.st.SyncPacing(ctx, jobs.PacingSyncParams{Peer: peer, Updates: ups})
	if err != nil {
		return nil, err
	}
	out := make([]promptkit.SharedPacing, len(got))
	for i, b := range got {
		out[i] = SharedPacing(b)
	}
	return out, nil
}

// SharedPacing is the engine's view of a backend's pacing as the store
// keeps it: SharedPacing(b).RequestsPerSecond(now) is the rate the
// processes follow.
func SharedPacing(b jobs.BackendPacing) promptkit.SharedPacing {
	sp := promptkit.SharedPacing{Backend: b.Backend, PauseUntil: b.PauseUntil, CooldownUntil: b.CooldownUntil, Held: b.Held,
		Rate: promptkit.LearnedRate{Cap: b.RateCap, Floor: b.RateFloor, At: b.RateAt}}
	for _, pr := range b.Peers {
		sp.Peers = append(sp.Peers, promptkit.PacingPeer{ID: pr.Peer, Demand: pr.Demand,
			Estimate: promptkit.RateEstimate{Admitted: pr.Estimate, At: pr.EstimateAt}})
	}
	return sp
}
