package jobs_test

import (
	"errors"
	"testing"

	"github.com/promptkit/promptkit/jobs"
)

// Normalize accepts every field on an org, and on a token everything but
// a share and a concurrency limit, returning the limit unchanged.
func TestLimitNormalizeAccepts(t *testing.T) {
	for _, l := range []jobs.Limit{
		{Scope: jobs.LimitOrg, Subject: "acme"},
		{Scope: jobs.LimitOrg, Subject: "acme", RequestsPerMinute: 1, TokensPerMinute: 2, MaxRunning: 3,
			DailyUSD: 0.5, MonthlyUSD: 10, Weight: jobs.MaxWeight},
		{Scope: jobs.LimitToken, Subject: "tok", RequestsPerMinute: 60, TokensPerMinute: 1000, DailyUSD: 1, MonthlyUSD: 2},
	} {
		got, err := l.Normalize()
		if err != nil || got != l {
			t.Errorf("Normalize(%+v) = %+v, %v", l, got, err)
		}
	}
}

// A refusal is ErrInvalid naming the field.
func TestLimitNormalizeNamesField(t *testing.T) {
	_, err := jobs.Limit{Scope: jobs.LimitToken, Subject: "tok", Weight: 2}.Normalize()
	var ie *jobs.InvalidError
	if !errors.Is(err, jobs.ErrInvalid) || !errors.As(err, &ie) || ie.Field != "weight" {
		t.Errorf("a token's weight: %v", err)
	}
}
