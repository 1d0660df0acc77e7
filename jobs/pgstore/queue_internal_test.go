package pgstore

import (
	"testing"

	"github.com/promptkit/promptkit/jobs/internal/queue"
)

// PostgreSQL decides the queue rules in its claim and enqueue statements,
// built from queue's SQL fragments: evaluated here over queue's tables of
// cases, they say what queue's Go functions say.
func TestQueueRulesMatchGo(t *testing.T) {
	s := openInternal(t)
	ctx := t.Context()
	t.Run("room", func(t *testing.T) {
		q := `SELECT ` + queue.CappedSQL("l") + `, ` + queue.RoomSQL("l", "SELECT $3::int") + `
			FROM (VALUES ($1::int, $2::bool)) AS l(max_running, paused)`
		for _, c := range queue.RoomCases {
			var capped bool
			var room int
			if err := s.pool.QueryRow(ctx, q, c.Limit.MaxRunning, c.Limit.Paused, c.Running).Scan(&capped, &room); err != nil {
				t.Fatal(err)
			}
			if capped != c.Limit.Capped() || room != c.Limit.Room(c.Running) {
				t.Errorf("%s: PostgreSQL says capped %v, room %d; Go says %v, %d", c.Name, capped, room,
					c.Limit.Capped(), c.Limit.Room(c.Running))
			}
		}
	})
}
