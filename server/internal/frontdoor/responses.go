package frontdoor

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"time"

	"github.com/promptkit/promptkit/internal/openaiapi"
	"github.com/promptkit/promptkit/jobs"
	"github.com/promptkit/promptkit/pktype"
	"github.com/promptkit/promptkit/server/internal/auth"
	"github.com/promptkit/promptkit/server/internal/httpapi"
	"github.com/promptkit/promptkit/server/internal/submit"
)

// OpenAI's Responses API (docs/openai.md#responses): a request is stored
// as a prompt whose chat request holds the whole conversation (the
// instructions, the turns of the response it continues, its input) and
// the request's echo (jobs.ResponsesRequest); its id is "resp_" and the
// prompt's, which a retry keeps. Answered like a chat completion (the
// same wait, errors and relay of the answer's pieces), or at once with
// background, whose event stream is made from what is stored alone, so
// that it can be read again from any sequence number, also after a
// restart.

// maxInputItemsLimit bounds ?limit= of GET /v1/responses/{id}/input_items,
// as OpenAI does.
const maxInputItemsLimit = 100

// jobHeaders reads the headers every request that queues a job takes:
// X-Promptkit-Priority, X-Promptkit-Max-Attempts and Idempotency-Key.
func jobHeaders(r *http.Request) (prio *int, attempts int, key string, err error) {
	if r.Header.Get(headerPriority) != "" {
		n, err := headerInt(r, headerPriority, jobs.MinPriority, jobs.MaxPriority,
			fmt.Sprintf("%s must be an integer from %d (first) to %d (last).", headerPriority, jobs.MinPriority, jobs.MaxPriority))
		if err != nil {
			return nil, 0, "", err
		}
		prio = &n
	}
	if attempts, err = headerInt(r, headerMaxAttempts, 1, jobs.MaxMaxAttempts,
		fmt.Sprintf("%s must be an integer from 1 to %d.", headerMaxAttempts, jobs.MaxMaxAttempts)); err != nil {
		return nil, 0, "", err
	}
	key, err = httpapi.IdempotencyKey(r)
	return prio, attempts, key, err
}

// CreateResponse answers POST /v1/responses: the request becomes a job;
// the answer is its response object once the job is terminal, at once
// with background, or an event stream with stream.
func (a *API) CreateResponse(w http.ResponseWriter, r *http.Request) error {
	id := auth.Of(r)
	prio, attempts, key, err := jobHeaders(r)
	if err != nil {
		return err
	}
	body, err := httpapi.ReadBody(w, r, a.MaxBody)
	if err != nil {
		return err
	}
	params, err := openaiapi.DecodeResponses(body)
	if err != nil {
		return httpapi.About("decoding", err)
	}
	target, err := a.resolve(params.Model)
	if err != nil {
		return err
	}
	var prev []pktype.Message
	if params.PreviousResponseID != "" {
		if prev, err = a.continued(r.Context(), id, params.PreviousResponseID); err != nil {
			return err
		}
	}
	items, err := a.resolveItems(r.Context(), id, params.Input)
	if err != nil {
		return err
	}
	chat, err := params.Conversation(prev, items)
	if err != nil {
		return httpapi.About("decoding", err)
	}
	opts := target.Options
	// A plain stream relays the answer's pieces; a background one is made
	// from the stored answer alone (see ResponseEvents).
	opts.Stream = params.Stream && !params.Background
	if !params.Background {
		opts.Deadline = a.clientDeadline(r)
	}
	p, err := jobs.EnqueueParams{
		OrgID: id.Org, CreatedBy: id.User, Chat: &chat, Profile: target.Profile,
		ExecutionOptions: opts, Priority: prio, MaxAttempts: attempts,
	}.Normalize()
	if err != nil {
		return httpapi.About("response", err)
	}
	hash := responseHash(params.Model, chat)
	var coalesced bool
	key, coalesced = a.sameRequest(r, id, key, hash, &p)
	e, err := a.Jobs.Admit(r.Context(), id, p, key, hash, "response", !params.Background)
	if err != nil {
		return err
	}
	a.Log.Debug("response queued", "prompt_id", e.PromptID, "job_id", e.JobID, "org", id.Org,
		"existing", e.Existing, "coalesced", coalesced, "background", params.Background)
	httpapi.SetIDs(w, e.PromptID, e.JobID)
	// A worker may have started the job already: the store replays a
	// job's first pieces to a reader that comes late.
	var pieces <-chan pktype.StreamDelta
	if opts.Stream {
		pieces = a.notifier().SubscribeDeltas(r.Context(), e.JobID)
	}
	stored, err := a.Store.GetPrompt(r.Context(), id.Org, e.PromptID)
	if err != nil {
		return httpapi.About("response", err)
	}
	deadline := time.Now().Add(a.chatTimeout())
	_ = http.NewResponseController(w).SetWriteDeadline(deadline.Add(10 * time.Second))
	switch {
	case params.Background && params.Stream:
		a.streamStored(w, r, id, stored, -1, deadline)
		return nil
	case params.Background:
		o, err := a.responseNow(r.Context(), id, stored)
		if err != nil {
			return httpapi.About("response", err)
		}
		httpapi.WriteJSON(w, http.StatusOK, o)
		return nil
	case params.Stream:
		a.streamLive(w, r, id, e, stored, pieces, deadline)
		return nil
	}
	httpapi.EarlyHints(w, r)
	j, err := a.awaitJob(r.Context(), id.Org, e, deadline)
	if err != nil {
		return httpapi.About("response", err)
	}
	status, v, err := a.responseOutcome(r.Context(), id, stored, j)
	if err != nil {
		return httpapi.About("response", err)
	}
	writeOutcome(w, j, status, v)
	return nil
}

