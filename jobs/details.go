package jobs

import (
	"context"
	"fmt"
	"time"

	"github.com/promptkit/promptkit/pktype"
)

// JobDetails is everything stored about one job: the job, its prompt, the
// prompt's every job (its retry history), the job's events, its answer and
// what its provider calls cost. `promptkit jobs show` prints it and the
// operator dashboard shows it.
type JobDetails struct {
	Job      Job       `json:"job"`
	Prompt   Prompt    `json:"prompt"`
	History  []Job     `json:"history"`
	Events   []Event   `json:"events"`
	Response *Response `json:"response,omitempty"`
	// Cost sums the job's provider calls (JobCost); null when any call's
	// cost is unknown.
	Cost pktype.Cost `json:"cost_usd"`
}

// LoadJobDetails reads a job's details from st, scoped to orgID (empty:
// any org). ErrNotFound when the job does not exist there.
func LoadJobDetails(ctx context.Context, st Store, orgID, jobID string) (JobDetails, error) {
	var d JobDetails
	var err error
	if d.Job, err = st.GetJob(ctx, orgID, jobID); err != nil {
		return d, fmt.Errorf("job %s: %w", jobID, err)
	}
	if d.Prompt, err = st.GetPrompt(ctx, orgID, d.Job.PromptID); err != nil {
		return d, err
	}
	if d.History, err = st.PromptJobs(ctx, orgID, d.Job.PromptID); err != nil {
		return d, err
	}
	if d.Events, err = st.JobEvents(ctx, orgID, jobID); err != nil {
		return d, err
	}
	d.Cost = JobCost(d.Events)
	if d.Job.ResponseID != "" {
		r, err := st.GetResponse(ctx, orgID, d.Job.ResponseID)
		if err != nil {
			return d, err
		}
		d.Response = &r
	}
	return d, nil
}

// AttemptStep is one execution attempt on a job's timeline: its attempt
// event, with when it started and ended and how long the job waited
// before it.
type AttemptStep struct {
	AttemptEvent
	// StartedAt is when the attempt began waiting for capacity: its event's
	// time less its capacity wait and generation time.
	StartedAt time.Time `json:"started_at"`
	// EndedAt is its event's time.
	EndedAt time.Time `json:"ended_at"`
	// WaitBeforeMS is the time between the job's previous event (its
	// claim, or the attempt before: a retry's delay) and StartedAt.
	WaitBeforeMS int64 `json:"wait_before_ms"`
}

// Timeline returns the job's attempts in order, each placed in time. An
// attempt event that does not decode is left out.
func Timeline(events []Event) []AttemptStep {
	out := []AttemptStep{}
	var prev time.Time
	for _, ev := range events {
		if ev.Type != EventAttempt {
			prev = ev.At
			continue
		}
		e, err := DecodeAttemptEvent(ev.Data)
		if err != nil {
			continue
		}
		s := AttemptStep{AttemptEvent: e, EndedAt: ev.At,
			StartedAt: ev.At.Add(-time.Duration(e.CapacityWaitMS+e.GenerationMS) * time.Millisecond)}
		if !prev.IsZero() && s.StartedAt.After(prev) {
			s.WaitBeforeMS = s.StartedAt.Sub(prev).Milliseconds()
		}
		prev = ev.At
		out = append(out, s)
	}
	return out
}
