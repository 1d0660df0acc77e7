package pgstore

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/promptkit/promptkit/jobs"
	"github.com/promptkit/promptkit/jobs/internal/listing"
	"github.com/promptkit/promptkit/jobs/internal/usageq"
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
		got := explain(t, s, eventsAfterSQL, args...)
		if !strings.Contains(got, "Index Scan using job_events_pkey") || !strings.Contains(got, "Nested Loop") ||
			strings.Contains(got, "Sort") || strings.Contains(got, "Hash") {
			t.Errorf("EventsAfter%v plan:\n%s", args, got)
		}
	}
}

// One org's or one token's spend since a time (what a budget reads on
// every submission) is a range read of its index, not a scan of the
// ledger: index-only once the ledger is vacuumed (the index includes
// every column Usage sums), or a bitmap of the same range when a
// transaction open elsewhere on the database (another test's) kept
// VACUUM from marking the pages all-visible.
func TestUsageRangePlan(t *testing.T) {
	s := openInternal(t)
	ctx := t.Context()
	if _, err := s.pool.Exec(ctx, `
		INSERT INTO usage_ledger (at, job_id, org_id, user_id, token_id, model, backend, input_tokens, output_tokens, cost_usd)
		SELECT timestamptz '2030-01-01' + i * interval '1 minute', 'j' || i, 'org' || (i % 50), 'u' || (i % 200),
			'tok' || (i % 400), 'm', 'b', 10, 10, 0.001
		FROM generate_series(1, 50000) AS i`); err != nil {
		t.Fatal(err)
	}
	if _, err := s.pool.Exec(ctx, `VACUUM ANALYZE usage_ledger`); err != nil {
		t.Fatal(err)
	}
	since := time.Date(2030, 1, 2, 0, 0, 0, 0, time.UTC) // most of the ledger: a budget period
	for _, c := range []struct {
		p     jobs.UsageParams
		index string
	}{
		{jobs.UsageParams{OrgID: "org7", From: since}, "usage_ledger_org_at"},
		{jobs.UsageParams{TokenID: "tok7", From: since}, "usage_ledger_token_at"},
	} {
		q, args := usageq.Query(c.p, usageDialect)
		got := explain(t, s, q, args...)
		ranged := strings.Contains(got, "Index Only Scan using "+c.index) || strings.Contains(got, "Bitmap Index Scan on "+c.index)
		if !ranged || strings.Contains(got, "Seq Scan") {
			t.Errorf("Usage(%+v) plan:\n%s", c.p, got)
		}
	}
}

// An admission's count of an org's or a token's open reservations is a
// range read of its index, not a scan of every org's.
func TestReservedPlan(t *testing.T) {
	s := openInternal(t)
	ctx := t.Context()
	ps := make([]jobs.EnqueueParams, 5000)
	for i := range ps {
		ps[i] = jobs.EnqueueParams{OrgID: fmt.Sprint("org", i%100), CreatedBy: "u", Text: "x"}
	}
	es, err := s.EnqueueBatch(ctx, ps)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.pool.Exec(ctx, `
		INSERT INTO reservations (id, org_id, token_id, request, tokens, usd, job_id, claimed_at, expires_at)
		SELECT 'r' || i, 'org' || (i % 100), 'tok' || (i % 400), i % 2 = 0, 10, 0.01,
			CASE WHEN i % 2 = 1 THEN ($1::text[])[1 + i % 5000] ELSE '' END, timestamptz '2030-01-01',
			timestamptz '2030-01-01' + i * interval '1 second'
		FROM generate_series(1, 20000) AS i`, jobIDs(es)); err != nil {
		t.Fatal(err)
	}
	if _, err := s.pool.Exec(ctx, `ANALYZE`); err != nil {
		t.Fatal(err)
	}
	now := time.Date(2030, 1, 1, 5, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		q, subject, index string
	}{{reservedSQL, "org7", "reservations_org_idx"}, {reservedTokenSQL, "tok7", "reservations_token_idx"}} {
		got := explain(t, s, c.q, c.subject, now)
		if !strings.Contains(got, c.index) || !strings.Contains(got, "jobs_pkey") || strings.Contains(got, "Seq Scan") {
			t.Errorf("Reserved(%s) plan:\n%s", c.subject, got)
		}
	}
}

// jobIDs are the IDs of enqueued jobs.
func jobIDs(es []jobs.Enqueued) []string {
	out := make([]string, len(es))
	for i, e := range es {
		out[i] = e.JobID
	}
	return out
}

