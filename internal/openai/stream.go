package openai

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"maps"
	"mime"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/promptkit/promptkit/internal/llm"
	"github.com/promptkit/promptkit/pktype"
)

// Malformed streams, in fixed words like decode.go's.
var (
	errNoDone         = errors.New("stream ended before data: [DONE]")
	errStreamToolCall = errors.New("choices[0].delta.tool_calls has a call without an id or a function name, or with conflicting ones")
	errToolCallIndex  = errors.New("choices[0].delta.tool_calls[].index is not a non-negative integer")
)

// doneData is the data of the event that ends a stream.
const doneData = "[DONE]"

type wireStreamOptions struct {
	IncludeUsage bool `json:"include_usage"`
}

// PrepareStream is Prepare for an answer streamed as the backend
// generates it: the body also carries "stream": true and
// "stream_options": {"include_usage": true}, and ExecuteStream (or
// Execute) reads the answer's Server-Sent Events into the Outcome a
// plain answer gives.
func PrepareStream(ep Endpoint, req pktype.GenerateRequest) (*Frozen, error) {
	target, err := endpointURL(ep.BaseURL, "chat", "completions")
	if err != nil {
		return nil, err
	}
	body, err := encodeRequest(req, true)
	if err != nil {
		return nil, err
	}
	f, err := freeze(ep, target, body, decodeChat)
	if err != nil {
		return nil, err
	}
	f.stream = true
	return f, nil
}

// ExecuteStream is Execute for a request from PrepareStream: it passes
// each piece of the answer (text, parts of tool calls) to emit as it
// arrives, on the calling goroutine, numbered by Index from 0 (Generation
// and Attempt are left zero for the caller to set). emit may be nil. On
// success the Outcome's Response is the whole answer assembled, as Decode
// would give it for the same answer unstreamed; on failure pieces already
// passed stay passed. A stream that ends without "data: [DONE]" fails; a
// "data: {"error": ...}" event fails like a provider status (500 unless
// the error carries a status or a code that names one), its text only in
// the error's Detail. A backend that answers with a plain JSON completion
// instead passes it as one piece.
func (f *Frozen) ExecuteStream(ctx context.Context, emit func(pktype.StreamDelta)) llm.Outcome {
	return f.exchange(ctx, emit)
}

// isJSON reports a plain JSON answer, which a backend that does not
// stream sends instead of events.
func isJSON(h http.Header) bool {
	mt, _, err := mime.ParseMediaType(h.Get("Content-Type"))
	return err == nil && mt == "application/json"
}

// emitWhole passes a completion answered at once as a stream's only piece.
func (f *Frozen) emitWhole(out *llm.Outcome, emit func(pktype.StreamDelta)) {
	r := out.Response
	d := pktype.StreamDelta{Text: r.Text}
	for i, c := range r.ToolCalls {
		d.ToolCalls = append(d.ToolCalls, pktype.ToolCallDelta{Index: i, ID: c.ID, Name: c.Function.Name, Arguments: c.Function.Arguments})
	}
	if d.Text == "" && len(d.ToolCalls) == 0 {
		return
	}
	out.FirstDelta = f.now()
	if emit != nil {
		emit(d)
	}
}

// readStream reads a 2xx event stream into out.
func (f *Frozen) readStream(ctx context.Context, body io.Reader, out *llm.Outcome, emit func(pktype.StreamDelta)) {
	r, usage, presence, err := decodeStream(body, f.maxBytes, func(d pktype.StreamDelta) {
		if out.FirstDelta.IsZero() {
			out.FirstDelta = f.now()
		}
		if emit != nil {
			emit(d)
		}
	})
	// Usage reported before a failure was still billed.
	out.Usage, out.Presence = usage, presence
	var ev *errorEvent
	var ae *llm.AttemptError
	switch {
	case err == nil:
		out.Response = r
	case errors.As(err, &ev):
		// The provider failed after its 200: the status the event names
		// is what the attempt failed with, for retries as for callers.
		out.StatusCode = ev.status
		out.Err = pktype.NewGenerationError(f.backend, ev.status, ev.detail(f.apiKey), time.Time{})
	case ctx.Err() != nil:
		// Cut short by our own deadline or cancellation, whatever was
		// read by then.
		out.Err = &llm.AttemptError{Kind: pktype.ErrTransport, Cause: ctx.Err()}
	case errors.As(err, &ae):
		out.Err = err
	default:
		out.Err = transportFailure(ctx, err)
	}
}

// errorEvent is a stream's error event: data {"error": ...}, or vLLM's
// {"object": "error", ...}. It keeps the provider's data for Detail only.
type errorEvent struct {
	status int
	data   []byte
	// wrapped says data is the error object itself, not its envelope.
	wrapped bool
}

func (e *errorEvent) Error() string { return "stream error event" }

func (e *errorEvent) detail(apiKey string) string {
	data := e.data
	if e.wrapped {
		data = slices.Concat([]byte(`{"error":`), data, []byte(`}`))
	}
	return errorDetail(data, apiKey)
}

