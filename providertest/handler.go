package providertest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/promptkit/promptkit/pktype"
)

// maxBody caps how much of a request body is read, so a runaway client
// cannot exhaust memory in a long-running fake.
const maxBody = 32 << 20

// summaryWords is how many words of the last user message the default
// plain-text reply repeats.
const summaryWords = 12

// errClosed reports that the Server was closed while a request waited.
var errClosed = errors.New("providertest: server closed")

// Option configures a Handler.
type Option func(*Handler)

// WithRateLimit allows at most perSecond chat-completions requests per
// one-second fixed window. A window opens at the first request after the
// previous window ended (per the WithClock clock) and admits perSecond
// requests; later ones get 429 with an OpenAI-style rate_limit_error body
// and a Retry-After header giving the whole seconds until the window ends,
// at least 1. Rejected requests do not use up capacity. Values of 0 or less disable
// the limiter. Defaults to 0 (no limit).
// [Handler.SetRateLimit] changes the limit later.
func WithRateLimit(perSecond int) Option {
	return func(h *Handler) { h.rateLimit = perSecond }
}

// WithTokenRateLimit allows at most perMinute tokens of chat-completions
// requests per one-minute fixed window, opened like WithRateLimit's. A
// request costs what OpenAI counts against the limit before answering:
// its prompt tokens (whitespace words of its messages, as the default
// usage counts them) plus its max_tokens (or max_completion_tokens; 0
// when it sets neither), whatever completion it then gets. A request that
// would take the window past perMinute gets the same 429 as the request
// limiter, with a Retry-After giving the whole seconds until the token
// window ends, at least 1. Only admitted requests use up tokens or
// request capacity. Values of 0 or less disable the limit. Defaults to 0;
// [Handler.SetTokenRateLimit] changes it later.
func WithTokenRateLimit(perMinute int) Option {
	return func(h *Handler) { h.tokenLimit = perMinute }
}

// WithRateLimitHeaders makes every chat-completions answer, 429s
// included, carry OpenAI's rate-limit headers as of the request's
// arrival: with a request limit, x-ratelimit-limit-requests (the limit
// per window), x-ratelimit-remaining-requests (what the window has left)
// and x-ratelimit-reset-requests (the time until the window ends, in
// OpenAI's duration format such as "1s" or "340ms", rounded up to the
// millisecond); with a token limit, the same three ending in -tokens.
// Headers of a scripted Response take precedence. Without this option no
// rate-limit header is sent.
func WithRateLimitHeaders() Option {
	return func(h *Handler) { h.rateHeaders = true }
}

// WithRetryAfter fixes the Retry-After value the rate limiter sends, for
// example "1" or a RetryAfterDate string. Defaults to the computed number
// of seconds until the window ends.
func WithRetryAfter(v string) Option {
	return func(h *Handler) { h.retryAfter = v }
}

// WithLatency delays every scripted and default reply by d, before any
// Response.Delay. The wait ends early when the request's context ends.
// Rate-limit and request-validation errors are not delayed. Defaults to 0.
func WithLatency(d time.Duration) Option {
	return func(h *Handler) { h.latency = d }
}

// WithClock sets the clock used for the rate-limit window, the "created"
// field of generated bodies and the Date header of every reply, so tests
// can resolve Retry-After dates against it. Defaults to time.Now.
func WithClock(now func() time.Time) Option {
	return func(h *Handler) { h.now = now }
}

// WithModel sets the model name reported in generated bodies, and makes
// it a model GET /models lists. Defaults to the request's model, or
// "providertest" when the request has none.
func WithModel(name string) Option {
	return func(h *Handler) { h.model = name }
}

// WithModels adds model names for GET /models to list and GET
// /models/{id} to describe, after any WithModel name; unlike WithModel it
// does not change the model generated bodies report. Chat requests for
// other models are still answered. Without WithModel or WithModels the
// list holds "providertest" and any id is described, since the fake then
// serves whatever model a request names. Defaults to none.
func WithModels(names ...string) Option {
	return func(h *Handler) { h.models = append(h.models, names...) }
}

