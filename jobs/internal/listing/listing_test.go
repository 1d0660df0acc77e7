package listing

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/promptkit/promptkit/jobs"
)

func TestPage(t *testing.T) {
	rows := []jobs.Job{{ID: "c", CreatedAt: time.UnixMicro(3)}, {ID: "b", CreatedAt: time.UnixMicro(2)}, {ID: "a", CreatedAt: time.UnixMicro(1)}}
	if p := Page(rows[:2], 2); len(p.Jobs) != 2 || p.Next != "" {
		t.Errorf("no row beyond the limit: %+v", p)
	}
	p := Page(rows, 2)
	if len(p.Jobs) != 2 || p.Next != jobs.CursorAfter(rows[1]).String() {
		t.Errorf("a row beyond the limit: %+v", p)
	}
	c, err := jobs.DecodeCursor(p.Next)
	if err != nil || c.ID != "b" || !c.CreatedAt.Equal(rows[1].CreatedAt) {
		t.Errorf("Next decodes to %+v, %v", c, err)
	}
}

func TestQuery(t *testing.T) {
	d := Dialect{Placeholder: func(n int) string { return fmt.Sprint("$", n) }, Time: func(t time.Time) any { return t.UnixMicro() }}
	after := jobs.Cursor{CreatedAt: time.UnixMicro(7), ID: "j"}.String()
	q, args, err := Query(jobs.ListParams{JobFilter: jobs.JobFilter{OrgID: "o", State: jobs.Queued}, After: after, Limit: 5}, d, "id")
	want := `SELECT id FROM jobs WHERE org_id = $1 AND state = $2 AND (created_at, id) < ($3, $4) ORDER BY created_at DESC, id DESC LIMIT $5`
	if err != nil || q != want {
		t.Errorf("Query = %q, %v; want %q", q, err, want)
	}
	if fmt.Sprint(args) != "[o queued 7 j 6]" {
		t.Errorf("arguments %v", args)
	}
	q, args, err = Query(jobs.ListParams{JobFilter: jobs.JobFilter{CreatedBy: "u", Current: true}, Limit: 5}, d, "id")
	want = `SELECT id FROM jobs WHERE created_by = $1 AND state <> 'superseded' ORDER BY created_at DESC, id DESC LIMIT $2`
	if err != nil || q != want || fmt.Sprint(args) != "[u 6]" {
		t.Errorf("Query = %q %v, %v; want %q", q, args, err, want)
	}
	lo, hi := 10, 20
	q, args, err = Query(jobs.ListParams{JobFilter: jobs.JobFilter{Until: time.UnixMicro(9), MinPriority: &lo, MaxPriority: &hi,
		Profile: "p", BatchID: "b", Backend: "x"}, Limit: 5}, d, "id")
	want = `SELECT id FROM jobs WHERE created_at < $1 AND priority >= $2 AND priority <= $3` +
		` AND EXISTS (SELECT 1 FROM prompts p WHERE p.id = jobs.prompt_id AND p.profile = $4)` +
		` AND prompt_id IN (SELECT p.id FROM prompts p WHERE p.batch_id = $5)` +
		` AND EXISTS (SELECT 1 FROM usage_ledger u WHERE u.job_id = jobs.id AND u.backend = $6)` +
		` ORDER BY created_at DESC, id DESC LIMIT $7`
	if err != nil || q != want || fmt.Sprint(args) != "[9 10 20 p b x 6]" {
		t.Errorf("Query = %q %v, %v; want %q", q, args, err, want)
	}
	cq, cargs := CountQuery(jobs.JobFilter{OrgID: "o", Backend: "x"}, d)
	want = `SELECT count(*) FROM jobs WHERE org_id = $1 AND EXISTS (SELECT 1 FROM usage_ledger u WHERE u.job_id = jobs.id AND u.backend = $2)`
	if cq != want || fmt.Sprint(cargs) != "[o x]" {
		t.Errorf("CountQuery = %q %v; want %q", cq, cargs, want)
	}
	if _, _, err := Query(jobs.ListParams{After: "%"}, d, "id"); !errors.Is(err, jobs.ErrInvalid) {
		t.Errorf("bad cursor: %v", err)
	}
}
