// Package openai is the wire client for OpenAI-compatible backends: chat
// completions (Prepare, or PrepareStream for an answer streamed as
// Server-Sent Events) and embeddings (PrepareEmbedding). It performs
// exactly one attempt per Execute call; retries, backoff and accounting
// live in the layers above.
//
// A request is validated, encoded and bound to its credential once by
// Prepare, so every attempt of a generation sends identical bytes and the
// same key even if the environment changes in between.
package openai

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"net/url"
	"os"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"time"
	"unicode"

	"github.com/promptkit/promptkit/internal/llm"
	"github.com/promptkit/promptkit/pktype"
)

const (
	defaultMaxResponseBytes = 8 << 20
	// errorBodyLimit bounds how much of a non-2xx body is read for Detail.
	errorBodyLimit = 64 << 10
	// drainLimit bounds how much unread body is discarded before Close so
	// keep-alive connections can be reused without reading unbounded data.
	drainLimit        = 256 << 10
	defaultSchemaName = "output"
)

var schemaNameRE = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)

// Endpoint describes one backend.
type Endpoint struct {
	// BackendID names the backend in errors.
	BackendID string
	// BaseURL is the API root, e.g. http://127.0.0.1:8081/v1; requests go
	// to BaseURL + "/chat/completions" (or "/embeddings").
	BaseURL string
	// APIKeyEnv optionally names the environment variable holding the API
	// key. It is read once, in Prepare.
	APIKeyEnv string
	// Timeout bounds one attempt; 0 means no per-attempt timeout.
	Timeout time.Duration
	// HTTPClient defaults to a package-level client without an overall
	// timeout (deadlines come from the per-attempt context, so a timeout
	// never outlives or spans attempts), keeping MaxIdleConns idle
	// connections per host.
	HTTPClient *http.Client
	// MaxIdleConns sizes the default client's idle connection pool per
	// host: as many as the backend has calls in flight keeps each call on
	// a reused connection. 0 (or negative) means DefaultIdleConns.
	// Ignored when HTTPClient is set.
	MaxIdleConns int
	// Getenv defaults to os.Getenv.
	Getenv func(string) string
	// Now defaults to time.Now; it stamps Outcome.Received.
	Now func() time.Time
	// MaxResponseBytes bounds a success body (a whole event stream); 0
	// (or negative) means 8 MiB.
	MaxResponseBytes int64
}

// Frozen is a validated, encoded request bound to its credential. It is
// immutable, so Execute may be called repeatedly and concurrently.
type Frozen struct {
	backend  string
	url      string
	body     []byte
	apiKey   string
	client   *http.Client
	timeout  time.Duration
	now      func() time.Time
	maxBytes int64
	// decode fills out from a 2xx body: a chat completion's or an
	// embedding list's decoder, so both share one exchange.
	decode func(raw []byte, out *llm.Outcome) error
	// stream marks a request sent with "stream": true: a 2xx answer is
	// read as events (stream.go) instead of by decode.
	stream bool
}

type wireJSONSchema struct {
	Name   string          `json:"name"`
	Schema json.RawMessage `json:"schema"`
}

type wireResponseFormat struct {
	Type       string          `json:"type"`
	JSONSchema *wireJSONSchema `json:"json_schema,omitempty"`
}

// wireRequest is OpenAI's chat completion request: the sampling
// parameters have the same names on the wire as everywhere in promptkit,
// and the extra parameters (pktype.Params) are appended to it as given.
type wireRequest struct {
	Model    string        `json:"model"`
	Messages []wireMessage `json:"messages"`
	pktype.Sampling
	ResponseFormat json.RawMessage `json:"response_format,omitempty"`
	pktype.ToolUse
	// Only in a streaming request (PrepareStream): omitted otherwise, so
	// a plain request's bytes do not change.
	Stream        bool               `json:"stream,omitempty"`
	StreamOptions *wireStreamOptions `json:"stream_options,omitempty"`
}

