package sdkcompat

import (
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/responses"
)

// The Responses API through the Go SDK: a plain response, a streamed one
// whose text deltas join to the answer, and a background one, polled and
// then its stream resumed after its first event.
func TestFrontDoorResponses(t *testing.T) {
	t.Parallel()
	s := startService(t)
	cl := s.client(s.token)
	ctx := t.Context()
	input := func(text string) responses.ResponseNewParams {
		return responses.ResponseNewParams{Model: "default", Input: responses.ResponseNewParamsInputUnion{OfString: openai.String(text)}}
	}

	r, err := cl.Responses.New(ctx, input("say hi to responses"))
	if err != nil {
		t.Fatal(err)
	}
	if r.Status != "completed" || r.OutputText() != "Fake provider reply: say hi to responses" || !strings.HasPrefix(r.ID, "resp_") {
		t.Fatalf("response %s", r.RawJSON())
	}
	got, err := cl.Responses.Get(ctx, r.ID, responses.ResponseGetParams{})
	if err != nil || got.OutputText() != r.OutputText() {
		t.Fatalf("get: %v %s", err, got.RawJSON())
	}

	stream := cl.Responses.NewStreaming(ctx, input("stream it please"))
	var text strings.Builder
	var seq []int64
	completed := false
	for stream.Next() {
		ev := stream.Current()
		seq = append(seq, ev.SequenceNumber)
		switch ev.Type {
		case "response.output_text.delta":
			text.WriteString(ev.Delta)
		case "response.completed":
			completed = true
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	if !completed || text.String() != "Fake provider reply: stream it please" {
		t.Errorf("streamed %q, completed %v", text.String(), completed)
	}
	for i, n := range seq {
		if n != int64(i) {
			t.Fatalf("sequence numbers %v", seq)
		}
	}

	bg := input("in the background")
	bg.Background = openai.Bool(true)
	b, err := cl.Responses.New(ctx, bg)
	if err != nil {
		t.Fatal(err)
	}
	if b.Status != "queued" && b.Status != "in_progress" && b.Status != "completed" {
		t.Fatalf("background response %s", b.RawJSON())
	}
	resumed := cl.Responses.GetStreaming(ctx, b.ID, responses.ResponseGetParams{StartingAfter: openai.Int(0)})
	text.Reset()
	first := int64(-1)
	for resumed.Next() {
		ev := resumed.Current()
		if first < 0 {
			first = ev.SequenceNumber
		}
		if ev.Type == "response.output_text.delta" {
			text.WriteString(ev.Delta)
		}
	}
	if err := resumed.Err(); err != nil {
		t.Fatal(err)
	}
	if first != 1 || text.String() != "Fake provider reply: in the background" {
		t.Errorf("resumed after 0: first event %d, text %q", first, text.String())
	}
}
