-- Tokens may have the operator role (jobs.RoleOperator): an admin of
-- every org, and of what all orgs share (backends, workers).

-- +goose Up
ALTER TABLE tokens DROP CONSTRAINT tokens_role_check;
ALTER TABLE tokens ADD CONSTRAINT tokens_role_check CHECK (role IN ('member', 'admin', 'operator'));

-- +goose Down
DELETE FROM tokens WHERE role = 'operator';
ALTER TABLE tokens DROP CONSTRAINT tokens_role_check;
ALTER TABLE tokens ADD CONSTRAINT tokens_role_check CHECK (role IN ('member', 'admin'));
