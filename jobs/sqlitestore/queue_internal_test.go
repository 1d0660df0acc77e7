package sqlitestore

import (
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/promptkit/promptkit/jobs"
	"github.com/promptkit/promptkit/jobs/internal/queue"
)

// SQLite decides the start tags with queue.Tags from what qTagInputs
// reads: over queue's table of cases, the tags and last tag it records
// are Tags' of the case's inputs (scheduled jobs, other priorities and
// other orgs read as they should). Each case's queue is set up at
// priority 5 in a transaction rolled back afterwards; priority 6 holds a
// queue that must not count.
func TestTagsMatchGo(t *testing.T) {
	s, err := Open(t.Context(), filepath.Join(t.TempDir(), "jobs.db"), jobs.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	rollback := errors.New("roll back")
	for _, c := range queue.TagCases {
		err := s.write(t.Context(), "tags", func(w *wtx) error {
			later := w.now + time.Hour.Microseconds()
			stmts := [][]any{
				{`INSERT INTO prompts (id, org_id, created_by, created_at) VALUES ('p', 'o', 'u', 1)`},
				{`INSERT INTO fair_tags (priority, org_id, last) VALUES (6, 'o', 1000), (6, 'z', 2000)`},
				{`INSERT INTO jobs (id, prompt_id, priority, org_id, created_by, created_at, updated_at, available_at, fair_tag)
					VALUES ('noise', 'p', 6, 'z', 'u', 1, 1, 1, 0.001)`},
			}
			if !c.NoLimits {
				stmts = append(stmts, []any{`INSERT INTO limits (scope, subject, weight, updated_at) VALUES ('org', 'o', ?, 1)`, c.Weight})
			}
			for org, last := range c.Last {
				stmts = append(stmts, []any{`INSERT INTO fair_tags (priority, org_id, last) VALUES (5, ?, ?)`, org, last})
			}
			for i, j := range c.Queued {
				at := w.now
				if j.Later {
					at = later
				}
				stmts = append(stmts, []any{`INSERT INTO jobs (id, prompt_id, priority, org_id, created_by, created_at,
					updated_at, available_at, fair_tag) VALUES (?, 'p', 5, 'z', 'u', 1, 1, ?, ?)`, fmt.Sprint("q", i), at, j.Tag})
			}
			for _, st := range stmts {
				if _, err := w.tx.ExecContext(w.ctx, st[0].(string), st[1:]...); err != nil {
					return fmt.Errorf("%s: %w", st[0], err)
				}
			}
			k := tagKey{"o", 5}
			if err := w.takeTags(k, c.N); err != nil {
				return err
			}
			var last float64
			if err := w.tx.QueryRowContext(w.ctx, `SELECT last FROM fair_tags WHERE priority = 5 AND org_id = 'o'`).Scan(&last); err != nil {
				return err
			}
			wantTags, wantLast := queue.Tags(c.Inputs(), c.N)
			if !slices.Equal(w.tags[k], wantTags) || last != wantLast {
				t.Errorf("%s: SQLite gives tags %v, last %v; Go gives %v, %v", c.Name, w.tags[k], last, wantTags, wantLast)
			}
			return rollback
		})
		if !errors.Is(err, rollback) {
			t.Fatalf("%s: %v", c.Name, err)
		}
	}
}