// errorStatus is the HTTP status an error event stands for: its code when
// that is an HTTP error status or a name OpenAI answers with one, else 500.
func errorStatus(obj json.RawMessage) int {
	var e struct {
		Code json.RawMessage `json:"code"`
		Type json.RawMessage `json:"type"`
	}
	if json.Unmarshal(obj, &e) != nil {
		return http.StatusInternalServerError
	}
	var n int
	if json.Unmarshal(e.Code, &n) == nil && n >= 400 && n <= 599 {
		return n
	}
	for _, raw := range []json.RawMessage{e.Code, e.Type} {
		var s string
		if json.Unmarshal(raw, &s) != nil {
			continue
		}
		switch s {
		case "rate_limit_exceeded", "rate_limit_error":
			return http.StatusTooManyRequests
		case "overloaded_error", "server_overloaded", "service_unavailable":
			return http.StatusServiceUnavailable
		case "invalid_request_error", "context_length_exceeded":
			return http.StatusBadRequest
		}
	}
	return http.StatusInternalServerError
}

// Streaming wire types: OpenAI's chat.completion.chunk.
type (
	wireChunk struct {
		Object  string          `json:"object"`
		Model   string          `json:"model"`
		Choices json.RawMessage `json:"choices"`
		Usage   json.RawMessage `json:"usage"`
		Error   json.RawMessage `json:"error"`
	}
	wireChunkChoice struct {
		Delta *struct {
			Content   json.RawMessage     `json:"content"`
			ToolCalls []wireToolCallDelta `json:"tool_calls"`
		} `json:"delta"`
		FinishReason *string `json:"finish_reason"`
	}
	wireToolCallDelta struct {
		Index    *int   `json:"index"`
		ID       string `json:"id"`
		Type     string `json:"type"`
		Function *struct {
			Name      string `json:"name"`
			Arguments string `json:"arguments"`
		} `json:"function"`
	}
)

// assembler joins a stream's chunks into one answer.
type assembler struct {
	emit   func(pktype.StreamDelta)
	pieces int
	text   strings.Builder
	calls  map[int]*pktype.ToolCall
	last   int // the index of the call most recently added to
	model  string
	finish string
	choice bool // some chunk had a choice
	usage  *wireUsage
}

// decodeStream reads a chat completion streamed as Server-Sent Events
// from r, passing each piece to emit as it is decoded, and returns the
// answer once "data: [DONE]" ends the stream. It reads at most maxBytes.
// Errors are malformed (*llm.AttemptError), an *errorEvent, or r's own
// read error; a stream that ends before [DONE] is never a success. Usage
// and presence are the last usage reported, also on failure.
func decodeStream(r io.Reader, maxBytes int64, emit func(pktype.StreamDelta)) (*pktype.GenerateResponse, pktype.TokenUsage, pktype.TokenUsagePresence, error) {
	a := &assembler{emit: emit, calls: map[int]*pktype.ToolCall{}, last: -1}
	err := readEvents(r, maxBytes, a.event)
	u, p := a.usage.resolve()
	if err != nil {
		return nil, u, p, err
	}
	resp, err := a.response(u, p)
	return resp, u, p, err
}

// errDone stops readEvents at [DONE].
var errDone = errors.New("done")

// readEvents calls event with the data of each event of the stream in r
// (https://html.spec.whatwg.org/multipage/server-sent-events.html): lines
// end in LF or CRLF, a blank line ends an event, lines starting with ':'
// are comments, fields other than data are ignored, and multi-line data
// is joined with LF. It returns nil once event returns errDone, and
// errNoDone (malformed) when r ends first: an event not ended by a blank
// line is dropped, as it may be cut short, except a complete "data:
// [DONE]" line.
func readEvents(r io.Reader, maxBytes int64, event func([]byte) error) error {
	br := bufio.NewReader(&io.LimitedReader{R: r, N: maxBytes + 1})
	var data []byte
	has := false
	var read int64
	for {
		line, err := br.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			// A long line, bounded by the limit. The slice is the
			// reader's buffer, which reading on overwrites: copy first.
			head := bytes.Clone(line)
			var rest []byte
			rest, err = br.ReadBytes('\n')
			line = append(head, rest...)
		}
		read += int64(len(line))
		if read > maxBytes {
			return malformed(errTooLarge)
		}
		if err != nil {
			if err != io.EOF {
				return err
			}
			if has && string(data) == doneData {
				return nil
			}
			return malformed(errNoDone)
		}
		line = bytes.TrimSuffix(line[:len(line)-1], []byte("\r"))
		switch {
		case len(line) == 0:
			if !has {
				continue
			}
			if err := event(data); err != nil {
				if err == errDone {
					return nil
				}
				return err
			}
			data, has = data[:0], false
		case line[0] == ':':
			// A comment: servers send them to keep the connection alive.
		default:
			name, value, _ := bytes.Cut(line, []byte(":"))
			if string(name) != "data" {
				continue // event, id, retry: nothing a completion needs
			}
			if has {
				data = append(data, '\n')
			}
			data = append(data, bytes.TrimPrefix(value, []byte(" "))...)
			has = true
		}
	}
}