// DefaultReplyPrefix starts the default responder's text replies, so a
// reader can tell an answer came from this fake and not from a model.
const DefaultReplyPrefix = "Fake provider reply: "

// WithReplyPrefix sets the text that starts the default responder's text
// replies, before the first words of the last message; programs embedding
// the fake use it to say where an answer came from. Defaults to
// DefaultReplyPrefix.
func WithReplyPrefix(prefix string) Option {
	return func(h *Handler) { h.replyPrefix = prefix; h.replyPrefixSet = true }
}

// WithReasoning makes the fake answer like a reasoning model served by
// vLLM with a reasoning parser (or DeepSeek's and Qwen3's APIs): every
// default reply carries reasoning (see Response.Reasoning), "Thinking
// about: " followed by the first words of the last user message, and
// usage reports its words as completion_tokens_details.reasoning_tokens
// and half the prompt tokens, rounded down, as
// prompt_tokens_details.cached_tokens. A request's own switch wins: vLLM's
// "chat_template_kwargs": {"enable_thinking": false} turns reasoning off,
// and {"enable_thinking": true} or any "reasoning_effort" turns it on
// without this option. Defaults to off.
func WithReasoning() Option {
	return func(h *Handler) { h.reasoning = true }
}

// WithStatus makes every chat-completions and embeddings request, in
// any order and whatever its body, answer the HTTP status code with
// OpenAI's error body, for example for 503
//
//	{"error":{"message":"The server is overloaded (providertest --status).","type":"server_error","param":null,"code":null}}
//
// with "type" as for Status replies (server_error for 5xx). It takes
// precedence over the script (which stays queued) and the rate limiters,
// waits for no latency, and is counted in Stats.Requests only; models
// requests are answered as usual. Codes outside 400 to 599 leave it off.
// Defaults to off.
func WithStatus(code int) Option {
	return func(h *Handler) {
		if code >= 400 && code <= 599 {
			h.failStatus = code
		}
	}
}

// WithMaxRecorded keeps only the n most recent requests for Requests, so a
// long-running fake does not grow without bound; Count and Stats still
// count every request. Values of 0 or less keep all. Defaults to 0.
func WithMaxRecorded(n int) Option {
	return func(h *Handler) { h.maxRecorded = n }
}

// Request is one request as the Handler received it.
type Request struct {
	// Method is the HTTP method.
	Method string
	// Path is the URL path.
	Path string
	// Header holds the request headers.
	Header http.Header
	// Body is the raw request body.
	Body []byte
	// Model is the body's "model", or "" when absent or not decodable.
	Model string
	// Messages are the body's "messages"; array content parts are joined
	// with newlines. Nil when absent or not decodable.
	Messages []Message
	// ResponseFormat is the body's raw "response_format", or nil.
	ResponseFormat json.RawMessage
	// Stream is the body's "stream": true when the request asked for a
	// server-sent event stream.
	Stream bool
	// Tools are the names of the function tools the request offered.
	Tools []string
	// Input holds an embeddings request's inputs: each text, or a token
	// array as its JSON. Nil for other requests or when not decodable.
	Input []string
}

// Message is one chat message of a Request.
type Message struct {
	// Role is the message role, such as "system" or "user".
	Role string
	// Content is the message text.
	Content string
	// ToolCalls are an assistant message's tool calls, and ToolCallID the
	// call a tool message answers.
	ToolCalls  []pktype.ToolCall
	ToolCallID string
}

// Stats counts what the Handler did.
type Stats struct {
	// Requests counts every request received, on any path.
	Requests int
	// RateLimited counts 429 replies sent by the WithRateLimit and
	// WithTokenRateLimit limiters.
	RateLimited int
	// TokenLimited counts the RateLimited replies the token limit caused.
	TokenLimited int
	// Scripted counts requests answered (or being answered) from the
	// Enqueue script.
	Scripted int
	// Defaults counts successful replies from the default responder.
	Defaults int
	// Rejected counts 400, 404 and 405 replies the Handler sent itself.
	Rejected int
	// Models counts successful answers to GET /models and /models/{id}.
	Models int
	// Canceled counts requests whose context ended while they waited.
	Canceled int
}

