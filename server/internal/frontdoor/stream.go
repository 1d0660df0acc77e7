package frontdoor

import (
	"context"
	"encoding/json"
	"net/http"
	"sync"
	"time"

	"github.com/promptkit/promptkit/internal/openaiapi"
	"github.com/promptkit/promptkit/jobs"
	"github.com/promptkit/promptkit/pktype"
	"github.com/promptkit/promptkit/server/internal/auth"
	"github.com/promptkit/promptkit/server/internal/httpapi"
	"github.com/promptkit/promptkit/server/internal/submit"
)

// relay turns the pieces a worker publishes of a job's answer
// (jobs.Notifier.SubscribeDeltas) into the chunks of a stream: each piece's
// chunk as the backend framed it (pktype.StreamDelta.Raw: its choices,
// reasoning, logprobs, system_fingerprint, ...), under the stream's id,
// with its finish reason and usage held back for the end, when the job
// has ended and the stored answer says them. It relays one backend call
// from its first piece: a call whose start it missed is not relayed, and
// once something was sent, a missed piece or another call (a retried
// attempt, a repair) stops it. Whatever was sent must then be where the
// stored answer begins, or the stream ends in an error: the client never
// sees two answers spliced into one.
type relay struct {
	id        string
	created   int64
	withUsage bool
	// model is the model chunks name: the request's until the backend
	// names its own, which the stored answer names too.
	model string

	gen, attempt int  // the call relayed; 0 before its first piece
	next         int  // the index of its next piece
	stopped      bool // no more pieces are relayed
	sent         map[int]*openaiapi.Sent
}

// started reports whether any of the answer was sent.
func (r *relay) started() bool { return r.gen != 0 }

// accept reports whether d is relayed, and returns what was sent of its
// choice before it.
func (r *relay) accept(d pktype.StreamDelta) (*openaiapi.Sent, bool) {
	switch {
	case r.stopped:
		return nil, false
	case !r.started():
		if d.Index != 0 {
			return nil, false // wait for a call's start
		}
		r.gen, r.attempt = d.Generation, d.Attempt
	case d.Generation != r.gen || d.Attempt != r.attempt || d.Index != r.next:
		r.stopped = true
		return nil, false
	}
	r.next = d.Index + 1
	if r.sent == nil {
		r.sent = map[int]*openaiapi.Sent{}
	}
	s := r.sent[d.Choice]
	if s == nil {
		s = &openaiapi.Sent{Text: map[string]string{}}
		r.sent[d.Choice] = s
	}
	return s, true
}

// take returns the chunk that relays d, if d is relayed.
func (r *relay) take(d pktype.StreamDelta) ([]byte, bool) {
	s, ok := r.accept(d)
	if !ok {
		return nil, false
	}
	for _, c := range d.ToolCalls {
		for len(s.Calls) <= c.Index {
			s.Calls = append(s.Calls, pktype.ToolCall{Type: pktype.ToolTypeFunction})
		}
		sc := &s.Calls[c.Index]
		sc.ID += c.ID
		sc.Function.Name += c.Name
		sc.Function.Arguments += c.Arguments
	}
	chunk, ok := r.frame(d, s)
	if !ok {
		chunk = r.synthesize(d, s)
	}
	s.Started = true
	return chunk, true
}

