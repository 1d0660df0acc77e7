package frontdoor

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/promptkit/promptkit/internal/openaiapi"
	"github.com/promptkit/promptkit/pktype"
)

// chunkOf is a backend's chunk of one choice's delta.
func chunkOf(choice int, delta string) json.RawMessage {
	return json.RawMessage(`{"id":"backend-id","object":"chat.completion.chunk","created":1,"model":"m-backend","system_fingerprint":"fp",` +
		`"choices":[{"index":` + string(mustJSON(choice)) + `,"delta":` + delta + `,"logprobs":null,"finish_reason":null}],"usage":null}`)
}

func piece(gen, attempt, index int, text string, calls ...pktype.ToolCallDelta) pktype.StreamDelta {
	return pktype.StreamDelta{Generation: gen, Attempt: attempt, Index: index, Text: text, ToolCalls: calls,
		Raw: chunkOf(0, `{"content":`+string(mustJSON(text))+`}`)}
}

func newRelay() relay { return relay{id: "chatcmpl-j", created: 7, model: "default"} }

// completion is a stored answer of one choice.
func completion(text string, calls ...pktype.ToolCall) openaiapi.ChatCompletion {
	return openaiapi.ChatCompletion{ID: "chatcmpl-j", Model: "m-backend",
		Choices: []openaiapi.Choice{{Message: message(text, calls...), FinishReason: "stop"}}}
}

func message(text string, calls ...pktype.ToolCall) openaiapi.Message {
	m := openaiapi.Message{Role: "assistant", ToolCalls: calls}
	if text != "" {
		m.Content = &text
	}
	return m
}

// decoded is a relayed chunk, decoded as a client reads it.
type decoded struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	Created int64  `json:"created"`
	Model   string `json:"model"`
	Choices []struct {
		Index        int            `json:"index"`
		Delta        map[string]any `json:"delta"`
		FinishReason *string        `json:"finish_reason"`
	} `json:"choices"`
	SystemFingerprint string `json:"system_fingerprint"`
	Usage             any    `json:"usage"`
}

func decode(t *testing.T, b []byte) decoded {
	t.Helper()
	var d decoded
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatalf("chunk %s: %v", b, err)
	}
	return d
}

// restText is the content the rest's chunks send.
func restText(chunks []openaiapi.ChatCompletionChunk) string {
	var b strings.Builder
	for _, c := range chunks {
		for _, ch := range c.Choices {
			if ch.Delta.Content != nil {
				b.WriteString(*ch.Delta.Content)
			}
		}
	}
	return b.String()
}

// The relay passes one backend call's chunks on in order, from its first,
// as the backend framed them but under the stream's id and time, the
// finish reason and usage held back; what the stored answer adds comes
// at the end.
func TestRelayOneCall(t *testing.T) {
	r := newRelay()
	if _, ok := r.take(piece(1, 1, 1, "late")); ok || r.started() {
		t.Fatal("a call whose first piece was missed was relayed")
	}
	var got string
	for i, s := range []string{"Hello", " there", ","} {
		b, ok := r.take(piece(1, 2, i, s))
		if !ok {
			t.Fatalf("piece %d not relayed", i)
		}
		c := decode(t, b)
		if c.ID != "chatcmpl-j" || c.Object != "chat.completion.chunk" || c.Created != 7 || c.Model != "m-backend" ||
			c.SystemFingerprint != "fp" || len(c.Choices) != 1 || c.Choices[0].FinishReason != nil {
			t.Errorf("chunk %d = %s", i, b)
		}
		if role, _ := c.Choices[0].Delta["role"].(string); (i == 0) != (role == "assistant") {
			t.Errorf("chunk %d role %q: the first says the role, the others need not", i, role)
		}
		if strings.Contains(string(b), `"usage"`) {
			t.Errorf("chunk %d carries usage, not asked for: %s", i, b)
		}
		got += c.Choices[0].Delta["content"].(string)
	}
	if got != "Hello there," {
		t.Errorf("relayed %q", got)
	}
	// Piece 3 was dropped: the relay stops, and the stored answer fills
	// in from what was sent.
	if _, ok := r.take(piece(1, 2, 4, " lost")); ok {
		t.Error("a piece after a gap was relayed")
	}
	if _, ok := r.take(piece(1, 2, 5, " more")); ok {
		t.Error("the relay went on after a gap")
	}
	rest, ok := r.rest(completion("Hello there, world."))
	if !ok || restText(rest) != " world." {
		t.Errorf("rest %q, %v", restText(rest), ok)
	}
	if last := rest[len(rest)-1]; last.Choices[0].FinishReason == nil || *last.Choices[0].FinishReason != "stop" || last.Model != "m-backend" {
		t.Errorf("the last chunk %+v: want the finish reason and the answer's model", last)
	}
	if _, ok := r.rest(completion("Hi there, world.")); ok {
		t.Error("an answer that does not continue what was sent was accepted")
	}
}

