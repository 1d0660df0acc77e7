-- The backend that answered a job (jobs.Response.Backend): with a model
-- group (docs/routing.md) one of its profile's backends. Responses stored
-- before have ''.

-- +goose Up
ALTER TABLE responses ADD COLUMN backend TEXT NOT NULL DEFAULT '';

-- +goose Down
ALTER TABLE responses DROP COLUMN backend;