// responseHash fingerprints a Responses request for its Idempotency-Key:
// the model and the whole conversation with its parameters and echo
// (background and previous_response_id included; how it is delivered,
// stream, is not).
func responseHash(model string, c jobs.ChatRequest) string {
	c.Schema = httpapi.CanonicalJSON(c.Schema)
	h, _ := httpapi.Hash(struct {
		API   string           `json:"api"`
		Model string           `json:"model"`
		Chat  jobs.ChatRequest `json:"chat"`
	}{"responses", model, c}) // cannot fail: strings, numbers and valid JSON
	return h
}

// ownedResponse reads the prompt of a response the identity may see: a
// prompt made by the Responses API, of the identity's (or, for an admin,
// its org's).
func (a *API) ownedResponse(ctx context.Context, id auth.Identity, respID string) (jobs.Prompt, error) {
	promptID, ok := openaiapi.PromptOfResponse(respID)
	if !ok {
		return jobs.Prompt{}, jobs.ErrNotFound
	}
	p, err := a.Store.GetPrompt(ctx, id.Org, promptID)
	if err != nil {
		return p, err
	}
	if !ownsResponse(id, p) {
		return jobs.Prompt{}, jobs.ErrNotFound
	}
	return p, nil
}

// ownsResponse reports whether p is a response (a Responses request's
// prompt) the identity may see.
func ownsResponse(id auth.Identity, p jobs.Prompt) bool {
	return id.Owns(p.OrgID, p.CreatedBy) && p.Chat != nil && p.Chat.Responses != nil
}

// responseState is a response's current job and, when that job
// succeeded, its answer (nil when it is no longer stored).
func (a *API) responseState(ctx context.Context, id auth.Identity, p jobs.Prompt) (jobs.Job, *jobs.Response, error) {
	j, err := a.currentJob(ctx, id, p.ID)
	if err != nil || !answered(j) {
		return j, nil, err
	}
	resp, err := a.Store.GetResponse(ctx, id.Org, j.ResponseID)
	if errors.Is(err, jobs.ErrNotFound) {
		return j, nil, nil
	}
	if err != nil {
		return j, nil, err
	}
	return j, &resp, nil
}

// currentJob is the latest job of a response's prompt: ErrNotFound when
// it has none (archived between the reads).
func (a *API) currentJob(ctx context.Context, id auth.Identity, promptID string) (jobs.Job, error) {
	js, err := a.Store.PromptJobs(ctx, id.Org, promptID)
	if err != nil {
		return jobs.Job{}, err
	}
	if len(js) == 0 {
		return jobs.Job{}, jobs.ErrNotFound
	}
	return js[len(js)-1], nil
}

// answered reports whether a response's current job j has an answer
// stored under j.ResponseID.
func answered(j jobs.Job) bool { return j.State == jobs.Succeeded && j.ResponseID != "" }

