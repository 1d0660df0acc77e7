package openaiapi

import (
	"cmp"
	"encoding/json"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/promptkit/promptkit/jobs"
	"github.com/promptkit/promptkit/pktype"
)

// ResponseIDPrefix begins a response's id: "resp_" and its prompt's id
// (a retry makes a new job, the prompt and its id stay).
const ResponseIDPrefix = "resp_"

// ResponseID is the id of the response a prompt stands for.
func ResponseID(promptID string) string { return ResponseIDPrefix + promptID }

// PromptOfResponse is the prompt id a response id names; ok is false for
// an id promptkit did not make.
func PromptOfResponse(id string) (string, bool) {
	p, ok := strings.CutPrefix(id, ResponseIDPrefix)
	return p, ok && p != "" && !strings.Contains(p, "_")
}

// Response statuses.
const (
	StatusQueued     = "queued"
	StatusInProgress = "in_progress"
	StatusCompleted  = "completed"
	StatusIncomplete = "incomplete"
	StatusFailed     = "failed"
	StatusCancelled  = "cancelled"
)

// Response is OpenAI's Response object: the request's echo, its status,
// and once answered its output and usage.
type Response struct {
	ID                 string             `json:"id"`
	Object             string             `json:"object"`
	CreatedAt          int64              `json:"created_at"`
	Status             string             `json:"status"`
	Background         bool               `json:"background"`
	Error              *ResponseError     `json:"error"`
	IncompleteDetails  *IncompleteDetails `json:"incomplete_details"`
	Instructions       *string            `json:"instructions"`
	MaxOutputTokens    *int               `json:"max_output_tokens"`
	Metadata           map[string]string  `json:"metadata"`
	Model              string             `json:"model"`
	Output             []OutputItem       `json:"output"`
	ParallelToolCalls  bool               `json:"parallel_tool_calls"`
	PreviousResponseID *string            `json:"previous_response_id"`
	Store              bool               `json:"store"`
	Temperature        *float64           `json:"temperature"`
	Text               TextConfig         `json:"text"`
	ToolChoice         json.RawMessage    `json:"tool_choice"`
	Tools              []ResponseTool     `json:"tools"`
	TopP               *float64           `json:"top_p"`
	Truncation         string             `json:"truncation"`
	Usage              *ResponseUsage     `json:"usage"`
	User               *string            `json:"user"`
}

// ResponseError is a failed response's error: the code and message a
// chat completion's error answer would have had (JobError).
type ResponseError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// IncompleteDetails says why a response is incomplete.
type IncompleteDetails struct {
	Reason string `json:"reason"`
}

// OutputItem is an item of a response's output, or of its input as GET
// /v1/responses/{id}/input_items lists it: the model's reasoning
// (Summary, always empty, and Content, its reasoning_text), a message
// (Role, Content), a function call (CallID, Name, Arguments) or a
// function's result (CallID, Output).
type OutputItem struct {
	ID        string         `json:"id"`
	Type      string         `json:"type"`
	Status    string         `json:"status"`
	Role      string         `json:"role,omitempty"`
	Summary   *[]ContentPart `json:"summary,omitempty"`
	Content   *[]ContentPart `json:"content,omitempty"`
	CallID    string         `json:"call_id,omitempty"`
	Name      string         `json:"name,omitempty"`
	Arguments *string        `json:"arguments,omitempty"`
	Output    *string        `json:"output,omitempty"`
}

// ContentPart is a message's part: output_text (with its annotations,
// always none, and its logprobs when asked for) or input_text; or a
// reasoning item's reasoning_text.
type ContentPart struct {
	Type        string          `json:"type"`
	Text        string          `json:"text"`
	Annotations *[]struct{}     `json:"annotations,omitempty"`
	Logprobs    json.RawMessage `json:"logprobs,omitempty"`
}

// TextConfig is the echo of text: {format}.
type TextConfig struct {
	Format TextFormat `json:"format"`
}

// TextFormat is text.format as the request set it.
type TextFormat struct {
	Type   string          `json:"type"`
	Name   string          `json:"name,omitempty"`
	Schema json.RawMessage `json:"schema,omitempty"`
	Strict *bool           `json:"strict,omitempty"`
}

// ResponseTool is a function tool in Responses' flat form.
type ResponseTool struct {
	Type        string          `json:"type"`
	Name        string          `json:"name"`
	Description *string         `json:"description"`
	Parameters  json.RawMessage `json:"parameters"`
	Strict      *bool           `json:"strict"`
}

