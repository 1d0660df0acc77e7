package promptkit

import (
	"encoding/json"
	"errors"
	"time"
)

// RunResult is a completed run. A run whose output failed validation after
// the repair budget is still a RunResult (Validation.Status "invalid"), not
// an error.
type RunResult struct {
	// RunID identifies this run; unique, time-ordered (UUIDv7).
	RunID         string `json:"run_id"`
	PromptID      string `json:"prompt_id,omitempty"`
	PromptVersion string `json:"prompt_version,omitempty"`
	ProfileID     string `json:"profile_id"`
	BackendID     string `json:"backend_id,omitempty"`
	// Model is the model the provider reported, else the one requested.
	Model string `json:"model"`
	// PromptHash identifies the rendered initial request (see PreparedRun).
	PromptHash string `json:"prompt_hash"`
	// Text is the final generation's text.
	Text string `json:"text"`
	// Output is the parsed JSON output when the prompt has an output schema
	// and the output is valid; nil otherwise.
	Output     json.RawMessage `json:"output,omitempty"`
	Validation Validation      `json:"validation"`
	// Usage sums the token counts of every generation attempt, repairs
	// included, and says which counts the provider reported (on at least
	// one attempt); an unreported count is unknown, not zero, and is null
	// in JSON.
	Usage Usage `json:"usage"`
	// Attempts counts provider calls actually made.
	Attempts int `json:"attempts"`
	// RepairCalls counts repair generations that made a provider call.
	RepairCalls int     `json:"repair_calls"`
	Timings     Timings `json:"timings"`
}

// DecodeOutput unmarshals Output into v. It fails when there is no valid
// output.
func (r *RunResult) DecodeOutput(v any) error {
	if r == nil || len(r.Output) == 0 {
		return errors.New("promptkit: run has no valid JSON output")
	}
	return json.Unmarshal(r.Output, v)
}

// ValidationStatus is the outcome of output validation.
type ValidationStatus string

const (
	// ValidationValid: the output satisfied the prompt's output schema.
	ValidationValid ValidationStatus = "valid"
	// ValidationInvalid: the output still failed after the repair budget.
	ValidationInvalid ValidationStatus = "invalid"
	// ValidationSkipped: the prompt has no output schema or the profile
	// turned validation off.
	ValidationSkipped ValidationStatus = "skipped"
)

// Validation reports output validation.
type Validation struct {
	Status ValidationStatus `json:"status"`
	// Errors are the validator's diagnostics for the final output when it
	// is invalid. They may quote the model's output.
	Errors []string `json:"errors,omitempty"`
}

// Timings break a run's wall time into phases.
type Timings struct {
	// Admission is the wait for logical admission (MaxConcurrentRuns).
	Admission time.Duration `json:"admission_ns"`
	// CapacityWait sums waits for backend permits (MaxActive).
	CapacityWait time.Duration `json:"capacity_wait_ns"`
	// Generation sums dispatched attempts, from dispatch to decoded response.
	Generation time.Duration `json:"generation_ns"`
	// Total is the whole run.
	Total time.Duration `json:"total_ns"`
}