// responseNow is a response's object as it stands.
func (a *API) responseNow(ctx context.Context, id auth.Identity, p jobs.Prompt) (openaiapi.Response, error) {
	j, resp, err := a.responseState(ctx, id, p)
	if err != nil {
		return openaiapi.Response{}, err
	}
	return openaiapi.ResponseObject(p, j, resp), nil
}

// continued are the turns a request continuing respID starts with (see
// openaiapi.ContinuedMessages); the response must be the identity's and
// answered.
func (a *API) continued(ctx context.Context, id auth.Identity, respID string) ([]pktype.Message, error) {
	const param = "previous_response_id"
	p, err := a.ownedResponse(ctx, id, respID)
	if errors.Is(err, jobs.ErrNotFound) {
		return nil, &httpapi.Problem{Status: http.StatusNotFound, Code: "not_found", Param: param,
			Message: "The previous response does not exist (or is not yours)."}
	}
	if err != nil {
		return nil, httpapi.About("previous response", err)
	}
	j, resp, err := a.responseState(ctx, id, p)
	if err != nil {
		return nil, httpapi.About("previous response", err)
	}
	if resp == nil {
		return nil, httpapi.OpenAIInvalid(param, openaiapi.CodeInvalidValue,
			"The previous response has no answer to continue from: it is "+openaiapi.ResponseObject(p, j, nil).Status+".")
	}
	return openaiapi.ContinuedMessages(p, *resp), nil
}

// resolveItems replaces each item reference of the input with the
// stored item it names: an item of a response of the identity's (its
// output, or its input). openaiapi.DecodeResponses has bounded the
// references and the responses they name; the responses are read
// together (their prompts in one query, their answers in another, and
// each one's jobs once, however many of its items are named), and what
// the references resolve to is bounded by the body limit, as if the
// items had been sent.
func (a *API) resolveItems(ctx context.Context, id auth.Identity, items []openaiapi.Item) ([]openaiapi.Item, error) {
	var promptIDs []string
	for _, it := range items {
		if it.Type != openaiapi.ItemReference {
			continue
		}
		if p, ok := openaiapi.PromptOfItem(it.ID); ok && !slices.Contains(promptIDs, p) {
			promptIDs = append(promptIDs, p)
		}
	}
	stored, err := a.storedItems(ctx, id, promptIDs)
	if err != nil {
		return nil, httpapi.About("item reference", err)
	}
	out := slices.Clone(items)
	left := a.MaxBody
	for i, it := range out {
		if it.Type != openaiapi.ItemReference {
			continue
		}
		o, ok := stored[it.ID]
		if !ok {
			return nil, &httpapi.Problem{Status: http.StatusNotFound, Code: "not_found", Param: it.Param + ".id",
				Message: "No stored item has the id of " + it.Param + ".id."}
		}
		out[i] = openaiapi.ItemOf(o, it.Param)
		if left -= int64(len(out[i].Text) + len(out[i].Arguments) + len(out[i].Name) + len(out[i].CallID)); left < 0 {
			return nil, httpapi.OpenAIInvalid("input", openaiapi.CodeInvalidValue, fmt.Sprintf(
				"input's item references stand for more than %d bytes, the most a request's body may hold: send fewer.", a.MaxBody))
		}
	}
	return out, nil
}

