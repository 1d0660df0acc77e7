-- Writes in one round trip. A writing transaction used to read the store
-- clock only once it held the event lock, and it needed what its first
-- statements read (the jobs it locked) to build the rest: two round trips,
-- the second inside the serialized section. Now the common writes (claim,
-- finish, plain enqueue, reclaim) read the clock first and send everything
-- at once:
--
--  - Since-polling keeps its guarantee through a floor. ChangesSince raises
--    change_floor to its clock reading T while it holds the event lock
--    (shared); a writer that takes the lock afterwards with a clock reading
--    below T fails (stamp_below_floor raises SQLSTATE PKS01), rolls back and runs again
--    in two round trips, stamping max(its clock, the floor). The floor also
--    keeps since-polling whole across processes whose clocks disagree: no
--    change is stamped below a time a reader has already reported as AsOf.
--  - A finishing write checks the claim in SQL and derives the response ID
--    there (response_id, the same function as jobs.ResponseID).

-- +goose Up
CREATE TABLE change_floor (
    one boolean     PRIMARY KEY DEFAULT true CHECK (one),
    at  timestamptz NOT NULL
);

-- Raises PKS01; writers call it only when the floor is above their stamp.
-- +goose StatementBegin
CREATE FUNCTION stamp_below_floor() RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'stamp below the change floor' USING ERRCODE = 'PKS01';
END
$$;
-- +goose StatementEnd

-- jobs.ResponseID: a name-based UUIDv8 from SHA-256 of a namespace and
-- "prompt_id/job_id". One expression, so the planner inlines it.
-- +goose StatementBegin
CREATE FUNCTION response_id(prompt_id text, job_id text) RETURNS text LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT encode(set_byte(set_byte(
        substring(sha256('\x6f2b4c1e8d3a5b7f9e0c2a1d4f6b8c3e'::bytea || convert_to(prompt_id || '/' || job_id, 'UTF8')) FROM 1 FOR 16),
        6, (get_byte(sha256('\x6f2b4c1e8d3a5b7f9e0c2a1d4f6b8c3e'::bytea || convert_to(prompt_id || '/' || job_id, 'UTF8')), 6) & 15) | 128),
        8, (get_byte(sha256('\x6f2b4c1e8d3a5b7f9e0c2a1d4f6b8c3e'::bytea || convert_to(prompt_id || '/' || job_id, 'UTF8')), 8) & 63) | 128),
        'hex')::uuid::text
$$;
-- +goose StatementEnd

-- +goose Down
DROP FUNCTION response_id(text, text);
DROP FUNCTION stamp_below_floor();
DROP TABLE change_floor;