// ResponseUsage is a response's usage, present only when the provider
// reported the input and output counts; the details only when it
// reported theirs. A missing total is the sum.
type ResponseUsage struct {
	InputTokens         int                  `json:"input_tokens"`
	InputTokensDetails  *InputTokensDetails  `json:"input_tokens_details,omitempty"`
	OutputTokens        int                  `json:"output_tokens"`
	OutputTokensDetails *OutputTokensDetails `json:"output_tokens_details,omitempty"`
	TotalTokens         int                  `json:"total_tokens"`
}

// InputTokensDetails are the cached input tokens.
type InputTokensDetails struct {
	CachedTokens int `json:"cached_tokens"`
}

// OutputTokensDetails are the reasoning output tokens.
type OutputTokensDetails struct {
	ReasoningTokens int `json:"reasoning_tokens"`
}

// DeletedResponse is the answer of DELETE /v1/responses/{id}.
type DeletedResponse struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	Deleted bool   `json:"deleted"`
}

// MessageItemID, ReasoningItemID and CallItemID are the ids of a
// response's output items: its message, its reasoning, and its function
// call i.
func MessageItemID(promptID string) string { return "msg_" + promptID }

// ReasoningItemID: see MessageItemID.
func ReasoningItemID(promptID string) string { return "rs_" + promptID }

// CallItemID: see MessageItemID.
func CallItemID(promptID string, i int) string { return fmt.Sprintf("fc_%s_%d", promptID, i) }

// inputItemID is the id of input item k of a response: a prefix by type,
// the prompt, and "in" with the item's place, apart from the output's.
func inputItemID(prefix, promptID string, k int) string {
	return fmt.Sprintf("%s_%s_in%d", prefix, promptID, k)
}