// wireMessage is a message as OpenAI takes it: an assistant message that
// only calls tools has null content (some backends refuse ""), content
// parts go as the caller sent them, and the message's extra fields are
// appended.
type wireMessage struct {
	Role       string            `json:"role"`
	Content    json.RawMessage   `json:"content"`
	ToolCalls  []pktype.ToolCall `json:"tool_calls,omitempty"`
	ToolCallID string            `json:"tool_call_id,omitempty"`
	extra      pktype.Params
}

// MarshalJSON writes the message with its extra fields.
func (m wireMessage) MarshalJSON() ([]byte, error) {
	type plain wireMessage
	b, err := marshal(plain(m))
	if err != nil {
		return nil, err
	}
	return m.extra.AppendObject(b), nil
}

func wireMessages(msgs []pktype.Message) ([]wireMessage, error) {
	out := make([]wireMessage, len(msgs))
	for i, m := range msgs {
		out[i] = wireMessage{Role: m.Role, ToolCalls: m.ToolCalls, ToolCallID: m.ToolCallID, extra: m.Extra}
		switch {
		case len(m.Parts) > 0:
			out[i].Content = m.Parts
		case m.Content != "" || len(m.ToolCalls) == 0:
			c, err := marshal(m.Content)
			if err != nil {
				return nil, err
			}
			out[i].Content = c
		default:
			out[i].Content = json.RawMessage("null")
		}
		for _, k := range slices.Sorted(maps.Keys(m.Extra)) {
			if pktype.MessageField(k) {
				return nil, invalid("message %d has %s among its extra fields", i, k)
			}
		}
	}
	return out, nil
}

// marshal encodes v as JSON without escaping HTML: prompts are not HTML,
// so <, > and & stay byte-identical on the wire.
func marshal(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{pktype.ErrInvalidRequest}, args...)...)
}

// Prepare validates and encodes one request and resolves the credential
// once. Errors wrap pktype.ErrInvalidRequest (a missing key:
// pktype.ErrMissingCredential, which matches it too); they
// never contain the base URL (it may carry user info) or a key value.
func Prepare(ep Endpoint, req pktype.GenerateRequest) (*Frozen, error) {
	target, err := endpointURL(ep.BaseURL, "chat", "completions")
	if err != nil {
		return nil, err
	}
	body, err := encodeRequest(req, false)
	if err != nil {
		return nil, err
	}
	return freeze(ep, target, body, decodeChat)
}

// decodeChat is Frozen.decode for a chat completion.
func decodeChat(raw []byte, out *llm.Outcome) error {
	r, usage, presence, err := decode(raw)
	out.Usage, out.Presence, out.Response = usage, presence, r
	return err
}

// freeze binds an encoded request for target to the endpoint's
// credential and client.
func freeze(ep Endpoint, target string, body []byte, dec func([]byte, *llm.Outcome) error) (*Frozen, error) {
	var key string
	if ep.APIKeyEnv != "" {
		getenv := ep.Getenv
		if getenv == nil {
			getenv = os.Getenv
		}
		// Surrounding whitespace (a trailing newline from a secrets file)
		// would make the header invalid, so it is not part of the key.
		key = strings.TrimSpace(getenv(ep.APIKeyEnv))
		if key == "" {
			return nil, fmt.Errorf("%w: environment variable %s is unset or empty", pktype.ErrMissingCredential, ep.APIKeyEnv)
		}
		if strings.IndexFunc(key, unicode.IsControl) >= 0 {
			return nil, invalid("API key in environment variable %s contains control characters", ep.APIKeyEnv)
		}
	}

	f := &Frozen{
		backend:  ep.BackendID,
		url:      target,
		body:     body,
		apiKey:   key,
		client:   ep.HTTPClient,
		timeout:  ep.Timeout,
		now:      ep.Now,
		maxBytes: ep.MaxResponseBytes,
		decode:   dec,
	}
	if f.client == nil {
		f.client = pooledClient(ep.MaxIdleConns)
	}
	if f.now == nil {
		f.now = time.Now
	}
	if f.maxBytes <= 0 {
		f.maxBytes = defaultMaxResponseBytes
	}
	return f, nil
}

