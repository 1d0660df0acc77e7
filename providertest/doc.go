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
// answers POST requests to any path ending in /chat/completions, and GET
// requests to paths ending in /models or /models/{id}, so both
// http://host/v1 and http://host work as base URLs. Other paths get 404 and
// other methods 405. Errors have OpenAI's shape:
//
//	{"error":{"message":"...","type":"invalid_request_error","param":"n","code":"unsupported_value"}}
//
// with "param" null when no one parameter is at fault.
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
// So does one asking for what the fake cannot do, rather than an answer
// that silently ignores it: "n" greater than 1, "tools", "tool_choice",
// "functions", "function_call", "audio" or the audio modality, "logprobs":
// true, and content parts other than text (image_url, input_audio, file,
// ...); "param" names the offending field. Everything else a chat request
// may carry (temperature, max_tokens, stop, seed, ...) is accepted and
// ignored. Scripted replies are sent whatever the body holds.
//
// # Streaming
//
// A request with "stream": true gets its generated 2xx reply (scripted or
// default) as OpenAI streams it: Content-Type text/event-stream and one
// "data: {chat.completion.chunk}" event per chunk, flushed as written — a
// first chunk with delta.role "assistant", content deltas of about one word
// each, a chunk with an empty delta and finish_reason "stop", then, when
// stream_options.include_usage is true, a chunk with empty "choices" and
// the "usage" (the others then carry "usage": null), and finally
// "data: [DONE]". Error statuses, rate-limit answers, 400s and raw
// [Response.Body] replies are sent as they are to any request, so a
// streaming client sees the same JSON error it would otherwise. Latency,
// delays and holds all pass before the first byte of a stream is written.
//
// # Models
//
// GET /models answers OpenAI's list ({"object":"list","data":[{"id",
// "object":"model","created","owned_by"}]}) of the models named by
// [WithModel] and [WithModels], and GET /models/{id} describes one of them
// or answers 404 model_not_found. With neither option the fake serves any
// model a request names, so the list holds "providertest" and every id is
// described. Models requests are counted (Stats.Models) and recorded, but
// take no scripted reply, no rate-limit capacity and no latency.
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
// Retry-After header, and [WithTokenRateLimit] one on tokens per minute;
// [WithClock] makes them deterministic. [Handler.SetRateLimit] and
// [Handler.SetTokenRateLimit] move the limits in the middle of a run.
// [WithRateLimitHeaders] adds OpenAI's x-ratelimit-* headers to every
// chat answer, so clients can learn the limits. [WithLatency] and
// [Response.Delay] slow replies down; all waits end early when the request's
// context ends, so a client that gives up is not kept waiting.
//
// Every method is safe for concurrent use.
package providertest
