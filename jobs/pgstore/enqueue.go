package pgstore

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/promptkit/promptkit/jobs"
)

// Enqueue inserts a prompt and its queued job in one transaction.
// Concurrent calls are committed together (each still gets its own result
// or error). See jobs.Store.
func (s *Store) Enqueue(ctx context.Context, p jobs.EnqueueParams) (jobs.Enqueued, error) {
	// Validate first, so a bad call never joins (and fails) a batch.
	if err := validateEnqueue(p); err != nil {
		return jobs.Enqueued{}, fmt.Errorf("pgstore: enqueue: %w", err)
	}
	r := &writeReq{enqueue: &enqueueReq{p: p}}
	if err := s.writes.do(ctx, r); err != nil {
		return jobs.Enqueued{}, fmt.Errorf("pgstore: enqueue: %w", err)
	}
	return r.enqueue.out, nil
}

// enqueueReq is one Enqueue call in a group-committed batch.
type enqueueReq struct {
	p   jobs.EnqueueParams
	out jobs.Enqueued
}

// runEnqueue stores Enqueue calls in one transaction of their own. When
// that fails (a parent or dependency missing for one call, say), each call
// is retried alone, so one bad call cannot fail the others.
func (s *Store) runEnqueue(ctx context.Context, reqs []*enqueueReq) []error {
	errs := make([]error, len(reqs))
	ps := make([]jobs.EnqueueParams, len(reqs))
	for i, r := range reqs {
		ps[i] = r.p
	}
	out, err := s.enqueue(ctx, ps)
	if err == nil {
		for i, r := range reqs {
			r.out = out[i]
		}
		return errs
	}
	if len(reqs) == 1 {
		errs[0] = err
		return errs
	}
	for i, r := range reqs {
		out, err := s.enqueue(ctx, ps[i:i+1])
		if err == nil {
			r.out = out[0]
		}
		errs[i] = err
	}
	return errs
}

// EnqueueBatch enqueues many prompts in one transaction, with one
// statement per table. See jobs.Store.
func (s *Store) EnqueueBatch(ctx context.Context, ps []jobs.EnqueueParams) ([]jobs.Enqueued, error) {
	if len(ps) == 0 {
		return nil, nil
	}
	out, err := s.enqueue(ctx, ps)
	if err != nil {
		return nil, fmt.Errorf("pgstore: enqueue batch: %w", err)
	}
	return out, nil
}

// enqueueRows holds a batch as column arrays for unnest.
type enqueueRows struct {
	promptID, jobID, org, by, parent, corr, text, ref, inputs, profile, key, opts, dep []string
	priority, maxAttempts                                                              []int
	available                                                                          []time.Time
	hasRefs, hasKeys                                                                   bool
}

func (s *Store) enqueue(ctx context.Context, ps []jobs.EnqueueParams) ([]jobs.Enqueued, error) {
	b, err := newEnqueueBatch(ps, s.clock(), s.schema)
	if err != nil {
		return nil, err
	}
	if err := s.write(ctx, b.pre, b.locked); err != nil {
		return nil, err
	}
	out, err := b.results()
	if err == nil && b.changed() {
		s.broadcast()
	}
	return out, err
}

// enqueueBatch is the part of a writing transaction that enqueues: the
// prompts go in before the event lock, the jobs and their events under it.
type enqueueBatch struct {
	rows     *enqueueRows
	now      time.Time // created_at of the prompts and jobs
	schema   string
	inserted map[string]bool // prompt IDs inserted, when keys may conflict
	found    map[[2]string]existingPrompt
}

func newEnqueueBatch(ps []jobs.EnqueueParams, now time.Time, schema string) (*enqueueBatch, error) {
	r, err := newEnqueueRows(ps, now)
	if err != nil {
		return nil, err
	}
	return &enqueueBatch{rows: r, now: now, schema: schema}, nil
}

