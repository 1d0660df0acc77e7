-- Shared cooldowns (jobs.PacingUpdate.CooldownUntil): a backend that one
-- process found unwell is avoided by the model groups of every process
-- until cool_until, the engines' clock's, the later end winning.

-- +goose Up
ALTER TABLE pacing ADD COLUMN cool_until timestamptz;

-- +goose Down
ALTER TABLE pacing DROP COLUMN cool_until;
