package httpapi

import (
	"net/http"
	"strconv"
)

// The headers naming the prompt and job a request queued or found, on
// the answers of POST /v1/chat/completions and POST /v1/prompts once the
// request is queued.
const (
	HeaderPromptID = "X-Promptkit-Prompt-Id"
	HeaderJobID    = "X-Promptkit-Job-Id"
	// HeaderEarlyHints asks a request that waits for its job to send the
	// two ids at once, in a 103 Early Hints (see EarlyHints).
	HeaderEarlyHints = "X-Promptkit-Early-Hints"
)

// SetIDs sets the id headers of the answer.
func SetIDs(w http.ResponseWriter, promptID, jobID string) {
	w.Header().Set(HeaderPromptID, promptID)
	w.Header().Set(HeaderJobID, jobID)
}

// EarlyHints, before a wait for a job, sends the headers set so far (the
// ids: SetIDs) at once in a 103 Early Hints informational response, when
// the request asked for it with X-Promptkit-Early-Hints: 1 (or true) and
// speaks HTTP/1.1 or later. A client that gives up waiting then still
// knows what to fetch (GET /v1/prompts/{id}); the final answer repeats
// them. The final status depends on how the job ends, so the ids cannot
// be sent early as its headers; and only on request, because a client
// must skip a 1xx it does not expect, but Python's http.client (under
// requests, urllib3 and urllib) takes a 103 for the answer.
func EarlyHints(w http.ResponseWriter, r *http.Request) {
	if ok, _ := strconv.ParseBool(r.Header.Get(HeaderEarlyHints)); ok && r.ProtoAtLeast(1, 1) {
		w.WriteHeader(http.StatusEarlyHints) // net/http flushes it at once
	}
}
