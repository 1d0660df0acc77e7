package frontdoor

import (
	"reflect"
	"testing"

	"github.com/promptkit/promptkit/internal/openaiapi"
	"github.com/promptkit/promptkit/pktype"
)

func piece(gen, attempt, index int, text string, calls ...pktype.ToolCallDelta) pktype.StreamDelta {
	return pktype.StreamDelta{Generation: gen, Attempt: attempt, Index: index, Text: text, ToolCalls: calls}
}

func answer(text string, calls ...pktype.ToolCall) openaiapi.Message {
	m := openaiapi.Message{Role: "assistant", ToolCalls: calls}
	if text != "" {
		m.Content = &text
	}
	return m
}

func text(d openaiapi.Delta) string {
	if d.Content == nil {
		return ""
	}
	return *d.Content
}

// The relay passes one backend call's pieces on in order, from its
// first; what the stored answer adds comes at the end.
func TestRelayOneCall(t *testing.T) {
	var r relay
	if _, ok := r.take(piece(1, 1, 1, "late")); ok || r.sent() {
		t.Fatal("a call whose first piece was missed was relayed")
	}
	var got string
	for i, s := range []string{"Hello", " there", ","} {
		d, ok := r.take(piece(1, 2, i, s))
		if !ok {
			t.Fatalf("piece %d not relayed", i)
		}
		got += text(d)
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
	rest, ok := r.rest(answer("Hello there, world."))
	if !ok || text(rest) != " world." {
		t.Errorf("rest %q, %v", text(rest), ok)
	}
	if _, ok := r.rest(answer("Hi there, world.")); ok {
		t.Error("an answer that does not continue what was sent was accepted")
	}
}

// A retried attempt after pieces were sent stops the relay: its answer is
// sent only if it continues what was sent.
func TestRelayRetriedAttempt(t *testing.T) {
	var r relay
	r.take(piece(1, 1, 0, "The answer is 4"))
	if _, ok := r.take(piece(1, 2, 0, "The answer is 5")); ok {
		t.Fatal("a second attempt was spliced onto the first")
	}
	if _, ok := r.rest(answer("The answer is 5.")); ok {
		t.Error("a replaced answer was accepted")
	}
	if rest, ok := r.rest(answer("The answer is 42.")); !ok || text(rest) != "2." {
		t.Errorf("an answer continuing what was sent: %q, %v", text(rest), ok)
	}
	// A repair is another generation: the same rule.
	var q relay
	q.take(piece(1, 1, 0, `{"a":`))
	if _, ok := q.take(piece(2, 1, 0, `{"b":1}`)); ok {
		t.Error("a repair was spliced on")
	}
}

// Tool call pieces are relayed by index and joined; the stored calls
// complete them.
func TestRelayToolCalls(t *testing.T) {
	var r relay
	d, _ := r.take(piece(1, 1, 0, "", pktype.ToolCallDelta{Index: 0, ID: "c1", Name: "f"}))
	if len(d.ToolCalls) != 1 || d.ToolCalls[0].ID != "c1" || d.ToolCalls[0].Type != "function" || d.ToolCalls[0].Function.Name != "f" {
		t.Fatalf("first piece %+v", d)
	}
	d, _ = r.take(piece(1, 1, 1, "", pktype.ToolCallDelta{Index: 0, Arguments: `{"x":`}))
	if d.ToolCalls[0].Type != "" || d.ToolCalls[0].Function.Arguments != `{"x":` {
		t.Errorf("arguments piece %+v", d)
	}
	c1 := pktype.ToolCall{ID: "c1", Type: "function", Function: pktype.FunctionCall{Name: "f", Arguments: `{"x":1}`}}
	c2 := pktype.ToolCall{ID: "c2", Type: "function", Function: pktype.FunctionCall{Name: "g", Arguments: `{}`}}
	rest, ok := r.rest(answer("", c1, c2))
	want := []openaiapi.ToolCallDelta{
		{Index: 0, Function: openaiapi.FunctionDelta{Arguments: `1}`}},
		{Index: 1, ID: "c2", Type: "function", Function: openaiapi.FunctionDelta(c2.Function)},
	}
	if !ok || rest.Content != nil || !reflect.DeepEqual(rest.ToolCalls, want) {
		t.Errorf("rest %+v, %v", rest, ok)
	}
	other := c1
	other.ID = "c9"
	if _, ok := r.rest(answer("", other)); ok {
		t.Error("another call accepted as the one sent")
	}
}
