package openai

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
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
	errNoMessage      = errors.New("choices[0].message missing")
	errContentMissing = errors.New("choices[0].message.content is not a string")
	errToolCall       = errors.New("choices[0].message.tool_calls has a call without an id or a function name")
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
	Message *struct {
		Content   json.RawMessage   `json:"content"`
		ToolCalls []pktype.ToolCall `json:"tool_calls"`
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
	c := choices[0]
	if c.Message == nil {
		return nil, u, p, malformed(errNoMessage)
	}
	calls := c.Message.ToolCalls
	for i, tc := range calls {
		if tc.ID == "" || tc.Function.Name == "" {
			return nil, u, p, malformed(errToolCall)
		}
		if tc.Type == "" {
			calls[i].Type = pktype.ToolTypeFunction // some backends leave the only type out
		}
	}
	// An answer that only calls tools may have null (or no) content.
	content := c.Message.Content
	var text string
	if len(calls) == 0 || (len(content) > 0 && string(content) != "null") {
		if len(content) == 0 || content[0] != '"' {
			return nil, u, p, malformed(errContentMissing)
		}
		if err := json.Unmarshal(content, &text); err != nil {
			return nil, u, p, malformed(errContentMissing)
		}
	}

	r := &pktype.GenerateResponse{Text: text, ToolCalls: calls, Model: env.Model, Usage: u, UsagePresence: &p}
	if c.FinishReason != nil {
		r.FinishReason = *c.FinishReason
	}
	return r, u, p, nil
}

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
