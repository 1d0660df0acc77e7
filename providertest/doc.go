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
// answers POST requests to any path ending in /chat/completions or
// /embeddings, and GET requests to paths ending in /models or
// /models/{id}, so both
// http://host/v1 and http://host work as base URLs. Other paths get 404 and
// other methods 405. Errors have OpenAI's shape:
//
//	{"error":{"message":"...","type":"invalid_request_error","param":"n","code":"integer_above_max_value"}}
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
//   - with response_format type json_object, {"reply":"..."}, or, when
//     it carries a "schema" (as instructor's JSON_SCHEMA mode sends it
//     and vLLM honours it), a document valid against that schema;
//   - when the request offers function tools and its last message is not a
//     tool's result (and tool_choice is not "none"), a call (finish_reason
//     "tool_calls", content null) of the tool tool_choice names, else of
//     the first tool, with arguments generated from the tool's parameters
//     schema as for json_schema;
//   - otherwise the text "Fake provider reply: " (or the [WithReplyPrefix]
//     prefix) followed by the first words of the last user message, or of
//     the last tool result when tool results end the conversation.
//
// Default replies report usage computed from whitespace word counts. A
// request that is not a JSON object with a model and messages gets a 400.
// So does one asking for what the fake cannot do, rather than an answer
// that silently ignores it: "n" greater than [MaxChoices], tools other
// than function tools, "tool_choice" without "tools", the deprecated
// "functions" and "function_call", "audio" or the audio modality, and
// content parts other than text (image_url, input_audio, file, ...); with
// "logprobs": true, a "top_logprobs" that is not an integer from 0 to
// [MaxTopLogprobs]. "param" names the offending field. Everything else a
// chat request may carry is accepted and ignored: OpenAI's temperature,
// max_tokens, stop, seed, parallel_tool_calls, presence_penalty,
// logit_bias, service_tier, prompt_cache_key, ..., vLLM's top_k, min_p,
// repetition_penalty, guided_json, chat_template_kwargs, ..., and any
// other top-level or message field (a message's "name", an earlier
// assistant turn's "reasoning_content"). Scripted replies are sent
// whatever the body holds; [CallTool] scripts an answer that calls a
// tool, and [Response.MoreChoices] one with several choices.
//
// # Choices, log probabilities and reasoning
//
// A request with "n" from 2 to [MaxChoices] gets that many default
// choices, "index" 0 to n-1, each with its own finish_reason. Choice i
// (i ≥ 1) is choice 0 with " (choice i)" appended to its text and its
// reasoning; a tool call is made in every choice, as call "call_<i+1>";
// a json_schema document (or a json_object's schema document) is the same
// in every choice, and a plain json_object's {"reply"} differs like text.
// Usage counts the completion words of every choice.
//
// With "logprobs": true (and "top_logprobs" k, default 0) every choice
// carries OpenAI's object, one entry per word of its content (the word
// with the whitespace after it, so the tokens join back to the content):
//
//	"logprobs":{"content":[{"token":"Fake ","logprob":-0.1,"bytes":[70,97,107,101,32],
//	  "top_logprobs":[{"token":"Fake ","logprob":-0.1,"bytes":[...]},{"token":"alt1","logprob":-1.1,"bytes":[...]}]}, ...]}
//
// The j-th entry (from 0) has logprob -(j mod 10 + 1)/10; its k
// top_logprobs are the token itself and then "alt1", "alt2", ..., each 1
// less likely than the one before. Scripted replies get them as well,
// computed from their text. A choice without log probabilities says
// "logprobs": null, as OpenAI's do, in answers that use logprobs,
// several choices or reasoning; answers that use none of these have no
// "logprobs" key, as they always had.
//
// [WithReasoning] makes the fake a reasoning model as vLLM serves one
// with a reasoning parser (DeepSeek-R1, Qwen3): each default choice
// carries "Thinking about: " and the first words of the last user message
// as message.reasoning_content beside its content, the answer carries
// "system_fingerprint": "fp_providertest", and its computed usage counts
// the reasoning words in completion_tokens and reports them in
// completion_tokens_details.reasoning_tokens, with half the prompt
// tokens, rounded down, in prompt_tokens_details.cached_tokens:
//
//	{"id":"chatcmpl-1","object":"chat.completion","created":...,"model":"m","system_fingerprint":"fp_providertest",
//	 "choices":[{"index":0,"message":{"role":"assistant","reasoning_content":"Thinking about: hello there",
//	   "content":"Fake provider reply: hello there"},"logprobs":null,"finish_reason":"stop"}],
//	 "usage":{"prompt_tokens":2,"completion_tokens":9,"total_tokens":11,
//	   "prompt_tokens_details":{"cached_tokens":1},"completion_tokens_details":{"reasoning_tokens":4}}}
//
// A request's own switch wins over the option, as on vLLM: any string
// "reasoning_effort" or "chat_template_kwargs": {"enable_thinking": true}
// turns reasoning on, and {"enable_thinking": false} turns it off (also
// when reasoning_effort is set). Without reasoning the answer is exactly
// what it would be without the option. [Response.Reasoning] scripts
// reasoning, with the same fingerprint and usage.
//
// # Failing
//
// [WithStatus] makes every chat-completions and embeddings request,
// whatever it holds, answer one status (400 to 599) with OpenAI's error
// body and "code": null, for testing a client against a backend that is
// down; for 503:
//
//	{"error":{"message":"The server is overloaded (providertest --status).","type":"server_error","param":null,"code":null}}
//
// The script stays queued and the limiters are not consulted; models
// requests are answered as usual.
//
// # Streaming
//
// A request with "stream": true gets its generated 2xx reply (scripted or
// default) as OpenAI streams it: Content-Type text/event-stream and one
// "data: {chat.completion.chunk}" event per chunk, flushed as written — a
// first chunk with delta.role "assistant" (and content ""), with reasoning
// delta.reasoning_content chunks of about one word each, content deltas
// of about one word each, for each tool call a delta.tool_calls chunk
// with its id, type and name and two with pieces of its arguments, a chunk
// with an empty delta and finish_reason "stop" ("tool_calls" when it
// calls tools), then, when stream_options.include_usage is true, a chunk
// with empty "choices" and the "usage" (the others then carry "usage":
// null), and finally "data: [DONE]". Every chunk holds one choice; with
// several, each choice has its own such sequence, carrying its "index",
// and the sequences interleave: the first chunk of choice 0, of choice 1,
// ..., then the second of each, and so on. With logprobs each content
// chunk's choice carries "logprobs": {"content": [the entry of its
// piece]} and the other chunks "logprobs": null; with reasoning every
// chunk carries the "system_fingerprint". Error statuses, rate-limit answers, 400s and raw
// [Response.Body] replies are sent as they are to any request, so a
// streaming client sees the same JSON error it would otherwise. Latency,
// delays and holds all pass before the first byte of a stream is written.
//
// # Embeddings
//
// POST /embeddings takes OpenAI's request: "model", "input" (a string, an
// array of strings, a token array or an array of token arrays; at most
// 2048, none empty), "dimensions" (1 to [MaxEmbeddingDimensions]) and
// "encoding_format" ("float" or "base64"); anything else is a 400 naming
// the parameter, as OpenAI's. The default responder answers OpenAI's list
// ({"object":"list","data":[{"object":"embedding","index","embedding"}],
// "model","usage":{"prompt_tokens","total_tokens"}}) with, per input,
// [EmbeddingFor] its text and the dimensions asked for
// ([DefaultEmbeddingDimensions] otherwise): deterministic unit vectors, as
// JSON numbers or, with "encoding_format": "base64", base64 of their
// little-endian float32 values. Usage counts the inputs' words.
//
// Embeddings requests share the script and the limiters with chat
// requests: a queued [Response] answers whichever comes next, with its
// Status, Header, Body, Usage (only prompt_tokens and total_tokens exist
// here), Delay and Hold; its Text is not used, and [MissingChoices]
// leaves out "data". The rate and token limits count them (a request
// costs its inputs' words), and 429s carry Retry-After as for chat.
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
