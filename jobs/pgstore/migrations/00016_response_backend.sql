-- The backend that answered a job (jobs.Response.Backend): with a model
-- group (docs/routing.md) one of its profile's backends. Responses stored
-- before have ''. A constant default rewrites no table.

-- +goose Up
ALTER TABLE responses ADD COLUMN backend text NOT NULL DEFAULT '';

-- +goose Down
ALTER TABLE responses DROP COLUMN backend;
