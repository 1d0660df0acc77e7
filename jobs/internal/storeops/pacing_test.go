package storeops

import (
	"reflect"
	"testing"
	"time"

	"github.com/promptkit/promptkit/jobs"
	"github.com/promptkit/promptkit/pktype"
)

// MergePacing writes a pacing row only for a backend with news, the
// peer's row for every backend of the sync, and merges several updates
// of one backend in their order.
func TestMergePacing(t *testing.T) {
	t0 := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	now := t0.Add(time.Minute)
	p := jobs.PacingSyncParams{Peer: "me", Updates: []jobs.PacingUpdate{
		{Backend: "a", Demand: 1, PauseUntil: t0.Add(2 * time.Second)},
		{Backend: "a", Demand: 2, PauseUntil: t0.Add(time.Second)},
		{Backend: "b", Demand: 3},
		{Backend: "c", Demand: 4, Rate: pktype.LearnedRate{Cap: 9, At: t0}},
	}}
	states := []jobs.BackendPacing{{Backend: "a", PauseUntil: t0, Held: true, UpdatedAt: t0}}
	peers := []PeerRow{{Backend: "b", PacingPeer: jobs.PacingPeer{ID: "me", Demand: 7, SeenAt: t0,
		Estimate: pktype.RateEstimate{Admitted: 5, At: t0}}}}
	got := MergePacing(p, now, states, peers)
	want := PacingWrite{
		States: []jobs.BackendPacing{
			{Backend: "a", PauseUntil: t0.Add(2 * time.Second), Held: true, UpdatedAt: now},
			{Backend: "c", Rate: pktype.LearnedRate{Cap: 9, At: t0}, UpdatedAt: now},
		},
		Peers: []PeerRow{
			{Backend: "a", PacingPeer: jobs.PacingPeer{ID: "me", Demand: 2, SeenAt: now}},
			{Backend: "b", PacingPeer: jobs.PacingPeer{ID: "me", Demand: 3, SeenAt: now, Estimate: pktype.RateEstimate{Admitted: 5, At: t0}}},
			{Backend: "c", PacingPeer: jobs.PacingPeer{ID: "me", Demand: 4, SeenAt: now}},
		},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got  %+v\nwant %+v", got, want)
	}
}
