package pgstore_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/promptkit/promptkit/jobs"
)

// BenchmarkSyncPacing measures one process's sync of three backends: a
// heartbeat (presence only) and news (a pause on each), which locks and
// merges the rows in Go (a second round trip), and a read.
func BenchmarkSyncPacing(b *testing.B) {
	s, _ := open(b, jobs.Options{})
	ctx := context.Background()
	backends := []string{"x", "y", "z"}
	for _, c := range []struct {
		name string
		news bool
		read bool
	}{{"heartbeat", false, false}, {"news", true, false}, {"read", false, true}} {
		b.Run(c.name, func(b *testing.B) {
			i := 0
			for b.Loop() {
				p := jobs.PacingSyncParams{Peer: "p"}
				if !c.read {
					for _, be := range backends {
						u := jobs.PacingUpdate{Backend: be, Demand: 1 + i%3}
						if c.news {
							u.PauseUntil = time.Now().Add(time.Second)
						}
						p.Updates = append(p.Updates, u)
					}
				}
				if _, err := s.SyncPacing(ctx, p); err != nil {
					b.Fatal(fmt.Errorf("sync pacing: %w", err))
				}
				i++
			}
		})
	}
}
