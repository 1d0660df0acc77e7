package pgstore

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/promptkit/promptkit/jobs"
	"github.com/promptkit/promptkit/jobs/internal/queue"
)

// Enqueue inserts a prompt and its queued job in one transaction.
// Concurrent calls are committed together (each still gets its own result
// or error). See jobs.Store.
func (s *Store) Enqueue(ctx context.Context, p jobs.EnqueueParams) (jobs.Enqueued, error) {
	// Normalized first, so a bad call never joins (and fails) a batch.
	p, err := normalize(p)
	if err != nil {
		return jobs.Enqueued{}, fmt.Errorf("pgstore: enqueue: %w", err)
	}
	r := &writeReq{enqueue: &enqueueReq{p: p}}
	err = s.writes.Do(ctx, r)
	s.wrote(ctx, "enqueue", err, err == nil && !r.enqueue.out.Existing)
	if err != nil {
		return jobs.Enqueued{}, fmt.Errorf("pgstore: enqueue: %w", err)
	}
	return r.enqueue.out, nil
}

// normalize normalizes p and checks that its chat and embeddings
// requests encode (see newEnqueueRows).
func normalize(p jobs.EnqueueParams) (jobs.EnqueueParams, error) {
	p, err := p.Normalize()
	if err == nil {
		_, err = jobs.EncodeChat(p.Chat)
	}
	if err == nil {
		_, err = jobs.EncodeEmbedding(p.Embedding)
	}
	return p, err
}

// enqueueReq is one Enqueue call, normalized, in a group-committed batch.
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
	norm := make([]jobs.EnqueueParams, len(ps))
	for i := range ps {
		var err error
		if norm[i], err = normalize(ps[i]); err != nil {
			return nil, fmt.Errorf("pgstore: enqueue batch: item %d: %w", i, err)
		}
	}
	out, err := s.enqueue(ctx, norm)
	s.wrote(ctx, "enqueue batch", err, slices.ContainsFunc(out, func(e jobs.Enqueued) bool { return !e.Existing }))
	if err != nil {
		return nil, fmt.Errorf("pgstore: enqueue batch: %w", err)
	}
	return out, nil
}

// enqueueRows holds a batch as column arrays for unnest.
type enqueueRows struct {
	promptID, jobID, org, by, parent, refUser, corr, text, ref, inputs, profile, key, hash, opts, dep []string
	chat, embedding, batch, customID, claim, token                                                    []string
	priority, maxAttempts                                                                             []int
	available                                                                                         []time.Time
	// grace is each item's KeyGrace when its key expires (KeyExpires),
	// else -1; fresh its KeyFresh.
	grace                         []time.Duration
	fresh                         []bool
	hasRefs, hasKeys, hasExpiring bool
}

// enqueue stores normalized items in one transaction.
func (s *Store) enqueue(ctx context.Context, ps []jobs.EnqueueParams) ([]jobs.Enqueued, error) {
	b := newEnqueueBatch(ps, s.clock(), s.schema)
	if err := s.chooseTrips(b.readsFirst())(ctx, b.pre, b.locked); err != nil {
		return nil, err
	}
	if b.changed() {
		s.notify.Broadcast()
	}
	return b.results(), nil
}

// enqueueBatch is the part of a writing transaction that enqueues: the
// prompts go in before the event lock, the jobs and their events under it.
//
// Idempotency: an item repeating an earlier item's (org, key) in the same
// batch is not inserted and gets that item's IDs. The others are inserted
// with ON CONFLICT DO UPDATE (a no-op update): a key that already exists
// returns the existing prompt, locked, so archiving cannot delete it while
// this transaction reads its first job; a key a concurrent transaction is
// inserting makes this one wait (before the event lock) for its outcome.
// A keyed item whose RequestHash contradicts that prompt's fails the
// transaction with jobs.ErrIdempotencyConflict (runEnqueue then retries
// the calls of a group alone, so only that call fails).
type enqueueBatch struct {
	rows   *enqueueRows
	now    time.Time // created_at of the prompts and jobs
	schema string
	dupOf  []int          // index of the earlier item with the same key, or -1
	match  map[int]string // item → existing prompt its key matched
	first  map[string]firstJob
	// claimed are the jobs ClaimAs claimed, by job ID.
	claimed map[string]jobs.Job
}

