package promptkit

import (
	"encoding/json"
	"errors"
	"fmt"
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
	// BackendID is the backend that answered the final generation: with
	// a model group (Profile.Backends), the one its last attempt chose.
	BackendID string `json:"backend_id,omitempty"`
	// Model is the model the provider reported, else the one requested
	// (with a model group, the answering backend's name for it).
	Model string `json:"model"`
	// PromptHash identifies the rendered initial request (see PreparedRun).
	PromptHash string `json:"prompt_hash"`
	// Text is the final generation's text (its first choice's).
	Text string `json:"text"`
	// Reasoning is the final generation's reasoning, when the backend sent
	// it apart from the text (reasoning_content: vLLM's and SGLang's
	// reasoning parsers, DeepSeek, Qwen3).
	Reasoning string `json:"reasoning,omitempty"`
	// Choices are the final generation's choices when the request asked
	// for several (an extra parameter n above 1); Text, Reasoning,
	// ToolCalls and FinishReason are the first's. Each is checked like
	// Text.
	Choices []Choice `json:"choices,omitempty"`
	// Raw is the final generation's answer as the backend sent it (see
	// GenerateResponse.Raw): with what promptkit does not model, such as
	// logprobs or system_fingerprint. Nil from an injected client.
	Raw json.RawMessage `json:"raw,omitempty"`
	// ToolCalls are the final generation's tool calls, when the model
	// called tools (see RunRequest.ToolUse); Text may then be empty.
	ToolCalls []ToolCall `json:"tool_calls,omitempty"`
	// FinishReason is the final generation's finish_reason as the provider
	// reported it ("stop", "length", ...); empty when it sent none.
	FinishReason string `json:"finish_reason,omitempty"`
	// Truncated reports that the final generation was cut off by its
	// token limit (finish_reason "length"): the profile's max_tokens, or
	// what is left of the model's context. A truncated output that fails
	// the output schema is not repaired, since a repair has the same limit;
	// Validation.Errors then says so first.
	Truncated bool `json:"truncated"`
	// Output is the parsed JSON output when the run checks its output (a
	// prompt's or the request's output schema, or RunRequest.JSONObject)
	// and the output is valid; nil otherwise.
	Output     json.RawMessage `json:"output,omitempty"`
	Validation Validation      `json:"validation"`
	// Usage sums the token counts of every generation attempt, repairs
	// included, and says which counts the provider reported (on at least
	// one attempt); an unreported count is unknown, not zero, and is null
	// in JSON.
	Usage Usage `json:"usage"`
	// Cost is what the run's provider calls cost by Config.Prices, repairs
	// and retries included: known only when every dispatched attempt's
	// cost is (its model has a price and the provider reported its
	// usage); null in JSON when unknown. A run that dispatched nothing
	// costs a known zero.
	Cost Cost `json:"cost_usd"`
	// Attempts counts provider calls actually made.
	Attempts int `json:"attempts"`
	// RepairCalls counts repair generations that made a provider call.
	RepairCalls int     `json:"repair_calls"`
	Timings     Timings `json:"timings"`
}

// OutputProblem says, in one fixed sentence that never quotes the output,
// what is wrong with the run's output: that it fails the output schema
// (Validation.Status "invalid"), that it was cut off (Truncated), or
// both. It is "" when the output is as asked. The job service stores it
// as a failed job's message; the CLI prints it.
func (r *RunResult) OutputProblem() string {
	if r == nil {
		return ""
	}
	invalid := r.Validation.Status == ValidationInvalid
	// An ad-hoc request asked for a schema of its own or a JSON object.
	format := "the requested output format"
	if r.PromptID != "" {
		format = "the prompt's output schema"
	}
	switch {
	case invalid && r.Truncated:
		return fmt.Sprintf("output was cut off at the token limit (finish_reason %q) and does not satisfy %s "+
			"(a repair would be cut off too): raise the profile's max_tokens", r.FinishReason, format)
	case invalid && r.RepairCalls > 0:
		return fmt.Sprintf("output does not satisfy %s after %d repair generation(s)", format, r.RepairCalls)
	case invalid:
		return "output does not satisfy " + format
	case r.Truncated:
		return fmt.Sprintf("output was cut off at the token limit (finish_reason %q): raise the profile's max_tokens", r.FinishReason)
	}
	return ""
}

// truncated reports whether a finish reason means the token limit cut the
// generation off: OpenAI's "length", or "max_tokens" from servers that
// pass Anthropic's reason through.
func truncated(finishReason string) bool {
	return finishReason == "length" || finishReason == "max_tokens"
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
	// ValidationValid: the output satisfied the output schema (the
	// prompt's or the request's), or was the JSON object asked for.
	ValidationValid ValidationStatus = "valid"
	// ValidationInvalid: the output still failed after the repair budget.
	ValidationInvalid ValidationStatus = "invalid"
	// ValidationSkipped: the run has no output schema and asks for no JSON
	// object, or the profile turned validation off.
	ValidationSkipped ValidationStatus = "skipped"
)

// Validation reports output validation.
type Validation struct {
	Status ValidationStatus `json:"status"`
	// Errors are the validator's diagnostics for the final output when it
	// is invalid. They may quote the model's output. When the output was
	// cut off (RunResult.Truncated), the first says so and whether a
	// repair was skipped because of it.
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