// The dashboard's backend activity (the last minutes of every backend's
// calls) is a range read of the ledger's (at) index, not a scan of it.
func TestBackendActivityPlan(t *testing.T) {
	s := openInternal(t)
	ctx := t.Context()
	if _, err := s.pool.Exec(ctx, `
		INSERT INTO usage_ledger (at, job_id, org_id, user_id, token_id, model, backend, status_code, outcome)
		SELECT timestamptz '2030-01-01' + i * interval '1 minute', 'j' || i, 'org' || (i % 50), 'u', 'tok', 'm',
			'b' || (i % 7), CASE WHEN i % 10 = 0 THEN 429 ELSE 200 END, 'success'
		FROM generate_series(1, 50000) AS i`); err != nil {
		t.Fatal(err)
	}
	if _, err := s.pool.Exec(ctx, `ANALYZE usage_ledger`); err != nil {
		t.Fatal(err)
	}
	// The last 15 minutes of the ledger's 50000.
	since := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC).Add((50000 - 15) * time.Minute)
	q, args := usageq.ActivityQuery(since, usageDialect)
	if got := explain(t, s, q, args...); !strings.Contains(got, "usage_ledger_at") || strings.Contains(got, "Seq Scan") {
		t.Errorf("BackendActivity plan:\n%s", got)
	}
}

// Filtering jobs by backend (the dashboard's JobFilter.Backend) reads the
// backend's ledger rows from its index (migration 00017), in the listing
// and in the count alike, never the whole ledger.
func TestListByBackendPlan(t *testing.T) {
	s := openInternal(t)
	ctx := t.Context()
	ps := make([]jobs.EnqueueParams, 5000)
	for i := range ps {
		ps[i] = jobs.EnqueueParams{OrgID: fmt.Sprint("org", i%3), CreatedBy: fmt.Sprint("u", i%13), Text: "x"}
	}
	if _, err := s.EnqueueBatch(ctx, ps); err != nil {
		t.Fatal(err)
	}
	// Three calls per job, one backend in a hundred rare.
	if _, err := s.pool.Exec(ctx, `
		INSERT INTO usage_ledger (at, job_id, org_id, user_id, token_id, model, backend)
		SELECT now(), id, org_id, created_by, '', 'm',
			CASE WHEN abs(hashtext(id)) % 100 = 0 THEN 'rare' ELSE 'b' || (abs(hashtext(id)) % 4) END
		FROM jobs, generate_series(1, 3)`); err != nil {
		t.Fatal(err)
	}
	if _, err := s.pool.Exec(ctx, `ANALYZE`); err != nil {
		t.Fatal(err)
	}
	for _, f := range []jobs.JobFilter{{Backend: "rare"}, {Backend: "b1"}, {Backend: "rare", OrgID: "org1", CreatedBy: "u3"}} {
		p, err := jobs.ListParams{JobFilter: f}.Normalize()
		if err != nil {
			t.Fatal(err)
		}
		lq, largs, err := listing.Query(p, listDialect, jobCols)
		if err != nil {
			t.Fatal(err)
		}
		cq, cargs := listing.CountQuery(p.JobFilter, listDialect)
		for _, q := range []struct {
			sql  string
			args []any
		}{{lq, largs}, {cq, cargs}} {
			got := explain(t, s, q.sql, q.args...)
			if !strings.Contains(got, "usage_ledger_backend_job") || strings.Contains(got, "Seq Scan on usage_ledger") {
				t.Errorf("%s %v plan:\n%s", q.sql, q.args, got)
			}
		}
	}
}

// explain returns q's plan, a line per node.
func explain(t *testing.T, s *Store, q string, args ...any) string {
	t.Helper()
	rows, err := s.pool.Query(t.Context(), `EXPLAIN `+q, args...)
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
	return strings.Join(plan, "\n")
}

// The active batches are read through the partial index
// batches_active_idx, which PostgreSQL may use only because the query's
// predicate (batchdb.ActiveWhere) implies the index's: with most batches
// finished, the plan reads the index, not the table or batches_created_idx.
func TestActiveBatchesPlan(t *testing.T) {
	s := openInternal(t)
	ctx := t.Context()
	if _, err := s.pool.Exec(ctx, `
		INSERT INTO batches (id, org_id, created_by, input_file_id, endpoint, completion_window, priority, status,
			created_at, expires_at)
		SELECT 'b' || i, 'o', 'u', 'f', '/v1/chat/completions', '24h', 0,
			CASE WHEN i % 500 = 0 THEN 'in_progress' ELSE 'completed' END,
			timestamptz '2030-01-01' + i * interval '1 second', timestamptz '2030-02-01'
		FROM generate_series(1, 20000) AS i`); err != nil {
		t.Fatal(err)
	}
	if _, err := s.pool.Exec(ctx, `ANALYZE batches`); err != nil {
		t.Fatal(err)
	}
	if got := explain(t, s, activeBatchesSQL); !strings.Contains(got, "batches_active_idx") {
		t.Errorf("plan of %s:\n%s", activeBatchesSQL, got)
	}
}