// endpointURL is base joined with the route's path segments.
func endpointURL(base string, path ...string) (string, error) {
	u, err := url.Parse(base)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return "", invalid("base URL must be an absolute http or https URL")
	}
	// JoinPath copes with a trailing slash and keeps any query (some
	// gateways require e.g. ?api-version=...). Fragments are never sent.
	u = u.JoinPath(path...)
	u.Fragment, u.RawFragment = "", ""
	return u.String(), nil
}

// encodeRequest encodes a chat request, with "stream": true and usage
// asked for when stream is set. The extra parameters come last, as given.
func encodeRequest(req pktype.GenerateRequest, stream bool) ([]byte, error) {
	if req.Model == "" {
		return nil, invalid("model is empty")
	}
	if len(req.Messages) == 0 {
		return nil, invalid("no messages")
	}
	if err := pktype.CheckParams(req.Extra, "extra "); err != nil {
		return nil, invalid("%v", err)
	}
	for i, m := range req.Messages {
		if m.Role == "" {
			return nil, invalid("message %d has an empty role", i)
		}
	}
	msgs, err := wireMessages(req.Messages)
	if err != nil {
		return nil, err
	}
	w := wireRequest{Model: req.Model, Messages: msgs, Sampling: req.Sampling, ToolUse: req.ToolUse}
	w.Extra = nil // appended below
	if stream {
		// Without include_usage a stream reports no usage at all.
		w.Stream, w.StreamOptions = true, &wireStreamOptions{IncludeUsage: true}
	}
	if req.JSONObject && len(req.OutputSchema) > 0 {
		return nil, invalid("json_object and an output schema exclude each other")
	}
	var format *wireResponseFormat
	if req.JSONObject {
		format = &wireResponseFormat{Type: "json_object"}
	}
	if len(req.OutputSchema) > 0 {
		if !json.Valid(req.OutputSchema) {
			return nil, invalid("response schema is not valid JSON")
		}
		name := req.OutputSchemaName
		if name == "" {
			name = defaultSchemaName
		}
		if !schemaNameRE.MatchString(name) {
			return nil, invalid("schema name must match %s", schemaNameRE)
		}
		format = &wireResponseFormat{
			Type:       "json_schema",
			JSONSchema: &wireJSONSchema{Name: name, Schema: req.OutputSchema},
		}
	}
	switch {
	case len(req.ResponseFormat) > 0:
		if !json.Valid(req.ResponseFormat) {
			return nil, invalid("response_format is not valid JSON")
		}
		w.ResponseFormat = req.ResponseFormat
	case format != nil:
		w.ResponseFormat, _ = json.Marshal(format) // cannot fail: valid JSON and strings
	}
	b, err := marshal(w)
	if err != nil {
		// e.g. a NaN temperature; the cause names no request content.
		return nil, invalid("encoding request: %v", err)
	}
	return req.Extra.AppendObject(b), nil
}

// Execute performs exactly one HTTP exchange. Each call builds a fresh
// request, body reader and per-attempt timeout derived from ctx, so a
// timed-out or canceled attempt leaves nothing behind for the next one.
// Any answer's rate-limit headers, error statuses included, are in
// Outcome.Limits (see ParseRateLimits). A request from PrepareStream is
// read as a stream whose pieces go nowhere (see ExecuteStream).
func (f *Frozen) Execute(ctx context.Context) llm.Outcome {
	return f.exchange(ctx, nil)
}