// storedItems are the items of the responses of promptIDs that the
// identity may see, by id: each one's input and, when it is answered,
// its output. A prompt that is not such a response has none.
func (a *API) storedItems(ctx context.Context, id auth.Identity, promptIDs []string) (map[string]openaiapi.OutputItem, error) {
	if len(promptIDs) == 0 {
		return nil, nil
	}
	prompts, err := a.Store.GetPrompts(ctx, id.Org, promptIDs)
	if err != nil {
		return nil, err
	}
	stored := map[string]openaiapi.OutputItem{}
	add := func(items []openaiapi.OutputItem) {
		for _, o := range items {
			if _, ok := stored[o.ID]; !ok {
				stored[o.ID] = o
			}
		}
	}
	answers := map[string]string{} // prompt id → its current job's response id
	for _, pid := range promptIDs {
		// There is no read of many prompts' jobs: one read each, which
		// stops when the request goes.
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		p, ok := prompts[pid]
		if !ok || !ownsResponse(id, p) {
			continue
		}
		add(openaiapi.InputItems(p))
		j, err := a.currentJob(ctx, id, pid)
		if errors.Is(err, jobs.ErrNotFound) {
			continue // archived between the reads
		}
		if err != nil {
			return nil, err
		}
		if answered(j) {
			answers[pid] = j.ResponseID
		}
	}
	if len(answers) == 0 {
		return stored, nil
	}
	resps, err := a.Store.GetResponses(ctx, id.Org, slices.Collect(maps.Values(answers)))
	if err != nil {
		return nil, err
	}
	for _, pid := range promptIDs { // after the inputs: an output never hides an input of the same id
		if resp, ok := resps[answers[pid]]; ok {
			add(openaiapi.ResponseObject(prompts[pid], jobs.Job{State: jobs.Succeeded}, &resp).Output)
		}
	}
	return stored, nil
}

// responseOutcome is the answer of a response request that waited, as
// awaitJob left its job: the response object, the job's error (as a chat
// completion's), or (not terminal) a 504 after the chat timeout or a 503
// when the server is closing.
func (a *API) responseOutcome(ctx context.Context, id auth.Identity, p jobs.Prompt, j jobs.Job) (int, any, error) {
	switch {
	case j.State == jobs.Succeeded:
		_, resp, err := a.responseState(ctx, id, p)
		if err != nil {
			return 0, nil, err
		}
		if resp == nil {
			return http.StatusInternalServerError, openaiapi.NewError("The answer is no longer stored.", openaiapi.TypeAPI, "", "response_unavailable"), nil
		}
		return http.StatusOK, openaiapi.ResponseObject(p, j, resp), nil
	case j.State.Terminal():
		status, body := openaiapi.JobError(j)
		return status, body, nil
	case a.Jobs.Serving.Err() != nil:
		return http.StatusServiceUnavailable, openaiapi.NewError(
			"The server is shutting down; the request goes on as response "+openaiapi.ResponseID(p.ID)+": fetch GET /v1/responses/"+openaiapi.ResponseID(p.ID)+".",
			openaiapi.TypeServer, "", "server_shutting_down"), nil
	}
	return http.StatusGatewayTimeout, openaiapi.NewError(
		"The answer took longer than the server waits; the job goes on: fetch GET /v1/responses/"+openaiapi.ResponseID(p.ID)+" for it.",
		openaiapi.TypeServer, "", "timeout"), nil
}

// eventWriter writes a response's events, numbering those it is not
// given numbered (a live stream's).
type eventWriter struct {
	sse  *httpapi.SSE
	next int
}

// write sends ev (numbered next unless number), named by its type as
// OpenAI names its events.
func (ew *eventWriter) write(ev openaiapi.ResponseEvent, number bool) error {
	if number {
		ev.SequenceNumber = ew.next
	}
	ew.next = ev.SequenceNumber + 1
	b, err := json.Marshal(ev)
	if err != nil {
		return err
	}
	return ew.sse.Event(0, ev.Type, b)
}

// writeAll sends evs, numbered, and flushes them.
func (ew *eventWriter) writeAll(evs ...openaiapi.ResponseEvent) error {
	for _, ev := range evs {
		if err := ew.write(ev, true); err != nil {
			return err
		}
	}
	return ew.sse.Flush()
}

// fail ends a stream with an error event.
func (ew *eventWriter) fail(code, message string) {
	_ = ew.writeAll(openaiapi.ErrorEvent(code, message))
}

