-- Shared cooldowns (jobs.PacingUpdate.CooldownUntil): a backend that one
-- process found unwell is avoided by the model groups of every process
-- until cool_until, microseconds since the epoch of the engines' clock,
-- the later end winning.

-- +goose Up
ALTER TABLE pacing ADD COLUMN cool_until INTEGER;

-- +goose Down
ALTER TABLE pacing DROP COLUMN cool_until;
