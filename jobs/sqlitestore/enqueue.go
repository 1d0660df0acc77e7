package sqlitestore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"

	"github.com/promptkit/promptkit/jobs"
	"github.com/promptkit/promptkit/jobs/internal/queue"
)

var (
	// The prompt with this key, its request hash and its first job.
	// "idempotency_key <> ''" lets SQLite use the partial unique index.
	qIdempotent = wq(`SELECT p.id, p.request_hash, j.id, j.state FROM prompts p JOIN jobs j ON j.prompt_id = p.id
		WHERE p.org_id = ?1 AND p.idempotency_key = ?2 AND p.idempotency_key <> ''
		ORDER BY j.created_at, j.id LIMIT 1`)
	// An expiring key (jobs.EnqueueParams.KeyExpires) leaves the prompt
	// that has no job queued or running nor one succeeded after ?3; a
	// fresh one (?4) leaves it whatever.
	qReleaseKey = wq(`UPDATE prompts SET idempotency_key = ''
		WHERE org_id = ?1 AND idempotency_key = ?2 AND idempotency_key <> ''
		AND (?4 OR NOT EXISTS (SELECT 1 FROM jobs j WHERE j.prompt_id = prompts.id
			AND (j.state IN ('queued', 'running') OR j.state = 'succeeded' AND j.finished_at > ?3)))`)
	qPromptInOrg  = wq(`SELECT 1 FROM prompts WHERE id = ?1 AND org_id = ?2 AND (?3 = '' OR created_by = ?3)`)
	qJobInOrg     = wq(`SELECT 1 FROM jobs WHERE id = ?1 AND org_id = ?2 AND (?3 = '' OR created_by = ?3)`)
	qInsertPrompt = wq(`INSERT INTO prompts (id, org_id, created_by, parent_id, correlation_id, text,
		prompt_ref, inputs, profile, idempotency_key, request_hash, created_at, chat, batch_id, custom_id, embedding)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`)
	qInsertJob = wq(`INSERT INTO jobs (id, prompt_id, state, priority, attempt, max_attempts,
		execution_options, supersedes, depends_on, org_id, created_by, created_at, updated_at, available_at, token_id, fair_tag)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`)
	// qTagInputs reads the queue.TagInputs of org ?1 at priority ?2 at
	// time ?3: its last tag, the head of the queue available at ?3 at that
	// priority (the first entry of jobs_claim there, past any not yet
	// available), the largest last tag there, and its weight.
	qTagInputs = wq(`SELECT
		coalesce((SELECT last FROM fair_tags WHERE priority = ?2 AND org_id = ?1), 0),
		(SELECT fair_tag FROM jobs WHERE state = 'queued' AND priority = ?2 AND available_at <= ?3
			ORDER BY fair_tag LIMIT 1),
		coalesce((SELECT max(last) FROM fair_tags WHERE priority = ?2), 0),
		coalesce((SELECT weight FROM limits WHERE scope = 'org' AND subject = ?1), 0)`)
	// qSaveTag records org ?2's last tag ?3 at priority ?1.
	qSaveTag = wq(`INSERT INTO fair_tags (priority, org_id, last) VALUES (?1, ?2, ?3)
		ON CONFLICT (priority, org_id) DO UPDATE SET last = excluded.last`)
	// qOrgRoom reads what decides the room (queue.Limit.Room) of org ?1
	// when it is capped: its limit, pause and running jobs (no row when it
	// is not capped).
	qOrgRoom = wq(`SELECT l.max_running, l.paused, (` + orgRunningSQL + `)
		FROM limits l WHERE l.scope = 'org' AND l.subject = ?1 AND ` + queue.CappedSQL("l"))
	qInsertEvent = wq(`INSERT INTO job_events (job_id, prompt_id, org_id, type, from_state, to_state, data, at)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?)`)
)