// Handler is the fake provider as an http.Handler. Create it with
// NewHandler; the zero value also works and uses every default.
type Handler struct {
	// Configuration, fixed once NewHandler returns.
	retryAfter  string
	rateHeaders bool
	latency     time.Duration
	now         func() time.Time
	model       string
	models      []string
	maxRecorded int
	// replyPrefix starts default text replies when replyPrefixSet.
	replyPrefix    string
	replyPrefixSet bool
	reasoning      bool // WithReasoning
	failStatus     int  // WithStatus; 0 for none

	mu          sync.Mutex
	script      []Response
	requests    []Request
	arrived     chan struct{} // closed and replaced on every arrival
	abort       chan struct{} // closed when the owning Server closes
	aborted     bool
	inFlight    int
	maxInFlight int
	stats       Stats
	nextID      int

	// Limiters: fixed windows of requests and of tokens.
	rateLimit   int
	windowStart time.Time
	windowCount int
	tokenLimit  int
	tokenStart  time.Time
	tokenUsed   int
}

// NewHandler returns a Handler configured by opts.
func NewHandler(opts ...Option) *Handler {
	h := &Handler{}
	for _, o := range opts {
		o(h)
	}
	return h
}

// Enqueue appends scripted replies. Each request takes the oldest queued
// reply; when none is queued the default responder answers. Scripted
// replies are sent whatever the request body holds.
func (h *Handler) Enqueue(rs ...Response) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.script = append(h.script, rs...)
}

// SetRateLimit changes the WithRateLimit limit to perSecond from the next
// request on; 0 or less turns it off. The current window keeps what it
// counted, so a lower limit may refuse the rest of the window.
func (h *Handler) SetRateLimit(perSecond int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.rateLimit = perSecond
}

// SetTokenRateLimit changes the WithTokenRateLimit limit to perMinute from
// the next request on; 0 or less turns it off. The current window keeps
// the tokens it counted.
func (h *Handler) SetTokenRateLimit(perMinute int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.tokenLimit = perMinute
}

// Pending returns how many scripted replies are still queued.
func (h *Handler) Pending() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.script)
}

// Requests returns copies of the recorded requests in arrival order.
func (h *Handler) Requests() []Request {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make([]Request, len(h.requests))
	for i, r := range h.requests {
		out[i] = r.clone()
	}
	return out
}

// Count returns how many requests have arrived.
func (h *Handler) Count() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.stats.Requests
}

// InFlight returns how many requests are inside ServeHTTP and have not yet
// been answered.
func (h *Handler) InFlight() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.inFlight
}

// MaxInFlight returns the highest InFlight value observed.
func (h *Handler) MaxInFlight() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.maxInFlight
}

// Stats returns a snapshot of the counters.
func (h *Handler) Stats() Stats {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.stats
}

