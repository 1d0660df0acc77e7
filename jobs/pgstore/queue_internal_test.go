package pgstore

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

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
	// Each case's queue is set up at priority 5 in a transaction rolled
	// back afterwards; priority 6 holds a queue that must not count.
	t.Run("tags", func(t *testing.T) {
		now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
		q := `WITH src AS (SELECT ord, 'o'::text AS org, 5 AS prio FROM generate_series(1, $1::int) AS ord), ` +
			queue.FairTagsPG("src", "$2::timestamptz") + `
			SELECT tag FROM fair ORDER BY ord`
		for _, c := range queue.TagCases {
			tx, err := s.pool.Begin(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer tx.Rollback(ctx) // after a failure; no-op once rolled back
			exec := func(sql string, args ...any) {
				if _, err := tx.Exec(ctx, sql, args...); err != nil {
					t.Fatalf("%s: %s: %v", c.Name, sql, err)
				}
			}
			exec(`INSERT INTO fair_tags (priority, org_id, last) VALUES (6, 'o', 1000), (6, 'z', 2000)`)
			exec(`INSERT INTO job_queue (job_id, priority, available_at, created_at, tag) VALUES ('noise', 6, $1, $1, 0.001)`, now)
			if !c.NoLimits {
				exec(`INSERT INTO limits (scope, subject, weight, updated_at) VALUES ('org', 'o', $1, $2)`, c.Weight, now)
			}
			for org, last := range c.Last {
				exec(`INSERT INTO fair_tags (priority, org_id, last) VALUES (5, $1, $2)`, org, last)
			}
			for i, j := range c.Queued {
				at := now
				if j.Later {
					at = now.Add(time.Hour)
				}
				exec(`INSERT INTO job_queue (job_id, priority, available_at, created_at, tag) VALUES ($1, 5, $2, $3, $4)`,
					fmt.Sprint("q", i), at, now, j.Tag)
			}
			rows, _ := tx.Query(ctx, q, c.N, now)
			tags, err := pgx.CollectRows(rows, pgx.RowTo[float64])
			if err != nil {
				t.Fatalf("%s: %v", c.Name, err)
			}
			var last float64
			if err := tx.QueryRow(ctx, `SELECT last FROM fair_tags WHERE priority = 5 AND org_id = 'o'`).Scan(&last); err != nil {
				t.Fatalf("%s: %v", c.Name, err)
			}
			goTags, goLast := queue.Tags(c.Inputs(), c.N)
			if !slices.Equal(tags, goTags) || last != goLast {
				t.Errorf("%s: PostgreSQL gives tags %v, last %v; Go gives %v, %v", c.Name, tags, last, goTags, goLast)
			}
			if err := tx.Rollback(ctx); err != nil {
				t.Fatal(err)
			}
		}
	})
}
