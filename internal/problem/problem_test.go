package problem_test

import (
	"strings"
	"testing"

	"github.com/promptkit/promptkit/internal/problem"
	"github.com/promptkit/promptkit/jobs"
)

// TestOfJob: one table classifies a job that ended without an answer,
// by its error kind; the message is the kind's description and the
// stored message, and the code the kind.
func TestOfJob(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		job    jobs.Job
		status int
		kind   problem.Kind
		code   string
	}{
		{jobs.Job{State: jobs.Failed, ErrorKind: jobs.KindRateLimit}, 429, problem.RateLimited, "rate_limit"},
		{jobs.Job{State: jobs.Failed, ErrorKind: jobs.KindBudgetExceeded}, 429, problem.BudgetSpent, "budget_exceeded"},
		{jobs.Job{State: jobs.Failed, ErrorKind: jobs.KindProvider4xx}, 400, "", "provider_4xx"},
		{jobs.Job{State: jobs.Failed, ErrorKind: jobs.KindTimeout}, 504, "", "timeout"},
		{jobs.Job{State: jobs.Failed, ErrorKind: jobs.KindTransport}, 502, "", "transport"},
		{jobs.Job{State: jobs.Failed}, 500, "", string(jobs.KindUnknown)},
		{jobs.Job{State: jobs.Cancelled}, 409, "", "cancelled"},
		{jobs.Job{State: jobs.Succeeded}, 500, "", ""},
	} {
		c.job.ErrorMessage = "status 418"
		f := problem.OfJob(c.job)
		if f.Status != c.status || f.Kind != c.kind || f.Code != c.code {
			t.Errorf("%s %s: %d %q %q, want %d %q %q", c.job.State, c.job.ErrorKind, f.Status, f.Kind, f.Code, c.status, c.kind, c.code)
		}
		if c.job.State == jobs.Failed && (!strings.HasPrefix(f.Message, "The request failed: ") || !strings.HasSuffix(f.Message, ". status 418")) {
			t.Errorf("%s: message %q", c.job.ErrorKind, f.Message)
		}
	}
}
