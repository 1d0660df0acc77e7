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
		ID      string `json:"id"`
		Object  string `json:"object"`
		Created int64  `json:"created"`
		Model   string `json:"model"`
		// Choices is nil to omit the key (MissingChoices) and points to an
		// empty slice for the usage chunk's "choices": [].
		Choices *[]chunkChoice  `json:"choices,omitempty"`
		Usage   json.RawMessage `json:"usage,omitempty"`
	}
	chunkChoice struct {
		Index        int     `json:"index"`
		Delta        delta   `json:"delta"`
		FinishReason *string `json:"finish_reason"`
	}
	delta struct {
		Role      string          `json:"role,omitempty"`
		Content   *string         `json:"content,omitempty"`
		ToolCalls []toolCallDelta `json:"tool_calls,omitempty"`
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
	created      int64
	text         string
	toolCalls    []pktype.ToolCall
	usage        json.RawMessage // rendered usage; nil for UsageAbsent
	omitChoices  bool
	includeUsage bool
}

// streamEvents renders the data of each server-sent event of a generated
// stream, as OpenAI sends them: a chunk with the assistant role, content
// deltas, tool call deltas (each call's id, type and name, then its
// arguments in two pieces), a chunk with finish_reason, with
// include_usage a chunk with empty choices and the usage, and [DONE].
func streamEvents(sp streamSpec) [][]byte {
	var events [][]byte
	add := func(choices *[]chunkChoice, usage json.RawMessage) {
		b, _ := json.Marshal(chunk{ // only strings, ints and valid raw JSON
			ID: sp.id, Object: "chat.completion.chunk", Created: sp.created, Model: sp.model,
			Choices: choices, Usage: usage,
		})
		events = append(events, b)
	}
	// With include_usage every chunk but the usage chunk says "usage": null.
	var pending json.RawMessage
	if sp.includeUsage && sp.usage != nil {
		pending = json.RawMessage("null")
	}
	one := func(d delta, finish *string) *[]chunkChoice {
		return &[]chunkChoice{{Delta: d, FinishReason: finish}}
	}

	if sp.omitChoices {
		add(nil, pending)
	} else {
		empty := ""
		add(one(delta{Role: "assistant", Content: &empty}, nil), pending)
		for _, piece := range splitWords(sp.text) {
			add(one(delta{Content: &piece}, nil), pending)
		}
		for i, c := range sp.toolCalls {
			head := toolCallDelta{Index: i, ID: c.ID, Type: c.Type, Function: pktype.FunctionCall{Name: c.Function.Name}}
			add(one(delta{ToolCalls: []toolCallDelta{head}}, nil), pending)
			half := len(c.Function.Arguments) / 2
			for half > 0 && !utf8.RuneStart(c.Function.Arguments[half]) {
				half-- // a piece must stay valid UTF-8 to be encoded as it is
			}
			for _, piece := range []string{c.Function.Arguments[:half], c.Function.Arguments[half:]} {
				add(one(delta{ToolCalls: []toolCallDelta{{Index: i, Function: pktype.FunctionCall{Arguments: piece}}}}, nil), pending)
			}
		}
		stop := "stop"
		if len(sp.toolCalls) > 0 {
			stop = "tool_calls"
		}
		add(one(delta{}, &stop), pending)
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
