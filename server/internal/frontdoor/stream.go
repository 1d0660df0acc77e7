package frontdoor

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
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
// (jobs.Store.SubscribeDeltas) into the deltas of a stream, and says at
// the end what of the stored answer is still to send. It relays one
// backend call from its first piece: a call whose start it missed is not
// relayed, and once something was sent, a missed piece or another call
// (a retried attempt, a repair) stops it. Whatever was sent must then be
// where the stored answer begins, or the stream ends in an error: the
// client never sees two answers spliced into one.
type relay struct {
	gen, attempt int  // the call relayed; 0 before its first piece
	next         int  // the index of its next piece
	stopped      bool // no more pieces are relayed
	text         strings.Builder
	calls        []pktype.ToolCall // as sent so far, arguments joined
}

// sent reports whether any of the answer was sent.
func (r *relay) sent() bool { return r.gen != 0 }

// take returns the stream delta for d, if d is relayed.
func (r *relay) take(d pktype.StreamDelta) (openaiapi.Delta, bool) {
	switch {
	case r.stopped:
		return openaiapi.Delta{}, false
	case !r.sent():
		if d.Index != 0 {
			return openaiapi.Delta{}, false // wait for a call's start
		}
		r.gen, r.attempt = d.Generation, d.Attempt
	case d.Generation != r.gen || d.Attempt != r.attempt || d.Index != r.next:
		r.stopped = true
		return openaiapi.Delta{}, false
	}
	r.next = d.Index + 1
	var out openaiapi.Delta
	if d.Text != "" {
		r.text.WriteString(d.Text)
		out.Content = &d.Text
	}
	for _, c := range d.ToolCalls {
		for len(r.calls) <= c.Index {
			r.calls = append(r.calls, pktype.ToolCall{Type: pktype.ToolTypeFunction})
		}
		sc := &r.calls[c.Index]
		sc.ID += c.ID
		sc.Function.Name += c.Name
		sc.Function.Arguments += c.Arguments
		td := openaiapi.ToolCallDelta{Index: c.Index, ID: c.ID, Function: openaiapi.FunctionDelta{Name: c.Name, Arguments: c.Arguments}}
		if c.ID != "" {
			td.Type = pktype.ToolTypeFunction
		}
		out.ToolCalls = append(out.ToolCalls, td)
	}
	return out, out.Content != nil || len(out.ToolCalls) > 0
}

// rest is what of message is still to send after what was relayed; ok is
// false when what was relayed is not where message begins.
func (r *relay) rest(message openaiapi.Message) (openaiapi.Delta, bool) {
	var out openaiapi.Delta
	text := ""
	if message.Content != nil {
		text = *message.Content
	}
	sent := r.text.String()
	if !strings.HasPrefix(text, sent) || len(r.calls) > len(message.ToolCalls) {
		return out, false
	}
	if s := text[len(sent):]; s != "" {
		out.Content = &s
	}
	for i, c := range message.ToolCalls {
		d := openaiapi.ToolCallDelta{Index: i, ID: c.ID, Type: c.Type, Function: openaiapi.FunctionDelta(c.Function)}
		if i < len(r.calls) {
			s := r.calls[i]
			if s.ID != c.ID || s.Function.Name != c.Function.Name || !strings.HasPrefix(c.Function.Arguments, s.Function.Arguments) {
				return out, false
			}
			if c.Function.Arguments == s.Function.Arguments {
				continue
			}
			d = openaiapi.ToolCallDelta{Index: i, Function: openaiapi.FunctionDelta{Arguments: c.Function.Arguments[len(s.Function.Arguments):]}}
		}
		out.ToolCalls = append(out.ToolCalls, d)
	}
	return out, true
}

// streamChat answers with Server-Sent Events: the headers at once, then
// the answer's pieces as the worker running the job publishes them, a
// keep-alive comment while none come, and at the end what the stored
// answer adds to what was sent (everything, when nothing was), the
// finish reason, the usage when asked, and data: [DONE]. A failure after
// the headers is one data: {"error": {...}} event, which OpenAI's SDKs
// raise; so is an answer that does not continue what was sent (see
// relay). pieces is the job's subscription.
func (a *API) streamChat(w http.ResponseWriter, r *http.Request, id auth.Identity, e submit.Admitted, params openaiapi.ChatParams,
	pieces <-chan pktype.StreamDelta, deadline time.Time) {
	// The write deadline is the chat's (set by Chat), not per flush.
	sse, err := httpapi.StartSSE(w, 0)
	if err != nil {
		return
	}
	base := openaiapi.ChatCompletionChunk{ID: "chatcmpl-" + e.JobID, Object: "chat.completion.chunk",
		Created: time.Now().Unix(), Model: params.Model, WithUsage: params.IncludeUsage}
	chunk := func(d openaiapi.Delta, finish *string) openaiapi.ChatCompletionChunk {
		c := base
		c.Choices = []openaiapi.ChunkChoice{{Delta: d, FinishReason: finish}}
		return c
	}
	event := func(v any) error {
		b, err := json.Marshal(v)
		if err != nil {
			return err
		}
		return sse.Event(0, "", b)
	}

	var rl relay
	res, left := a.follow(r, sse, id, e, pieces, deadline, func(d pktype.StreamDelta) error {
		first := !rl.sent()
		delta, ok := rl.take(d)
		if !ok {
			return nil
		}
		if first {
			delta.Role = pktype.RoleAssistant
		}
		if err := event(chunk(delta, nil)); err != nil {
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
	c, ok := v.(openaiapi.ChatCompletion)
	if status != http.StatusOK || !ok {
		_ = event(v)
		_ = sse.Flush()
		return
	}
	if !rl.sent() {
		// Nothing was relayed: the whole answer, as the job stored it.
		for _, ch := range openaiapi.Chunks(c, params.IncludeUsage) {
			if event(ch) != nil {
				return
			}
		}
	} else {
		rest, ok := rl.rest(c.Choices[0].Message)
		if !ok {
			_ = event(openaiapi.NewError("The answer being streamed was replaced: the backend call that sent its first part failed, "+
				"and the job's answer came from a retry. Fetch the whole answer with GET /v1/prompts/"+e.PromptID+".",
				openaiapi.TypeServer, "", "stream_replaced"))
			_ = sse.Flush()
			return
		}
		if rest.Content != nil || len(rest.ToolCalls) > 0 {
			if event(chunk(rest, nil)) != nil {
				return
			}
		}
		finish := c.Choices[0].FinishReason
		if event(chunk(openaiapi.Delta{}, &finish)) != nil {
			return
		}
		if params.IncludeUsage {
			last := base
			last.Choices = []openaiapi.ChunkChoice{}
			last.Usage = c.Usage
			if event(last) != nil {
				return
			}
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
// goroutine of its own; send and the comments alone write. left is true
// when a write failed: the client has gone (the job goes on).
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
			return res, false
		}
	}
}