// firstJob is an existing prompt's first job (its IDs are what an
// idempotent repeat returns). Both are nil if its jobs were archived.
type firstJob struct{ id, state *string }

// newEnqueueBatch prepares normalized items.
func newEnqueueBatch(ps []jobs.EnqueueParams, now time.Time, schema string) *enqueueBatch {
	r := newEnqueueRows(ps, now)
	b := &enqueueBatch{rows: r, now: now, schema: schema, dupOf: make([]int, len(ps))}
	seen := map[[2]string]int{}
	for i := range ps {
		b.dupOf[i] = -1
		if r.key[i] == "" {
			continue
		}
		k := [2]string{r.org[i], r.key[i]}
		if j, ok := seen[k]; ok {
			b.dupOf[i] = j
		} else {
			seen[k] = i
		}
	}
	return b
}

// readsFirst reports whether the locked statements depend on what the
// pre-lock ones read (which idempotency keys matched), or the pre-lock
// reads may reject the batch (a missing parent or dependency): then the
// transaction takes two round trips (see chooseTrips).
func (b *enqueueBatch) readsFirst() bool { return b.rows.hasKeys || b.rows.hasRefs }

func (b *enqueueBatch) pre(p *phase) {
	if b.rows.hasRefs {
		checkRefs(p, b.rows)
	}
	if b.rows.hasExpiring {
		b.releaseExpiredKeys(p)
	}
	b.insertPrompts(p)
}

func (b *enqueueBatch) locked(p *phase, stamp time.Time) {
	b.claimed = nil // a transaction tried again starts over
	if len(b.match) > 0 {
		b.lookupFirstJobs(p)
	}
	if fresh := b.fresh(); len(fresh) > 0 {
		insertJobs(p, b.rows, fresh, b.now, stamp, b.schema)
		b.claim(p, fresh, stamp)
	}
}

// claim claims the fresh items' jobs that have ClaimAs, one statement per
// worker (a submitter names one: its process's).
func (b *enqueueBatch) claim(p *phase, fresh []int, now time.Time) {
	byWorker := map[string][]string{}
	for _, i := range fresh {
		if w := b.rows.claim[i]; w != "" {
			byWorker[w] = append(byWorker[w], b.rows.jobID[i])
		}
	}
	for w, ids := range byWorker {
		data := string(jobs.TransitionData{Worker: w}.JSON())
		p.query(claimIDsSQL.q, claimIDsSQL.args(now, ids, []string{w}, []string{data}, []int32{}, b.schema),
			func(rows pgx.Rows) error {
				for rows.Next() {
					var call int
					j, err := scanJob(rows, &call)
					if err != nil {
						return err
					}
					if b.claimed == nil {
						b.claimed = map[string]jobs.Job{}
					}
					b.claimed[j.ID] = j
				}
				return nil
			})
	}
}

// fresh returns the indexes of the items whose prompt this batch inserted.
func (b *enqueueBatch) fresh() []int {
	out := make([]int, 0, len(b.dupOf))
	for i, d := range b.dupOf {
		if _, ok := b.match[i]; d < 0 && !ok {
			out = append(out, i)
		}
	}
	return out
}

// changed reports whether the batch created any job.
func (b *enqueueBatch) changed() bool { return len(b.fresh()) > 0 }

// results are the calls' IDs, once the transaction has committed.
func (b *enqueueBatch) results() []jobs.Enqueued {
	r := b.rows
	out := make([]jobs.Enqueued, len(b.dupOf))
	for i, d := range b.dupOf {
		if d >= 0 {
			continue
		}
		if pid, ok := b.match[i]; ok {
			f := b.first[pid]
			out[i] = jobs.Enqueued{PromptID: pid, JobID: str(f.id), State: jobs.State(str(f.state)), Existing: true}
		} else {
			out[i] = jobs.Enqueued{PromptID: r.promptID[i], JobID: r.jobID[i], State: jobs.Queued}
			if j, ok := b.claimed[r.jobID[i]]; ok {
				out[i].State, out[i].Claimed = jobs.Running, &j
			}
		}
	}
	for i, d := range b.dupOf {
		if d >= 0 {
			out[i] = out[d]
			out[i].Existing, out[i].Claimed = true, nil
		}
	}
	return out
}

