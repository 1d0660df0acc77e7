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

// TagCase is a queue as a store finds it when org "o" queues N jobs at
// one priority, and the start tags and last tag it must give them.
type TagCase struct {
	Name string
	// Weight is o's weight; NoLimits says o has no limits row at all.
	Weight   int
	NoLimits bool
	// Last are the orgs' last tags at the priority (fair_tags), by org.
	Last map[string]float64
	// Queued are the tags of the jobs queued at the priority; Later ones
	// are scheduled after now.
	Queued []QueuedTag
	N      int
	Tags   []float64
	// WantLast is o's last tag afterwards.
	WantLast float64
}

// QueuedTag is a queued job's start tag.
type QueuedTag struct {
	Tag   float64
	Later bool
}

// Inputs is what a store reads of c's queue (qTagInputs, FairTagsPG's
// fair_groups).
func (c TagCase) Inputs() TagInputs {
	in := TagInputs{Last: c.Last["o"], Weight: c.Weight}
	for _, l := range c.Last {
		in.MaxLast = max(in.MaxLast, l)
	}
	for _, q := range c.Queued {
		if !q.Later && (!in.HasHead || q.Tag < in.Head) {
			in.Head, in.HasHead = q.Tag, true
		}
	}
	return in
}

// TagCases are the table of cases of Tags: TestTags checks the function
// against it, pgstore's TestQueueRulesMatchGo checks FairTagsPG, and
// sqlitestore's TestTagsMatchGo checks what SQLite reads (qTagInputs)
// and records.
var TagCases = []TagCase{
	{Name: "empty queue, no history", NoLimits: true, N: 3, Tags: []float64{1, 2, 3}, WantLast: 3},
	{Name: "empty queue, weight 4", Weight: 4, N: 2, Tags: []float64{0.25, 0.5}, WantLast: 0.5},
	{Name: "weight 0 counts as 1", Weight: 0, N: 1, Tags: []float64{1}, WantLast: 1},
	{Name: "idle org joins at the queue's head", Weight: 1, Last: map[string]float64{"o": 2, "p": 40},
		Queued: []QueuedTag{{Tag: 30}, {Tag: 35}}, N: 2, Tags: []float64{31, 32}, WantLast: 32},
	{Name: "busy org continues from its last", Weight: 2, Last: map[string]float64{"o": 50, "p": 40},
		Queued: []QueuedTag{{Tag: 30}}, N: 3, Tags: []float64{50.5, 51, 51.5}, WantLast: 51.5},
	{Name: "empty queue: the largest last tag", Weight: 1, Last: map[string]float64{"o": 3, "p": 9, "q": 7},
		N: 1, Tags: []float64{10}, WantLast: 10},
	{Name: "scheduled jobs are not the head", Weight: 1, Last: map[string]float64{"p": 20},
		Queued: []QueuedTag{{Tag: 5, Later: true}, {Tag: 12}}, N: 1, Tags: []float64{13}, WantLast: 13},
	{Name: "only scheduled jobs: the largest last tag", Weight: 1, Last: map[string]float64{"p": 20},
		Queued: []QueuedTag{{Tag: 5, Later: true}}, N: 2, Tags: []float64{21, 22}, WantLast: 22},
	{Name: "weight 3, fractions", Weight: 3, Last: map[string]float64{"o": 1}, Queued: []QueuedTag{{Tag: 0.5}},
		N: 3, Tags: []float64{1 + third*1, 1 + third*2, 1 + third*3}, WantLast: 1 + third*3},
}

// third is a weight of 3's step, in float64 (not an exact constant): the
// tags are Base + Step·k computed in float64, as PostgreSQL's float8.
var third = 1 / float64(3)
