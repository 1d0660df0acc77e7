package pgstore

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/promptkit/promptkit/jobs"
)

// deletePromptSQL deletes a prompt whose jobs are all terminal, in one
// statement: the prompt and its jobs are locked first (a claim or a
// cancel of one of them waits, and is then seen as it ends), and nothing
// is deleted when one is queued or running. It returns whether the
// prompt was found and whether it had such a job. Every sub-statement
// sees the snapshot before the deletes; the foreign keys are checked at
// the statement's end, once all of them are gone (as in Archive).
const deletePromptSQL = `
	WITH target AS (
		SELECT id FROM prompts WHERE id = $1 AND ($2 = '' OR org_id = $2) FOR UPDATE
	), locked AS (
		SELECT id, state FROM jobs WHERE prompt_id = (SELECT id FROM target) FOR UPDATE
	), verdict AS (
		SELECT NOT EXISTS (SELECT 1 FROM locked WHERE state IN ('queued', 'running')) AS ok
	), events AS (
		DELETE FROM job_events WHERE job_id = ANY (ARRAY(SELECT id FROM locked)) AND (SELECT ok FROM verdict)
	), responses AS (
		DELETE FROM responses WHERE job_id = ANY (ARRAY(SELECT id FROM locked)) AND (SELECT ok FROM verdict)
	), gone_jobs AS (
		DELETE FROM jobs WHERE id = ANY (ARRAY(SELECT id FROM locked)) AND (SELECT ok FROM verdict)
	), gone AS (
		DELETE FROM prompts WHERE id = (SELECT id FROM target) AND (SELECT ok FROM verdict)
	)
	SELECT EXISTS (SELECT 1 FROM target), (SELECT ok FROM verdict)`

// isForeignKeyViolation reports whether err is PostgreSQL's
// foreign_key_violation (23503).
func isForeignKeyViolation(err error) bool {
	pgErr, ok := errors.AsType[*pgconn.PgError](err)
	return ok && pgErr.Code == "23503"
}

// DeletePrompt implements jobs.Store.
func (s *Store) DeletePrompt(ctx context.Context, orgID, id string) error {
	var found, ok bool
	err := notFound(s.pool.QueryRow(ctx, deletePromptSQL, id, orgID).Scan(&found, &ok))
	switch {
	case isForeignKeyViolation(err):
		// A job of the prompt was made after the statement's snapshot (a
		// Retry): the foreign key kept it, nothing was deleted.
		err = jobs.ErrPromptActive
	case err != nil:
	case !found:
		err = jobs.ErrNotFound
	case !ok:
		err = jobs.ErrPromptActive
	}
	s.wrote(ctx, "delete prompt", err, err == nil)
	if err != nil {
		return fmt.Errorf("pgstore: delete prompt %s: %w", id, err)
	}
	return nil
}