// WaitArrivals blocks until at least n requests have arrived in total, or
// ctx ends, in which case it returns ctx.Err(). A request counts as arrived
// once it is recorded and included in InFlight, before any delay or hold,
// so after WaitArrivals returns a held request is visible to InFlight.
func (h *Handler) WaitArrivals(ctx context.Context, n int) error {
	for {
		h.mu.Lock()
		if h.stats.Requests >= n {
			h.mu.Unlock()
			return nil
		}
		ch := h.arrivedLocked()
		h.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// arrivedLocked returns the channel closed at the next arrival.
func (h *Handler) arrivedLocked() chan struct{} {
	if h.arrived == nil {
		h.arrived = make(chan struct{})
	}
	return h.arrived
}

// abortLocked returns the channel closed by shutdown.
func (h *Handler) abortLocked() chan struct{} {
	if h.abort == nil {
		h.abort = make(chan struct{})
	}
	return h.abort
}

// shutdown releases every waiting request with a 503 and makes later waits
// end at once, so closing a Server never blocks on a forgotten Hold.
func (h *Handler) shutdown() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.aborted {
		h.aborted = true
		close(h.abortLocked())
	}
}

func (h *Handler) clock() time.Time {
	if h.now != nil {
		return h.now()
	}
	return time.Now()
}

// reply is a fully decided response, written after bookkeeping is done.
type reply struct {
	status int
	header http.Header
	body   []byte
	// events, when non-nil, makes the reply a text/event-stream: one
	// "data:" event per element, each flushed as it is written.
	events [][]byte
}

// ServeHTTP answers one request; see the package documentation.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, readErr := io.ReadAll(io.LimitReader(r.Body, maxBody+1))
	if readErr == nil && len(body) > maxBody {
		readErr = errors.New("request body too large")
	}
	var a admission
	var out *reply
	if embeddingsPath(r.URL.Path) {
		a, out = h.serveEmbeddings(r, body, readErr)
	} else {
		rec, chat, dl, parseErr := parseRequest(r, body)
		if readErr != nil {
			parseErr = readErr
		}
		a = h.arrive(rec, r)
		var dflt *Response
		if parseErr == nil {
			dflt = defaultResponse(chat, h.prefix(), h.thinks(chat))
		}
		out = h.respond(r.Context(), a, parseErr, func(rs *Response) *reply { return h.build(rs, chat, dl) }, dflt)
	}
	if out != nil && a.limits != nil {
		if out.header == nil {
			out.header = http.Header{}
		}
		for k, vs := range a.limits {
			if _, set := out.header[k]; !set {
				out.header[k] = vs
			}
		}
	}

	// Leave before writing, so a client holding the response sees
	// counters that already include it.
	h.mu.Lock()
	h.inFlight--
	if out == nil {
		h.stats.Canceled++
	}
	h.mu.Unlock()
	if out == nil {
		return // the client is gone
	}
	out.write(w, h.clock())
}

// admission is what a request is given when it arrives: a reply decided
// there (wrong path or method, rate limited, a models answer), or its
// scripted Response (nil: the default responder answers), and the channel
// that shutdown closes.
type admission struct {
	decided  *reply
	scripted *Response
	abort    <-chan struct{}
	// limits are the rate-limit headers for the answer, or nil.
	limits http.Header
}

// arrive records a request and decides, in the same critical section,
// which scripted reply it gets: so replies go in the order arrivals are
// counted, and a test that saw n arrivals (WaitArrivals) knows that the
// first n scripted replies are taken.
func (h *Handler) arrive(rec Request, r *http.Request) admission {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.stats.Requests++
	h.requests = append(h.requests, rec)
	if h.maxRecorded > 0 && len(h.requests) > h.maxRecorded {
		// Copy down so the dropped requests can be collected.
		n := copy(h.requests, h.requests[len(h.requests)-h.maxRecorded:])
		clear(h.requests[n:])
		h.requests = h.requests[:n]
	}
	h.inFlight++
	h.maxInFlight = max(h.maxInFlight, h.inFlight)
	if h.arrived != nil {
		close(h.arrived)
		h.arrived = nil
	}
	a := admission{abort: h.abortLocked()}
	path := r.URL.Path
	modelID, isModels := modelsPath(path)
	switch {
	case answersPOST(path) && r.Method != http.MethodPost:
		a.decided = h.notAllowedLocked(r.Method, http.MethodPost)
	case answersPOST(path) && h.failStatus != 0:
		a.decided = &reply{status: h.failStatus, body: forcedError(h.failStatus)}
	case answersPOST(path):
		v := h.limitLocked(rec)
		a.limits = v.header
		if v.limited {
			h.stats.RateLimited++
			if v.byTokens {
				h.stats.TokenLimited++
			}
			retry := v.retryAfter
			a.decided = &reply{
				status: http.StatusTooManyRequests,
				header: http.Header{"Retry-After": {retry}},
				body:   errorJSON("rate limit exceeded", "rate_limit_error", "rate_limit_exceeded"),
			}
		} else if len(h.script) > 0 {
			rs := h.script[0]
			h.script[0] = Response{} // drop references held by the backing array
			h.script = h.script[1:]
			a.scripted = &rs
			h.stats.Scripted++
		}
	case isModels && r.Method != http.MethodGet:
		a.decided = h.notAllowedLocked(r.Method, http.MethodGet)
	case isModels:
		a.decided = h.modelsReplyLocked(modelID)
	default:
		h.stats.Rejected++
		a.decided = &reply{
			status: http.StatusNotFound,
			body:   errorJSON(fmt.Sprintf("Invalid URL (%s %s)", r.Method, path), "invalid_request_error", "unknown_url"),
		}
	}
	return a
}