// streamLive answers a plain streamed request: response.created and
// response.in_progress at once, then the answer's text as the worker
// publishes its pieces (the relay of chat's streams: one backend call,
// from its first piece), keep-alive comments while none come, and at the
// end what the stored answer adds (the rest of its text, its function
// calls whole) and response.completed, .incomplete or .failed. An answer
// that does not continue what was sent ends in an error event
// (stream_replaced), as chat's does.
func (a *API) streamLive(w http.ResponseWriter, r *http.Request, id auth.Identity, e submit.Admitted, p jobs.Prompt,
	pieces <-chan pktype.StreamDelta, deadline time.Time) {
	sse, err := httpapi.StartSSE(w, 0)
	if err != nil {
		return
	}
	ew := &eventWriter{sse: sse}
	o := openaiapi.ResponseObject(p, jobs.Job{State: jobs.Queued}, nil)
	if ew.writeAll(openaiapi.ResponseStart(o, p.Chat.Responses.Model)...) != nil {
		return
	}
	// The first choice's reasoning and text are relayed as they come (the
	// relay of chat's streams: one backend call, from its first piece),
	// the reasoning item first; function calls come whole from the stored
	// answer: the message is an output item before them whenever the
	// answer has text, and the pieces do not tell whether it will.
	var rl relay
	var st openaiapi.Streamed
	res, left := a.follow(r, sse, id, e, pieces, deadline, func(d pktype.StreamDelta) error {
		// Every piece counts for the relay, so that one missed is seen.
		if _, ok := rl.accept(d); !ok || d.Choice != 0 || d.Text == "" && d.Reasoning == "" {
			return nil
		}
		var evs []openaiapi.ResponseEvent
		if d.Reasoning != "" && !st.Message {
			if !st.Reasoning {
				evs, st.Reasoning = openaiapi.ItemOpen(p.ID, openaiapi.ItemReasoning, 0), true
			}
			evs = append(evs, openaiapi.TextDelta(p.ID, openaiapi.ItemReasoning, 0, d.Reasoning))
			st.ReasoningText += d.Reasoning
		}
		if d.Text != "" {
			idx := 0
			if st.Reasoning {
				idx = 1
				if !st.ReasoningDone {
					// The model has done reasoning when its text begins.
					evs = append(evs, openaiapi.ItemDone(openaiapi.ReasoningOutput(p.ID, st.ReasoningText), 0)...)
					st.ReasoningDone = true
				}
			}
			if !st.Message {
				evs, st.Message = append(evs, openaiapi.ItemOpen(p.ID, openaiapi.ItemMessage, idx)...), true
			}
			evs = append(evs, openaiapi.TextDelta(p.ID, openaiapi.ItemMessage, idx, d.Text))
			st.Text += d.Text
		}
		return ew.writeAll(evs...)
	})
	if left || r.Context().Err() != nil {
		return // the client left; the job goes on
	}
	if res.err != nil {
		a.Log.Error("request failed", "route", r.Pattern, "op", "response stream", "err", res.err)
		ew.fail("internal_error", "The server had an error while processing the request.")
		return
	}
	j := res.j
	respID := openaiapi.ResponseID(p.ID)
	switch {
	case j.State == jobs.Succeeded:
	case j.State.Terminal():
		_ = ew.writeAll(openaiapi.ResponseEnd(openaiapi.ResponseObject(p, j, nil)))
		return
	case a.Jobs.Serving.Err() != nil:
		ew.fail("server_shutting_down", "The server is shutting down; the response goes on: fetch GET /v1/responses/"+respID+".")
		return
	default:
		ew.fail("timeout", "The answer took longer than the server waits; the job goes on: fetch GET /v1/responses/"+respID+".")
		return
	}
	_, resp, err := a.responseState(r.Context(), id, p)
	if err != nil || resp == nil {
		if err != nil {
			a.Log.Error("request failed", "route", r.Pattern, "op", "response stream", "err", err)
		}
		ew.fail("internal_error", "The server had an error while processing the request.")
		return
	}
	o = openaiapi.ResponseObject(p, j, resp)
	if !openaiapi.Continues(o, st) {
		ew.fail("stream_replaced", "The answer being streamed was replaced: the backend call that sent its first part failed, "+
			"and the job's answer came from a retry. Fetch the whole answer with GET /v1/responses/"+respID+".")
		return
	}
	_ = ew.writeAll(append(openaiapi.OutputEvents(p.ID, o, st), openaiapi.ResponseEnd(o))...)
}

