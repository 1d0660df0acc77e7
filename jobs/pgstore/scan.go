package pgstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/promptkit/promptkit/jobs"
)

// jobCols is the column list scanJob reads, in order. JSON columns are
// read as text so the caller's bytes come back unchanged.
const jobCols = `id, prompt_id, state, priority, attempt, max_attempts, execution_options::text,
	worker_claim, claimed_at, started_at, running_heartbeat_at, finished_at, response_id,
	error_kind, error_message, supersedes, depends_on, org_id, created_by, created_at,
	updated_at, available_at, token_id`

// scanJob reads a row of jobCols, then any extra columns into extra.
func scanJob(row pgx.Row, extra ...any) (jobs.Job, error) {
	var (
		j                              jobs.Job
		state                          string
		opts                           []byte
		claim, resp, kind, msg, sup, d *string
		claimed, started, hb, finished *time.Time
	)
	dst := []any{&j.ID, &j.PromptID, &state, &j.Priority, &j.Attempt, &j.MaxAttempts, &opts,
		&claim, &claimed, &started, &hb, &finished, &resp,
		&kind, &msg, &sup, &d, &j.OrgID, &j.CreatedBy, &j.CreatedAt,
		&j.UpdatedAt, &j.AvailableAt, &j.TokenID}
	err := row.Scan(append(dst, extra...)...)
	if err != nil {
		return jobs.Job{}, err
	}
	j.State = jobs.State(state)
	if j.ExecutionOptions, err = jobs.DecodeExecutionOptions(opts); err != nil {
		return jobs.Job{}, err
	}
	j.WorkerClaim = str(claim)
	j.ClaimedAt = tm(claimed)
	j.StartedAt = tm(started)
	j.HeartbeatAt = tm(hb)
	j.FinishedAt = tm(finished)
	j.ResponseID = str(resp)
	j.ErrorKind = jobs.ErrorKind(str(kind))
	j.ErrorMessage = str(msg)
	j.Supersedes = str(sup)
	j.DependsOn = str(d)
	j.CreatedAt = j.CreatedAt.UTC()
	j.UpdatedAt = j.UpdatedAt.UTC()
	j.AvailableAt = j.AvailableAt.UTC()
	return j, nil
}

func collectJobs(rows pgx.Rows) ([]jobs.Job, error) {
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (jobs.Job, error) { return scanJob(r) })
}

// queryJobs runs a query returning jobCols rows.
func (s *Store) queryJobs(ctx context.Context, q string, args ...any) ([]jobs.Job, error) {
	rows, err := s.pool.Query(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	return collectJobs(rows)
}

// eventCols is the column list scanEvent reads; eventColsE the same of
// job_events e.
const (
	eventCols  = `seq, job_id, prompt_id, org_id, type, from_state, to_state, data::text, at`
	eventColsE = `e.seq, e.job_id, e.prompt_id, e.org_id, e.type, e.from_state, e.to_state, e.data::text, e.at`
)

func scanEvent(row pgx.CollectableRow) (jobs.Event, error) { return scanEventExtra(row) }

// scanEventWithJob reads eventCols and the job's created_by and attempt
// (NULL when the job is gone).
func scanEventWithJob(row pgx.CollectableRow) (jobs.Event, error) {
	var by *string
	var attempt *int
	e, err := scanEventExtra(row, &by, &attempt)
	if err != nil {
		return jobs.Event{}, err
	}
	e.CreatedBy = str(by)
	if attempt != nil {
		e.Attempt = *attempt
	}
	return e, nil
}

// scanEventExtra reads eventCols, then any extra columns into extra.
func scanEventExtra(row pgx.Row, extra ...any) (jobs.Event, error) {
	var (
		e        jobs.Event
		typ      string
		from, to *string
		data     []byte
	)
	dst := []any{&e.Seq, &e.JobID, &e.PromptID, &e.OrgID, &typ, &from, &to, &data, &e.At}
	if err := row.Scan(append(dst, extra...)...); err != nil {
		return jobs.Event{}, err
	}
	e.Type = jobs.EventType(typ)
	e.From = jobs.State(str(from))
	e.To = jobs.State(str(to))
	if data != nil {
		e.Data = json.RawMessage(data)
	}
	e.At = e.At.UTC()
	return e, nil
}

const promptCols = `id, org_id, created_by, parent_id, correlation_id, text, prompt_ref, inputs::text, profile, idempotency_key, created_at,
	chat::text, batch_id, custom_id, embedding::text`

func scanPrompt(row pgx.Row) (jobs.Prompt, error) {
	var (
		p                       jobs.Prompt
		parent, batch, customID *string
		inputs, chat, embedding []byte
	)
	if err := row.Scan(&p.ID, &p.OrgID, &p.CreatedBy, &parent, &p.CorrelationID, &p.Text, &p.PromptRef, &inputs, &p.Profile,
		&p.IdempotencyKey, &p.CreatedAt, &chat, &batch, &customID, &embedding); err != nil {
		return jobs.Prompt{}, err
	}
	p.ParentID = str(parent)
	if inputs != nil {
		p.Inputs = json.RawMessage(inputs)
	}
	var err error
	if p.Chat, err = jobs.DecodeChat(chat); err != nil {
		return jobs.Prompt{}, err
	}
	if p.Embedding, err = jobs.DecodeEmbedding(embedding); err != nil {
		return jobs.Prompt{}, err
	}
	p.BatchID, p.CustomID = str(batch), str(customID)
	p.CreatedAt = p.CreatedAt.UTC()
	return p, nil
}

const responseCols = `r.id, r.prompt_id, r.job_id, r.output, r.parsed::text, r.model, r.usage::text, r.created_at,
	r.finish_reason, r.tool_calls::text, r.backend, r.body::text`

func scanResponse(row pgx.Row) (jobs.Response, error) {
	var (
		r                          jobs.Response
		parsed, usage, calls, body []byte
	)
	if err := row.Scan(&r.ID, &r.PromptID, &r.JobID, &r.Output, &parsed, &r.Model, &usage, &r.CreatedAt, &r.FinishReason, &calls, &r.Backend, &body); err != nil {
		return jobs.Response{}, err
	}
	if body != nil {
		r.Body = json.RawMessage(body)
	}
	if err := jobs.DecodeToolCalls(calls, &r); err != nil {
		return jobs.Response{}, err
	}
	if parsed != nil {
		r.Parsed = json.RawMessage(parsed)
	}
	if err := json.Unmarshal(usage, &r.Usage); err != nil {
		return jobs.Response{}, fmt.Errorf("usage: %w", err)
	}
	r.CreatedAt = r.CreatedAt.UTC()
	return r, nil
}

func str(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

func tm(p *time.Time) time.Time {
	if p == nil {
		return time.Time{}
	}
	return p.UTC()
}

// notFound translates pgx.ErrNoRows into jobs.ErrNotFound.
func notFound(err error) error {
	if errors.Is(err, pgx.ErrNoRows) {
		return jobs.ErrNotFound
	}
	// A key PostgreSQL cannot even hold (a NUL in an id) names nothing,
	// as it does on SQLite.
	if pgErr, ok := errors.AsType[*pgconn.PgError](err); ok && strings.HasPrefix(pgErr.Code, "22") {
		return jobs.ErrNotFound
	}
	return err
}
