package pgstore

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/promptkit/promptkit/jobs"
)

func TestExplainGeneric(t *testing.T) {
	ctx := context.Background()
	base := os.Getenv("PROMPTKIT_TEST_DATABASE_URL")
	if base == "" || os.Getenv("EXPLAIN") == "" {
		t.Skip()
	}
	c0, _ := pgx.Connect(ctx, base)
	c0.Exec(ctx, "DROP SCHEMA IF EXISTS explain_t CASCADE")
	defer c0.Exec(ctx, "DROP SCHEMA IF EXISTS explain_t CASCADE")
	defer c0.Close(ctx)
	s, err := Open(ctx, base+"&search_path=explain_t", jobs.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	batch := make([]jobs.EnqueueParams, 1000)
	for i := range batch {
		batch[i] = jobs.EnqueueParams{OrgID: "o", Text: "t"}
	}
	for range 20 {
		s.EnqueueBatch(ctx, batch)
	}
	c0.Exec(ctx, "ANALYZE explain_t.jobs")
	js, _ := s.Claim(ctx, jobs.ClaimParams{Worker: "w", Limit: 100})
	conn, _ := pgx.Connect(ctx, base+"&search_path=explain_t&plan_cache_mode=force_generic_plan")
	defer conn.Close(ctx)
	u := `{}`
	j := js[0]
	args := finishSQL.args([]string{"succeed"}, []string{j.ID}, []string{jobs.ResponseID(j.PromptID, j.ID)}, []string{"out"}, []*string{nil}, []string{""}, []*string{&u}, []int{0}, []*time.Time{nil}, []string{""}, []string{""}, []bool{false}, []*string{nil}, time.Now().UTC(), s.schema)
	if _, err := conn.Prepare(ctx, "fin", finishSQL.q); err != nil {
		t.Fatal(err)
	}
	conn.Exec(ctx, "BEGIN")
	rows, err := conn.Query(ctx, "EXPLAIN (ANALYZE, BUFFERS) EXECUTE fin($1,$2,$3,$4,$5,$6,$7,$8,$9,$10,$11,$12,$13,$14,$15)", append([]any{pgx.QueryExecModeSimpleProtocol}, args...)...)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var l string
		rows.Scan(&l)
		t.Log(l)
	}
	rows.Close()
	conn.Exec(ctx, "ROLLBACK")
	if _, err := conn.Prepare(ctx, "cl", claimSQL.q); err != nil {
		t.Fatal(err)
	}
	conn.Exec(ctx, "BEGIN")
	rows, err = conn.Query(ctx, "EXPLAIN (ANALYZE, BUFFERS) EXECUTE cl($1,$2,$3,$4,$5)", append([]any{pgx.QueryExecModeSimpleProtocol}, claimSQL.args(time.Now().UTC(), 100, 10, "w", s.schema)...)...)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var l string
		rows.Scan(&l)
		t.Log(l)
	}
	rows.Close()
	conn.Exec(ctx, "ROLLBACK")
}
