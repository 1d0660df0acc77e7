// Package pgstore is the PostgreSQL implementation of jobs.Store, on pgx.
//
// Open connects with a postgres:// or postgresql:// URL, applies the
// embedded goose migrations (Migrate does only that) and returns a Store.
// A search_path query parameter selects the schema: the tables and goose's
// version table live there, it is created when missing, and two stores on
// different schemas of one database do not see or wait for each other.
//
// # Tables
//
// jobs holds every job, with indexes only on columns that never change
// (id, org, user and creation time, prompt), and half of each page left free:
// so a transition (claim, finish, requeue, heartbeat) is a HOT update
// that writes no index entry. Two narrow side tables mirror jobs.state
// and carry the indexes the hot paths need: job_queue holds exactly the
// queued jobs with their claim order (priority, then the start tag of fair
// sharing: migration 00013), job_running exactly the running ones (for
// Reclaim and the count of an org's running jobs). Both are
// written only under the event lock (below), so no statement waits for
// one of their rows. Migration 00002 explains this layout. IDs, orgs,
// users and keys are COLLATE "C" (migration 00004): they are opaque, and
// byte order makes every index step a memcmp whatever the database's
// collation. tokens holds the API tokens by the SHA-256 of their secret
// (migration 00006); token writes have no events and do not take the
// event lock, nor do those of limits (migration 00013), which claims and
// enqueues read under it. Nor do the writes of files (their content in chunks of
// jobs.FileChunkSize, in file_chunks) and batches (migration 00008);
// CancelBatchJobs cancels jobs with Cancel's statement, under the lock.
//
// # Claims
//
// Claim is one statement: a CTE picks job_queue entries in claim order
// (of an org with a concurrency limit, no more than it has room for; see
// claimSQL) with FOR UPDATE SKIP LOCKED (on the entry and on its job row), the
// entries move to job_running, an UPDATE moves the jobs to running, and
// the same statement appends their events and notifies. A job whose DependsOn job
// is queued or running waits; one whose dependency is terminal (or was
// archived) is claimable, and the worker checks the outcome. Every
// finalizing write first locks the job row and checks state = running AND
// worker_claim = the caller, so a stale worker changes nothing and gets
// jobs.ErrNotClaimed. What a write does — the target state, the attempts
// it spends, the error kind and message, the event's data — is decided in
// Go (jobs/internal/finish, jobs.ReclaimParams.Decide,
// jobs.TransitionData) and passed to the statements as parameters; the
// SQL only moves rows.
//
// # Event ordering
//
// Readers page through job_events by seq ("after N") and poll jobs by
// updated_at ("since T"; found through job_events.at, which every change of
// updated_at writes with the same time). A sequence value is allocated when a row is
// inserted, not when its transaction commits, so with plain inserts a
// transaction could commit seq 7 after a reader had already seen seq 8 and
// moved past it. The store closes that gap by making allocation order equal
// commit order:
//
//  1. A writing transaction first does everything that may wait for other
//     transactions: validation, row locks (SELECT ... FOR UPDATE), inserts
//     that may conflict on a unique index.
//  2. At its end it takes pg_advisory_xact_lock(K), where K is a constant
//     derived from the schema name (the "event lock").
//  3. Only then it stamps updated_at on the rows it changes and inserts
//     its job_events (seq from an identity sequence), in one statement per
//     kind of change.
//  4. COMMIT. PostgreSQL releases transaction locks only after the commit
//     is visible to other sessions.
//
// So a later seq always belongs to a transaction that became visible later,
// and EventsAfter needs no lock: every event with a seq below one it can see
// is already visible. ChangesSince takes the same lock (shared, so readers
// do not wait for each other), reads the clock T while holding it and
// raises a floor (the one-row table change_floor) to T: every writer that
// stamped a time before T has committed, and no writer that takes the lock
// afterwards stamps below T. It returns AsOf = T − 1µs, so changes stamped
// in T's microsecond are returned again by the next call (the contract
// allows repeats) instead of being missed.
//
// The stamp is the store clock, read before the transaction is sent (most
// writes are one round trip, see Throughput), and checked in step 3: if a
// ChangesSince has raised the floor above it in the meantime, the check
// raises SQLSTATE PKS01, the transaction (which has written nothing) rolls
// back, and it runs again in two round trips, the second sent once the lock
// is held, stamping max(clock, floor). The floor also keeps since-polling
// whole across processes whose clocks disagree: a writer behind a reader's
// clock stamps the reader's time, not its own (taking the two-round-trip
// path each time, so keep the clocks in sync).
//
// Step 3 touches only rows this transaction already locked in step 1
// (Reclaim locks its jobs there, with SKIP LOCKED), rows it inserts, rows
// it claims with SKIP LOCKED (Claim does all its work there, as one
// statement that never waits for a row lock), and side-table rows, which
// only transactions holding the event lock write (change_floor, which
// ChangesSince writes under the shared lock, writers only read); so a
// transaction holding the event lock never waits for one that wants it: no
// deadlock.
//
// The event lock serializes the end of writing transactions, including
// their commit's WAL flush; keeping step 3 to one statement per kind of
// change (batched with unnest arrays), and those statements to HOT updates
// and narrow inserts, keeps that section short. Heartbeats neither change
// updated_at nor append events, so they never take it.
//
// # Throughput
//
// Because of that serialization, the store spends as few round trips and
// commits per job as it can. A writing transaction runs one of four ways
// (pipeline.go):
//
//   - writeOneTrip: one pipelined round trip — BEGIN, the pre-lock
//     statements, the lock request, the stamp check, the locked statements
//     and COMMIT — so no network wait falls inside the serialized section.
//     Finishing writes, enqueues without idempotency keys or references,
//     and batches of those with claims run this way: their locked
//     statements do not depend on what the pre-lock ones read (a finishing
//     write checks the claim in SQL, and names a succeeded job's response
//     with jobs.ResponseID of the prompt the store remembered when it
//     claimed the job, or derives the same ID in SQL, response_id, when
//     another process claimed it).
//   - writeOneTripGated: writeOneTrip whose gate statement takes the event
//     lock only when it finds work, so an empty Claim poll serializes with
//     nobody; the statements after the gate do nothing when it did not
//     take the lock. Claims alone run this way.
//   - writeTwoTrips: the pre-lock statements in the first round trip; the
//     event lock, the stamp check and the locked statements, built from
//     what the first read, in the second, so again no network wait falls
//     inside the serialized section. Cancel, Retry and keyed or
//     referencing enqueues run this way.
//   - writeTwoTripsGated: the event lock, behind an optional gate, in the
//     first round trip, with the change floor; the locked statements,
//     stamped above the floor, in the second. Reclaim and CancelBatchJobs
//     run this way (Reclaim locks the expired jobs in its first round trip
//     and applies jobs.ReclaimParams.Decide's decisions through the
//     finishing statement in its second), and so does any write whose
//     stamp check failed.
//
// chooseTrips picks writeOneTrip or writeTwoTrips for a transaction.
//
// A group of Claim calls is one statement (one skip-locked scan for the
// sum of their limits, handed out in call order). Concurrent calls are
// group-committed (jobs/internal/groupcommit): Enqueue calls that arrive
// while a transaction is in flight run together in the next one, as do
// Claim calls, and Succeed, Fail, Requeue and AppendAttempt calls (one
// set-based statement); each call still gets its own result or error, and
// an idle store adds no delay. Before cutting the next batch the group
// yields once, so the callers it just released can submit their next call
// in time to join it.
// The writing statements run with generic plans (plan_cache_mode),
// because re-planning the batched statements on every execution would
// cost more than running them, with sequential scans off, because the side
// tables are small or empty when a plan is made, and without JIT. Reads
// keep cached plans, made with sequential scans and JIT off too (readParams,
// the store's connection settings unless the URL names them): under the
// defaults a prepared read's generic plan was costed on the tables as they
// were when it first ran, so a store started on a fresh database kept
// sequential scans of job_events and prompts as history grew. The hot
// reads are index lookups and ordered index scans, right at any size and
// whatever the statistics. Nothing relies on ANALYZE having run.
//
// # Readiness
//
// Check upserts this store's own row of the readiness table (one per open
// Store, so probes of many processes never wait for each other), and also
// fails for a while after a real write failed for a database reason, until
// a write stores something (see Check and wrote in health.go).
//
// # Notifications
//
// Writing transactions that enqueue or change a job's state, or change a
// batch's status (MoveBatch, CancelBatch, FinishBatch, in the statement
// that moves the batch), call pg_notify('promptkit_jobs', <schema>),
// delivered at commit to every process: a batch waiter (GET
// /v1/batches/{id}?wait=) in any serve looks again when its batch moves.
// The receiving side is the Store's Notifier (Store.Notifier, deltas.go),
// apart from the row operations: a jobs.LocalNotifier whose Notify
// channels are fed by one LISTEN connection per Store (started on first
// use, reconnecting with backoff) and by the store's own commits, and
// which also carries running jobs' answer pieces between processes (on
// promptkit_deltas, sent by a loop of its own). Close stops both.
package pgstore
