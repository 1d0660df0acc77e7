package providertest

import (
	"encoding/json"
	"unicode"
	"unicode/utf8"

	"github.com/promptkit/promptkit/pktype"
)

// doneEvent is the data of the event that ends every generated stream.
const doneEvent = "[DONE]"

// Streaming wire types, shaped like OpenAI's chat.completion.chunk.
type (
	chunk struct {
		ID                string `json:"id"`
		Object            string `json:"object"`
		Created           int64  `json:"created"`
		Model             string `json:"model"`
		SystemFingerprint string `json:"system_fingerprint,omitempty"`
		// Choices is nil to omit the key (MissingChoices) and points to an
		// empty slice for the usage chunk's "choices": [].
		Choices *[]chunkChoice  `json:"choices,omitempty"`
		Usage   json.RawMessage `json:"usage,omitempty"`
	}
	chunkChoice struct {
		Index        int             `json:"index"`
		Delta        delta           `json:"delta"`
		Logprobs     json.RawMessage `json:"logprobs,omitempty"` // see choiceShape
		FinishReason *string         `json:"finish_reason"`
	}
	delta struct {
		Role             string          `json:"role,omitempty"`
		Content          *string         `json:"content,omitempty"`
		ReasoningContent *string         `json:"reasoning_content,omitempty"`
		ToolCalls        []toolCallDelta `json:"tool_calls,omitempty"`
	}
	toolCallDelta struct {
		Index    int                 `json:"index"`
		ID       string              `json:"id,omitempty"`
		Type     string              `json:"type,omitempty"`
		Function pktype.FunctionCall `json:"function"`
	}
)

// streamSpec is what a generated stream carries.
type streamSpec struct {
	id, model    string
	fingerprint  string // system_fingerprint; "" omits it
	created      int64
	choices      []Choice
	shape        choiceShape
	usage        json.RawMessage // rendered usage; nil for UsageAbsent
	omitChoices  bool
	includeUsage bool
}

// streamEvents renders the data of each server-sent event of a generated
// stream, as OpenAI sends them: per choice a chunk with the assistant
// role, reasoning deltas, content deltas, tool call deltas (each call's
// id, type and name, then its arguments in two pieces) and a chunk with
// finish_reason; then, with include_usage, a chunk with empty choices and
// the usage, and [DONE]. Several choices interleave: the first chunk of
// each in index order, then the second of each, and so on.
func streamEvents(sp streamSpec) [][]byte {
	var events [][]byte
	add := func(choices *[]chunkChoice, usage json.RawMessage) {
		b, _ := json.Marshal(chunk{ // only strings, ints, finite floats and valid raw JSON
			ID: sp.id, Object: "chat.completion.chunk", Created: sp.created, Model: sp.model,
			SystemFingerprint: sp.fingerprint, Choices: choices, Usage: usage,
		})
		events = append(events, b)
	}
	// With include_usage every chunk but the usage chunk says "usage": null.
	var pending json.RawMessage
	if sp.includeUsage && sp.usage != nil {
		pending = json.RawMessage("null")
	}

	if sp.omitChoices {
		add(nil, pending)
	} else {
		seqs := make([][]chunkChoice, len(sp.choices))
		longest := 0
		for i, c := range sp.choices {
			seqs[i] = choiceChunks(i, c, sp.shape)
			longest = max(longest, len(seqs[i]))
		}
		for step := range longest {
			for _, seq := range seqs {
				if step < len(seq) {
					add(&[]chunkChoice{seq[step]}, pending)
				}
			}
		}
	}
	if pending != nil {
		var none *[]chunkChoice
		if !sp.omitChoices {
			none = &[]chunkChoice{}
		}
		add(none, sp.usage)
	}
	return append(events, []byte(doneEvent))
}

// choiceChunks is the chunk sequence of choice i: role, reasoning,
// content, tool calls, finish.
func choiceChunks(i int, c Choice, shape choiceShape) []chunkChoice {
	var out []chunkChoice
	one := func(d delta, lp json.RawMessage, finish *string) {
		out = append(out, chunkChoice{Index: i, Delta: d, Logprobs: lp, FinishReason: finish})
	}
	empty := ""
	one(delta{Role: "assistant", Content: &empty}, shape.none(), nil)
	for _, piece := range splitWords(c.Reasoning) {
		one(delta{ReasoningContent: &piece}, shape.none(), nil)
	}
	for k, piece := range splitWords(c.Text) {
		one(delta{Content: &piece}, shape.piece(k, piece), nil)
	}
	for j, tc := range c.ToolCalls {
		head := toolCallDelta{Index: j, ID: tc.ID, Type: tc.Type, Function: pktype.FunctionCall{Name: tc.Function.Name}}
		one(delta{ToolCalls: []toolCallDelta{head}}, shape.none(), nil)
		half := len(tc.Function.Arguments) / 2
		for half > 0 && !utf8.RuneStart(tc.Function.Arguments[half]) {
			half-- // a piece must stay valid UTF-8 to be encoded as it is
		}
		for _, piece := range []string{tc.Function.Arguments[:half], tc.Function.Arguments[half:]} {
			one(delta{ToolCalls: []toolCallDelta{{Index: j, Function: pktype.FunctionCall{Arguments: piece}}}}, shape.none(), nil)
		}
	}
	stop := c.finishReason()
	one(delta{}, shape.none(), &stop)
	return out
}

// splitWords cuts s into pieces of one word each, every piece keeping the
// whitespace that follows its word (the first also any leading
// whitespace), so the pieces join back to s exactly. It returns nil for
// an empty s.
func splitWords(s string) []string {
	var out []string
	start, prevSpace, seenWord := 0, false, false
	for i, r := range s {
		space := unicode.IsSpace(r)
		if !space {
			if prevSpace && seenWord {
				out = append(out, s[start:i])
				start = i
			}
			seenWord = true
		}
		prevSpace = space
	}
	if start < len(s) {
		out = append(out, s[start:])
	}
	return out
}
