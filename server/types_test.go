package server

import (
	"github.com/promptkit/promptkit/internal/openaiapi"
	"github.com/promptkit/promptkit/server/internal/auth"
	"github.com/promptkit/promptkit/server/internal/events"
	"github.com/promptkit/promptkit/server/internal/frontdoor"
	"github.com/promptkit/promptkit/server/internal/page"
	"github.com/promptkit/promptkit/server/internal/rest"
)

// The API's answer shapes, as the tests decode them.
type (
	submitted    = rest.Submitted
	promptView   = rest.PromptView
	promptState  = rest.PromptState
	answerView   = rest.AnswerView
	jobView      = rest.JobView
	promptList   = rest.PromptList
	recent       = rest.RecentPage
	retryRequest = rest.RetryRequest
	profileList  = rest.ProfileList
	usagePage    = rest.UsagePage
	modelList    = frontdoor.ModelList
	stateChanged = events.StateChanged
	ticketAnswer = auth.TicketAnswer
)

// apiError is promptkit's error body, as the API documents it.
type apiError struct {
	Error errorBody `json:"error"`
}

type errorBody struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// The headers of POST /v1/chat/completions, as docs/openai.md names them.
const (
	headerPromptID    = "X-Promptkit-Prompt-Id"
	headerJobID       = "X-Promptkit-Job-Id"
	headerPriority    = "X-Promptkit-Priority"
	headerMaxAttempts = "X-Promptkit-Max-Attempts"
)

// pagePatterns are the page's routes, which openapi.json does not
// describe.
var pagePatterns = []string{page.IndexPattern, page.DashboardPattern, page.AssetPattern}

func batchID(b openaiapi.Batch) string { return b.ID }