// exchange is Execute, passing a streamed answer's pieces to emit (which
// may be nil).
func (f *Frozen) exchange(ctx context.Context, emit func(pktype.StreamDelta)) llm.Outcome {
	attemptCtx, cancel := ctx, context.CancelFunc(func() {})
	if f.timeout > 0 {
		attemptCtx, cancel = context.WithTimeout(ctx, f.timeout)
	}
	defer cancel()

	httpReq, err := http.NewRequestWithContext(attemptCtx, http.MethodPost, f.url, bytes.NewReader(f.body))
	if err != nil {
		return llm.Outcome{Err: transportFailure(attemptCtx, err)}
	}
	httpReq.Header.Set("Content-Type", "application/json")
	if f.stream {
		httpReq.Header.Set("Accept", "text/event-stream")
	} else {
		httpReq.Header.Set("Accept", "application/json")
	}
	if f.apiKey != "" {
		httpReq.Header.Set("Authorization", "Bearer "+f.apiKey)
	}

	resp, err := f.client.Do(httpReq)
	if err != nil {
		return llm.Outcome{Err: transportFailure(attemptCtx, err)}
	}
	// Runs before cancel (deferred earlier), so draining can still finish.
	defer closeBody(resp.Body)

	out := llm.Outcome{StatusCode: resp.StatusCode, Received: f.now()}
	out.Limits = ParseRateLimits(resp.Header, out.Received)

	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		// A partial error body still yields a useful detail; a read error
		// here does not hide the status the provider chose.
		raw, _ := io.ReadAll(io.LimitReader(resp.Body, errorBodyLimit))
		if nb, ok := ParseRetryAfter(resp.Header.Get("Retry-After"), out.Received); ok {
			out.NotBefore = nb
		}
		out.Err = pktype.NewGenerationError(f.backend, resp.StatusCode, errorDetail(raw, f.apiKey), out.NotBefore)
		return out
	}

	if resp.ContentLength > f.maxBytes {
		out.Err = malformed(errTooLarge)
		return out
	}
	if f.stream && !isJSON(resp.Header) {
		f.readStream(attemptCtx, resp.Body, &out, emit)
		return out
	}
	raw, err := io.ReadAll(io.LimitReader(resp.Body, f.maxBytes+1))
	if err != nil {
		out.Err = transportFailure(attemptCtx, err)
		return out
	}
	if int64(len(raw)) > f.maxBytes {
		out.Err = malformed(errTooLarge)
		return out
	}
	if err := f.decode(raw, &out); err != nil {
		// A body cut short by our own deadline is a transport problem, not
		// the provider's fault.
		if ctxErr := attemptCtx.Err(); ctxErr != nil {
			out.Err = &llm.AttemptError{Kind: pktype.ErrTransport, Cause: ctxErr}
		} else {
			out.Err = err
		}
	}
	if f.stream && out.Err == nil {
		// A backend that ignores "stream" answers everything at once.
		f.emitWhole(&out, emit)
	}
	return out
}

// transportFailure prefers the context's error when the attempt context is
// done, so callers can tell timeouts and cancellation apart. A *url.Error is
// unwrapped because its text embeds the URL.
func transportFailure(ctx context.Context, err error) error {
	if ctxErr := ctx.Err(); ctxErr != nil {
		return &llm.AttemptError{Kind: pktype.ErrTransport, Cause: ctxErr}
	}
	var ue *url.Error
	if errors.As(err, &ue) && ue.Err != nil {
		err = ue.Err
	}
	return &llm.AttemptError{Kind: pktype.ErrTransport, Cause: err, Reason: transportReason(err)}
}

// transportReason names common transport failures with fixed phrases, so
// errors say what went wrong without quoting hosts, URLs or addresses.
func transportReason(err error) string {
	var dnsErr *net.DNSError
	var certErr *tls.CertificateVerificationError
	var recordErr tls.RecordHeaderError
	switch {
	case errors.Is(err, syscall.ECONNREFUSED):
		return "connection refused"
	case errors.Is(err, syscall.ECONNRESET):
		return "connection reset"
	case errors.As(err, &dnsErr):
		return "host not found"
	case errors.As(err, &certErr):
		return "TLS certificate not trusted"
	case errors.As(err, &recordErr):
		return "TLS handshake failed (is the base URL http rather than https?)"
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return "connection closed before the response was complete"
	}
	var netErr net.Error
	if errors.As(err, &netErr) && netErr.Timeout() {
		return "timed out"
	}
	return ""
}

// closeBody discards a bounded remainder so the connection can be reused,
// then closes the body.
func closeBody(body io.ReadCloser) {
	_, _ = io.CopyN(io.Discard, body, drainLimit)
	_ = body.Close()
}
