package jobs

import "time"

// UsageGroup is a dimension Usage groups its buckets by.
type UsageGroup string

// UsageParams selects the usage ledger's entries Usage sums.
type UsageParams struct {
	OrgID, UserID, TokenID, Model, Backend string
	From, To                               time.Time
	GroupBy                                []UsageGroup
}

// UsageBucket is the usage of one group of ledger entries.
type UsageBucket struct {
	Day                                          time.Time
	OrgID, UserID, TokenID, Model, Backend       string
	Requests                                     int64
	InputTokens, OutputTokens, CachedInputTokens int64
	UnknownUsage                                 int64
	CostUSD                                      float64
	UnknownCost                                  int64
}