// notAllowedLocked counts and renders a 405 for a route that takes only
// method allow.
func (h *Handler) notAllowedLocked(method, allow string) *reply {
	h.stats.Rejected++
	return &reply{
		status: http.StatusMethodNotAllowed,
		header: http.Header{"Allow": {allow}},
		body:   errorJSON(fmt.Sprintf("Method %s not allowed; use %s", method, allow), "invalid_request_error", "method_not_allowed"),
	}
}

// respond makes the reply arrival decided on: a decided reply, a
// scripted one, a 400 for parseErr, or dflt; build renders a scripted or
// default Response for the request (a chat answer, embeddings). nil
// means the request context ended first.
func (h *Handler) respond(ctx context.Context, a admission, parseErr error, build func(*Response) *reply, dflt *Response) *reply {
	switch {
	case a.decided != nil:
		return a.decided
	case a.scripted != nil:
		if err := h.wait(ctx, a.abort, h.latency+a.scripted.Delay, a.scripted.Hold); err != nil {
			return closedReply(err)
		}
		return build(a.scripted)
	}

	if parseErr != nil {
		h.reject()
		re := &requestError{message: parseErr.Error(), code: "invalid_request"}
		errors.As(parseErr, &re)
		return &reply{status: http.StatusBadRequest, body: paramErrorJSON(re.message, "invalid_request_error", re.param, re.code)}
	}
	if err := h.wait(ctx, a.abort, h.latency, nil); err != nil {
		return closedReply(err)
	}
	h.mu.Lock()
	h.stats.Defaults++
	h.mu.Unlock()
	return build(dflt)
}

func (h *Handler) reject() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.stats.Rejected++
}

// closedReply maps a wait error to a reply: nil for a gone client, 503
// when the Server is closing.
func closedReply(err error) *reply {
	if errors.Is(err, errClosed) {
		return &reply{status: http.StatusServiceUnavailable, body: errorJSON("server closed", "server_error", "server_closed")}
	}
	return nil
}

// verdict is what the limiters decided about one request.
type verdict struct {
	limited    bool
	byTokens   bool        // the token limit refused it
	retryAfter string      // set when limited
	header     http.Header // rate-limit headers, nil unless asked for
}

// limitLocked applies the fixed-window limiters to rec, counting it
// against both only when both admit it.
func (h *Handler) limitLocked(rec Request) verdict {
	if h.rateLimit <= 0 && h.tokenLimit <= 0 {
		return verdict{}
	}
	now := h.clock()
	var v verdict
	var wait time.Duration
	if h.rateLimit > 0 {
		h.windowStart, h.windowCount = window(now, h.windowStart, h.windowCount, time.Second)
		if h.windowCount >= h.rateLimit {
			v.limited = true
			wait = h.windowStart.Add(time.Second).Sub(now)
		}
	}
	cost := 0
	if h.tokenLimit > 0 {
		cost = requestTokens(rec)
		h.tokenStart, h.tokenUsed = window(now, h.tokenStart, h.tokenUsed, time.Minute)
		if h.tokenUsed+cost > h.tokenLimit {
			v.limited, v.byTokens = true, true
			wait = max(wait, h.tokenStart.Add(time.Minute).Sub(now))
		}
	}
	if !v.limited {
		h.windowCount++
		h.tokenUsed += cost
	}
	if h.rateHeaders {
		v.header = http.Header{}
		if h.rateLimit > 0 {
			setBudget(v.header, "requests", h.rateLimit, h.windowCount, h.windowStart.Add(time.Second).Sub(now))
		}
		if h.tokenLimit > 0 {
			setBudget(v.header, "tokens", h.tokenLimit, h.tokenUsed, h.tokenStart.Add(time.Minute).Sub(now))
		}
	}
	switch {
	case !v.limited:
	case h.retryAfter != "":
		v.retryAfter = h.retryAfter
	default:
		v.retryAfter = strconv.Itoa(max(int(math.Ceil(wait.Seconds())), 1))
	}
	return v
}