// enqueueOne stores one normalized prompt and its job. A repeated
// idempotency key whose request hash differs from the stored one (both
// set) is jobs.ErrIdempotencyConflict, and nothing is stored; within a
// batch or a group, an earlier item's prompt is the stored one. An
// expired key is first taken from its prompt (see jobs.EnqueueParams).
func (w *wtx) enqueueOne(p jobs.EnqueueParams) (jobs.Enqueued, error) {
	if p.KeyExpires {
		// In the same transaction as the lookup below: of calls racing
		// with one expired key, the first stores a new prompt and the
		// others find it.
		if _, err := w.exec(qReleaseKey, p.OrgID, p.IdempotencyKey, w.now-p.KeyGrace.Microseconds(), p.KeyFresh); err != nil {
			return jobs.Enqueued{}, fmt.Errorf("expired key release: %w", err)
		}
	}
	if p.IdempotencyKey != "" {
		var e jobs.Enqueued
		var hash, state string
		err := w.queryRow(qIdempotent, p.OrgID, p.IdempotencyKey).Scan(&e.PromptID, &hash, &e.JobID, &state)
		if err == nil {
			if conflict(hash, p.RequestHash) {
				return jobs.Enqueued{}, fmt.Errorf("%w: key %q", jobs.ErrIdempotencyConflict, p.IdempotencyKey)
			}
			e.State = jobs.State(state)
			e.Existing = true
			return e, nil
		}
		if !errors.Is(err, sql.ErrNoRows) {
			return jobs.Enqueued{}, fmt.Errorf("idempotency lookup: %w", err)
		}
	}
	var one int
	if p.ParentID != "" {
		err := w.queryRow(qPromptInOrg, p.ParentID, p.OrgID, p.ReferenceUser).Scan(&one)
		if errors.Is(err, sql.ErrNoRows) {
			return jobs.Enqueued{}, &jobs.InvalidError{Field: "parent_id", Reason: "no such prompt"}
		}
		if err != nil {
			return jobs.Enqueued{}, fmt.Errorf("parent lookup: %w", err)
		}
	}
	if p.DependsOn != "" {
		err := w.queryRow(qJobInOrg, p.DependsOn, p.OrgID, p.ReferenceUser).Scan(&one)
		if errors.Is(err, sql.ErrNoRows) {
			return jobs.Enqueued{}, &jobs.InvalidError{Field: "depends_on", Reason: "no such job"}
		}
		if err != nil {
			return jobs.Enqueued{}, fmt.Errorf("depends_on lookup: %w", err)
		}
	}
	chat, err := jobs.EncodeChat(p.Chat)
	if err != nil {
		return jobs.Enqueued{}, err
	}
	embedding, err := jobs.EncodeEmbedding(p.Embedding)
	if err != nil {
		return jobs.Enqueued{}, err
	}
	promptID := jobs.NewID()
	if _, err := w.exec(qInsertPrompt, promptID, p.OrgID, p.CreatedBy, nullString(p.ParentID),
		p.CorrelationID, p.Text, p.PromptRef, nullBytes(p.Inputs), p.Profile, p.IdempotencyKey, p.RequestHash, w.now,
		nullBytes(chat), nullString(p.BatchID), nullString(p.CustomID), nullBytes(embedding)); err != nil {
		return jobs.Enqueued{}, fmt.Errorf("insert prompt: %w", err)
	}
	now := fromMicros(w.now)
	availableAt := now
	if !p.AvailableAt.IsZero() {
		availableAt = p.AvailableAt
	}
	jobID := jobs.NewID()
	if err := w.insertJob(jobs.Job{ID: jobID, PromptID: promptID, State: jobs.Queued, Priority: *p.Priority, Attempt: 1,
		MaxAttempts: p.MaxAttempts, ExecutionOptions: p.ExecutionOptions, DependsOn: p.DependsOn, OrgID: p.OrgID,
		CreatedBy: p.CreatedBy, TokenID: p.TokenID, CreatedAt: now, UpdatedAt: now, AvailableAt: availableAt}, nil); err != nil {
		return jobs.Enqueued{}, err
	}
	e := jobs.Enqueued{PromptID: promptID, JobID: jobID, State: jobs.Queued}
	if p.ClaimAs != "" {
		// An org at its concurrency limit gets its job queued instead.
		var l queue.Limit
		var running int
		switch err := w.queryRow(qOrgRoom, p.OrgID).Scan(&l.MaxRunning, &l.Paused, &running); {
		case err == nil && l.Room(running) <= 0:
			return e, nil
		case err != nil && !errors.Is(err, sql.ErrNoRows):
			return jobs.Enqueued{}, fmt.Errorf("org room: %w", err)
		}
		j, err := scanJob(w.queryRow(qClaimID, p.ClaimAs, w.now, jobID))
		if err != nil {
			return jobs.Enqueued{}, fmt.Errorf("claim: %w", err)
		}
		w.transition(j, jobs.Queued, jobs.Running, jobs.TransitionData{Worker: p.ClaimAs}.JSON())
		e.State, e.Claimed = jobs.Running, &j
	}
	return e, nil
}

// conflict reports whether a repeat's request hash contradicts the stored
// one: both are set and they differ.
func conflict(stored, hash string) bool { return stored != "" && hash != "" && stored != hash }

