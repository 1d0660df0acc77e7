-- The profile is stored once, on the prompt. Submissions used to write it
-- into the job's execution_options as well ({"profile": …}), which
-- jobs.ParseExecutionOptions now refuses; a prompt without a profile of its
-- own takes it from the first of its jobs that names one, then the key
-- goes. execution_options is json (the caller's bytes); only the rows that
-- held the key are rewritten.
--
-- Listing by org and user, newest first with keyset pagination on
-- (created_at, id), is served by (org_id, created_by, created_at, id),
-- columns that never change. It replaces the org index (org_id,
-- created_at, id): listing a whole org still finds the org's rows through
-- the index's prefix, then sorts them, while keeping both indexes would
-- write a second index entry for every enqueued job, a cost batch enqueue
-- shows (BENCHMARKS.md). State is deliberately not in it, nor in any other
-- index on jobs: every transition changes state, and a transition must
-- stay a HOT update that writes no index entry (migration 00002). A filter
-- on state is checked on the user's rows instead.

-- +goose Up
UPDATE prompts p SET profile = first.profile
FROM (
    SELECT DISTINCT ON (prompt_id) prompt_id, execution_options->>'profile' AS profile
    FROM jobs
    WHERE json_typeof(execution_options->'profile') = 'string' AND execution_options->>'profile' <> ''
    ORDER BY prompt_id, created_at, id
) first
WHERE p.id = first.prompt_id AND p.profile = '';
UPDATE jobs SET execution_options = (execution_options::jsonb - 'profile')::json
WHERE execution_options::jsonb ? 'profile';
CREATE INDEX jobs_org_user_created_idx ON jobs (org_id, created_by, created_at, id);
DROP INDEX jobs_org_created_idx;

-- +goose Down
CREATE INDEX jobs_org_created_idx ON jobs (org_id, created_at DESC, id DESC);
DROP INDEX jobs_org_user_created_idx;
UPDATE jobs j SET execution_options = (j.execution_options::jsonb || jsonb_build_object('profile', p.profile))::json
FROM prompts p
WHERE p.id = j.prompt_id AND p.profile <> '';
