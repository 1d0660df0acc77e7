-- The profile is stored once, on the prompt. Submissions used to write it
-- into the job's execution_options as well ({"profile": …}), which
-- jobs.ParseExecutionOptions now refuses; a prompt without a profile of its
-- own takes it from the first of its jobs that names one, then the key
-- goes.
--
-- Listing by org and user, newest first with keyset pagination on
-- (created_at, id), is served by (org_id, created_by, created_at, id). It
-- replaces the org index (org_id, created_at, id): listing a whole org
-- still finds the org's rows through the index's prefix, then sorts them,
-- while keeping both would write a second index entry for every enqueued
-- job, a cost batch enqueue shows (BENCHMARKS.md). State is left out: a
-- filter on it is a cheap check on the user's rows, while in the index
-- every transition would have to move the job's entry.

-- +goose Up
UPDATE prompts SET profile = (
    SELECT json_extract(j.execution_options, '$.profile') FROM jobs j
    WHERE j.prompt_id = prompts.id AND json_type(j.execution_options, '$.profile') = 'text'
        AND json_extract(j.execution_options, '$.profile') <> ''
    ORDER BY j.created_at, j.id LIMIT 1)
WHERE profile = '' AND EXISTS (
    SELECT 1 FROM jobs j
    WHERE j.prompt_id = prompts.id AND json_type(j.execution_options, '$.profile') = 'text'
        AND json_extract(j.execution_options, '$.profile') <> '');
UPDATE jobs SET execution_options = json_remove(execution_options, '$.profile')
WHERE json_type(execution_options, '$.profile') IS NOT NULL;
CREATE INDEX IF NOT EXISTS jobs_org_user_created ON jobs (org_id, created_by, created_at, id);
DROP INDEX IF EXISTS jobs_org_created;

-- +goose Down
CREATE INDEX IF NOT EXISTS jobs_org_created ON jobs (org_id, created_at, id);
DROP INDEX IF EXISTS jobs_org_user_created;
UPDATE jobs SET execution_options = json_set(execution_options, '$.profile',
    (SELECT profile FROM prompts WHERE prompts.id = jobs.prompt_id))
WHERE EXISTS (SELECT 1 FROM prompts WHERE prompts.id = jobs.prompt_id AND prompts.profile <> '');