// window returns the fixed window of length size that now falls in and
// what it counted: the current one, or a new, empty one opening now when
// none is open. A clock that moved backwards also opens a new window.
func window(now, start time.Time, count int, size time.Duration) (time.Time, int) {
	if start.IsZero() || !now.Before(start.Add(size)) || now.Before(start) {
		return now, 0
	}
	return start, count
}

// setBudget writes OpenAI's three headers for one budget.
func setBudget(hdr http.Header, kind string, limit, used int, reset time.Duration) {
	hdr.Set("X-Ratelimit-Limit-"+kind, strconv.Itoa(limit))
	hdr.Set("X-Ratelimit-Remaining-"+kind, strconv.Itoa(max(limit-used, 0)))
	// Rounded up, so a client that waits this long finds the window over;
	// whole milliseconds, as OpenAI sends them.
	ms := (reset + time.Millisecond - 1).Truncate(time.Millisecond)
	hdr.Set("X-Ratelimit-Reset-"+kind, ms.String())
}

// requestTokens is what a request costs under WithTokenRateLimit: its
// prompt words plus its max_tokens (else max_completion_tokens).
func requestTokens(rec Request) int {
	n := 0
	for _, m := range rec.Messages {
		n += countWords(m.Content)
	}
	for _, s := range rec.Input {
		n += countWords(s)
	}
	var limits struct {
		MaxTokens           *int `json:"max_tokens"`
		MaxCompletionTokens *int `json:"max_completion_tokens"`
	}
	_ = json.Unmarshal(rec.Body, &limits) // lenient: an unreadable body asks for no completion
	switch {
	case limits.MaxTokens != nil && *limits.MaxTokens > 0:
		n += *limits.MaxTokens
	case limits.MaxCompletionTokens != nil && *limits.MaxCompletionTokens > 0:
		n += *limits.MaxCompletionTokens
	}
	return n
}

// wait sleeps d and then waits for hold, ending early with the context's
// error or errClosed.
func (h *Handler) wait(ctx context.Context, abort <-chan struct{}, d time.Duration, hold <-chan struct{}) error {
	if d > 0 {
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-t.C:
		case <-ctx.Done():
			return ctx.Err()
		case <-abort:
			return errClosed
		}
	}
	if hold != nil {
		select {
		case <-hold:
		case <-ctx.Done():
			return ctx.Err()
		case <-abort:
			return errClosed
		}
	}
	return nil
}

