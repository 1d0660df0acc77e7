package main

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// TestRun runs the example end to end. It waits through one real default
// backoff (at most 0.5 s) after the scripted 429: the example deliberately
// uses no test seams.
func TestRun(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var out bytes.Buffer
	if err := run(ctx, &out); err != nil {
		t.Fatalf("run: %v", err)
	}

	var sum Summary
	if err := json.Unmarshal(out.Bytes(), &sum); err != nil {
		t.Fatalf("output is not the summary JSON: %v\n%s", err, out.Bytes())
	}
	if len(sum.Runs) != 2 {
		t.Fatalf("got %d runs, want 2", len(sum.Runs))
	}
	prop, assess := sum.Runs[0], sum.Runs[1]

	check := func(name string, got, want any) {
		t.Helper()
		if got != want {
			t.Errorf("%s = %v, want %v", name, got, want)
		}
	}
	check("proposal prompt", prop.PromptID, "propose")
	check("proposal profile", prop.ProfileID, "proposer")
	check("proposal backend", prop.BackendID, "shared")
	check("proposal attempts", prop.Attempts, uint64(2))
	check("proposal transient_retries", prop.TransientRetries, uint64(1))
	check("proposal repair_calls", prop.RepairCalls, uint64(0))
	check("proposal outcome", prop.FinishedOutcome, "success")
	check("proposal validation", prop.Validation, "valid")
	check("proposal started events", prop.Events["started"], 1)
	check("proposal attempt events", prop.Events["attempt"], 2)
	check("proposal retry_delay events", prop.Events["retry_delay"], 1)
	check("proposal finished events", prop.Events["finished"], 1)
	if len(prop.AttemptLog) == 2 {
		check("first attempt status", prop.AttemptLog[0].Status, 429)
		check("first attempt failure", prop.AttemptLog[0].Failure, "provider_status")
		check("second attempt outcome", prop.AttemptLog[1].Outcome, "success")
	} else {
		t.Errorf("proposal attempt_log has %d entries, want 2", len(prop.AttemptLog))
	}
	// The 429 reported no usage, so counts are known but not complete.
	check("proposal prompt_tokens", prop.Usage.PromptTokens, UsageSummary{Value: 120, Known: true, Complete: false})
	check("proposal cached_tokens", prop.Usage.CachedTokens, UsageSummary{})

	check("assessment prompt", assess.PromptID, "assess")
	check("assessment profile", assess.ProfileID, "assessor")
	check("assessment backend", assess.BackendID, "shared")
	check("assessment attempts", assess.Attempts, uint64(1))
	check("assessment transient_retries", assess.TransientRetries, uint64(0))
	check("assessment outcome", assess.FinishedOutcome, "success")
	check("assessment retry_delay events", assess.Events["retry_delay"], 0)
	check("assessment prompt_tokens", assess.Usage.PromptTokens, UsageSummary{Value: 90, Known: true, Complete: true})

	check("assessment decision", sum.Assessment, "accepted")
	check("provider requests", sum.ProviderRequests, 3)

	// Metadata only: nothing of the prompts, the outputs or the provider's
	// error text.
	for _, secret := range []string{"quarterly", "Ship the report", "Review needs an owner", "rate limited", "provider.invalid"} {
		if strings.Contains(out.String(), secret) {
			t.Errorf("output contains %q", secret)
		}
	}
}