func newEnqueueRows(ps []jobs.EnqueueParams, now time.Time) *enqueueRows {
	n := len(ps)
	r := &enqueueRows{
		promptID: make([]string, n), jobID: make([]string, n), org: make([]string, n), by: make([]string, n),
		parent: make([]string, n), refUser: make([]string, n), corr: make([]string, n), text: make([]string, n), ref: make([]string, n),
		inputs: make([]string, n), profile: make([]string, n), key: make([]string, n), hash: make([]string, n),
		opts: make([]string, n), dep: make([]string, n), priority: make([]int, n), maxAttempts: make([]int, n),
		available: make([]time.Time, n), chat: make([]string, n), embedding: make([]string, n), batch: make([]string, n),
		customID: make([]string, n), claim: make([]string, n), token: make([]string, n),
		grace: make([]time.Duration, n), fresh: make([]bool, n),
	}
	for i, p := range ps {
		chat, _ := jobs.EncodeChat(p.Chat)                // checked by normalize
		embedding, _ := jobs.EncodeEmbedding(p.Embedding) // checked by normalize
		avail := now
		if !p.AvailableAt.IsZero() {
			avail = p.AvailableAt
		}
		r.promptID[i], r.jobID[i] = jobs.NewID(), jobs.NewID()
		r.org[i], r.by[i], r.parent[i], r.corr[i] = p.OrgID, p.CreatedBy, p.ParentID, p.CorrelationID
		r.refUser[i] = p.ReferenceUser
		r.text[i], r.ref[i], r.inputs[i], r.profile[i] = p.Text, p.PromptRef, string(p.Inputs), p.Profile
		r.key[i], r.hash[i], r.opts[i], r.dep[i] = p.IdempotencyKey, p.RequestHash, string(p.ExecutionOptions.JSON()), p.DependsOn
		r.priority[i], r.maxAttempts[i], r.available[i] = *p.Priority, p.MaxAttempts, avail
		r.chat[i], r.embedding[i], r.batch[i], r.customID[i] = string(chat), string(embedding), p.BatchID, p.CustomID
		r.claim[i], r.token[i] = p.ClaimAs, p.TokenID
		r.hasRefs = r.hasRefs || p.ParentID != "" || p.DependsOn != ""
		r.hasKeys = r.hasKeys || p.IdempotencyKey != ""
		r.grace[i] = -1
		if p.KeyExpires {
			r.grace[i], r.fresh[i], r.hasExpiring = p.KeyGrace, p.KeyFresh, true
		}
	}
	return r
}

// checkRefs rejects a ParentID or DependsOn that does not exist in the
// item's org (or, with a ReferenceUser, was not created by that user).
func checkRefs(p *phase, r *enqueueRows) {
	p.query(`
		SELECT u.parent <> '' AND NOT EXISTS (SELECT 1 FROM prompts p WHERE p.id = u.parent AND p.org_id = u.org
			AND (u.ref_user = '' OR p.created_by = u.ref_user))
		FROM unnest($1::text[], $2::text[], $3::text[], $4::text[]) AS u(org, parent, dep, ref_user)
		WHERE (u.parent <> '' AND NOT EXISTS (SELECT 1 FROM prompts p WHERE p.id = u.parent AND p.org_id = u.org
			AND (u.ref_user = '' OR p.created_by = u.ref_user)))
		   OR (u.dep <> '' AND NOT EXISTS (SELECT 1 FROM jobs j WHERE j.id = u.dep AND j.org_id = u.org
			AND (u.ref_user = '' OR j.created_by = u.ref_user)))
		LIMIT 1`, []any{r.org, r.parent, r.dep, r.refUser}, func(rows pgx.Rows) error {
		if !rows.Next() {
			return nil
		}
		var badParent bool
		if err := rows.Scan(&badParent); err != nil {
			return err
		}
		if badParent {
			return &jobs.InvalidError{Field: "parent_id", Reason: "no such prompt"}
		}
		return &jobs.InvalidError{Field: "depends_on", Reason: "no such job"}
	})
}