// planLog collects the plans auto_explain reports on a store's own
// connections: every statement the store runs, in the exec mode, plan
// cache mode and settings it runs it with, and with the plan PostgreSQL
// actually used (a cached generic one included).
type planLog struct {
	mu    sync.Mutex
	plans []string
}

// configure makes every pooled connection report its plans to l.
func (l *planLog) configure(cfg *pgxpool.Config) {
	cfg.ConnConfig.OnNotice = func(_ *pgconn.PgConn, n *pgconn.Notice) {
		if strings.Contains(n.Message, "Query Text:") {
			l.mu.Lock()
			l.plans = append(l.plans, n.Message)
			l.mu.Unlock()
		}
	}
	cfg.AfterConnect = func(ctx context.Context, conn *pgx.Conn) error {
		for _, q := range []string{`LOAD 'auto_explain'`, `SET auto_explain.log_min_duration = 0`,
			`SET client_min_messages = log`} {
			if _, err := conn.Exec(ctx, q); err != nil {
				return err
			}
		}
		return nil
	}
}

// take returns the plans reported since the last take.
func (l *planLog) take() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := l.plans
	l.plans = nil
	return out
}

// hotRound runs the statements of a chat completion and of its followers
// once: an enqueue, a claim, a success, the prompt, job and response reads,
// the event log (whole, one org, one user) and the changes.
func hotRound(t testing.TB, s *Store) {
	t.Helper()
	ctx := t.Context()
	e, err := s.Enqueue(ctx, jobs.EnqueueParams{OrgID: "org1", CreatedBy: "u3", Text: "x"})
	if err != nil {
		t.Fatal(err)
	}
	js, err := s.Claim(ctx, jobs.ClaimParams{Worker: "w", Limit: 1})
	if err != nil || len(js) != 1 {
		t.Fatal(len(js), err)
	}
	j := js[0]
	if _, err := s.Succeed(ctx, jobs.SucceedParams{JobID: j.ID, Worker: "w", Answer: jobs.Answer{Output: "ok"}}); err != nil {
		t.Fatal(err)
	}
	rid := jobs.ResponseID(j.PromptID, j.ID)
	if _, err := s.GetPrompt(ctx, j.OrgID, j.PromptID); err != nil {
		t.Fatal(err)
	}
	if _, err := s.GetPrompts(ctx, j.OrgID, []string{j.PromptID, e.PromptID}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.GetJob(ctx, "org1", e.JobID); err != nil {
		t.Fatal(err)
	}
	if _, err := s.GetResponse(ctx, j.OrgID, rid); err != nil {
		t.Fatal(err)
	}
	if _, err := s.GetResponses(ctx, j.OrgID, []string{rid}); err != nil {
		t.Fatal(err)
	}
	var head int64
	if err := s.pool.QueryRow(ctx, `SELECT max(seq) FROM job_events`).Scan(&head); err != nil {
		t.Fatal(err)
	}
	for _, p := range []jobs.EventsParams{{After: max(head-20, 0)}, {After: max(head-20, 0), OrgID: "org1"},
		{After: max(head-20, 0), OrgID: "org1", CreatedBy: "u3"}} {
		if _, err := s.EventsAfter(ctx, p); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.ChangesSince(ctx, jobs.ChangesParams{OrgID: "org1", Since: s.clock().Add(-time.Second)}); err != nil {
		t.Fatal(err)
	}
}

// fillHistory gives the store the history of a busy day: n jobs enqueued
// through the store (their prompts, queue rows and events), then a
// response and two more events for each, written directly. Nothing runs
// ANALYZE (autovacuum may be off, as on the test server).
func fillHistory(t testing.TB, s *Store, n int) {
	t.Helper()
	ctx := t.Context()
	ps := make([]jobs.EnqueueParams, 5000)
	for i := range ps {
		ps[i] = jobs.EnqueueParams{OrgID: fmt.Sprint("org", i%3), CreatedBy: fmt.Sprint("u", i%13), Text: "x"}
	}
	for range n / len(ps) {
		if _, err := s.EnqueueBatch(ctx, ps); err != nil {
			t.Fatal(err)
		}
	}
	for _, q := range []string{`
		INSERT INTO responses (id, prompt_id, job_id, output, created_at)
		SELECT 'r' || id, prompt_id, id, 'x', now() FROM jobs`, `
		INSERT INTO job_events (job_id, prompt_id, org_id, type, from_state, to_state, at)
		SELECT id, prompt_id, org_id, 'transition', s, s, now() FROM jobs, unnest(ARRAY['running', 'queued']) AS s`,
	} {
		if _, err := s.pool.Exec(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
}

// seqScanOfHistory is a sequential scan of a table that grows with
// history.
var seqScanOfHistory = regexp.MustCompile(`Seq Scan on (jobs|job_events|prompts|responses)\b`)

// The hot statements' plans do not depend on when the process started:
// after running every one of them on empty tables (where a cached generic
// plan would be made), and then filling the tables, every plan the store's
// own connection uses reads the tables through their indexes.
func TestHotPlansOutliveStart(t *testing.T) {
	var log planLog
	s := openInternalWith(t, map[string]string{"pool_max_conns": "1"}, log.configure)
	for range 8 {
		hotRound(t, s)
	}
	log.take()
	fillHistory(t, s, 20000)
	log.take()
	for range 2 {
		hotRound(t, s)
	}
	plans := log.take()
	// Each hot statement (by its text) was seen and read its index.
	for _, want := range []struct{ text, index string }{
		{"FROM job_events e LEFT JOIN LATERAL", "job_events_pkey"},                    // EventsAfter
		{"FROM prompts WHERE id = $1", "prompts_pkey"},                                // GetPrompt
		{"FROM prompts WHERE id = ANY($1)", "prompts_pkey"},                           // GetPrompts
		{"FROM jobs WHERE id = $1", "jobs_pkey"},                                      // GetJob
		{"FROM responses r JOIN prompts p", "responses_pkey"},                         // GetResponse(s)
		{"SELECT job_id FROM job_events WHERE at > $1", "job_events_at_idx"},          // ChangesSince
		{"FROM job_queue WHERE available_at", "job_queue_claim_idx"},                  // the claim's gate
		{"WITH picked AS (", ""},                                                      // the claim
		{"INSERT INTO prompts (", ""},                                                 // the enqueue
		{"SELECT 1 FROM jobs WHERE id = ANY($1) ORDER BY id FOR UPDATE", "jobs_pkey"}, // the finish's lock
		{"WITH u AS (", ""}, // the finish
	} {
		seen := false
		for _, p := range plans {
			if strings.Contains(p, want.text) {
				seen = true
				if !strings.Contains(p, want.index) {
					t.Errorf("%s: not through %s:\n%s", want.text, want.index, p)
				}
			}
		}
		if !seen {
			t.Errorf("%s: never ran", want.text)
		}
	}
	for _, p := range plans {
		if seqScanOfHistory.MatchString(p) {
			t.Errorf("plan:\n%s", p)
		}
	}
}

// BenchmarkHotReads measures the reads of a chat completion and its
// follower (GetPrompt, GetJob, GetResponses, four EventsAfter) on 20000
// jobs' history: with sequential scans allowed (PostgreSQL's defaults,
// before readParams), the statements first run on empty tables (fresh: the
// generic plans of a store started on a fresh database) or on the full
// tables (restarted: a store restarted on the same data); and as the store
// runs them (readParams), first run on empty tables.
func BenchmarkHotReads(b *testing.B) {
	for _, c := range []struct {
		name     string
		seqscans bool
		early    bool
	}{{"seqscan-fresh", true, true}, {"seqscan-restarted", true, false}, {"store", false, true}} {
		b.Run(c.name, func(b *testing.B) {
			params := map[string]string{"pool_max_conns": "1"}
			if c.seqscans {
				params["enable_seqscan"], params["jit"] = "on", "on"
			}
			s := openInternalWith(b, params, nil)
			if c.early {
				for range 8 {
					hotRound(b, s)
				}
			}
			fillHistory(b, s, 20000)
			for range 8 {
				hotRound(b, s)
			}
			ctx := b.Context()
			js, err := s.Claim(ctx, jobs.ClaimParams{Worker: "w", Limit: 1})
			if err != nil || len(js) != 1 {
				b.Fatal(len(js), err)
			}
			j := js[0]
			if _, err := s.Succeed(ctx, jobs.SucceedParams{JobID: j.ID, Worker: "w", Answer: jobs.Answer{Output: "ok"}}); err != nil {
				b.Fatal(err)
			}
			var head int64
			if err := s.pool.QueryRow(ctx, `SELECT max(seq) FROM job_events`).Scan(&head); err != nil {
				b.Fatal(err)
			}
			rid := jobs.ResponseID(j.PromptID, j.ID)
			for b.Loop() {
				if _, err := s.GetPrompt(ctx, j.OrgID, j.PromptID); err != nil {
					b.Fatal(err)
				}
				if _, err := s.GetJob(ctx, j.OrgID, j.ID); err != nil {
					b.Fatal(err)
				}
				if rs, err := s.GetResponses(ctx, j.OrgID, []string{rid}); err != nil || len(rs) != 1 {
					b.Fatal(len(rs), err)
				}
				for range 4 {
					if _, err := s.EventsAfter(ctx, jobs.EventsParams{After: head - 3, OrgID: j.OrgID}); err != nil {
						b.Fatal(err)
					}
				}
			}
		})
	}
}