// streamStored sends a response's stored event stream (ResponseEvents)
// after sequence number after, then follows the response, sending each
// event as what is stored comes to hold it, until the response has ended,
// the deadline passes or the server closes (a client then resumes with
// starting_after). It wakes on the events of the prompt's jobs.
func (a *API) streamStored(w http.ResponseWriter, r *http.Request, id auth.Identity, p jobs.Prompt, after int, deadline time.Time) {
	wake, stop := a.Jobs.Hub.Wake(func(ev jobs.Event) bool { return ev.PromptID == p.ID })
	defer stop()
	sse, err := httpapi.StartSSE(w, 0)
	if err != nil {
		return
	}
	ew := &eventWriter{sse: sse}
	keepAlive := time.NewTicker(a.KeepAlive)
	defer keepAlive.Stop()
	end := time.NewTimer(time.Until(deadline))
	defer end.Stop()
	for {
		j, resp, err := a.responseState(r.Context(), id, p)
		if err != nil {
			if r.Context().Err() == nil {
				a.Log.Error("request failed", "route", r.Pattern, "op", "response stream", "err", err)
				ew.fail("internal_error", "The server had an error while processing the request.")
			}
			return
		}
		evs := openaiapi.ResponseEvents(p, j, resp)
		for _, ev := range evs {
			if ev.SequenceNumber > after {
				if ew.write(ev, false) != nil {
					return
				}
				after = ev.SequenceNumber
			}
		}
		if sse.Flush() != nil || openaiapi.Ended(openaiapi.ResponseObject(p, j, resp).Status) {
			return
		}
		select {
		case <-wake:
		case <-keepAlive.C:
			if sse.Comment("keep-alive") != nil || sse.Flush() != nil {
				return
			}
		case <-end.C:
			return
		case <-a.Jobs.Serving.Done():
			return
		case <-r.Context().Done():
			return
		}
	}
}

// GetResponse answers GET /v1/responses/{id}: the object as it stands;
// with ?stream=true (a background response's), its event stream after
// ?starting_after=N, following it until it ends.
func (a *API) GetResponse(w http.ResponseWriter, r *http.Request) error {
	id := auth.Of(r)
	q := r.URL.Query()
	if err := refuseInclude(q["include"], q["include[]"]); err != nil {
		return err
	}
	stream := false
	if v := q.Get("stream"); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return httpapi.OpenAIInvalid("stream", openaiapi.CodeInvalidValue, "stream must be true or false.")
		}
		stream = b
	} else if r.ContentLength != 0 {
		// The OpenAI Go SDK's GetStreaming asks with a JSON body,
		// {"stream": true}, on its GET, not with the query.
		body, err := httpapi.ReadBody(w, r, a.MaxBody)
		if err != nil {
			return err
		}
		var v struct {
			Stream bool `json:"stream"`
		}
		if len(body) > 0 && json.Unmarshal(body, &v) != nil {
			return httpapi.OpenAIInvalid("stream", openaiapi.CodeInvalidJSON, "The body of GET /v1/responses/{id} may only be {\"stream\": true}.")
		}
		stream = v.Stream
	}
	after := -1
	if v := q.Get("starting_after"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < -1 {
			return httpapi.OpenAIInvalid("starting_after", openaiapi.CodeInvalidValue, "starting_after must be a sequence number (an integer from 0).")
		}
		after = n
	}
	p, err := a.ownedResponse(r.Context(), id, r.PathValue("id"))
	if err != nil {
		return httpapi.About("response", err)
	}
	if !stream {
		o, err := a.responseNow(r.Context(), id, p)
		if err != nil {
			return httpapi.About("response", err)
		}
		httpapi.WriteJSON(w, http.StatusOK, o)
		return nil
	}
	if !p.Chat.Responses.Background {
		return httpapi.OpenAIInvalid("stream", openaiapi.CodeInvalidValue,
			"Only a background response's events can be streamed again: this response was not created with background: true.")
	}
	deadline := time.Now().Add(a.chatTimeout())
	_ = http.NewResponseController(w).SetWriteDeadline(deadline.Add(10 * time.Second))
	a.streamStored(w, r, id, p, after, deadline)
	return nil
}

// refuseInclude refuses ?include= values: promptkit's responses have no
// optional parts.
func refuseInclude(lists ...[]string) error {
	for _, l := range lists {
		for _, v := range l {
			if v != "" {
				return httpapi.OpenAIInvalid("include", openaiapi.CodeUnsupportedValue, "include is not supported: promptkit's responses hold text and function calls only.")
			}
		}
	}
	return nil
}

