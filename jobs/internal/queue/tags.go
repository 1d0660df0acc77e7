package queue

// TagInputs is what decides the start tags of an org's jobs at one
// priority (the queue's fair share, see jobs.Store.Claim): the store reads
// them in the transaction that queues the jobs.
type TagInputs struct {
	// Last is the org's last start tag at the priority (fair_tags.last), 0
	// when it has none.
	Last float64
	// Head is the smallest start tag of the jobs queued at the priority
	// and available now (HasHead); jobs scheduled for later do not count.
	Head    float64
	HasHead bool
	// MaxLast is the largest last start tag of any org at the priority, 0
	// when there is none.
	MaxLast float64
	// Weight is the org's weight (limits.weight; 0 without a limits row).
	Weight int
}

// Step is the distance between an org's consecutive start tags: 1/weight,
// a weight below 1 counting as 1. An org of weight w thus gets w jobs in
// the time an org of weight 1 gets one.
func (in TagInputs) Step() float64 { return 1 / float64(max(in.Weight, 1)) }

// Base is where an org's next tags count up from: its last tag, or the
// tag of the queue's head when that is later (an org that was idle joins
// at the head, not ahead of it), or, with nothing available queued, the
// largest tag given at the priority (so an idle queue does not hand a
// returning org a lead).
func (in TagInputs) Base() float64 {
	v := in.MaxLast
	if in.HasHead {
		v = in.Head
	}
	return max(in.Last, v)
}

// Tags returns the start tags of the org's next n jobs at the priority,
// Base + k·Step for k = 1..n, and its new last tag, Base + n·Step, which
// the store records. (PostgreSQL computes the same products in float8:
// FairTagsPG.)
func Tags(in TagInputs, n int) (tags []float64, last float64) {
	base, step := in.Base(), in.Step()
	tags = make([]float64, n)
	for k := range n {
		tags[k] = base + step*float64(k+1)
	}
	return tags, base + step*float64(n)
}

// FairTagsPG is Tags in PostgreSQL, for the statements that queue jobs
// in one round trip under the event lock: the CTEs that give the jobs of
// the CTE named src (columns ord, org and prio) their start tags, with
// now the statement's time: fair (ord, tag), and fair_saved, which
// records each org's last tag per priority. fair_groups reads each
// (org, priority)'s TagInputs and computes Base and Step as Tags does;
// the tags of one org and priority count up from its base in ord order,
// as Tags' do. The head of the available queue is the first entry of
// job_queue (PostgreSQL's side table of queued jobs) at the priority,
// past any entries not yet available.
func FairTagsPG(src, now string) string {
	return `fair_groups AS (
		SELECT g.org, g.prio,
			greatest(
				coalesce((SELECT f.last FROM fair_tags f WHERE f.priority = g.prio AND f.org_id = g.org), 0),
				coalesce(
					(SELECT q.tag FROM job_queue q WHERE q.priority = g.prio AND q.available_at <= ` + now + `
						ORDER BY q.tag LIMIT 1),
					(SELECT max(f.last) FROM fair_tags f WHERE f.priority = g.prio),
					0)) AS base,
			1::float8 / greatest(coalesce(
				(SELECT l.weight FROM limits l WHERE l.scope = 'org' AND l.subject = g.org), 1), 1) AS step
		FROM (SELECT DISTINCT org, prio FROM ` + src + `) g
	), fair AS (
		SELECT s.ord, fg.base + fg.step * row_number() OVER (PARTITION BY s.org, s.prio ORDER BY s.ord) AS tag
		FROM ` + src + ` s JOIN fair_groups fg ON fg.org = s.org AND fg.prio = s.prio
	), fair_saved AS (
		INSERT INTO fair_tags (priority, org_id, last)
		SELECT fg.prio, fg.org, fg.base + fg.step * count(*)
		FROM ` + src + ` s JOIN fair_groups fg ON fg.org = s.org AND fg.prio = s.prio
		GROUP BY fg.prio, fg.org, fg.base, fg.step
		ON CONFLICT (priority, org_id) DO UPDATE SET last = EXCLUDED.last
	)`
}
