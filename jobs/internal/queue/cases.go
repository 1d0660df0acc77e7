package queue

// RoomCases are the table of cases of Capped and Room: TestRoom checks
// the functions against it, and pgstore's TestQueueRulesMatchGo checks
// PostgreSQL's RoomSQL and CappedSQL against it.
var RoomCases = []struct {
	Name    string
	Limit   Limit
	Running int
	Capped  bool
	Room    int
}{
	{"no limit", Limit{}, 0, false, 0},
	{"no limit, running", Limit{}, 7, false, -7},
	{"limit, idle", Limit{MaxRunning: 3}, 0, true, 3},
	{"limit, some running", Limit{MaxRunning: 3}, 2, true, 1},
	{"full", Limit{MaxRunning: 3}, 3, true, 0},
	{"limit lowered below running", Limit{MaxRunning: 2}, 5, true, -3},
	{"paused without limit", Limit{Paused: true}, 0, true, 0},
	{"paused with room", Limit{MaxRunning: 10, Paused: true}, 1, true, 0},
	{"paused and full", Limit{MaxRunning: 1, Paused: true}, 4, true, 0},
}