// ResponseObject is a stored Responses request's object as it stands:
// p its prompt, j its current job, r that job's answer when it succeeded
// (nil when there is none, or it is no longer stored).
func ResponseObject(p jobs.Prompt, j jobs.Job, r *jobs.Response) Response {
	o := responseEcho(p)
	switch j.State {
	case jobs.Queued:
		o.Status = StatusQueued
	case jobs.Succeeded:
		if r == nil {
			o.Status = StatusFailed
			o.Error = &ResponseError{Code: "response_unavailable", Message: "The answer is no longer stored."}
			break
		}
		o.Status = StatusCompleted
		o.Model = cmp.Or(r.Model, o.Model)
		switch r.FinishReason {
		case "length":
			o.Status, o.IncompleteDetails = StatusIncomplete, &IncompleteDetails{Reason: "max_output_tokens"}
		case "content_filter":
			o.Status, o.IncompleteDetails = StatusIncomplete, &IncompleteDetails{Reason: "content_filter"}
		}
		o.Output = outputItems(p.ID, *r, o.Status)
		o.Usage = responseUsage(r.Usage)
	case jobs.Failed:
		_, body := JobError(j)
		o.Status = StatusFailed
		o.Error = &ResponseError{Code: deref(body.Error.Code), Message: body.Error.Message}
	case jobs.Cancelled:
		o.Status = StatusCancelled
	default:
		o.Status = StatusInProgress
	}
	return o
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// responseEcho is the object of a request before any answer: its id,
// time and the request's parameters.
func responseEcho(p jobs.Prompt) Response {
	o := Response{ID: ResponseID(p.ID), Object: "response", CreatedAt: p.CreatedAt.Unix(), Status: StatusQueued,
		Metadata: map[string]string{}, Output: []OutputItem{}, ParallelToolCalls: true, Store: true,
		Text: TextConfig{Format: TextFormat{Type: "text"}}, ToolChoice: json.RawMessage(`"auto"`),
		Tools: []ResponseTool{}, Truncation: "disabled"}
	c := p.Chat
	if c == nil {
		return o
	}
	rr := c.Responses
	if rr == nil {
		rr = &jobs.ResponsesRequest{}
	}
	o.Background, o.Instructions, o.Model = rr.Background, rr.Instructions, rr.Model
	o.MaxOutputTokens, o.Temperature, o.TopP = c.MaxTokens, c.Temperature, c.TopP
	if len(c.Metadata) > 0 {
		o.Metadata = c.Metadata
	}
	if rr.PreviousResponseID != "" {
		o.PreviousResponseID = &rr.PreviousResponseID
	}
	if rr.Store != nil {
		o.Store = *rr.Store
	}
	if rr.User != "" {
		o.User = &rr.User
	}
	switch c.ResponseFormat {
	case jobs.FormatJSONObject:
		o.Text.Format.Type = "json_object"
	case jobs.FormatJSONSchema:
		o.Text.Format = TextFormat{Type: "json_schema", Name: c.SchemaName, Schema: c.Schema, Strict: rr.Strict}
	}
	for _, t := range c.Tools {
		rt := ResponseTool{Type: t.Type, Name: t.Function.Name, Parameters: t.Function.Parameters, Strict: t.Function.Strict}
		rt.Description = t.Function.Description
		o.Tools = append(o.Tools, rt)
	}
	if tc := c.ToolChoice; tc != nil {
		if tc.Mode == pktype.ToolChoiceFunction {
			o.ToolChoice, _ = json.Marshal(struct {
				Type string `json:"type"`
				Name string `json:"name"`
			}{pktype.ToolTypeFunction, tc.Function})
		} else {
			o.ToolChoice, _ = json.Marshal(tc.Mode)
		}
	}
	if c.ParallelToolCalls != nil {
		o.ParallelToolCalls = *c.ParallelToolCalls
	}
	return o
}

// outputItems are an answer's output: its reasoning, when the backend
// sent it; its message (when it has text, or no calls), with the
// logprobs it was answered with; then its function calls.
func outputItems(promptID string, r jobs.Response, status string) []OutputItem {
	var out []OutputItem
	itemStatus := StatusCompleted
	if status == StatusIncomplete {
		itemStatus = StatusIncomplete
	}
	first := Completion(jobs.Job{}, r).Choices[0]
	if reasoning := Reasoning(first.Message); reasoning != "" {
		out = append(out, reasoningItem(ReasoningItemID(promptID), itemStatus, reasoning))
	}
	if text := AnswerText(r); text != "" || len(r.ToolCalls) == 0 {
		item := messageItem(MessageItemID(promptID), itemStatus, text)
		var lp struct {
			Content json.RawMessage `json:"content"`
		}
		if json.Unmarshal(first.Logprobs, &lp) == nil && len(lp.Content) > 0 && string(lp.Content) != "null" {
			(*item.Content)[0].Logprobs = lp.Content
		}
		out = append(out, item)
	}
	for i, c := range r.ToolCalls {
		out = append(out, callItem(CallItemID(promptID, i), StatusCompleted, c, c.Function.Arguments))
	}
	return out
}

// Reasoning is an answer message's reasoning, as a backend sends it beside
// the text (reasoning_content, or reasoning); "" when it sent none.
func Reasoning(m Message) string {
	for _, k := range []string{"reasoning_content", "reasoning"} {
		if s := textMember(m, k); s != "" {
			return s
		}
	}
	return ""
}

func reasoningItem(id, status, text string) OutputItem {
	return OutputItem{ID: id, Type: ItemReasoning, Status: status, Summary: &[]ContentPart{},
		Content: &[]ContentPart{reasoningText(text)}}
}

func reasoningText(text string) ContentPart { return ContentPart{Type: "reasoning_text", Text: text} }

func messageItem(id, status, text string) OutputItem {
	return OutputItem{ID: id, Type: ItemMessage, Status: status, Role: pktype.RoleAssistant,
		Content: &[]ContentPart{outputText(text)}}
}

func outputText(text string) ContentPart {
	return ContentPart{Type: "output_text", Text: text, Annotations: &[]struct{}{}}
}

func callItem(id, status string, c pktype.ToolCall, args string) OutputItem {
	return OutputItem{ID: id, Type: ItemFunctionCall, Status: status, CallID: c.ID, Name: c.Function.Name, Arguments: &args}
}

// responseUsage is the usage of a response, nil unless the provider
// reported the prompt and completion counts (never a number for a count
// it did not report).
func responseUsage(u pktype.Usage) *ResponseUsage {
	cu := usageOf(u, nil)
	if cu == nil {
		return nil
	}
	out := &ResponseUsage{InputTokens: cu.PromptTokens, OutputTokens: cu.CompletionTokens, TotalTokens: cu.TotalTokens}
	if u.Known.CachedTokens {
		out.InputTokensDetails = &InputTokensDetails{CachedTokens: u.CachedTokens}
	}
	if u.Known.ReasoningTokens {
		out.OutputTokensDetails = &OutputTokensDetails{ReasoningTokens: u.ReasoningTokens}
	}
	return out
}

// InputItems are a stored request's own input (after its instructions
// and the turns it continued), as items with ids: a message per message,
// an assistant turn's calls one function_call item each, a tool result a
// function_call_output item.
func InputItems(p jobs.Prompt) []OutputItem {
	var out []OutputItem
	if p.Chat == nil || p.Chat.Responses == nil {
		return out
	}
	msgs := p.Chat.Messages[min(p.Chat.Responses.InputStart, len(p.Chat.Messages)):]
	for _, m := range msgs {
		k := len(out)
		switch m.Role {
		case pktype.RoleTool:
			out = append(out, OutputItem{ID: inputItemID("fco", p.ID, k), Type: ItemFunctionCallOutput, Status: StatusCompleted,
				CallID: m.ToolCallID, Output: &m.Content})
		case pktype.RoleAssistant:
			if m.Content != "" || len(m.ToolCalls) == 0 {
				out = append(out, messageItem(inputItemID("msg", p.ID, k), StatusCompleted, m.Content))
			}
			for _, c := range m.ToolCalls {
				out = append(out, callItem(inputItemID("fc", p.ID, len(out)), StatusCompleted, c, c.Function.Arguments))
			}
		default:
			out = append(out, OutputItem{ID: inputItemID("msg", p.ID, k), Type: ItemMessage, Status: StatusCompleted, Role: m.Role,
				Content: &[]ContentPart{{Type: "input_text", Text: m.Content}}})
		}
	}
	return out
}

// ItemOf is a stored item as an input item, for an item reference (the
// reference's param names it in errors).
func ItemOf(o OutputItem, param string) Item {
	it := Item{Type: o.Type, Role: o.Role, CallID: o.CallID, Name: o.Name, Param: param}
	if o.Content != nil {
		var b strings.Builder
		for i, c := range *o.Content {
			if i > 0 {
				b.WriteByte('\n')
			}
			b.WriteString(c.Text)
		}
		it.Text = b.String()
	}
	if o.Arguments != nil {
		it.Arguments = *o.Arguments
	}
	if o.Output != nil {
		it.Text = *o.Output
	}
	return it
}

// PromptOfItem is the prompt id an item id names (see MessageItemID,
// CallItemID and InputItems); ok is false for an id promptkit did not
// make.
func PromptOfItem(id string) (string, bool) {
	_, rest, ok := strings.Cut(id, "_")
	if !ok {
		return "", false
	}
	p, _, _ := strings.Cut(rest, "_")
	return p, p != ""
}

// ResponseEvent is one event of a response's stream (OpenAI's names:
// response.created, response.output_text.delta, ...). Each type sets the
// fields OpenAI's event of that type has.
type ResponseEvent struct {
	Type           string       `json:"type"`
	SequenceNumber int          `json:"sequence_number"`
	Response       *Response    `json:"response,omitempty"`
	OutputIndex    *int         `json:"output_index,omitempty"`
	ItemID         string       `json:"item_id,omitempty"`
	ContentIndex   *int         `json:"content_index,omitempty"`
	Item           *OutputItem  `json:"item,omitempty"`
	Part           *ContentPart `json:"part,omitempty"`
	Delta          *string      `json:"delta,omitempty"`
	Text           *string      `json:"text,omitempty"`
	Arguments      *string      `json:"arguments,omitempty"`
	Name           string       `json:"name,omitempty"`
	Logprobs       *[]struct{}  `json:"logprobs,omitempty"`
	// An error event's.
	Code    *string `json:"code,omitempty"`
	Message string  `json:"message,omitempty"`
	Param   *string `json:"param,omitempty"`
}

// ErrorEvent is a stream's error event: what ends a stream that cannot
// go on (a server error, an answer replaced by a retry), not a failed
// response, whose end is response.failed.
func ErrorEvent(code, message string) ResponseEvent {
	return ResponseEvent{Type: "error", Code: &code, Message: message}
}

// ResponseStart are the events that open a stream: response.created and
// response.in_progress, each with the object as it was then (no output,
// and the model the request named, so that the same events are sent
// however late they are read).
func ResponseStart(o Response, model string) []ResponseEvent {
	created := snapshot(o, StatusQueued, model)
	running := snapshot(o, StatusInProgress, model)
	return []ResponseEvent{{Type: "response.created", Response: &created}, {Type: "response.in_progress", Response: &running}}
}

func snapshot(o Response, status, model string) Response {
	o.Status, o.Model, o.Output, o.Usage, o.Error, o.IncompleteDetails = status, model, []OutputItem{}, nil, nil, nil
	return o
}

// Streamed is what a live stream already sent of a response's output:
// of its reasoning item (when opened; Done once closed) and of its
// message (when opened), the text of each.
type Streamed struct {
	Reasoning, ReasoningDone, Message bool
	ReasoningText, Text               string
}

// ItemOpen are the events that open output item idx, of the given type
// (ItemReasoning or ItemMessage): the item (in progress, no content) and
// its empty part (reasoning_text, or output_text).
func ItemOpen(promptID, typ string, idx int) []ResponseEvent {
	id, part := MessageItemID(promptID), outputText("")
	item := OutputItem{ID: id, Type: ItemMessage, Status: StatusInProgress, Role: pktype.RoleAssistant, Content: &[]ContentPart{}}
	if typ == ItemReasoning {
		id, part = ReasoningItemID(promptID), reasoningText("")
		item = OutputItem{ID: id, Type: ItemReasoning, Status: StatusInProgress, Summary: &[]ContentPart{}, Content: &[]ContentPart{}}
	}
	return []ResponseEvent{
		{Type: "response.output_item.added", OutputIndex: new(idx), Item: &item},
		{Type: "response.content_part.added", ItemID: id, OutputIndex: new(idx), ContentIndex: new(0), Part: &part},
	}
}

// TextDelta is a piece of the text of output item idx, of the given type:
// the message's output_text, or the reasoning's reasoning_text.
func TextDelta(promptID, typ string, idx int, delta string) ResponseEvent {
	if typ == ItemReasoning {
		return ResponseEvent{Type: "response.reasoning_text.delta", ItemID: ReasoningItemID(promptID), OutputIndex: new(idx),
			ContentIndex: new(0), Delta: &delta}
	}
	return ResponseEvent{Type: "response.output_text.delta", ItemID: MessageItemID(promptID), OutputIndex: new(idx), ContentIndex: new(0),
		Delta: &delta, Logprobs: &[]struct{}{}}
}

// ItemDone are the events that close output item idx: its text done, its
// part done and the item done.
func ItemDone(item OutputItem, idx int) []ResponseEvent {
	part := (*item.Content)[0] // a message or a reasoning item: one part
	text, done := part.Text, item
	textDone := ResponseEvent{Type: "response.output_text.done", ItemID: item.ID, OutputIndex: &idx, ContentIndex: new(0), Text: &text,
		Logprobs: &[]struct{}{}}
	if item.Type == ItemReasoning {
		textDone = ResponseEvent{Type: "response.reasoning_text.done", ItemID: item.ID, OutputIndex: &idx, ContentIndex: new(0), Text: &text}
	}
	return []ResponseEvent{textDone,
		{Type: "response.content_part.done", ItemID: item.ID, OutputIndex: &idx, ContentIndex: new(0), Part: &part},
		{Type: "response.output_item.done", OutputIndex: &idx, Item: &done}}
}

// ReasoningOutput is the reasoning item of a response whose reasoning is
// text, complete.
func ReasoningOutput(promptID, text string) OutputItem {
	return reasoningItem(ReasoningItemID(promptID), StatusCompleted, text)
}

// Continues reports whether o's output begins with what a live stream
// sent of it (st): its reasoning (all of it, once closed) and its
// message's text, each the output item it was sent as.
func Continues(o Response, st Streamed) bool {
	text := func(typ string) (string, int, bool) {
		for i, item := range o.Output {
			if item.Type == typ && item.Content != nil && len(*item.Content) > 0 {
				return (*item.Content)[0].Text, i, true
			}
		}
		return "", 0, false
	}
	if st.Reasoning {
		r, i, ok := text(ItemReasoning)
		if !ok || i != 0 || !strings.HasPrefix(r, st.ReasoningText) || st.ReasoningDone && r != st.ReasoningText {
			return false
		}
	}
	if st.Message {
		t, i, ok := text(ItemMessage)
		want := 0
		if st.Reasoning {
			want = 1
		}
		if !ok || i != want || !strings.HasPrefix(t, st.Text) {
			return false
		}
	}
	return true
}

// OutputEvents are the events of o's output items after what a stream
// already sent of them (st): for its reasoning and its message, unless
// opened, the item and part added; the text after what was sent, in
// pieces; then, unless done, the text, part and item done. For each
// function call, the item added, its arguments in pieces, the arguments
// and the item done. Pieces are at most DeltaBytes long, cut at character
// boundaries only: the same text always makes the same pieces.
func OutputEvents(promptID string, o Response, st Streamed) []ResponseEvent {
	var evs []ResponseEvent
	for i, item := range o.Output {
		idx := i
		switch item.Type {
		case ItemReasoning, ItemMessage:
			text := ""
			if item.Content != nil && len(*item.Content) > 0 {
				text = (*item.Content)[0].Text
			}
			opened, sent := st.Message, st.Text
			if item.Type == ItemReasoning {
				if st.ReasoningDone {
					continue
				}
				opened, sent = st.Reasoning, st.ReasoningText
			}
			if !opened {
				evs = append(evs, ItemOpen(promptID, item.Type, idx)...)
			}
			for _, d := range splitText(strings.TrimPrefix(text, sent)) {
				evs = append(evs, TextDelta(promptID, item.Type, idx, d))
			}
			evs = append(evs, ItemDone(item, idx)...)
		case ItemFunctionCall:
			args := ""
			if item.Arguments != nil {
				args = *item.Arguments
			}
			added := item
			added.Status, added.Arguments = StatusInProgress, new("")
			evs = append(evs, ResponseEvent{Type: "response.output_item.added", OutputIndex: &idx, Item: &added})
			for _, d := range splitText(args) {
				evs = append(evs, ResponseEvent{Type: "response.function_call_arguments.delta", ItemID: item.ID, OutputIndex: &idx, Delta: &d})
			}
			done := item
			evs = append(evs,
				ResponseEvent{Type: "response.function_call_arguments.done", ItemID: item.ID, OutputIndex: &idx, Name: item.Name, Arguments: &args},
				ResponseEvent{Type: "response.output_item.done", OutputIndex: &idx, Item: &done})
		}
	}
	return evs
}

// ResponseEnd is the event that ends the stream of a response that ended:
// response.completed, response.incomplete, or response.failed — also for
// a cancelled response (OpenAI has no event of its own for it), whose
// object says cancelled.
func ResponseEnd(o Response) ResponseEvent {
	typ := "response.failed"
	switch o.Status {
	case StatusCompleted:
		typ = "response.completed"
	case StatusIncomplete:
		typ = "response.incomplete"
	}
	return ResponseEvent{Type: typ, Response: &o}
}

// Ended reports whether a response's status is final.
func Ended(status string) bool {
	switch status {
	case StatusCompleted, StatusIncomplete, StatusFailed, StatusCancelled:
		return true
	}
	return false
}

// ResponseEvents is the stream of a response as it stands, numbered from
// 0, made from what is stored alone so that it is the same whenever it is
// made (before and after a restart): response.created; then, once its
// job has left the queue, response.in_progress; then, once it has ended,
// the output's events (OutputEvents) and the end (ResponseEnd). A stream
// that follows the response sends, each time it looks, the events past
// the last it sent.
func ResponseEvents(p jobs.Prompt, j jobs.Job, r *jobs.Response) []ResponseEvent {
	o := ResponseObject(p, j, r)
	model := ""
	if p.Chat != nil && p.Chat.Responses != nil {
		model = p.Chat.Responses.Model
	}
	evs := ResponseStart(o, model)
	switch {
	case o.Status == StatusQueued:
		evs = evs[:1]
	case Ended(o.Status):
		evs = append(evs, OutputEvents(p.ID, o, Streamed{})...)
		evs = append(evs, ResponseEnd(o))
	}
	for i := range evs {
		evs[i].SequenceNumber = i
	}
	return evs
}

// DeltaBytes bounds the pieces of text and arguments that OutputEvents
// makes.
const DeltaBytes = 64

// splitText cuts s into pieces of at most DeltaBytes bytes, at character
// boundaries; none for "".
func splitText(s string) []string {
	var out []string
	for s != "" {
		n := min(len(s), DeltaBytes)
		for n < len(s) && n > 0 && !utf8.RuneStart(s[n]) {
			n--
		}
		if n == 0 { // a character longer than DeltaBytes cannot be
			_, n = utf8.DecodeRuneInString(s)
		}
		out = append(out, s[:n])
		s = s[n:]
	}
	return out
}