// event takes one event's data.
func (a *assembler) event(data []byte) error {
	if string(data) == doneData {
		return errDone
	}
	obj, err := singleObject(data)
	if err != nil {
		return err
	}
	var c wireChunk
	if err := json.Unmarshal(obj, &c); err != nil {
		return malformed(errWrongType)
	}
	if len(c.Error) > 0 && string(c.Error) != "null" {
		return &errorEvent{status: errorStatus(c.Error), data: bytes.Clone(obj)}
	}
	if c.Object == "error" {
		return &errorEvent{status: errorStatus(obj), data: bytes.Clone(obj), wrapped: true}
	}
	if len(c.Usage) > 0 && string(c.Usage) != "null" {
		var u wireUsage
		if err := json.Unmarshal(c.Usage, &u); err != nil {
			if errors.Is(err, errInvalidCount) {
				return malformed(errInvalidCount)
			}
			return malformed(errWrongType)
		}
		a.usage = &u // the last report is the whole call's
	}
	if a.model == "" {
		a.model = c.Model
	}
	var choices []wireChunkChoice
	if len(c.Choices) > 0 && string(c.Choices) != "null" {
		if err := json.Unmarshal(c.Choices, &choices); err != nil {
			return malformed(errWrongType)
		}
	}
	if len(choices) == 0 {
		return nil // the usage chunk, or a keep-alive
	}
	a.choice = true
	ch := choices[0]
	if ch.FinishReason != nil {
		a.finish = *ch.FinishReason
	}
	if ch.Delta == nil {
		return nil
	}
	d := pktype.StreamDelta{}
	if content := ch.Delta.Content; len(content) > 0 && string(content) != "null" {
		if content[0] != '"' || json.Unmarshal(content, &d.Text) != nil {
			return malformed(errWrongType)
		}
	}
	a.text.WriteString(d.Text)
	for _, tc := range ch.Delta.ToolCalls {
		piece, err := a.toolCall(tc)
		if err != nil {
			return err
		}
		if piece.ID != "" || piece.Name != "" || piece.Arguments != "" {
			d.ToolCalls = append(d.ToolCalls, piece)
		}
	}
	if d.Text == "" && len(d.ToolCalls) == 0 {
		return nil
	}
	d.Index = a.pieces
	a.pieces++
	if a.emit != nil {
		a.emit(d)
	}
	return nil
}

// toolCall joins one tool call piece into its call: the ID, type and
// name once (a repeat must agree), the arguments appended. A piece
// without an index (some backends leave it out) continues the last call
// unless it starts a new one with another ID.
func (a *assembler) toolCall(tc wireToolCallDelta) (pktype.ToolCallDelta, error) {
	i := a.last
	switch {
	case tc.Index != nil:
		i = *tc.Index
		if i < 0 {
			return pktype.ToolCallDelta{}, malformed(errToolCallIndex)
		}
	case i < 0 || (tc.ID != "" && a.calls[i].ID != "" && tc.ID != a.calls[i].ID):
		i = len(a.calls)
		for a.calls[i] != nil {
			i++
		}
	}
	c := a.calls[i]
	if c == nil {
		c = &pktype.ToolCall{}
		a.calls[i] = c
	}
	a.last = i
	piece := pktype.ToolCallDelta{Index: i, ID: tc.ID}
	set := func(field *string, v string) bool {
		if v == "" || *field == v {
			return true
		}
		if *field != "" {
			return false
		}
		*field = v
		return true
	}
	if !set(&c.ID, tc.ID) || !set(&c.Type, tc.Type) {
		return piece, malformed(errStreamToolCall)
	}
	if fn := tc.Function; fn != nil {
		if !set(&c.Function.Name, fn.Name) {
			return piece, malformed(errStreamToolCall)
		}
		c.Function.Arguments += fn.Arguments
		piece.Name, piece.Arguments = fn.Name, fn.Arguments
	}
	return piece, nil
}

// response is the assembled answer, checked as decode checks a whole one.
func (a *assembler) response(u pktype.TokenUsage, p pktype.TokenUsagePresence) (*pktype.GenerateResponse, error) {
	if !a.choice {
		return nil, malformed(errNoChoices)
	}
	var calls []pktype.ToolCall
	for _, i := range slices.Sorted(maps.Keys(a.calls)) {
		c := *a.calls[i]
		if c.ID == "" || c.Function.Name == "" {
			return nil, malformed(errStreamToolCall)
		}
		if c.Type == "" {
			c.Type = pktype.ToolTypeFunction // some backends leave the only type out
		}
		calls = append(calls, c)
	}
	return &pktype.GenerateResponse{Text: a.text.String(), ToolCalls: calls, Model: a.model, FinishReason: a.finish, Usage: u, UsagePresence: &p}, nil
}
