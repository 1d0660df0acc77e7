package providertest_test

import (
	"encoding/json"
	"sort"
	"strings"
	"testing"

	"github.com/promptkit/promptkit/pktype"
)

// This file decodes answers the way a client does: a completion into its
// choices, and a stream into one assembled choice per index.

// answer is a decoded chat completion.
type answer struct {
	ID                string          `json:"id"`
	Model             string          `json:"model"`
	SystemFingerprint *string         `json:"system_fingerprint"`
	Choices           []answerChoice  `json:"choices"`
	Usage             *usageCounts    `json:"usage"`
	raw               json.RawMessage // the whole body
}

type answerChoice struct {
	Index   int `json:"index"`
	Message struct {
		Role             string            `json:"role"`
		Content          *string           `json:"content"`
		ReasoningContent string            `json:"reasoning_content"`
		ToolCalls        []pktype.ToolCall `json:"tool_calls"`
	} `json:"message"`
	// Logprobs stays nil when the key is absent and holds "null" when null.
	Logprobs     json.RawMessage `json:"logprobs"`
	FinishReason string          `json:"finish_reason"`
}

type usageCounts struct {
	PromptTokens        int `json:"prompt_tokens"`
	CompletionTokens    int `json:"completion_tokens"`
	TotalTokens         int `json:"total_tokens"`
	PromptTokensDetails struct {
		CachedTokens int `json:"cached_tokens"`
	} `json:"prompt_tokens_details"`
	CompletionTokensDetails struct {
		ReasoningTokens int `json:"reasoning_tokens"`
	} `json:"completion_tokens_details"`
}

type logprobsObject struct {
	Content []logprobEntry `json:"content"`
}

type logprobEntry struct {
	Token       string  `json:"token"`
	Logprob     float64 `json:"logprob"`
	Bytes       []int   `json:"bytes"`
	TopLogprobs []struct {
		Token   string  `json:"token"`
		Logprob float64 `json:"logprob"`
		Bytes   []int   `json:"bytes"`
	} `json:"top_logprobs"`
}

// decodeAnswer decodes a 200 chat completion.
func decodeAnswer(t *testing.T, r result) answer {
	t.Helper()
	var a answer
	if r.status != 200 || json.Unmarshal(r.body, &a) != nil {
		t.Fatalf("answer %d %s", r.status, r.body)
	}
	a.raw = r.body
	return a
}

// texts returns each choice's content ("" for null), checking that the
// choices come in index order.
func (a answer) texts(t *testing.T) []string {
	t.Helper()
	var out []string
	for i, c := range a.Choices {
		if c.Index != i {
			t.Errorf("choice %d has index %d", i, c.Index)
		}
		if c.Message.Content != nil {
			out = append(out, *c.Message.Content)
		} else {
			out = append(out, "")
		}
	}
	return out
}

// logprobs decodes a choice's logprobs object, failing when it is null
// or absent.
func (c answerChoice) logprobs(t *testing.T) logprobsObject {
	t.Helper()
	var lp *logprobsObject
	if err := json.Unmarshal(c.Logprobs, &lp); err != nil || lp == nil {
		t.Fatalf("choice %d logprobs %s, want an object", c.Index, c.Logprobs)
	}
	return *lp
}

// streamed is one choice assembled from a stream.
type streamed struct {
	role, content, reasoning string
	toolCalls                []pktype.ToolCall
	finish                   string
	logprobs                 []logprobEntry
	// kinds lists what each of the choice's chunks carried, in order:
	// role, reasoning, content, tool, finish.
	kinds []string
	// logprobsKeys holds each chunk's raw "logprobs" ("" when absent).
	logprobsKeys []string
}

// stream is a decoded stream: choices by index, the usage chunk's usage,
// and every chunk's system_fingerprint.
type stream struct {
	choices      map[int]*streamed
	usage        *usageCounts
	fingerprints []string
	// indexes lists the choice index of every chunk with a choice.
	indexes []int
}