// frame is d's own chunk under the stream's id, time and usage rule,
// without its finish reason; ok is false when d came without one, or
// with one it cannot read. It adds what was sent of the choice's text
// to s.
func (r *relay) frame(d pktype.StreamDelta, s *openaiapi.Sent) ([]byte, bool) {
	var chunk map[string]json.RawMessage
	if json.Unmarshal(d.Raw, &chunk) != nil || chunk == nil {
		return nil, false
	}
	var choices []map[string]json.RawMessage
	if json.Unmarshal(chunk["choices"], &choices) != nil || len(choices) != 1 {
		return nil, false
	}
	ch := choices[0]
	var delta map[string]json.RawMessage
	if err := json.Unmarshal(ch["delta"], &delta); err != nil {
		return nil, false
	}
	if delta == nil {
		delta = map[string]json.RawMessage{}
	}
	for k, v := range delta {
		var text string
		if k != "role" && json.Unmarshal(v, &text) == nil {
			s.Text[k] += text
		}
	}
	if _, ok := delta["role"]; !ok && !s.Started {
		delta["role"] = json.RawMessage(`"assistant"`)
	}
	ch["delta"], _ = json.Marshal(delta)          // cannot fail: raw members
	ch["finish_reason"] = json.RawMessage("null") // said at the end
	chunk["choices"], _ = json.Marshal(choices)
	var model string
	if json.Unmarshal(chunk["model"], &model) == nil && model != "" {
		r.model = model
	} else {
		chunk["model"] = mustJSON(r.model) // every chunk names one
	}
	chunk["id"], chunk["object"], chunk["created"] = mustJSON(r.id), json.RawMessage(`"chat.completion.chunk"`), mustJSON(r.created)
	delete(chunk, "usage")
	if r.withUsage {
		chunk["usage"] = json.RawMessage("null")
	}
	b, err := json.Marshal(chunk)
	return b, err == nil
}

// synthesize is the chunk of a piece that came without its own (too
// large for a PostgreSQL notification): its text, reasoning and calls.
func (r *relay) synthesize(d pktype.StreamDelta, s *openaiapi.Sent) []byte {
	var delta openaiapi.Delta
	if !s.Started {
		delta.Role = pktype.RoleAssistant
	}
	if d.Text != "" {
		delta.Content = &d.Text
		s.Text["content"] += d.Text
	}
	if d.Reasoning != "" {
		delta.Extra = pktype.Params{"reasoning_content": mustJSON(d.Reasoning)}
		s.Text["reasoning_content"] += d.Reasoning
	}
	for _, c := range d.ToolCalls {
		td := openaiapi.ToolCallDelta{Index: c.Index, ID: c.ID, Function: openaiapi.FunctionDelta{Name: c.Name, Arguments: c.Arguments}}
		if c.ID != "" {
			td.Type = pktype.ToolTypeFunction
		}
		delta.ToolCalls = append(delta.ToolCalls, td)
	}
	b, _ := json.Marshal(r.chunk(openaiapi.ChunkChoice{Index: d.Choice, Delta: delta})) // cannot fail: strings and raw JSON
	return b
}

// chunk is a chunk of the stream with the given choices.
func (r *relay) chunk(choices ...openaiapi.ChunkChoice) openaiapi.ChatCompletionChunk {
	return openaiapi.ChatCompletionChunk{ID: r.id, Object: "chat.completion.chunk", Created: r.created, Model: r.model,
		WithUsage: r.withUsage, Choices: choices}
}

// rest are the chunks that end the stream with what of c was not sent,
// under the stream's id and time; ok is false when what was sent is not
// where c begins.
func (r *relay) rest(c openaiapi.ChatCompletion) ([]openaiapi.ChatCompletionChunk, bool) {
	out, ok := openaiapi.ChunksAfter(c, r.sent, r.withUsage)
	for i := range out {
		out[i].ID, out[i].Created = r.id, r.created
	}
	return out, ok
}

// mustJSON is v's JSON, for values that always have one.
func mustJSON(v any) json.RawMessage {
	b, _ := json.Marshal(v) // cannot fail: a string or a number
	return b
}

