package pgstore

import (
	"fmt"
	"strings"
	"testing"

	"github.com/promptkit/promptkit/jobs"
)

// EventsAfter with CreatedBy walks the log from its cursor in order and
// looks each job up by its key, whatever the estimates: no hash join over
// the user's jobs, no sort (see eventsAfterSQL).
func TestEventsAfterPlan(t *testing.T) {
	s := openInternal(t)
	ctx := t.Context()
	ps := make([]jobs.EnqueueParams, 5000)
	for i := range ps {
		ps[i] = jobs.EnqueueParams{OrgID: fmt.Sprint("org", i%3), CreatedBy: fmt.Sprint("u", i%13), Text: "x"}
	}
	if _, err := s.EnqueueBatch(ctx, ps); err != nil {
		t.Fatal(err)
	}
	if _, err := s.pool.Exec(ctx, `ANALYZE`); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]any{{0, 500, "", ""}, {0, 500, "org1", "u3"}, {0, 500, "", "u3"}, {4000, 500, "org1", "u3"}} {
		rows, err := s.pool.Query(ctx, `EXPLAIN `+eventsAfterSQL, args...)
		if err != nil {
			t.Fatal(err)
		}
		var plan []string
		for rows.Next() {
			var line string
			if err := rows.Scan(&line); err != nil {
				t.Fatal(err)
			}
			plan = append(plan, line)
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		got := strings.Join(plan, "\n")
		if !strings.Contains(got, "Index Scan using job_events_pkey") || !strings.Contains(got, "Nested Loop") ||
			strings.Contains(got, "Sort") || strings.Contains(got, "Hash") {
			t.Errorf("EventsAfter%v plan:\n%s", args, got)
		}
	}
}
