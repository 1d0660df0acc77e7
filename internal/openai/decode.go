package openai

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"io"
	"slices"
	"strconv"

	"github.com/promptkit/promptkit/internal/llm"
	"github.com/promptkit/promptkit/pktype"
)

// Malformed causes are fixed strings: decoder errors can quote body bytes,
// and provider bodies may echo prompts.
var (
	errTooLarge       = errors.New("response too large")
	errInvalidJSON    = errors.New("invalid JSON")
	errNotObject      = errors.New("response is not a JSON object")
	errTrailingData   = errors.New("trailing data after JSON object")
	errWrongType      = errors.New("field has the wrong JSON type")
	errInvalidCount   = errors.New("token count is not a non-negative integer")
	errNoChoices      = errors.New("choices missing or empty")
	errNoMessage      = errors.New("a choice's message is missing")
	errContentMissing = errors.New("a choice's message.content is not a string, and the message holds nothing else")
	errToolCall       = errors.New("a choice's message.tool_calls has a call without an id or a function name")
)

func malformed(cause error) error {
	return &llm.AttemptError{Kind: pktype.ErrMalformedResponse, Cause: cause}
}

// count is a token count that remembers whether it was present. Only plain
// non-negative integer literals are accepted: 1.0 or 1e3 suggest a provider
// bug we would rather surface than round.
type count struct {
	n   int
	set bool
}

func (c *count) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		*c = count{} // a later null overrides an earlier duplicate key
		return nil
	}
	for _, ch := range b {
		if ch < '0' || ch > '9' {
			return errInvalidCount
		}
	}
	n, err := strconv.Atoi(string(b))
	if err != nil {
		return errInvalidCount // overflow
	}
	*c = count{n: n, set: true}
	return nil
}

type wireUsage struct {
	PromptTokens        count `json:"prompt_tokens"`
	CompletionTokens    count `json:"completion_tokens"`
	TotalTokens         count `json:"total_tokens"`
	PromptTokensDetails *struct {
		CachedTokens count `json:"cached_tokens"`
	} `json:"prompt_tokens_details"`
	CompletionTokensDetails *struct {
		ReasoningTokens count `json:"reasoning_tokens"`
	} `json:"completion_tokens_details"`
}

func (w *wireUsage) resolve() (pktype.TokenUsage, pktype.TokenUsagePresence) {
	var u pktype.TokenUsage
	var p pktype.TokenUsagePresence
	if w == nil {
		return u, p
	}
	u.PromptTokens, p.PromptTokens = w.PromptTokens.n, w.PromptTokens.set
	u.CompletionTokens, p.CompletionTokens = w.CompletionTokens.n, w.CompletionTokens.set
	u.TotalTokens, p.TotalTokens = w.TotalTokens.n, w.TotalTokens.set
	if d := w.PromptTokensDetails; d != nil {
		u.CachedTokens, p.CachedTokens = d.CachedTokens.n, d.CachedTokens.set
	}
	if d := w.CompletionTokensDetails; d != nil {
		u.ReasoningTokens, p.ReasoningTokens = d.ReasoningTokens.n, d.ReasoningTokens.set
	}
	return u, p
}

// wireEnvelope leaves choices raw so that usage survives a bad choices
// array: the provider still billed those tokens.
type wireEnvelope struct {
	Model   string          `json:"model"`
	Choices json.RawMessage `json:"choices"`
	Usage   *wireUsage      `json:"usage"`
}

type wireChoice struct {
	Index   *int `json:"index"`
	Message *struct {
		Content   json.RawMessage   `json:"content"`
		ToolCalls []pktype.ToolCall `json:"tool_calls"`
		// What an answer may hold instead of text: it then has null
		// content.
		ReasoningContent json.RawMessage `json:"reasoning_content"`
		Reasoning        json.RawMessage `json:"reasoning"`
		Refusal          json.RawMessage `json:"refusal"`
		Audio            json.RawMessage `json:"audio"`
		FunctionCall     json.RawMessage `json:"function_call"`
	} `json:"message"`
	FinishReason *string `json:"finish_reason"`
}

// Decode strictly decodes a 2xx chat-completions body. Every error wraps
// pktype.ErrMalformedResponse and never quotes the body.
func Decode(body []byte) (*pktype.GenerateResponse, error) {
	r, _, _, err := decode(body)
	return r, err
}

