// Package httpapi is the one HTTP pipeline under every route of the
// server: reading and decoding a body, the Idempotency-Key and query
// parameters every API shares, one classification of failures into a
// Problem (status, kind, code, message) and the Dialect that encodes it
// in an API's shape — promptkit's {"error": {"code", "message"}} here,
// OpenAI's error object by openaiapi.ErrorFor — and the Server-Sent
// Events writer. Handlers return errors; Dialect.Handler
// writes them in the shape of the handler's API, so a route family
// differs from another only in its dialect.
//
// Nothing here quotes a request body, a prompt or provider text: messages
// name parameters, offsets and limits.
package httpapi

import (
	"encoding/json"
	"math"
	"net/http"
	"strconv"
	"time"
)

// WriteJSON answers status with v as JSON.
func WriteJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v) // a failed write is the client's disconnect
}

// RetryAfter formats a delay as Retry-After's whole seconds, rounded up,
// at least 1.
func RetryAfter(d time.Duration) string {
	return strconv.Itoa(max(1, int(math.Ceil(d.Seconds()))))
}

// NonNil is s, or an empty slice for nil (a JSON [] rather than null).
func NonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}