// insertJob inserts j, a queued job its caller decided (an enqueue's, or
// jobs.RetryParams.Replacement), with its start tag (qNextTag), and
// records its first event (→ queued) with data (a retry's names the job
// it supersedes: jobs.RetryParams.Data).
func (w *wtx) insertJob(j jobs.Job, data []byte) error {
	tag, err := w.nextTag(j.OrgID, j.Priority)
	if err != nil {
		return err
	}
	if _, err := w.exec(qInsertJob, j.ID, j.PromptID, string(j.State), j.Priority, j.Attempt, j.MaxAttempts,
		string(j.ExecutionOptions.JSON()), nullString(j.Supersedes), nullString(j.DependsOn), j.OrgID, j.CreatedBy,
		j.CreatedAt.UnixMicro(), j.UpdatedAt.UnixMicro(), j.AvailableAt.UnixMicro(), j.TokenID, tag); err != nil {
		return fmt.Errorf("insert job: %w", err)
	}
	w.transition(j, "", jobs.Queued, data)
	return nil
}

// tagKey names an org's tags at a priority.
type tagKey struct {
	org      string
	priority int
}

// takeTags allocates the start tags of n jobs of an org at a priority,
// as queue.Tags decides from what qTagInputs reads, and records the org's
// last; the transaction's next n insertJob calls for them then take the
// tags in order (an EnqueueBatch takes an org's tags at once, not one per
// job). Tags an idempotent repeat leaves untaken are a gap, as if the org
// had queued that many more jobs.
func (w *wtx) takeTags(k tagKey, n int) error {
	var in queue.TagInputs
	var head sql.NullFloat64
	if err := w.queryRow(qTagInputs, k.org, k.priority, w.now).Scan(&in.Last, &head, &in.MaxLast, &in.Weight); err != nil {
		return fmt.Errorf("start tags: %w", err)
	}
	in.Head, in.HasHead = head.Float64, head.Valid
	tags, last := queue.Tags(in, n)
	if _, err := w.exec(qSaveTag, k.priority, k.org, last); err != nil {
		return fmt.Errorf("start tags: %w", err)
	}
	if w.tags == nil {
		w.tags = map[tagKey][]float64{}
	}
	w.tags[k] = append(w.tags[k], tags...)
	return nil
}

// nextTag is the start tag of the org's next job at the priority.
func (w *wtx) nextTag(org string, priority int) (float64, error) {
	k := tagKey{org, priority}
	if len(w.tags[k]) == 0 {
		if err := w.takeTags(k, 1); err != nil {
			return 0, err
		}
	}
	tag := w.tags[k][0]
	w.tags[k] = w.tags[k][1:]
	return tag, nil
}

// Enqueue implements jobs.Store. Concurrent calls share transactions (group
// commit); each still gets its own result.
func (s *Store) Enqueue(ctx context.Context, p jobs.EnqueueParams) (jobs.Enqueued, error) {
	// Normalized first, so a bad call never joins a group.
	p, err := p.Normalize()
	if err != nil {
		return jobs.Enqueued{}, fmt.Errorf("sqlitestore: enqueue: %w", err)
	}
	var e jobs.Enqueued
	err = s.grouped(ctx, "enqueue", func(w *wtx) error {
		var err error
		e, err = w.enqueueOne(p)
		return err
	})
	s.wrote(ctx, "enqueue", err, err == nil && !e.Existing)
	if err != nil {
		return jobs.Enqueued{}, err
	}
	return e, nil
}

// EnqueueBatch implements jobs.Store: one transaction, all or nothing.
func (s *Store) EnqueueBatch(ctx context.Context, ps []jobs.EnqueueParams) ([]jobs.Enqueued, error) {
	if len(ps) == 0 {
		return nil, nil
	}
	norm := make([]jobs.EnqueueParams, len(ps))
	for i, p := range ps {
		var err error
		if norm[i], err = p.Normalize(); err != nil {
			return nil, fmt.Errorf("sqlitestore: enqueue batch: item %d: %w", i, err)
		}
	}
	out := make([]jobs.Enqueued, len(ps))
	err := s.write(ctx, "enqueue batch", func(w *wtx) error {
		counts := map[tagKey]int{}
		var keys []tagKey
		for _, p := range norm {
			k := tagKey{p.OrgID, *p.Priority}
			if counts[k] == 0 {
				keys = append(keys, k)
			}
			counts[k]++
		}
		for _, k := range keys {
			if err := w.takeTags(k, counts[k]); err != nil {
				return err
			}
		}
		for i, p := range norm {
			e, err := w.enqueueOne(p)
			if err != nil {
				return fmt.Errorf("item %d: %w", i, err)
			}
			out[i] = e
		}
		return nil
	})
	s.wrote(ctx, "enqueue batch", err, err == nil && slices.ContainsFunc(out, func(e jobs.Enqueued) bool { return !e.Existing }))
	if err != nil {
		return nil, err
	}
	return out, nil
}