// build renders a scripted or default Response for the given request,
// as a stream when dl asks for one.
func (h *Handler) build(rs *Response, chat *chatRequest, dl delivery) *reply {
	status := rs.status()
	if status < 100 || status > 999 {
		status = http.StatusInternalServerError // WriteHeader would panic
	}
	out := &reply{status: status, header: rs.Header.Clone(), body: rs.Body}
	if out.body != nil {
		out.body = append([]byte(nil), out.body...)
		return out
	}
	if status < 200 || status > 299 {
		out.body = statusError(status)
		return out
	}

	model, promptWords := h.model, 0
	if chat != nil {
		if model == "" {
			model = chat.model
		}
		for _, m := range chat.messages {
			promptWords += countWords(m.Content)
		}
	}
	if model == "" {
		model = defaultModel
	}
	h.mu.Lock()
	h.nextID++
	id := h.nextID
	h.mu.Unlock()

	choices := rs.choices()
	fingerprint := ""
	for _, c := range choices {
		if c.Reasoning != "" {
			fingerprint = reasoningFingerprint
		}
	}
	shape := choiceShape{logprobs: dl.logprobs, top: dl.topLogprobs, extended: dl.logprobs || len(choices) > 1 || fingerprint != ""}
	if dl.stream {
		out.events = streamEvents(streamSpec{
			id:           "chatcmpl-" + strconv.Itoa(id),
			model:        model,
			fingerprint:  fingerprint,
			created:      h.clock().Unix(),
			choices:      choices,
			shape:        shape,
			usage:        renderUsage(rs.Usage, promptWords, choices),
			omitChoices:  rs.omitChoices,
			includeUsage: dl.includeUsage,
		})
		return out
	}
	env := envelope{
		ID:                "chatcmpl-" + strconv.Itoa(id),
		Object:            "chat.completion",
		Created:           h.clock().Unix(),
		Model:             model,
		SystemFingerprint: fingerprint,
		Usage:             renderUsage(rs.Usage, promptWords, choices),
	}
	if !rs.omitChoices {
		for i, c := range choices {
			msg := wireMessage{Role: "assistant", ReasoningContent: c.Reasoning, Content: &c.Text, ToolCalls: c.ToolCalls}
			if c.Text == "" && len(c.ToolCalls) > 0 {
				msg.Content = nil // as OpenAI answers a turn that only calls tools
			}
			env.Choices = append(env.Choices, choice{Index: i, Message: msg, Logprobs: shape.content(c.Text), FinishReason: c.finishReason()})
		}
	}
	out.body, _ = json.Marshal(env) // only strings, ints, finite floats and valid raw JSON
	return out
}

func (rp *reply) write(w http.ResponseWriter, now time.Time) {
	hdr := w.Header()
	if rp.events != nil {
		hdr.Set("Content-Type", "text/event-stream")
		hdr.Set("Cache-Control", "no-cache")
	} else {
		hdr.Set("Content-Type", "application/json")
	}
	hdr.Set("Date", now.UTC().Format(http.TimeFormat))
	for k, vs := range rp.header {
		hdr.Del(k)
		for _, v := range vs {
			hdr.Add(k, v)
		}
	}
	w.WriteHeader(rp.status)
	// 1xx, 204 and 304 replies cannot carry a body.
	if rp.status < 200 || rp.status == http.StatusNoContent || rp.status == http.StatusNotModified {
		return
	}
	if rp.events == nil {
		_, _ = w.Write(rp.body) // a failed write means the client left
		return
	}
	rc := http.NewResponseController(w)
	for _, ev := range rp.events {
		if _, err := w.Write(append(append([]byte("data: "), ev...), "\n\n"...)); err != nil {
			return // the client left
		}
		_ = rc.Flush() // a writer that cannot flush delivers the stream at the end
	}
}

// prefix is the text that starts default text replies.
func (h *Handler) prefix() string {
	if h.replyPrefixSet {
		return h.replyPrefix
	}
	return DefaultReplyPrefix
}

// reasoningPrefix starts the reasoning of default replies in reasoning
// mode, and reasoningFingerprint is the system_fingerprint of answers
// with reasoning.
const (
	reasoningPrefix      = "Thinking about: "
	reasoningFingerprint = "fp_providertest"
)

// thinks reports whether the default reply to chat carries reasoning:
// the request's own switch, else WithReasoning.
func (h *Handler) thinks(chat *chatRequest) bool {
	if chat.thinking != nil {
		return *chat.thinking
	}
	return h.reasoning
}

// defaultResponse is the default responder's answer: chat.n choices
// (defaultChoice), with reasoning when reasoning is set.
func defaultResponse(chat *chatRequest, prefix string, reasoning bool) *Response {
	first := defaultChoice(chat, prefix, reasoning, 0)
	r := &Response{Text: first.Text, ToolCalls: first.ToolCalls, Reasoning: first.Reasoning}
	for i := 1; i < chat.n; i++ {
		r.MoreChoices = append(r.MoreChoices, defaultChoice(chat, prefix, reasoning, i))
	}
	return r
}

