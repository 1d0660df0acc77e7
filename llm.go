package promptkit

import (
	"context"

	"github.com/promptkit/promptkit/pktype"
)

// LLMClient generates one chat completion. Set Config.LLMClient to replace
// the built-in OpenAI-compatible HTTP client, for example to call an SDK or
// a fake in tests.
//
// The engine calls Generate once per attempt and never retries an injected
// client automatically: its own policy owns retries. Generate may be called
// concurrently from many runs, bounded by the backends' MaxActive permits.
// A nil response with a nil error is treated as a malformed response. A
// client may return a *GenerationError (pktype.NewGenerationError) for a
// provider status, so that callers can see it.
type LLMClient interface {
	Generate(ctx context.Context, req GenerateRequest) (*GenerateResponse, error)
}

// Requests, their sampling parameters, responses and usage are pktype's.
type (
	Message          = pktype.Message
	Sampling         = pktype.Sampling
	GenerateRequest  = pktype.GenerateRequest
	GenerateResponse = pktype.GenerateResponse
	Choice           = pktype.Choice
	// Params are extra request parameters sent as given (Sampling.Extra).
	Params             = pktype.Params
	TokenUsage         = pktype.TokenUsage
	TokenUsagePresence = pktype.TokenUsagePresence
	Usage              = pktype.Usage
	// Prices and costs (Config.Prices, RunResult.Cost).
	Price        = pktype.Price
	Cost         = pktype.Cost
	CallEstimate = pktype.CallEstimate
	ToolUse      = pktype.ToolUse
	Tool         = pktype.Tool
	ToolFunction = pktype.ToolFunction
	ToolChoice   = pktype.ToolChoice
	ToolCall     = pktype.ToolCall
	FunctionCall = pktype.FunctionCall
	// A streamed answer's pieces (RunRequest.OnDelta).
	StreamDelta   = pktype.StreamDelta
	ToolCallDelta = pktype.ToolCallDelta
)

// Chat roles.
const (
	RoleSystem    = pktype.RoleSystem
	RoleUser      = pktype.RoleUser
	RoleAssistant = pktype.RoleAssistant
	RoleTool      = pktype.RoleTool
)