// With include_usage, every relayed chunk says usage null, and the
// rest ends with the usage.
func TestRelayUsage(t *testing.T) {
	r := newRelay()
	r.withUsage = true
	b, _ := r.take(piece(1, 1, 0, "Hi"))
	if !strings.Contains(string(b), `"usage":null`) {
		t.Errorf("chunk %s: want usage null", b)
	}
	c := completion("Hi")
	c.Usage = &openaiapi.Usage{PromptTokens: 1, CompletionTokens: 1, TotalTokens: 2}
	rest, ok := r.rest(c)
	if !ok || rest[len(rest)-1].Usage == nil || len(rest[len(rest)-1].Choices) != 0 {
		t.Errorf("rest %+v, %v", rest, ok)
	}
}

// A retried attempt after pieces were sent stops the relay: its answer is
// sent only if it continues what was sent.
func TestRelayRetriedAttempt(t *testing.T) {
	r := newRelay()
	r.take(piece(1, 1, 0, "The answer is 4"))
	if _, ok := r.take(piece(1, 2, 0, "The answer is 5")); ok {
		t.Fatal("a second attempt was spliced onto the first")
	}
	if _, ok := r.rest(completion("The answer is 5.")); ok {
		t.Error("a replaced answer was accepted")
	}
	if rest, ok := r.rest(completion("The answer is 42.")); !ok || restText(rest) != "2." {
		t.Errorf("an answer continuing what was sent: %q, %v", restText(rest), ok)
	}
	// A repair is another generation: the same rule.
	q := newRelay()
	q.take(piece(1, 1, 0, `{"a":`))
	if _, ok := q.take(piece(2, 1, 0, `{"b":1}`)); ok {
		t.Error("a repair was spliced on")
	}
}