// defaultChoice is choice i of the default answer: a call of a tool when
// the request offers tools and has no tool results yet (the tool
// tool_choice names, else the first; never with tool_choice none), with
// arguments valid against the tool's parameters schema, as call
// "call_<i+1>"; otherwise defaultContent. Choices after the first differ
// by a " (choice i)" suffix on their text and reasoning, so a client can
// tell them apart.
func defaultChoice(chat *chatRequest, prefix string, reasoning bool, i int) Choice {
	suffix := ""
	if i > 0 {
		suffix = " (choice " + strconv.Itoa(i) + ")"
	}
	var c Choice
	if reasoning {
		c.Reasoning = strings.TrimSpace(reasoningPrefix+summary(chat.messages)) + suffix
	}
	if t, ok := toolToCall(chat); ok {
		args := "{}"
		if t.Function.Parameters != nil {
			if b, err := json.Marshal(exampleFor(t.Function.Parameters)); err == nil {
				args = string(b)
			}
		}
		c.ToolCalls = CallTool(t.Function.Name, args).ToolCalls
		c.ToolCalls[0].ID = "call_" + strconv.Itoa(i+1)
		return c
	}
	c.Text = defaultContent(chat, prefix, suffix)
	return c
}

// toolToCall is the tool the default responder calls, if any.
func toolToCall(chat *chatRequest) (tool, bool) {
	if len(chat.tools) == 0 || chat.messages[len(chat.messages)-1].Role == "tool" {
		return tool{}, false
	}
	var choice pktype.ToolChoice
	if present(chat.toolChoice) && json.Unmarshal(chat.toolChoice, &choice) == nil {
		switch choice.Mode {
		case pktype.ToolChoiceNone:
			return tool{}, false
		case pktype.ToolChoiceFunction:
			for _, t := range chat.tools {
				if t.Function.Name == choice.Function {
					return t, true
				}
			}
		}
	}
	return chat.tools[0], true
}

// defaultContent is the default responder's assistant content, its text
// ending in suffix: a JSON document for a JSON response_format (with a
// schema, one valid against it, the same for every choice), else text.
func defaultContent(chat *chatRequest, prefix, suffix string) string {
	text := strings.TrimSpace(prefix+summary(chat.messages)) + suffix
	switch chat.responseFormat.Type {
	case "json_schema":
		if s := chat.responseFormat.JSONSchema.Schema; s != nil {
			b, err := json.Marshal(exampleFor(s))
			if err == nil {
				return string(b)
			}
		}
		fallthrough // no usable schema: any JSON object will do
	case "json_object":
		// A schema beside "type" counts for json_object only, not for a
		// json_schema format that fell through.
		if s := chat.responseFormat.Schema; s != nil && chat.responseFormat.Type == "json_object" {
			if b, err := json.Marshal(exampleFor(s)); err == nil {
				return string(b)
			}
		}
		b, _ := json.Marshal(map[string]string{"reply": text})
		return string(b)
	}
	return text
}

// summary returns the first words of the last user message (or of the last
// message when no user spoke, or of the tools' results when they answer
// the last turn), marking any cut with "...".
func summary(msgs []Message) string {
	last := msgs[len(msgs)-1].Content
	for i := len(msgs) - 1; i >= 0; i-- {
		if msgs[i].Role == "user" || msgs[i].Role == "tool" {
			last = msgs[i].Content
			break
		}
	}
	words := strings.Fields(last)
	if len(words) > summaryWords {
		return strings.Join(words[:summaryWords], " ") + " ..."
	}
	return strings.Join(words, " ")
}

func (r Request) clone() Request {
	r.Header = r.Header.Clone()
	r.Body = append([]byte(nil), r.Body...)
	r.Messages = append([]Message(nil), r.Messages...)
	for i, m := range r.Messages {
		r.Messages[i].ToolCalls = slices.Clone(m.ToolCalls)
	}
	r.Tools = slices.Clone(r.Tools)
	r.Input = append([]string(nil), r.Input...)
	if r.ResponseFormat != nil {
		r.ResponseFormat = append(json.RawMessage(nil), r.ResponseFormat...)
	}
	return r
}