func (b *enqueueBatch) pre(p *phase) {
	if b.rows.hasRefs {
		checkRefs(p, b.rows)
	}
	insertPrompts(p, b.rows, b.now, &b.inserted)
}

func (b *enqueueBatch) locked(p *phase, stamp time.Time) {
	fresh := b.rows.fresh(b.inserted)
	if len(fresh) < len(b.rows.promptID) {
		lookupExisting(p, b.rows, fresh, &b.found)
	}
	if len(fresh) > 0 {
		insertJobs(p, b.rows, fresh, b.now, stamp, b.schema)
	}
}

// results are the calls' IDs, once the transaction has committed.
func (b *enqueueBatch) results() ([]jobs.Enqueued, error) {
	return b.rows.results(b.inserted, b.found)
}

// changed reports whether the batch created any job.
func (b *enqueueBatch) changed() bool { return len(b.rows.fresh(b.inserted)) > 0 }

func newEnqueueRows(ps []jobs.EnqueueParams, now time.Time) (*enqueueRows, error) {
	n := len(ps)
	r := &enqueueRows{
		promptID: make([]string, n), jobID: make([]string, n), org: make([]string, n), by: make([]string, n),
		parent: make([]string, n), corr: make([]string, n), text: make([]string, n), ref: make([]string, n),
		inputs: make([]string, n), profile: make([]string, n), key: make([]string, n), opts: make([]string, n),
		dep: make([]string, n), priority: make([]int, n), maxAttempts: make([]int, n), available: make([]time.Time, n),
	}
	for i, p := range ps {
		if err := validateEnqueue(p); err != nil {
			return nil, err
		}
		prio := 50
		if p.Priority != nil {
			prio = *p.Priority
		}
		maxA := p.MaxAttempts
		if maxA == 0 {
			maxA = 3
		}
		opts := "{}"
		if len(p.ExecutionOptions) > 0 {
			opts = string(p.ExecutionOptions)
		}
		avail := now
		if !p.AvailableAt.IsZero() {
			avail = p.AvailableAt.UTC().Truncate(time.Microsecond)
		}
		r.promptID[i], r.jobID[i] = jobs.NewID(), jobs.NewID()
		r.org[i], r.by[i], r.parent[i], r.corr[i] = p.OrgID, p.CreatedBy, p.ParentID, p.CorrelationID
		r.text[i], r.ref[i], r.inputs[i], r.profile[i] = p.Text, p.PromptRef, string(p.Inputs), p.Profile
		r.key[i], r.opts[i], r.dep[i] = p.IdempotencyKey, opts, p.DependsOn
		r.priority[i], r.maxAttempts[i], r.available[i] = prio, maxA, avail
		r.hasRefs = r.hasRefs || p.ParentID != "" || p.DependsOn != ""
		r.hasKeys = r.hasKeys || p.IdempotencyKey != ""
	}
	return r, nil
}

// validateEnqueue checks what can be checked without the database.
func validateEnqueue(p jobs.EnqueueParams) error {
	if p.Priority != nil && (*p.Priority < 0 || *p.Priority > 100) {
		return fmt.Errorf("priority %d is outside 0–100: %w", *p.Priority, jobs.ErrInvalid)
	}
	if p.MaxAttempts < 0 {
		return fmt.Errorf("max attempts %d is below 1: %w", p.MaxAttempts, jobs.ErrInvalid)
	}
	if len(p.Inputs) > 0 && !json.Valid(p.Inputs) {
		return fmt.Errorf("inputs are not valid JSON: %w", jobs.ErrInvalid)
	}
	if len(p.ExecutionOptions) > 0 && !json.Valid(p.ExecutionOptions) {
		return fmt.Errorf("execution options are not valid JSON: %w", jobs.ErrInvalid)
	}
	return nil
}

