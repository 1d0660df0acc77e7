package sqlitestore

import (
	"context"

	"github.com/promptkit/promptkit/jobs"
)

// DeletePrompt's statements, on the writer: the checks, then the rows
// from the leaves up, so the foreign keys hold at every step.
var (
	qDeleteFind = wq(`SELECT (SELECT count(*) FROM jobs WHERE prompt_id = ?1 AND state IN ('queued', 'running'))
		FROM prompts WHERE id = ?1 AND (?2 = '' OR org_id = ?2)`)
	qDeleteEvents    = wq(`DELETE FROM job_events WHERE job_id IN (SELECT id FROM jobs WHERE prompt_id = ?)`)
	qDeleteResponses = wq(`DELETE FROM responses WHERE job_id IN (SELECT id FROM jobs WHERE prompt_id = ?)`)
	qDeleteJobs      = wq(`DELETE FROM jobs WHERE prompt_id = ?`)
	qDeletePrompt    = wq(`DELETE FROM prompts WHERE id = ?`)
)

// DeletePrompt implements jobs.Store.
func (s *Store) DeletePrompt(ctx context.Context, orgID, id string) error {
	err := s.write(ctx, "delete prompt", func(w *wtx) error {
		var active int
		if err := w.queryRow(qDeleteFind, id, orgID).Scan(&active); err != nil {
			return notFound(err)
		}
		if active > 0 {
			return jobs.ErrPromptActive
		}
		for _, q := range []string{qDeleteEvents, qDeleteResponses, qDeleteJobs, qDeletePrompt} {
			if _, err := w.exec(q, id); err != nil {
				return err
			}
		}
		return nil
	})
	s.wrote(ctx, "delete prompt", err, err == nil)
	return err
}