// CancelResponse answers POST /v1/responses/{id}/cancel: a background
// response's queued or running job is cancelled, and the object returned
// as it then is (a response that already ended, as it is).
func (a *API) CancelResponse(w http.ResponseWriter, r *http.Request) error {
	id := auth.Of(r)
	p, err := a.ownedResponse(r.Context(), id, r.PathValue("id"))
	if err != nil {
		return httpapi.About("response", err)
	}
	if !p.Chat.Responses.Background {
		return httpapi.OpenAIInvalid("", openaiapi.CodeInvalidValue,
			"Only responses created with background: true can be cancelled (a job can be: POST /v1/jobs/{id}/cancel).")
	}
	j, _, err := a.responseState(r.Context(), id, p)
	if err != nil {
		return httpapi.About("response", err)
	}
	if !j.State.Terminal() {
		_, err := a.Store.Cancel(r.Context(), jobs.CancelParams{OrgID: id.Org, JobID: j.ID})
		if err != nil && !errors.Is(err, jobs.ErrIllegalTransition) { // it ended meanwhile: answered as it is
			return httpapi.About("response", err)
		}
		a.Log.Info("response cancelled", "job_id", j.ID, "prompt_id", p.ID, "org", id.Org)
	}
	o, err := a.responseNow(r.Context(), id, p)
	if err != nil {
		return httpapi.About("response", err)
	}
	httpapi.WriteJSON(w, http.StatusOK, o)
	return nil
}

// DeleteResponse answers DELETE /v1/responses/{id}: the prompt goes with
// its jobs, events and answers. A response still queued or running is
// refused (409): cancel it first.
func (a *API) DeleteResponse(w http.ResponseWriter, r *http.Request) error {
	id := auth.Of(r)
	respID := r.PathValue("id")
	p, err := a.ownedResponse(r.Context(), id, respID)
	if err != nil {
		return httpapi.About("response", err)
	}
	err = a.Store.DeletePrompt(r.Context(), id.Org, p.ID)
	if errors.Is(err, jobs.ErrPromptActive) {
		return &httpapi.Problem{Status: http.StatusConflict, Code: "response_in_progress",
			Message: "The response is queued or in progress: cancel it first (POST /v1/responses/{id}/cancel for a background response, " +
				"POST /v1/jobs/{id}/cancel for another), then delete it."}
	}
	if err != nil {
		return httpapi.About("response", err)
	}
	a.Log.Info("response deleted", "prompt_id", p.ID, "org", id.Org)
	httpapi.WriteJSON(w, http.StatusOK, openaiapi.DeletedResponse{ID: openaiapi.ResponseID(p.ID), Object: "response", Deleted: true})
	return nil
}

// ListInputItems answers GET /v1/responses/{id}/input_items: the
// request's own input items (not its instructions, nor the turns of the
// response it continued), as a list object; ?order= asc or desc (the
// default, as OpenAI), ?after= an item id, ?limit= 1 to 100 (20).
func (a *API) ListInputItems(w http.ResponseWriter, r *http.Request) error {
	id := auth.Of(r)
	q := r.URL.Query()
	if err := refuseInclude(q["include"], q["include[]"]); err != nil {
		return err
	}
	limit, err := httpapi.Limit(r, maxInputItemsLimit)
	if err != nil {
		return err
	}
	if limit == 0 {
		limit = 20
	}
	order := q.Get("order")
	if order != "" && order != "asc" && order != "desc" {
		return httpapi.OpenAIInvalid("order", openaiapi.CodeInvalidValue, "order must be asc or desc.")
	}
	p, err := a.ownedResponse(r.Context(), id, r.PathValue("id"))
	if err != nil {
		return httpapi.About("response", err)
	}
	items := openaiapi.InputItems(p)
	if order != "asc" {
		slices.Reverse(items)
	}
	if after := q.Get("after"); after != "" {
		k := slices.IndexFunc(items, func(o openaiapi.OutputItem) bool { return o.ID == after })
		if k < 0 {
			return httpapi.OpenAIInvalid("after", openaiapi.CodeInvalidValue, "after must name an input item of this response.")
		}
		items = items[k+1:]
	}
	more := len(items) > limit
	if more {
		items = items[:limit]
	}
	httpapi.WriteJSON(w, http.StatusOK, openaiapi.NewList(items, func(o openaiapi.OutputItem) string { return o.ID }, more))
	return nil
}