// checkRefs rejects a ParentID or DependsOn that does not exist in the
// item's org.
func checkRefs(p *phase, r *enqueueRows) {
	p.query(`
		SELECT u.parent <> '' AND NOT EXISTS (SELECT 1 FROM prompts p WHERE p.id = u.parent AND p.org_id = u.org)
		FROM unnest($1::text[], $2::text[], $3::text[]) AS u(org, parent, dep)
		WHERE (u.parent <> '' AND NOT EXISTS (SELECT 1 FROM prompts p WHERE p.id = u.parent AND p.org_id = u.org))
		   OR (u.dep <> '' AND NOT EXISTS (SELECT 1 FROM jobs j WHERE j.id = u.dep AND j.org_id = u.org))
		LIMIT 1`, []any{r.org, r.parent, r.dep}, func(rows pgx.Rows) error {
		if !rows.Next() {
			return nil
		}
		var badParent bool
		if err := rows.Scan(&badParent); err != nil {
			return err
		}
		if badParent {
			return fmt.Errorf("parent prompt not found in the org: %w", jobs.ErrInvalid)
		}
		return fmt.Errorf("dependency job not found in the org: %w", jobs.ErrInvalid)
	})
}

// insertPrompts inserts the batch's prompts before the event lock (an
// idempotency-key insert may wait for a concurrent transaction holding the
// same key, which must never happen under the lock). With idempotency
// keys it records which prompts it inserted; without, all were.
func insertPrompts(p *phase, r *enqueueRows, now time.Time, inserted *map[string]bool) {
	// Rows go in (org, key) order so concurrent batches sharing keys lock
	// them in the same order and cannot deadlock.
	const q = `
		INSERT INTO prompts (id, org_id, created_by, parent_id, correlation_id, text, prompt_ref, inputs, profile, idempotency_key, created_at)
		SELECT u.id, u.org, u.by, NULLIF(u.parent, ''), u.corr, u.text, u.ref, NULLIF(u.inputs, '')::json, u.profile, u.key, $11
		FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::text[], $8::text[], $9::text[], $10::text[])
			AS u(id, org, by, parent, corr, text, ref, inputs, profile, key)
		ORDER BY u.org, u.key
		ON CONFLICT (org_id, idempotency_key) WHERE idempotency_key <> '' DO NOTHING`
	args := []any{r.promptID, r.org, r.by, r.parent, r.corr, r.text, r.ref, r.inputs, r.profile, r.key, now}
	if !r.hasKeys {
		p.exec(q, args...)
		return
	}
	p.query(q+` RETURNING id`, args, func(rows pgx.Rows) error {
		m := make(map[string]bool, len(r.promptID))
		for rows.Next() {
			var id string
			if err := rows.Scan(&id); err != nil {
				return err
			}
			m[id] = true
		}
		*inserted = m
		return nil
	})
}

// fresh returns the indexes of the items whose prompt was inserted.
func (r *enqueueRows) fresh(inserted map[string]bool) []int {
	out := make([]int, 0, len(r.promptID))
	for i, id := range r.promptID {
		if inserted == nil || inserted[id] {
			out = append(out, i)
		}
	}
	return out
}

// existingPrompt is an earlier prompt an idempotency key matched, with its
// first job.
type existingPrompt struct {
	promptID     string
	jobID, state *string
}

// lookupExisting reads the prompts that idempotency keys matched. It runs
// under the event lock: it only reads, so it cannot wait for anyone.
func lookupExisting(p *phase, r *enqueueRows, fresh []int, found *map[[2]string]existingPrompt) {
	isFresh := make(map[int]bool, len(fresh))
	for _, i := range fresh {
		isFresh[i] = true
	}
	var orgs, keys []string
	for i := range r.promptID {
		if !isFresh[i] {
			orgs, keys = append(orgs, r.org[i]), append(keys, r.key[i])
		}
	}
	p.query(`
		SELECT p.org_id, p.idempotency_key, p.id, j.id, j.state
		FROM prompts p
		LEFT JOIN LATERAL (SELECT id, state FROM jobs WHERE prompt_id = p.id ORDER BY created_at, id LIMIT 1) j ON true
		WHERE p.idempotency_key <> '' AND (p.org_id, p.idempotency_key) IN (SELECT * FROM unnest($1::text[], $2::text[]))`,
		[]any{orgs, keys}, func(rows pgx.Rows) error {
			m := map[[2]string]existingPrompt{}
			for rows.Next() {
				var org, key string
				var e existingPrompt
				if err := rows.Scan(&org, &key, &e.promptID, &e.jobID, &e.state); err != nil {
					return err
				}
				m[[2]string{org, key}] = e
			}
			*found = m
			return nil
		})
}

