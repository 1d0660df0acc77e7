package openai

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"io"
	"maps"
	"mime"
	"net/http"
	"slices"
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

// Streaming wire types: OpenAI's chat.completion.chunk. Its members
// are kept raw, so that the answer a stream makes holds every field the
// backend sent, those promptkit does not model too.
type (
	wireChunk struct {
		Object  string          `json:"object"`
		Model   string          `json:"model"`
		Choices json.RawMessage `json:"choices"`
		Usage   json.RawMessage `json:"usage"`
		Error   json.RawMessage `json:"error"`
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

// assembler joins a stream's chunks into one answer: the pieces it
// passes on as they come, and at the end the answer and the
// chat.completion object the chunks make (GenerateResponse.Raw).
type assembler struct {
	emit    func(pktype.StreamDelta)
	pieces  int
	choices map[int]*choiceAssembly
	model   string
	// top holds the chunks' other members (id, created,
	// system_fingerprint, ...), the last non-null of each.
	top   map[string]json.RawMessage
	usage *wireUsage
	// rawUsage is the last usage reported, as sent.
	rawUsage json.RawMessage
}

// choiceAssembly is one choice of a streamed answer as its deltas built it.
type choiceAssembly struct {
	index int
	calls map[int]*pktype.ToolCall
	last  int // the index of the call most recently added to
	// message holds the delta's members but its tool calls (content,
	// reasoning, refusal, role, ...), merged (mergeMember); choice the
	// choice's own members but its delta (finish_reason, logprobs, ...).
	message map[string]json.RawMessage
	choice  map[string]json.RawMessage
}

// decodeStream reads a chat completion streamed as Server-Sent Events
// from r, passing each piece to emit as it is decoded, and returns the
// answer once "data: [DONE]" ends the stream. It reads at most maxBytes.
// Errors are malformed (*llm.AttemptError), an *errorEvent, or r's own
// read error; a stream that ends before [DONE] is never a success. Usage
// and presence are the last usage reported, also on failure.
func decodeStream(r io.Reader, maxBytes int64, emit func(pktype.StreamDelta)) (*pktype.GenerateResponse, pktype.TokenUsage, pktype.TokenUsagePresence, error) {
	a := &assembler{emit: emit, choices: map[int]*choiceAssembly{}, top: map[string]json.RawMessage{}}
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
	var members map[string]json.RawMessage
	if err := json.Unmarshal(obj, &members); err != nil {
		return malformed(errWrongType)
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
		a.rawUsage = bytes.Clone(c.Usage)
	}
	if a.model == "" {
		a.model = c.Model
	}
	for k, v := range members {
		switch k {
		case "choices", "usage", "object", "model":
		default:
			if !isNull(v) {
				a.top[k] = bytes.Clone(v)
			}
		}
	}
	var choices []map[string]json.RawMessage
	if len(c.Choices) > 0 && string(c.Choices) != "null" {
		if err := json.Unmarshal(c.Choices, &choices); err != nil {
			return malformed(errWrongType)
		}
	}
	for i, ch := range choices {
		raw := obj
		if len(choices) > 1 {
			// The piece's chunk holds its own choice alone.
			one := maps.Clone(members)
			one["choices"], _ = json.Marshal([]map[string]json.RawMessage{ch}) // cannot fail: raw members
			raw, _ = json.Marshal(one)
		}
		if err := a.choice(ch, i, raw); err != nil {
			return err
		}
	}
	return nil
}

// choice takes one choice of a chunk (the i-th), whose chunk is raw.
func (a *assembler) choice(ch map[string]json.RawMessage, i int, raw []byte) error {
	index := i
	if v, ok := ch["index"]; ok && !isNull(v) {
		if json.Unmarshal(v, &index) != nil || index < 0 {
			return malformed(errWrongType)
		}
	}
	c := a.choices[index]
	if c == nil {
		c = &choiceAssembly{index: index, calls: map[int]*pktype.ToolCall{}, last: -1,
			message: map[string]json.RawMessage{}, choice: map[string]json.RawMessage{}}
		a.choices[index] = c
	}
	for k, v := range ch {
		switch k {
		case "index", "delta":
		case "finish_reason":
			if !isNull(v) {
				if v[0] != '"' {
					return malformed(errWrongType)
				}
				c.choice[k] = bytes.Clone(v)
			}
		default:
			mergeMember(c.choice, k, v)
		}
	}
	d := pktype.StreamDelta{Choice: index}
	delta := ch["delta"]
	var members map[string]json.RawMessage
	if !isNull(delta) {
		if err := json.Unmarshal(delta, &members); err != nil || members == nil {
			return malformed(errWrongType)
		}
	}
	something := !isNull(ch["logprobs"])
	for k, v := range members {
		switch k {
		case "tool_calls":
			if isNull(v) {
				continue
			}
			var calls []wireToolCallDelta
			if err := json.Unmarshal(v, &calls); err != nil {
				return malformed(errWrongType)
			}
			for _, tc := range calls {
				piece, err := c.toolCall(tc)
				if err != nil {
					return err
				}
				if piece.ID != "" || piece.Name != "" || piece.Arguments != "" {
					d.ToolCalls = append(d.ToolCalls, piece)
				}
			}
		case "content", "reasoning_content", "reasoning":
			mergeMember(c.message, k, v)
			if isNull(v) {
				continue
			}
			var s string
			switch {
			case v[0] == '"' && json.Unmarshal(v, &s) == nil:
				if k == "content" {
					d.Text = s
				} else {
					d.Reasoning += s
				}
			case k == "content":
				return malformed(errWrongType)
			default:
				something = true // a reasoning object, not text
			}
		case "role":
			mergeMember(c.message, k, v)
		default:
			mergeMember(c.message, k, v)
			something = something || !isNull(v)
		}
	}
	if d.Text == "" && d.Reasoning == "" && len(d.ToolCalls) == 0 && !something {
		return nil // the role, an empty piece or the finish reason
	}
	d.Index = a.pieces
	d.Raw = bytes.Clone(raw)
	a.pieces++
	if a.emit != nil {
		a.emit(d)
	}
	return nil
}

// textMembers are the members whose pieces a stream sends in turn, to be
// joined: the answer's text, its reasoning and refusal, a deprecated
// function call's arguments, audio's data and transcript.
var textMembers = map[string]bool{"content": true, "reasoning_content": true, "reasoning": true, "refusal": true,
	"arguments": true, "data": true, "transcript": true}

// mergeMember merges v, a chunk's member k, into m, where the earlier
// chunks' are: the pieces of a text member are joined, arrays (logprobs'
// content) appended to, objects merged member by member, and anything
// else replaced by its latest non-null value.
func mergeMember(m map[string]json.RawMessage, k string, v json.RawMessage) {
	old, ok := m[k]
	if isNull(v) {
		if !ok {
			m[k] = json.RawMessage("null") // sent, if only as null
		}
		return
	}
	if !ok || isNull(old) {
		m[k] = bytes.Clone(v)
		return
	}
	switch {
	case old[0] == '"' && v[0] == '"' && textMembers[k]:
		var a, b string
		if json.Unmarshal(old, &a) == nil && json.Unmarshal(v, &b) == nil {
			m[k], _ = json.Marshal(a + b)
			return
		}
	case old[0] == '[' && v[0] == '[':
		var a, b []json.RawMessage
		if json.Unmarshal(old, &a) == nil && json.Unmarshal(v, &b) == nil {
			m[k], _ = json.Marshal(append(a, b...))
			return
		}
	case old[0] == '{' && v[0] == '{':
		var a, b map[string]json.RawMessage
		if json.Unmarshal(old, &a) == nil && json.Unmarshal(v, &b) == nil {
			for bk, bv := range b {
				mergeMember(a, bk, bv)
			}
			m[k], _ = json.Marshal(a)
			return
		}
	case k == "role":
		return // sent once; a repeat says the same
	}
	m[k] = bytes.Clone(v)
}

// toolCall joins one tool call piece into its call: the ID, type and
// name once (a repeat must agree), the arguments appended. A piece
// without an index (some backends leave it out) continues the last call
// unless it starts a new one with another ID.
func (c *choiceAssembly) toolCall(tc wireToolCallDelta) (pktype.ToolCallDelta, error) {
	i := c.last
	switch {
	case tc.Index != nil:
		i = *tc.Index
		if i < 0 {
			return pktype.ToolCallDelta{}, malformed(errToolCallIndex)
		}
	case i < 0 || (tc.ID != "" && c.calls[i].ID != "" && tc.ID != c.calls[i].ID):
		i = len(c.calls)
		for c.calls[i] != nil {
			i++
		}
	}
	call := c.calls[i]
	if call == nil {
		call = &pktype.ToolCall{}
		c.calls[i] = call
	}
	c.last = i
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
	if !set(&call.ID, tc.ID) || !set(&call.Type, tc.Type) {
		return piece, malformed(errStreamToolCall)
	}
	if fn := tc.Function; fn != nil {
		if !set(&call.Function.Name, fn.Name) {
			return piece, malformed(errStreamToolCall)
		}
		call.Function.Arguments += fn.Arguments
		piece.Name, piece.Arguments = fn.Name, fn.Arguments
	}
	return piece, nil
}

// result is the choice as an answer's, checked as decode checks a whole
// one, and its chat.completion choice object.
func (c *choiceAssembly) result() (pktype.Choice, map[string]any, error) {
	out := pktype.Choice{Index: c.index}
	for _, i := range slices.Sorted(maps.Keys(c.calls)) {
		call := *c.calls[i]
		if call.ID == "" || call.Function.Name == "" {
			return out, nil, malformed(errStreamToolCall)
		}
		if call.Type == "" {
			call.Type = pktype.ToolTypeFunction // some backends leave the only type out
		}
		out.ToolCalls = append(out.ToolCalls, call)
	}
	out.Text = stringOf(c.message["content"])
	out.Reasoning = cmp.Or(stringOf(c.message["reasoning_content"]), stringOf(c.message["reasoning"]))
	out.FinishReason = stringOf(c.choice["finish_reason"])

	msg := map[string]any{}
	for k, v := range c.message {
		msg[k] = v
	}
	if _, ok := msg["role"]; !ok {
		msg["role"] = pktype.RoleAssistant
	}
	if _, ok := msg["content"]; !ok {
		if len(out.ToolCalls) > 0 {
			msg["content"] = nil
		} else {
			msg["content"] = ""
		}
	}
	if len(out.ToolCalls) > 0 {
		msg["tool_calls"] = out.ToolCalls
	}
	obj := map[string]any{"index": c.index, "message": msg, "logprobs": nil, "finish_reason": nil}
	for k, v := range c.choice {
		obj[k] = v
	}
	return out, obj, nil
}

// response is the assembled answer and its chat.completion object.
func (a *assembler) response(u pktype.TokenUsage, p pktype.TokenUsagePresence) (*pktype.GenerateResponse, error) {
	if len(a.choices) == 0 {
		return nil, malformed(errNoChoices)
	}
	var choices []pktype.Choice
	var objs []map[string]any
	for _, i := range slices.Sorted(maps.Keys(a.choices)) {
		c, obj, err := a.choices[i].result()
		if err != nil {
			return nil, err
		}
		choices, objs = append(choices, c), append(objs, obj)
	}
	r := response(choices, a.model, u, p)
	whole := map[string]any{}
	for k, v := range a.top {
		whole[k] = v
	}
	whole["object"], whole["model"], whole["choices"] = "chat.completion", a.model, objs
	if a.rawUsage != nil {
		whole["usage"] = a.rawUsage
	}
	raw, err := json.Marshal(whole)
	if err != nil {
		return nil, malformed(errWrongType)
	}
	r.Raw = raw
	return r, nil
}