// A piece that came without its chunk (too large for a notification) is
// relayed as promptkit makes one: its text, reasoning and calls, joined
// by index; the stored calls complete them.
func TestRelayWithoutChunks(t *testing.T) {
	r := newRelay()
	b, _ := r.take(pktype.StreamDelta{Generation: 1, Attempt: 1, Index: 0, Reasoning: "hmm",
		ToolCalls: []pktype.ToolCallDelta{{Index: 0, ID: "c1", Name: "f"}}})
	c := decode(t, b)
	d := c.Choices[0].Delta
	if d["role"] != "assistant" || d["reasoning_content"] != "hmm" || c.Model != "default" {
		t.Fatalf("first chunk %s", b)
	}
	calls := d["tool_calls"].([]any)
	if first := calls[0].(map[string]any); first["id"] != "c1" || first["type"] != "function" {
		t.Fatalf("first call piece %s", b)
	}
	b, _ = r.take(pktype.StreamDelta{Generation: 1, Attempt: 1, Index: 1, ToolCalls: []pktype.ToolCallDelta{{Index: 0, Arguments: `{"x":`}}})
	if strings.Contains(string(b), `"type"`) || !strings.Contains(string(b), `"arguments":"{\"x\":"`) {
		t.Errorf("arguments piece %s", b)
	}
	c1 := pktype.ToolCall{ID: "c1", Type: "function", Function: pktype.FunctionCall{Name: "f", Arguments: `{"x":1}`}}
	c2 := pktype.ToolCall{ID: "c2", Type: "function", Function: pktype.FunctionCall{Name: "g", Arguments: `{}`}}
	stored := completion("", c1, c2)
	stored.Choices[0].Message.Extra = pktype.Params{"reasoning_content": json.RawMessage(`"hmm, yes"`)}
	rest, ok := r.rest(stored)
	var got []openaiapi.ToolCallDelta
	reasoning := ""
	for _, ch := range rest {
		got = append(got, ch.Choices[0].Delta.ToolCalls...)
		if v, ok := ch.Choices[0].Delta.Extra["reasoning_content"]; ok {
			reasoning += strings.Trim(string(v), `"`)
		}
	}
	want := []openaiapi.ToolCallDelta{
		{Index: 0, Function: openaiapi.FunctionDelta{Arguments: `1}`}},
		{Index: 1, ID: "c2", Type: "function", Function: openaiapi.FunctionDelta(c2.Function)},
	}
	if !ok || !reflect.DeepEqual(got, want) || reasoning != ", yes" {
		t.Errorf("rest %+v (reasoning %q), %v", got, reasoning, ok)
	}
	other := c1
	other.ID = "c9"
	if _, ok := r.rest(completion("", other)); ok {
		t.Error("another call accepted as the one sent")
	}
}

// Several choices (n) are relayed each under its own index, reasoning as
// the backend named it; the rest completes each choice, and a choice
// whose reasoning the stored answer does not continue replaces the
// answer.
func TestRelayChoices(t *testing.T) {
	r := newRelay()
	steps := []pktype.StreamDelta{
		{Index: 0, Choice: 0, Reasoning: "think", Raw: chunkOf(0, `{"role":"assistant","reasoning_content":"think"}`)},
		{Index: 1, Choice: 1, Reasoning: "ponder", Raw: chunkOf(1, `{"role":"assistant","reasoning_content":"ponder"}`)},
		{Index: 2, Choice: 1, Text: "B", Raw: chunkOf(1, `{"content":"B"}`)},
		{Index: 3, Choice: 0, Text: "A", Raw: chunkOf(0, `{"content":"A"}`)},
	}
	for _, d := range steps {
		d.Generation, d.Attempt = 1, 1
		b, ok := r.take(d)
		if c := decode(t, b); !ok || c.Choices[0].Index != d.Choice {
			t.Fatalf("piece %d: %s, %v", d.Index, b, ok)
		}
	}
	choice := func(i int, text, reasoning string) openaiapi.Choice {
		m := message(text)
		m.Extra = pktype.Params{"reasoning_content": mustJSON(reasoning)}
		return openaiapi.Choice{Index: i, Message: m, FinishReason: "stop"}
	}
	stored := openaiapi.ChatCompletion{Model: "m-backend", Choices: []openaiapi.Choice{choice(0, "A!", "think"), choice(1, "B", "ponder more")}}
	rest, ok := r.rest(stored)
	if !ok {
		t.Fatal("the stored answer continues what was sent")
	}
	finished := map[int]bool{}
	var added []string
	for _, c := range rest {
		ch := c.Choices[0]
		if ch.Delta.Role != "" {
			t.Errorf("choice %d begins again: %+v", ch.Index, ch.Delta)
		}
		if ch.Delta.Content != nil {
			added = append(added, *ch.Delta.Content)
		}
		if v, ok := ch.Delta.Extra["reasoning_content"]; ok {
			added = append(added, string(v))
		}
		if ch.FinishReason != nil {
			finished[ch.Index] = true
		}
	}
	if !reflect.DeepEqual(added, []string{"!", `" more"`}) || !finished[0] || !finished[1] {
		t.Errorf("rest adds %q, finishes %v", added, finished)
	}
	stored.Choices[1] = choice(1, "B", "wonder")
	if _, ok := r.rest(stored); ok {
		t.Error("a choice whose reasoning changed was accepted")
	}
}