// results maps every item to its IDs: its own when inserted; otherwise
// the earlier prompt's first job, or the item of this batch that inserted
// the same key.
func (r *enqueueRows) results(inserted map[string]bool, found map[[2]string]existingPrompt) ([]jobs.Enqueued, error) {
	out := make([]jobs.Enqueued, len(r.promptID))
	inBatch := map[string]int{}
	for i, id := range r.promptID {
		if inserted == nil || inserted[id] {
			out[i] = jobs.Enqueued{PromptID: id, JobID: r.jobID[i], State: jobs.Queued}
			inBatch[id] = i
		}
	}
	for i, id := range r.promptID {
		if inserted == nil || inserted[id] {
			continue
		}
		e, ok := found[[2]string{r.org[i], r.key[i]}]
		if !ok {
			// The matching prompt was archived between the insert and
			// the read; trying again will insert it afresh.
			return nil, fmt.Errorf("idempotency key matched a prompt that no longer exists")
		}
		if j, ok := inBatch[e.promptID]; ok {
			out[i] = jobs.Enqueued{PromptID: e.promptID, JobID: r.jobID[j], State: jobs.Queued, Existing: true}
			continue
		}
		out[i] = jobs.Enqueued{PromptID: e.promptID, JobID: str(e.jobID), State: jobs.State(str(e.state)), Existing: true}
	}
	return out, nil
}

// insertJobs inserts the fresh items' jobs and their first events under
// the event lock: created_at is the pre-lock time the prompts got,
// updated_at the stamp taken under the lock.
func insertJobs(p *phase, r *enqueueRows, fresh []int, created, stamp time.Time, schema string) {
	n := len(fresh)
	ids, pids, opts, deps, orgs, bys := make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n)
	prios, maxAs := make([]int, n), make([]int, n)
	avail := make([]time.Time, n)
	for k, i := range fresh {
		ids[k], pids[k], opts[k], deps[k], orgs[k], bys[k] = r.jobID[i], r.promptID[i], r.opts[i], r.dep[i], r.org[i], r.by[i]
		prios[k], maxAs[k], avail[k] = r.priority[i], r.maxAttempts[i], r.available[i]
	}
	p.exec(`
		WITH j AS (
			INSERT INTO jobs (id, prompt_id, state, priority, attempt, max_attempts, execution_options, depends_on,
				org_id, created_by, created_at, updated_at, available_at)
			SELECT u.id, u.pid, 'queued', u.prio, 1, u.maxa, u.opts::json, NULLIF(u.dep, ''), u.org, u.by, $10, $11, u.avail
			FROM unnest($1::text[], $2::text[], $3::int[], $4::int[], $5::text[], $6::text[], $7::text[], $8::text[], $9::timestamptz[])
				WITH ORDINALITY AS u(id, pid, prio, maxa, opts, dep, org, by, avail, ord)
			ORDER BY u.ord
			RETURNING id, prompt_id, org_id
		), ev AS (
			INSERT INTO job_events (job_id, prompt_id, org_id, type, to_state, at)
			SELECT id, prompt_id, org_id, 'transition', 'queued', $11 FROM j
		)
		SELECT pg_notify('`+notifyChannel+`', $12)`,
		ids, pids, prios, maxAs, opts, deps, orgs, bys, avail, created, stamp, schema)
}