// releaseExpiredKeys takes each expiring key (jobs.EnqueueParams.
// KeyExpires) of the batch from the prompt that holds it when that prompt
// has no job queued or running nor one succeeded less than the item's
// grace ago, so that insertPrompts then stores a new prompt under the key
// instead of matching the old one. Only the first item with a key counts
// (a repeat within the batch gets that item's prompt). The prompts are
// locked in (org, key) order, as insertPrompts locks keys, so concurrent
// batches cannot deadlock. A concurrent transaction that released the
// same key first has emptied it by the time this one gets the row lock:
// PostgreSQL rechecks the row, this one releases nothing, and
// insertPrompts waits for that transaction's new prompt and matches it.
func (b *enqueueBatch) releaseExpiredKeys(p *phase) {
	r := b.rows
	var orgs, keys []string
	var since []time.Time
	var fresh []bool
	for i, g := range r.grace {
		if g >= 0 && b.dupOf[i] < 0 {
			orgs, keys, since = append(orgs, r.org[i]), append(keys, r.key[i]), append(since, b.now.Add(-g))
			fresh = append(fresh, r.fresh[i])
		}
	}
	p.exec(`
		WITH expired AS (
			SELECT p.id FROM prompts p
			JOIN unnest($1::text[], $2::text[], $3::timestamptz[], $4::bool[]) AS u(org, key, since, fresh)
				ON p.org_id = u.org AND p.idempotency_key = u.key
			WHERE p.idempotency_key <> ''
				AND (u.fresh OR NOT EXISTS (SELECT 1 FROM jobs j WHERE j.prompt_id = p.id
					AND (j.state IN ('queued', 'running') OR j.state = 'succeeded' AND j.finished_at > u.since)))
			ORDER BY p.org_id, p.idempotency_key
			FOR UPDATE OF p
		)
		UPDATE prompts SET idempotency_key = '' FROM expired WHERE prompts.id = expired.id`, orgs, keys, since, fresh)
}

// insertPrompts inserts the batch's prompts (but in-batch repeats)
// before the event lock, where waiting for a concurrent insert of the same
// key is safe, and records which keys matched existing prompts.
func (b *enqueueBatch) insertPrompts(p *phase) {
	r := b.rows
	var idx []int
	for i, d := range b.dupOf {
		if d < 0 {
			idx = append(idx, i)
		}
	}
	col := func(c []string) []string {
		out := make([]string, len(idx))
		for k, i := range idx {
			out[k] = c[i]
		}
		return out
	}
	q := `
		INSERT INTO prompts (id, org_id, created_by, parent_id, correlation_id, text, prompt_ref, inputs, profile, idempotency_key,
			request_hash, created_at, chat, batch_id, custom_id, embedding)
		SELECT u.id, u.org, u.by, NULLIF(u.parent, ''), u.corr, u.text, u.ref, NULLIF(u.inputs, '')::json, u.profile, u.key, u.hash, $12,
			NULLIF(u.chat, '')::json, NULLIF(u.batch, ''), NULLIF(u.custom, ''), NULLIF(u.embedding, '')::json
		FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::text[], $8::text[], $9::text[], $10::text[],
				$11::text[], $13::text[], $14::text[], $15::text[], $16::text[])
			AS u(id, org, by, parent, corr, text, ref, inputs, profile, key, hash, chat, batch, custom, embedding)`
	args := []any{col(r.promptID), col(r.org), col(r.by), col(r.parent), col(r.corr), col(r.text), col(r.ref),
		col(r.inputs), col(r.profile), col(r.key), col(r.hash), b.now, col(r.chat), col(r.batch), col(r.customID), col(r.embedding)}
	if !r.hasKeys {
		// Nothing can conflict: every prompt is inserted.
		p.exec(q, args...)
		return
	}
	// Rows go in (org, key) order so concurrent batches sharing keys lock
	// them in the same order and cannot deadlock.
	q += `
		ORDER BY u.org, u.key
		ON CONFLICT (org_id, idempotency_key) WHERE idempotency_key <> ''
		DO UPDATE SET idempotency_key = EXCLUDED.idempotency_key
		RETURNING id, org_id, idempotency_key, request_hash`
	type keyed struct{ id, hash string }
	p.query(q, args, func(rows pgx.Rows) error {
		byKey := map[[2]string]keyed{}
		for rows.Next() {
			var org, key string
			var k keyed
			if err := rows.Scan(&k.id, &org, &key, &k.hash); err != nil {
				return err
			}
			if key != "" {
				byKey[[2]string{org, key}] = k
			}
		}
		b.match = map[int]string{}
		for _, i := range idx {
			if k, ok := byKey[[2]string{r.org[i], r.key[i]}]; ok && k.id != r.promptID[i] {
				b.match[i] = k.id
			}
		}
		// Every keyed item, in-batch repeats included, against the prompt
		// its key names: the stored one, or the one the batch's first item
		// with the key inserted. An error rolls the transaction back.
		for i, key := range r.key {
			if key == "" {
				continue
			}
			if conflict(byKey[[2]string{r.org[i], key}].hash, r.hash[i]) {
				return fmt.Errorf("%w: key %q", jobs.ErrIdempotencyConflict, key)
			}
		}
		return nil
	})
}