// assemble decodes a stream as a client does, checking the rules a
// client relies on: each choice starts with the assistant role, sends
// nothing after its finish_reason, and its reasoning comes before its
// content.
func assemble(t *testing.T, r result) stream {
	t.Helper()
	st := stream{choices: map[int]*streamed{}}
	for i, c := range events(t, r) {
		b, _ := json.Marshal(c.raw)
		var ch struct {
			SystemFingerprint string       `json:"system_fingerprint"`
			Usage             *usageCounts `json:"usage"`
			Choices           []struct {
				Index int `json:"index"`
				Delta struct {
					Role             string  `json:"role"`
					Content          *string `json:"content"`
					ReasoningContent *string `json:"reasoning_content"`
					ToolCalls        []struct {
						Index    int                 `json:"index"`
						ID       string              `json:"id"`
						Type     string              `json:"type"`
						Function pktype.FunctionCall `json:"function"`
					} `json:"tool_calls"`
				} `json:"delta"`
				Logprobs     json.RawMessage `json:"logprobs"`
				FinishReason *string         `json:"finish_reason"`
			} `json:"choices"`
		}
		if err := json.Unmarshal(b, &ch); err != nil {
			t.Fatalf("chunk %d %s: %v", i, b, err)
		}
		st.fingerprints = append(st.fingerprints, ch.SystemFingerprint)
		if ch.Usage != nil {
			st.usage = ch.Usage
		}
		for _, cc := range ch.Choices {
			st.indexes = append(st.indexes, cc.Index)
			s := st.choices[cc.Index]
			if s == nil {
				s = &streamed{}
				st.choices[cc.Index] = s
			}
			if s.finish != "" {
				t.Errorf("chunk %d continues choice %d after its finish_reason: %s", i, cc.Index, b)
			}
			d := cc.Delta
			switch {
			case d.Role != "":
				if len(s.kinds) != 0 {
					t.Errorf("chunk %d: role of choice %d after other deltas", i, cc.Index)
				}
				s.role = d.Role
				s.kinds = append(s.kinds, "role")
			case len(s.kinds) == 0:
				t.Errorf("chunk %d: choice %d starts without a role: %s", i, cc.Index, b)
			}
			if d.ReasoningContent != nil {
				if strings.Contains(strings.Join(s.kinds, " "), "content") {
					t.Errorf("chunk %d: reasoning of choice %d after its content", i, cc.Index)
				}
				s.reasoning += *d.ReasoningContent
				s.kinds = append(s.kinds, "reasoning")
			}
			if d.Content != nil && d.Role == "" {
				s.content += *d.Content
				s.kinds = append(s.kinds, "content")
			}
			for _, tc := range d.ToolCalls {
				for len(s.toolCalls) <= tc.Index {
					s.toolCalls = append(s.toolCalls, pktype.ToolCall{})
				}
				call := &s.toolCalls[tc.Index]
				if tc.ID != "" {
					call.ID, call.Type = tc.ID, tc.Type
				}
				call.Function.Name += tc.Function.Name
				call.Function.Arguments += tc.Function.Arguments
				s.kinds = append(s.kinds, "tool")
			}
			if cc.FinishReason != nil {
				s.finish = *cc.FinishReason
				s.kinds = append(s.kinds, "finish")
			}
			s.logprobsKeys = append(s.logprobsKeys, string(cc.Logprobs))
			var lp *logprobsObject
			if json.Unmarshal(cc.Logprobs, &lp) == nil && lp != nil {
				s.logprobs = append(s.logprobs, lp.Content...)
			}
		}
	}
	return st
}

// sortedIndexes lists the stream's choice indexes in order.
func (st stream) sortedIndexes() []int {
	var out []int
	for i := range st.choices {
		out = append(out, i)
	}
	sort.Ints(out)
	return out
}
