// Package providertest provides a fake OpenAI-compatible chat-completions
// provider for tests, in the spirit of net/http/httptest.
//
// A [Server] listens on a loopback address and exposes its base URL (ending
// in /v1) for use as a promptkit backend:
//
//	srv := providertest.NewServer()
//	defer srv.Close()
//	// point the client at srv.URL; POST srv.URL+"/chat/completions"
//
// A [Handler] is the same fake as a plain [net/http.Handler], for mounting
// in your own server (the promptkit fake-provider command does this). It
// answers POST requests to any path ending in /chat/completions, so both
// http://host/v1 and http://host work as base URLs. Other paths get 404 and
// other methods 405, each with an OpenAI-style JSON error body.
//
// # Replies
//
// Replies queued with [Handler.Enqueue] are consumed first-in first-out, one
// per request. [Reply], [Status], [Malformed] and [MissingChoices] build the
// common ones; [Response] fields control status, headers, body, usage,
// delays and holds. When the queue is empty a default responder answers:
//
//   - with response_format type json_schema, a JSON document valid against
//     the schema (a best-effort example generator covering the common
//     keywords: type, enum, const, properties, required, items, bounds,
//     lengths, formats, $ref, allOf, anyOf and oneOf);
//   - with response_format type json_object, {"reply":"..."};
//   - otherwise the text "Simulated reply: " followed by the first words of
//     the last user message.
//
// Default replies report usage computed from whitespace word counts. A
// request that is not a JSON object with a model and messages gets a 400.
//
// # Observing
//
// [Handler.Requests], [Handler.Count], [Handler.InFlight],
// [Handler.MaxInFlight] and [Handler.Stats] report what the fake saw.
// [Handler.WaitArrivals] blocks until a number of requests have arrived,
// so tests can synchronise with in-flight requests (for example ones kept
// waiting by [Response.Hold]) without sleeping. Bookkeeping for a request
// is complete before its response is written, so once a client has its
// response every counter already reflects it.
//
// # Limits and timing
//
// [WithRateLimit] turns on a fixed-window limiter that answers 429 with a
// Retry-After header; [WithClock] makes it deterministic. [WithLatency] and
// [Response.Delay] slow replies down; all waits end early when the request's
// context ends, so a client that gives up is not kept waiting.
//
// Every method is safe for concurrent use.
package providertest