// decode is Decode plus the usage it could establish: on error, usage and
// presence are still filled when the envelope itself decoded and only the
// choices were unusable.
func decode(body []byte) (*pktype.GenerateResponse, pktype.TokenUsage, pktype.TokenUsagePresence, error) {
	var u pktype.TokenUsage
	var p pktype.TokenUsagePresence

	raw, err := singleObject(body)
	if err != nil {
		return nil, u, p, err
	}

	var env wireEnvelope
	if err := json.Unmarshal(raw, &env); err != nil {
		if errors.Is(err, errInvalidCount) {
			return nil, u, p, malformed(errInvalidCount)
		}
		return nil, u, p, malformed(errWrongType)
	}
	u, p = env.Usage.resolve()

	if len(env.Choices) == 0 || string(env.Choices) == "null" {
		return nil, u, p, malformed(errNoChoices)
	}
	var choices []wireChoice
	if err := json.Unmarshal(env.Choices, &choices); err != nil {
		return nil, u, p, malformed(errWrongType)
	}
	if len(choices) == 0 {
		return nil, u, p, malformed(errNoChoices)
	}
	out := make([]pktype.Choice, len(choices))
	for i, c := range choices {
		if out[i], err = decodeChoice(c, i); err != nil {
			return nil, u, p, err
		}
	}
	slices.SortStableFunc(out, func(a, b pktype.Choice) int { return cmp.Compare(a.Index, b.Index) })
	r := response(out, env.Model, u, p)
	r.Raw = raw
	return r, u, p, nil
}

// response is the answer of choices (sorted by index).
func response(choices []pktype.Choice, model string, u pktype.TokenUsage, p pktype.TokenUsagePresence) *pktype.GenerateResponse {
	c := choices[0]
	r := &pktype.GenerateResponse{Text: c.Text, Reasoning: c.Reasoning, ToolCalls: c.ToolCalls, FinishReason: c.FinishReason,
		Model: model, Usage: u, UsagePresence: &p}
	if len(choices) > 1 {
		r.Choices = choices
	}
	return r
}

// decodeChoice checks and reads one choice, the i-th of the answer.
func decodeChoice(c wireChoice, i int) (pktype.Choice, error) {
	out := pktype.Choice{Index: i}
	if c.Index != nil {
		out.Index = *c.Index
	}
	if c.Message == nil {
		return out, malformed(errNoMessage)
	}
	m := c.Message
	calls := m.ToolCalls
	for i, tc := range calls {
		if tc.ID == "" || tc.Function.Name == "" {
			return out, malformed(errToolCall)
		}
		if tc.Type == "" {
			calls[i].Type = pktype.ToolTypeFunction // some backends leave the only type out
		}
	}
	out.ToolCalls = calls
	out.Reasoning = cmp.Or(stringOf(m.ReasoningContent), stringOf(m.Reasoning))
	// An answer that only calls tools, refuses, speaks or reasons may have
	// null (or no) content; one that holds nothing at all is malformed.
	content := m.Content
	if len(content) > 0 && string(content) != "null" {
		if content[0] != '"' || json.Unmarshal(content, &out.Text) != nil {
			return out, malformed(errContentMissing)
		}
	} else if len(calls) == 0 && out.Reasoning == "" && isNull(m.Refusal) && isNull(m.Audio) && isNull(m.FunctionCall) {
		return out, malformed(errContentMissing)
	}
	if c.FinishReason != nil {
		out.FinishReason = *c.FinishReason
	}
	return out, nil
}

// stringOf is raw's string, "" when raw is not one.
func stringOf(raw json.RawMessage) string {
	var s string
	if len(raw) == 0 || raw[0] != '"' || json.Unmarshal(raw, &s) != nil {
		return ""
	}
	return s
}

// isNull reports whether a member is absent or null.
func isNull(raw json.RawMessage) bool { return len(raw) == 0 || string(raw) == "null" }

// singleObject returns the one JSON object body holds, and nothing
// else: a chat answer, an embeddings answer, a stream's chunk.
func singleObject(body []byte) (json.RawMessage, error) {
	dec := json.NewDecoder(bytes.NewReader(body))
	var raw json.RawMessage
	if err := dec.Decode(&raw); err != nil {
		return nil, malformed(errInvalidJSON)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, malformed(errTrailingData)
	}
	if len(raw) == 0 || raw[0] != '{' {
		return nil, malformed(errNotObject)
	}
	return raw, nil
}