// streamChat answers with Server-Sent Events: the headers at once, then
// the answer's pieces as the worker running the job publishes them, a
// keep-alive comment while none come, and at the end what the stored
// answer adds to what was sent (everything, when nothing was), each
// choice's finish reason, the usage when asked, and data: [DONE]. A
// failure after the headers is one data: {"error": {...}} event, which
// OpenAI's SDKs raise; so is an answer that does not continue what was
// sent (see relay). pieces is the job's subscription.
func (a *API) streamChat(w http.ResponseWriter, r *http.Request, id auth.Identity, e submit.Admitted, params openaiapi.ChatParams,
	pieces <-chan pktype.StreamDelta, deadline time.Time) {
	// The write deadline is the chat's (set by Chat), not per flush.
	sse, err := httpapi.StartSSE(w, 0)
	if err != nil {
		return
	}
	event := func(v any) error {
		b, err := json.Marshal(v)
		if err != nil {
			return err
		}
		return sse.Event(0, "", b)
	}

	rl := relay{id: "chatcmpl-" + e.JobID, created: time.Now().Unix(), withUsage: params.IncludeUsage, model: params.Model}
	res, left := a.follow(r, sse, id, e, pieces, deadline, func(d pktype.StreamDelta) error {
		chunk, ok := rl.take(d)
		if !ok {
			return nil
		}
		if err := sse.Event(0, "", chunk); err != nil {
			return err
		}
		return sse.Flush()
	})
	if left || r.Context().Err() != nil {
		return // the client left; the job goes on
	}
	var status int
	var v any
	err = res.err
	if err == nil {
		status, v, err = a.chatOutcome(r.Context(), id, res.j)
	}
	if err != nil {
		a.Log.Error("request failed", "route", r.Pattern, "op", "chat completion stream", "err", err)
		_ = event(openaiapi.NewError("The server had an error while processing the request.", openaiapi.TypeAPI, "", "internal_error"))
		_ = sse.Flush()
		return
	}
	raw, ok := v.(json.RawMessage)
	var c openaiapi.ChatCompletion
	if status != http.StatusOK || !ok || json.Unmarshal(raw, &c) != nil {
		_ = event(v)
		_ = sse.Flush()
		return
	}
	chunks := openaiapi.Chunks(c, params.IncludeUsage)
	if rl.started() {
		if chunks, ok = rl.rest(c); !ok {
			_ = event(openaiapi.NewError("The answer being streamed was replaced: the backend call that sent its first part failed, "+
				"and the job's answer came from a retry. Fetch the whole answer with GET /v1/prompts/"+e.PromptID+".",
				openaiapi.TypeServer, "", "stream_replaced"))
			_ = sse.Flush()
			return
		}
	}
	for _, ch := range chunks {
		if event(ch) != nil {
			return
		}
	}
	_ = sse.Event(0, "", []byte("[DONE]"))
	_ = sse.Flush()
}

// waited is how a wait for a job ended: the job as it then was, or why
// it could not be read.
type waited struct {
	j   jobs.Job
	err error
}

// follow waits for job e (awaitJob, until the deadline) beside the relay
// of its answer's pieces: send gets each piece as it comes, and a
// keep-alive comment goes out while none come. The wait runs in a
// goroutine of its own; send and the comments alone write. When the wait
// ends, the pieces already delivered are sent first: a worker publishes
// its pieces before it stores the answer, so a fast backend's last
// pieces may still be queued, and sending them spares the client a rest
// made from the stored answer. left is true when a write failed: the
// client has gone (the job goes on).
func (a *API) follow(r *http.Request, sse *httpapi.SSE, id auth.Identity, e submit.Admitted, pieces <-chan pktype.StreamDelta,
	deadline time.Time, send func(pktype.StreamDelta) error) (res waited, left bool) {
	ctx, cancel := context.WithCancel(r.Context())
	done := make(chan waited, 1)
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	wg.Go(func() {
		j, err := a.awaitJob(ctx, id.Org, e, deadline)
		done <- waited{j, err}
	})
	keepAlive := time.NewTicker(a.KeepAlive)
	defer keepAlive.Stop()
	for {
		select {
		case d, ok := <-pieces:
			if !ok {
				pieces = nil // the request ended
				continue
			}
			if send(d) != nil {
				return res, true
			}
		case <-keepAlive.C:
			if sse.Comment("keep-alive") != nil || sse.Flush() != nil {
				return res, true
			}
		case res = <-done:
			for {
				select {
				case d, ok := <-pieces:
					if !ok {
						return res, false
					}
					if send(d) != nil {
						return res, true
					}
				default:
					return res, false
				}
			}
		}
	}
}
