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
// one. `promptkit serve` and `promptkit worker` do. The engine's news and
// the store's state are the same values (pktype's): nothing is converted.
func PacingStore(st jobs.Store) promptkit.PacingStore { return pacingStore{st} }

type pacingStore struct{ st jobs.Store }

func (p pacingStore) SyncPacing(ctx context.Context, peer string, news []promptkit.PacingNews) ([]promptkit.SharedPacing, error) {
	return p.st.SyncPacing(ctx, jobs.PacingSyncParams{Peer: peer, Updates: news})
}
