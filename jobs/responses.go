package jobs

import (
	"maps"
	"slices"
)

// ResponsesRequest is what a request made through OpenAI's Responses API
// (POST /v1/responses) keeps beside its conversation: what the response
// object echoes, and what a later request continuing it
// (previous_response_id) or listing its input needs. The conversation
// itself (instructions, the continued response's turns and this request's
// input) is the ChatRequest's Messages, so a worker runs it like any chat
// request.
type ResponsesRequest struct {
	// Model is the model the request named (the prompt's Profile and
	// ExecutionOptions are what it resolved to).
	Model string `json:"model"`
	// Instructions, when set, is Messages[0], a system message: a request
	// continuing this one leaves it out, as OpenAI does.
	Instructions *string `json:"instructions,omitempty"`
	// InputStart is the index in Messages of this request's own input
	// (after the instructions and the continued response's turns).
	InputStart int `json:"input_start"`
	// PreviousResponseID is the response this one continues ("resp_…").
	PreviousResponseID string `json:"previous_response_id,omitempty"`
	// Background: the request was answered at once and runs on its own.
	Background bool `json:"background,omitempty"`
	// Store is the request's store flag as sent (promptkit stores every
	// request whatever it says).
	Store *bool `json:"store,omitempty"`
	// User is the request's user field, echoed only.
	User string `json:"user,omitempty"`
	// Strict is text.format.strict as sent with a json_schema format.
	Strict *bool `json:"strict,omitempty"`
}

// check refuses what no store may hold in a Responses request: a NUL in
// its strings or in the chat's metadata, or an input start outside the
// conversation.
func (r *ResponsesRequest) check(c ChatRequest) error {
	for _, k := range slices.Sorted(maps.Keys(c.Metadata)) {
		if err := checkText("metadata", k+c.Metadata[k]); err != nil {
			return err
		}
	}
	if r == nil {
		return nil
	}
	for _, f := range []struct{ name, v string }{
		{"model", r.Model}, {"previous_response_id", r.PreviousResponseID}, {"user", r.User},
	} {
		if err := checkText(f.name, f.v); err != nil {
			return err
		}
	}
	if r.Instructions != nil {
		if err := checkText("instructions", *r.Instructions); err != nil {
			return err
		}
	}
	if r.InputStart < 0 || r.InputStart > len(c.Messages) {
		return invalid("chat: responses.input_start %d is outside the %d messages", r.InputStart, len(c.Messages))
	}
	return nil
}
