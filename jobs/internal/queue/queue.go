// Package queue is the queue policy both job stores apply, each rule
// decided once, here, as a pure Go function:
//
//   - Room: how many more of an org's jobs may start (a paused or full
//     organisation gets no room), and which orgs are capped at all.
//   - Tags: the fair-share start tags of the jobs an org queues at a
//     priority, and the org's last tag there.
//
// A store applies a rule one of two ways, and never decides it in SQL of
// its own:
//
//   - SQLite has a single writer: its transaction reads the rule's inputs,
//     calls the Go function and writes the decided values (a statement or
//     two more than deciding in SQL, which its writes can afford).
//   - PostgreSQL claims and enqueues in one round trip inside a serialized
//     section (the event lock), where another round trip would cost
//     throughput: its statements decide in place, built from the SQL
//     fragments here (RoomSQL, CappedSQL, FairTagsPG), which say what the
//     Go functions say. Its driver test (pgstore's TestQueueRulesMatchGo)
//     evaluates the fragments over the tables of cases in cases.go and
//     checks that they agree with the Go functions.
//
// A fragment that is the same text in both dialects is shared (RoomSQL,
// CappedSQL); one that is not is PostgreSQL's alone (FairTagsPG), since
// SQLite decides in Go. Changing a rule means changing its function, its
// fragment and its table of cases together.
package queue

// Limit is what an org's concurrency limit (the limits row of scope org)
// says about its room.
type Limit struct {
	// MaxRunning caps the org's running jobs; 0 is no cap.
	MaxRunning int
	// Paused holds all of the org's queued jobs.
	Paused bool
}

// Capped reports whether the org's claims are bounded by its Room: it
// has a concurrency limit or is paused. An org without a limits row, or
// with neither, is not capped: its room is unbounded.
func (l Limit) Capped() bool { return l.MaxRunning > 0 || l.Paused }

// Room is how many more of a capped org's jobs may start while running of
// them run: a paused org gets none, whatever its limit; otherwise the
// limit less the running jobs. A room of 0 or less means none (it is
// negative when the limit was lowered below the running count).
func (l Limit) Room(running int) int {
	if l.Paused {
		return 0
	}
	return l.MaxRunning - running
}

// CappedSQL is Capped over the limits row aliased l: the same text in
// both dialects.
func CappedSQL(l string) string {
	return "(" + l + ".max_running > 0 OR " + l + ".paused)"
}

// RoomSQL is Room over the limits row aliased l, with running an SQL
// expression (a scalar subquery) counting the org's running jobs: the same
// text in both dialects.
func RoomSQL(l, running string) string {
	return "CASE WHEN " + l + ".paused THEN 0 ELSE " + l + ".max_running - (" + running + ") END"
}
