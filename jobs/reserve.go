package jobs

import (
	"context"
	"math"
	"time"
)

// A reservation holds a share of an org's (and a token's) limits while
// the work it was made for is admitted or running: a request counts
// towards its requests per minute for a minute, and a provider call in
// flight counts towards the tokens per minute and the budgets, at its
// estimated tokens and cost, until the call is in the ledger (Release) or
// its reservation expires. Admission reads the ledger and the open
// reservations and adds its own reservation in one step (Store.Reserve),
// so concurrent admissions cannot pass a limit together.

// ReserveParams describes one reservation and the check that admits it.
type ReserveParams struct {
	// OrgID is whose reservation it is; TokenID, when set, the token's
	// too. Reserve serialises the reservations of each, across every
	// process on the database.
	OrgID, TokenID string
	// Request counts the reservation as one request for the requests per
	// minute, until it expires.
	Request bool
	// Call counts it as a provider call in flight, of Tokens tokens and a
	// cost of USD (nil: not estimable), until it is released or expires.
	Call   bool
	Tokens int64
	USD    *float64
	// JobID and ClaimedAt, for a job's call, are the job and its claim:
	// the reservation counts only while the job runs under that claim. A
	// reclaim or a cancel, which records the call as lost in the ledger,
	// ends it.
	JobID     string
	ClaimedAt time.Time
	// TTL is how long it counts unless released: a minute for a request,
	// the longest a call can last for a call (a call whose maker died is
	// then in the ledger as a lost call). Required.
	TTL time.Duration
	// Check, when set, is called with the store's time and a reader of
	// the ledger and the reservations that sees every reservation made
	// before, and none made after until this one is stored: an error
	// refuses the reservation and is returned as it is. This is where the
	// limits are decided (quota.Quotas): the store only serialises.
	Check func(ctx context.Context, r ReserveReader, now time.Time) error
}

// Normalize checks the parameters: an org, no NUL, a request or a call
// (not both), a positive TTL, tokens not negative and a finite cost not
// negative.
func (p ReserveParams) Normalize() (ReserveParams, error) {
	switch {
	case p.OrgID == "":
		return p, invalidField("org", "a reservation needs an org")
	case p.Request == p.Call:
		return p, invalid("a reservation is a request or a call")
	case p.TTL <= 0:
		return p, invalid("a reservation needs a positive TTL")
	case p.Tokens < 0:
		return p, invalidField("tokens", "must not be negative")
	case p.USD != nil && (*p.USD < 0 || math.IsNaN(*p.USD) || math.IsInf(*p.USD, 0)):
		return p, invalidField("usd", "must be a non-negative amount")
	}
	for _, f := range []struct{ name, v string }{{"org", p.OrgID}, {"token", p.TokenID}, {"job", p.JobID}} {
		if err := checkText(f.name, f.v); err != nil {
			return p, err
		}
	}
	p.ClaimedAt = p.ClaimedAt.UTC().Truncate(time.Microsecond)
	return p, nil
}

// ReserveReader is what a reservation's check reads: the usage ledger and
// the open reservations. Store is one (reading outside any reservation);
// Reserve passes one that reads under its lock.
type ReserveReader interface {
	Usage(ctx context.Context, p UsageParams) ([]UsageBucket, error)
	Reserved(ctx context.Context, p ReservedParams) (Reserved, error)
}

// ReservedParams names whose open reservations to sum.
type ReservedParams struct {
	Scope   LimitScope
	Subject string // the org ID or token ID
}

// Reserved sums the open reservations of an org or a token at the store's
// time.
type Reserved struct {
	// Requests counts the requests reserved in the last minute;
	// NextExpiry is when the first of them stops counting (zero when
	// there is none).
	Requests   int
	NextExpiry time.Time
	// Calls counts the calls in flight (a job's, while its claim holds);
	// Tokens and CostUSD sum their
	// estimates, and UnknownCost counts those whose cost was not
	// estimable (CostUSD leaves them out).
	Calls, UnknownCost int
	Tokens             int64
	CostUSD            float64
}