// conflict reports whether a repeat's request hash contradicts the stored
// one: both are set and they differ.
func conflict(stored, hash string) bool { return stored != "" && hash != "" && stored != hash }

// lookupFirstJobs reads the first job of each prompt a key matched. It
// runs under the event lock: it only reads, so it cannot wait for anyone.
func (b *enqueueBatch) lookupFirstJobs(p *phase) {
	pids := make([]string, 0, len(b.match))
	for _, pid := range b.match {
		pids = append(pids, pid)
	}
	p.query(`
		SELECT DISTINCT ON (prompt_id) prompt_id, id, state FROM jobs
		WHERE prompt_id = ANY ($1) ORDER BY prompt_id, created_at, id`, []any{pids}, func(rows pgx.Rows) error {
		b.first = map[string]firstJob{}
		for rows.Next() {
			var pid string
			var f firstJob
			if err := rows.Scan(&pid, &f.id, &f.state); err != nil {
				return err
			}
			b.first[pid] = f
		}
		return nil
	})
}

// insertJobs inserts the fresh items' jobs (into jobs and job_queue),
// with their start tags (queue.FairTagsPG), and their first events under the event
// lock: created_at is the pre-lock time the prompts got, updated_at the
// stamp taken under the lock.
func insertJobs(p *phase, r *enqueueRows, fresh []int, created, stamp time.Time, schema string) {
	n := len(fresh)
	ids, pids, opts, deps, orgs, bys := make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n)
	tokens := make([]string, n)
	prios, maxAs := make([]int, n), make([]int, n)
	avail := make([]time.Time, n)
	for k, i := range fresh {
		ids[k], pids[k], opts[k], deps[k], orgs[k], bys[k] = r.jobID[i], r.promptID[i], r.opts[i], r.dep[i], r.org[i], r.by[i]
		tokens[k] = r.token[i]
		prios[k], maxAs[k], avail[k] = r.priority[i], r.maxAttempts[i], r.available[i]
	}
	p.exec(`
		WITH u AS (
			SELECT * FROM unnest($1::text[], $2::text[], $3::int[], $4::int[], $5::text[], $6::text[], $7::text[], $8::text[], $9::timestamptz[],
				$13::text[])
				WITH ORDINALITY AS u(id, pid, prio, maxa, opts, dep, org, by, avail, token, ord)
		), `+queue.FairTagsPG("u", "$11::timestamptz")+`, j AS (
			INSERT INTO jobs (id, prompt_id, state, priority, attempt, max_attempts, execution_options, depends_on,
				org_id, created_by, created_at, updated_at, available_at, token_id, fair_tag)
			SELECT u.id, u.pid, 'queued', u.prio, 1, u.maxa, u.opts::json, NULLIF(u.dep, ''), u.org, u.by, $10, $11, u.avail,
				u.token, fair.tag
			FROM u JOIN fair ON fair.ord = u.ord
			ORDER BY u.ord
			RETURNING id, prompt_id, org_id, state, priority, available_at, created_at, depends_on, fair_tag
		), q AS (
			`+queueRows("j")+`
		), ev AS (
			INSERT INTO job_events (job_id, prompt_id, org_id, type, to_state, at)
			SELECT id, prompt_id, org_id, 'transition', 'queued', $11 FROM j
		)
		SELECT pg_notify('`+notifyChannel+`', $12)`,
		ids, pids, prios, maxAs, opts, deps, orgs, bys, avail, created, stamp, schema, tokens)
}
